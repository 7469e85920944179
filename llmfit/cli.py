"""The command line: parse options, call one library function, hand the result to one renderer.

The only module that knows argv and exit codes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from llmfit import __version__
from llmfit.errors import EXIT_FITS, EXIT_NOTHING_FITS, LlmfitError, UsageError


class _DefaultGroup(click.Group):
    """`llmfit REPO …` plans; `llmfit <command> …` runs a named command."""

    default = "plan"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = [self.default, *args]
        return super().parse_args(ctx, args)


def _context(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1024, "m": 1024 * 1024}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    try:
        n = int(float(digits) * scale)
    except ValueError:
        raise UsageError(
            f"--context {value!r} is not a token count (like 32768, 32k or 1m)."
        ) from None
    if n <= 0:
        raise UsageError(f"--context {value!r} must be positive.")
    return n


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llmfit")
def cli() -> None:
    """Where a Hugging Face model can run on your GPU fleet, and the command to run it.

    \b
    Example usage:
      llmfit Qwen/Qwen3-235B-A22B --fleet fleet.toml
      llmfit meta-llama/Llama-3.1-8B-Instruct --fleet fleet.toml --context 32k --json
    """


@cli.command(name="plan")
@click.argument("repo")
@click.option("--fleet", "fleet_path", type=click.Path(path_type=Path), help="Fleet file (TOML).")
@click.option(
    "--context", "context", help="Token pool to plan for (32768, 32k, 1m); default: trained."
)
@click.option(
    "--gpu-memory-utilization",
    type=click.FloatRange(0.05, 1.0),
    default=0.90,
    show_default=True,
    help="Share of each card the plan counts on; passed on to vLLM.",
)
@click.option("--json", "json_", is_flag=True, help="Print the version-1 JSON document.")
@click.option("--all", "show_all", is_flag=True, help="Show every option, not the top ten.")
@click.option(
    "--offline",
    is_flag=True,
    help="Use only what is cached; never touch the network (as HF_HUB_OFFLINE=1).",
)
@click.option("--revision", help="Branch, tag or commit of REPO (the same as REPO@REVISION).")
def plan_cmd(
    repo: str,
    fleet_path: Path | None,
    context: str | None,
    gpu_memory_utilization: float,
    json_: bool,
    show_all: bool,
    offline: bool,
    revision: str | None,
) -> None:
    """Plan REPO (org/name[@revision] from the Hub or its cache, or a directory) on a fleet.

    Online, only metadata is fetched (config, index, headers by range), and kept for offline use.
    """
    from llmfit.advise import advise
    from llmfit.plan.planner import PlanSettings
    from llmfit.render.progress import make_progress
    from llmfit.sources.fleet import read_fleet
    from llmfit.sources.hub import offline as is_offline
    from llmfit.sources.hub import quiet_huggingface_hub

    if fleet_path is None:
        raise UsageError("no fleet given.", hint=f"llmfit {repo} --fleet examples/fleet.toml")
    fleet = read_fleet(fleet_path)
    settings = PlanSettings(
        context=_context(context), gpu_memory_utilization=gpu_memory_utilization
    )
    progress = None
    if not is_offline(offline):
        quiet_huggingface_hub()
        progress = make_progress()
    try:
        advice = advise(
            repo, fleet, settings, offline=offline, revision=revision, progress=progress
        )
    finally:
        if progress is not None:
            progress.end()
    if json_:
        from llmfit.render.json import render_json

        click.echo(render_json(advice))
    else:
        from llmfit.render.console import make_console
        from llmfit.render.table import render_text

        render_text(advice, make_console(), show_all=show_all)
    sys.exit(EXIT_FITS if advice.plan.options else EXIT_NOTHING_FITS)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; an LlmfitError becomes its sentence, its hint and its exit code."""
    try:
        cli.main(args=argv, prog_name="llmfit", standalone_mode=False)
    except LlmfitError as e:
        click.echo(f"llmfit: {e.message}", err=True)
        if e.hint:
            click.echo(f"hint: {e.hint}", err=True)
        if os.environ.get("LLMFIT_DEBUG"):
            raise
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
