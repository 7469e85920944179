"""The command line: parse options, call one library function, hand the result to one renderer.

The only module that knows argv and exit codes.
"""

from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path
from typing import BinaryIO

import click

from llmfit import __version__
from llmfit.errors import (
    EXIT_FITS,
    EXIT_INTERNAL,
    EXIT_NOTHING_FITS,
    LlmfitError,
    UsageError,
)
from llmfit.plan.engines import keys as registered_engines
from llmfit.plan.settings import MAX_CONTEXT, PRECISIONS, RANKINGS, Pins
from llmfit.render.commands import FORMATS
from llmfit.render.safe import clean, clean_lines


class _DefaultGroup(click.Group):
    """`llmfit REPO …` plans; `llmfit <command> …` runs a named command."""

    default = "plan"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = [self.default, *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # `llmfit … | head`: the reader has what it wanted. Caught here, before click's own
            # handler turns it into exit 1 (llmfit's "nothing fits").
            from llmfit.render.console import quiet_exit

            quiet_exit()
            raise  # not reached: quiet_exit raises SystemExit(0)


# No model is trained past a few million tokens; a billion is far beyond any, and a bound keeps a
# mistyped exponent (1e300) from reaching the planner's arithmetic.


def _context(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1024, "m": 1024 * 1024}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    try:
        number = float(digits) * scale
    except ValueError:
        number = math.nan
    # float() reads "inf" and "nan" too, and int() of them raises what no sentence explains.
    if not math.isfinite(number):
        raise UsageError(f"--context {value!r} is not a token count (like 32768, 32k or 1m).")
    n = int(number)
    if n <= 0:
        raise UsageError(f"--context {value!r} must be positive.")
    if n > MAX_CONTEXT:
        raise UsageError(
            f"--context {value!r} is {n:,} tokens, more than the {MAX_CONTEXT:,} llmfit plans for."
        )
    return n


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A float flag's value, refusing nan and inf (which click's FloatRange lets through: no
    comparison with nan is true, and inf is within an open upper bound)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number.", ctx=ctx, param=param)
    return value


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llmfit")
def cli() -> None:
    """Where a Hugging Face model can run on your GPU fleet, and the command to run it.

    llmfit REPO plans REPO (the same as `llmfit plan REPO`; see `llmfit plan --help`);
    `llmfit models` lists the models that fit a fleet; `llmfit fleet` summarises a fleet and
    imports one from nvidia-smi or kubectl.

    \b
    On the bundled fixtures (export HF_HUB_CACHE=fixtures/hub HF_HUB_OFFLINE=1):
      every way, ranked, and the best one's command:
        llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml
      only the checkpoint as shipped, or what if it were fp8:
        llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml --precision stored
        llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml --precision fp8
      at a context, and the longest that fits when nothing does:
        llmfit meta-llama/Llama-3.1-8B-Instruct --fleet 1xrtx4090-24g --context 32k
      each card part by part, and why other ways were refused:
        llmfit deepseek-ai/DeepSeek-V3 --fleet examples/fleet.toml --explain --why-not
      the commands of a two-node launch (--ray for the Ray form):
        llmfit deepseek-ai/DeepSeek-V3 --fleet 2x8xh100-80g@ib0 --commands
      a GGUF repository on llama.cpp, and the JSON document:
        llmfit llmfit-fixtures/Tiny-Llama-GGUF --fleet cpu:64g,1xrtx4090-24g --json
      the fleet at a glance:
        llmfit fleet examples/fleet.toml
    """


@cli.command(name="plan")
@click.argument("repo")
@click.option(
    "--fleet",
    "fleet_path",
    help="Fleet file (TOML) or inline fleet (4x8xh100-80g@ib0,cpu:512g); "
    "default: ./fleet.toml, then $LLMFIT_FLEET, then this machine.",
)
@click.option(
    "--context", "context", help="Token pool to plan for (32768, 32k, 1m); default: trained."
)
@click.option(
    "--gpu-memory-utilization",
    type=click.FloatRange(0.05, 1.0),
    callback=_finite,
    default=0.90,
    show_default=True,
    help="Share of each card the plan counts on; passed on to vLLM.",
)
@click.option(
    "--kv-cache-dtype",
    type=click.Choice(["auto", "bf16", "fp8"]),
    default="auto",
    show_default=True,
    help="KV cache dtype to plan (auto: the checkpoint's); passed on to vLLM.",
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="all",
    show_default=True,
    help="Offer the checkpoint as stored, the what-ifs of a 16-bit one, or only one what-if.",
)
@click.option("--tp", type=click.IntRange(1), help="Only layouts of this tensor-parallel size.")
@click.option("--pp", type=click.IntRange(1), help="Only layouts of this many pipeline stages.")
@click.option("--dp", type=click.IntRange(1), help="Only layouts of this many data-parallel ranks.")
@click.option(
    "--ep/--no-ep", default=None, help="Only layouts with (or without) expert parallelism."
)
@click.option("--gpus", type=click.IntRange(1), help="Only layouts of this many cards in all.")
@click.option(
    "--concurrency",
    type=click.FloatRange(min=0, min_open=True, max=1e9),
    callback=_finite,
    help="Only layouts holding this many sequences of --context tokens at once.",
)
@click.option(
    "--rank",
    "rank_by",
    type=click.Choice(RANKINGS),
    default="cards",
    show_default=True,
    help="What best means: the fewest cards, the most sequences held at once, or the fastest "
    "decode of one sequence.",
)
@click.option(
    "--engine",
    "engine_keys",
    multiple=True,
    type=click.Choice(registered_engines()),
    help="Plan for this engine only (repeatable); default: vLLM and llama.cpp, whichever can "
    "run the model (SGLang when named).",
)
@click.option(
    "--vllm-version",
    help="The vLLM release to plan for (0.11 … 0.33); default: the newest llmfit models.",
)
@click.option(
    "--max-num-seqs", type=click.IntRange(1, 1 << 20), help="vLLM: sequences a step (passed on)."
)
@click.option(
    "--max-num-batched-tokens",
    type=click.IntRange(1, 1 << 24),
    help="vLLM: tokens a step (passed on).",
)
@click.option("--enforce-eager", is_flag=True, help="vLLM: no CUDA graphs (passed on).")
@click.option(
    "--enable-prefix-caching/--no-enable-prefix-caching",
    default=None,
    help="vLLM: prefix caching on or off (hybrid models keep more state with it).",
)
@click.option(
    "--max-loras",
    type=click.IntRange(1, 1024),
    help="vLLM: LoRA adapter slots (--enable-lora), each of --max-lora-rank.",
)
@click.option(
    "--max-lora-rank",
    type=click.IntRange(1, 1024),
    default=16,
    show_default=True,
    help="vLLM: the rank of each LoRA slot.",
)
@click.option(
    "--speculative-config",
    help="vLLM: speculative decoding, as JSON "
    '(\'{"method": "mtp", "num_speculative_tokens": 1}\').',
)
@click.option(
    "--limit-mm-per-prompt",
    help="vLLM: items a prompt may carry, as JSON ('{\"image\": 0}' for text only).",
)
@click.option("--json", "json_", is_flag=True, help="Print the version-1 JSON document.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Show every option and every layout considered, not the best ten.",
)
@click.option("--commands", "commands_only", is_flag=True, help="Print only the command lines.")
@click.option("--explain", is_flag=True, help="Show one option's card part by part, and why.")
@click.option("--why-not", is_flag=True, help="List the ways that were refused, and why.")
@click.option(
    "--option", "number", type=click.IntRange(1), help="Which option (default: the best)."
)
@click.option("--ray", is_flag=True, help="Multi-node vLLM commands in the Ray form.")
@click.option(
    "--local-paths",
    is_flag=True,
    help="llama-server -m with this machine's file paths, not -hf REPO:QUANT.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="shell",
    show_default=True,
    help="The launch as shell commands, `docker run` lines, or Kubernetes YAML.",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Use only what is cached; never touch the network (as HF_HUB_OFFLINE=1).",
)
@click.option("--revision", help="Branch, tag or commit of REPO (the same as REPO@REVISION).")
def plan_cmd(
    repo: str,
    fleet_path: str | None,
    context: str | None,
    gpu_memory_utilization: float,
    kv_cache_dtype: str,
    precision: str,
    tp: int | None,
    pp: int | None,
    dp: int | None,
    ep: bool | None,
    gpus: int | None,
    concurrency: float | None,
    rank_by: str,
    engine_keys: tuple[str, ...],
    vllm_version: str | None,
    max_num_seqs: int | None,
    max_num_batched_tokens: int | None,
    enforce_eager: bool,
    enable_prefix_caching: bool | None,
    max_loras: int | None,
    max_lora_rank: int,
    speculative_config: str | None,
    limit_mm_per_prompt: str | None,
    json_: bool,
    show_all: bool,
    commands_only: bool,
    explain: bool,
    why_not: bool,
    number: int | None,
    ray: bool,
    local_paths: bool,
    fmt: str,
    offline: bool,
    revision: str | None,
) -> None:
    """Plan REPO (org/name[@revision] from the Hub or its cache, or a directory) on a fleet.

    Online, only metadata is fetched (config, index, headers by range), and kept for offline use.

    \b
    Examples (on the bundled fixtures: HF_HUB_CACHE=fixtures/hub HF_HUB_OFFLINE=1):
      llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml
      llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml --precision stored
      llmfit meta-llama/Llama-3.1-8B-Instruct --fleet examples/fleet.toml --context 32k
      llmfit deepseek-ai/DeepSeek-V3 --fleet examples/fleet.toml --explain --option 2
      llmfit deepseek-ai/DeepSeek-V3 --fleet examples/fleet.toml --why-not
      llmfit deepseek-ai/DeepSeek-V3 --fleet examples/fleet.toml --option 2 --commands --ray
    """
    from llmfit.advise import advise
    from llmfit.plan.engines.vllm_options import vllm_options
    from llmfit.plan.planner import PlanSettings
    from llmfit.sources.fleet import resolve_fleet
    from llmfit.sources.hub import offline as is_offline
    from llmfit.sources.hub import quiet_huggingface_hub

    fleet = resolve_fleet(fleet_path)
    try:
        vllm = vllm_options(
            version=vllm_version,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            enforce_eager=enforce_eager,
            enable_prefix_caching=enable_prefix_caching,
            max_loras=max_loras or 0,
            max_lora_rank=max_lora_rank if max_loras else 0,
            speculative_config=speculative_config,
            limit_mm_per_prompt=limit_mm_per_prompt,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    settings = PlanSettings(
        context=_context(context),
        gpu_memory_utilization=gpu_memory_utilization,
        kv_cache_dtype={"bf16": "bfloat16"}.get(kv_cache_dtype, kv_cache_dtype),
        precision=precision,
        pins=Pins(tp=tp, pp=pp, dp=dp, ep=ep, gpus=gpus),
        concurrency=concurrency,
        rank=rank_by,
        engines=engine_keys,
        every_layout=show_all,
        local_paths=local_paths,
        vllm=vllm,
    )
    progress = None
    if not is_offline(offline):
        from llmfit.render.progress import make_progress

        quiet_huggingface_hub()
        progress = make_progress()
    try:
        advice = advise(
            repo, fleet, settings, offline=offline, revision=revision, progress=progress
        )
    finally:
        if progress is not None:
            progress.end()
    options = advice.plan.options
    if number is not None and number > len(options):
        raise UsageError(f"--option {number}: there are only {len(options)} options.")
    chosen = number or 1
    if json_:
        from llmfit.render.json import render_json

        click.echo(render_json(advice, ray=ray))
    else:
        from llmfit.render.console import make_console
        from llmfit.render.table import render_commands, render_text

        console = make_console()
        if commands_only and not options:
            from llmfit.render.table import nothing_to_run

            for line in nothing_to_run(advice):
                click.echo(clean(f"llmfit: {line}"), err=True)
        elif commands_only and fmt != "shell":
            if options:
                from llmfit.render.deploy import render_deploy

                click.echo(
                    clean_lines(render_deploy(fmt, advice, options[chosen - 1], ray)), nl=False
                )
        elif commands_only:
            if options:
                render_commands(advice, console, options[chosen - 1], ray)
        elif explain or why_not:
            from llmfit.render.explain import render_explain, render_why_not

            if explain and options:
                render_explain(advice, console, chosen)
            if why_not:
                if explain:
                    console.print()
                render_why_not(advice, console, every=show_all)
        else:
            render_text(advice, console, show_all=show_all, ray=ray, fmt=fmt)
    sys.exit(EXIT_FITS if options else EXIT_NOTHING_FITS)


@cli.command(
    name="check",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--fleet", "fleet_path", help="Fleet file or inline fleet (as for planning).")
@click.option("--json", "json_", is_flag=True, help="Print the version-1 JSON document.")
@click.option("--offline", is_flag=True, help="Use only what is cached; never touch the network.")
@click.option(
    "--vllm-version", help="The vLLM release the command runs on; default: the newest modelled."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="shell",
    show_default=True,
    help="Also print the launch as `docker run` lines or Kubernetes YAML, the verdict as comments.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def check_cmd(
    fleet_path: str | None,
    json_: bool,
    offline: bool,
    vllm_version: str | None,
    fmt: str,
    command: tuple[str, ...],
) -> None:
    """Plan exactly the layout a `vllm serve` or `llama-server` command asks for.

    Prints whether it fits the fleet, what each card holds, its KV pool, the longest context and
    how many sequences it holds; flags that do not change memory are listed as not modelled.
    Exit 0 when it fits, 1 when it does not.

    \b
    Examples (on the bundled fixtures: HF_HUB_CACHE=fixtures/hub HF_HUB_OFFLINE=1):
      llmfit check --fleet 2xh100-80g -- vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2
      llmfit check --fleet 8xh200-141g -- vllm serve deepseek-ai/DeepSeek-V3 -dp 8 \\
          --enable-expert-parallel --max-model-len 32768
      llmfit check --fleet 1xrtx4090-24g -- \\
          llama-server -hf llmfit-fixtures/Tiny-Llama-GGUF:Q8_0 -c 4096
      llmfit check --fleet 2xh100-80g --format k8s -- vllm serve Qwen/Qwen3-8B -tp 2
    """
    from llmfit.check import check
    from llmfit.render.progress import make_progress
    from llmfit.sources.fleet import resolve_fleet
    from llmfit.sources.hub import offline as is_offline
    from llmfit.sources.hub import quiet_huggingface_hub

    fleet = resolve_fleet(fleet_path)
    progress = None
    if not is_offline(offline):
        quiet_huggingface_hub()
        progress = make_progress()
    try:
        checked = check(
            command, fleet, offline=offline, progress=progress, vllm_version=vllm_version
        )
    finally:
        if progress is not None:
            progress.end()
    if json_:
        from llmfit.render.json import render_json

        click.echo(render_json(checked.advice, limit=1))
    else:
        from llmfit.render.check import render_check
        from llmfit.render.console import make_console

        if fmt == "shell":
            render_check(checked.argv, checked.request, checked.advice, make_console())
        else:
            # The verdict as comments, then the launch: the whole output goes to `sh` or to
            # `kubectl apply -f -` as it stands.
            from llmfit.render.check import check_lines
            from llmfit.render.deploy import render_deploy

            for line in check_lines(checked.argv, checked.request, checked.advice):
                click.echo(clean("# " + line))
            if checked.fits:
                options = checked.advice.plan.options
                click.echo(clean_lines(render_deploy(fmt, checked.advice, options[0])), nl=False)
    sys.exit(EXIT_FITS if checked.fits else EXIT_NOTHING_FITS)


def _params(value: str | None) -> int | None:
    """A parameter count: 70b, 8B, 1.5t, 235000000000."""
    if value is None:
        return None
    text = value.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}.get(text[-1:], 1)
    try:
        number = float(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        number = math.nan
    # float() reads "inf" and "nan", and int() of them raises what no sentence explains.
    if not math.isfinite(number):
        raise UsageError(f"--max-params {value!r} is not a parameter count (like 8b or 70B).")
    n = int(number)
    if n <= 0:
        raise UsageError(f"--max-params {value!r} must be positive.")
    return n


@cli.command(name="models")
@click.option("--fleet", "fleet_path", help="Fleet file or inline fleet (as for planning).")
@click.option("--search", help="Ask the Hub for repositories matching this (online).")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=20, show_default=True,
    help="With --search: how many repositories, most downloaded first.",
)  # fmt: skip
@click.option("--context", "context", help="Token pool to plan for (32768, 32k, 1m).")
@click.option(
    "--concurrency",
    type=click.FloatRange(min=0, min_open=True, max=1e9),
    callback=_finite,
    help="Only layouts holding this many sequences of --context tokens at once.",
)
@click.option(
    "--engine",
    "engine_keys",
    multiple=True,
    type=click.Choice(registered_engines()),
    help="Plan for this engine only (repeatable).",
)
@click.option("--max-params", help="Leave out models with more parameters (8b, 70B, 1.5t).")
@click.option("--json", "json_", is_flag=True, help="Print a list of version-1 documents.")
def models_list(
    fleet_path: str | None,
    search: str | None,
    limit: int,
    context: str | None,
    concurrency: float | None,
    engine_keys: tuple[str, ...],
    max_params: str | None,
    json_: bool,
) -> None:
    """Which models fit the fleet: those in the local cache, or those the Hub's search finds.

    Each model is planned as `llmfit REPO` plans it and shown with its best option in one line,
    best first; then those that do not fit, and those that could not be read.

    \b
    Examples (on the bundled fixtures: HF_HUB_CACHE=fixtures/hub HF_HUB_OFFLINE=1):
      llmfit models --fleet examples/fleet.toml
      llmfit models --fleet 1xrtx4090-24g --context 32k --max-params 70b
      llmfit models --fleet examples/fleet.toml --json
    Online:
      llmfit models --fleet examples/fleet.toml --search qwen3 --limit 10
    """
    from llmfit.models import list_models
    from llmfit.plan.planner import PlanSettings
    from llmfit.render.progress import make_progress
    from llmfit.sources.fleet import resolve_fleet
    from llmfit.sources.hub import offline as is_offline
    from llmfit.sources.hub import quiet_huggingface_hub

    fleet = resolve_fleet(fleet_path)
    settings = PlanSettings(context=_context(context), concurrency=concurrency, engines=engine_keys)
    progress = None
    if search is not None:
        if is_offline():
            raise UsageError(
                "--search asks the Hub, but this run is offline (HF_HUB_OFFLINE).",
                hint="llmfit models  (the models in the local cache)",
            )
        quiet_huggingface_hub()
        progress = make_progress()
    try:
        found = list_models(
            fleet, settings, search=search, limit=limit, max_params=_params(max_params),
            progress=progress,
        )  # fmt: skip
    finally:
        if progress is not None:
            progress.end()
    if json_:
        from llmfit.render.models import render_models_json

        click.echo(render_models_json(found))
    else:
        from llmfit.render.console import make_console
        from llmfit.render.models import render_models

        render_models(found, make_console())
    sys.exit(EXIT_FITS if any(r.fits for r in found.results) else EXIT_NOTHING_FITS)


class _FleetGroup(_DefaultGroup):
    """`llmfit fleet [FLEET]` shows the summary; `llmfit fleet import …` writes a fleet file."""

    default = "show"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in (*self.commands, "--help", "-h"):
            args = [self.default, *args]
        return click.Group.parse_args(self, ctx, args)


@cli.group(name="fleet", cls=_FleetGroup)
def fleet_group() -> None:
    """The fleet: a summary of what it has and what is free, and imports that write a fleet file.

    \b
    Example usage:
      llmfit fleet                          # ./fleet.toml, $LLMFIT_FLEET, or this machine
      llmfit fleet examples/fleet.toml --json
      llmfit fleet 4x8xh100-80g@ib0,cpu:512g
      llmfit fleet import nvidia-smi gpus.csv -L gpus.txt --name gpu-1 -o fleet.toml
      kubectl get nodes -o json | llmfit fleet import kubectl - --fabric-label example.com/fabric
    """


@fleet_group.command(name="show")
@click.argument("fleet", required=False)
@click.option("--json", "json_", is_flag=True, help="Print the summary as a JSON document.")
def fleet_show(fleet: str | None, json_: bool) -> None:
    """Summarise FLEET (a fleet file or an inline fleet; default as for planning)."""
    from llmfit.plan.fleet_summary import summarize
    from llmfit.render.fleet import render_summary, render_summary_json
    from llmfit.sources.fleet import resolve_fleet

    summary = summarize(resolve_fleet(fleet))
    click.echo(render_summary_json(summary) if json_ else clean_lines(render_summary(summary)))


@fleet_group.group(name="import")
def fleet_import() -> None:
    """Write a fleet file from what nvidia-smi or kubectl reports (to stdout, or -o FILE)."""


def _write(text: str, output: Path | None, count: int) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    import tempfile

    # Beside the target and renamed into place: a full disk or an interrupted run leaves the old
    # file (or none), never half a fleet.
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, output)
    except OSError as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"-o {output}: cannot be written ({e.strerror or e}).") from None
    click.echo(f"wrote {count} node{'s' if count != 1 else ''} to {output}", err=True)


_output = click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here."
)


@fleet_import.command(name="nvidia-smi")
@click.argument("csv_file", type=click.File("rb"))
@click.option(
    "-L", "--list", "list_file", type=click.File("rb"),
    help="Output of nvidia-smi -L from the same node, for its MIG instances.",
)  # fmt: skip
@click.option("--query-gpu", help="The fields a CSV without a header row was made with.")
@click.option("--name", help="The node's name; default: the file's name.")
@click.option("--fabric", default="", help="The fabric the node is on.")
@click.option("--ram-gb", type=click.FloatRange(0), default=0, help="The node's RAM in GB.")
@_output
def fleet_import_nvidia_smi(
    csv_file: BinaryIO,
    list_file: BinaryIO | None,
    query_gpu: str | None,
    name: str | None,
    fabric: str,
    ram_gb: float,
    output: Path | None,
) -> None:
    """A one-node fleet file from `nvidia-smi --query-gpu=name,memory.total,... --format=csv`.

    \b
    Example usage:
      nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv > gpus.csv
      nvidia-smi -L > gpus.txt
      llmfit fleet import nvidia-smi gpus.csv -L gpus.txt --name gpu-1 --ram-gb 1024
    """
    from llmfit.sources.fleet_import import fleet_toml, import_nvidia_smi, ram_flag

    source = csv_file.name
    node_name = name or (Path(source).stem if source != "<stdin>" else "node1")
    node = import_nvidia_smi(
        csv_file.read(),
        source,
        name=node_name,
        query=query_gpu,
        listing=list_file.read() if list_file else None,
        fabric=fabric,
        ram_bytes=ram_flag(ram_gb),
    )
    header = f"written by llmfit fleet import nvidia-smi from {source}"
    _write(fleet_toml((node,), header), output, 1)


@fleet_import.command(name="kubectl")
@click.argument("json_file", type=click.File("rb"))
@click.option("--fabric-label", help="The node label that names each node's fabric.")
@_output
def fleet_import_kubectl(
    json_file: BinaryIO, fabric_label: str | None, output: Path | None
) -> None:
    """A fleet file from `kubectl get nodes -o json` (GPU Feature Discovery labels).

    \b
    Example usage:
      kubectl get nodes -o json > nodes.json
      llmfit fleet import kubectl nodes.json --fabric-label example.com/fabric -o fleet.toml
    """
    from llmfit.sources.fleet_import import fleet_toml, import_kubectl

    nodes = import_kubectl(json_file.read(), json_file.name, fabric_label)
    header = f"written by llmfit fleet import kubectl from {json_file.name}"
    if fabric_label:
        header += f", fabric from label {fabric_label}"
    header += "\nKubernetes does not say which cards are busy: every healthy card is written free."
    _write(fleet_toml(nodes, header), output, len(nodes))


# What a URL's userinfo (user:password@) looks like wherever it appears in a message.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@")
# A Hugging Face token's shape, for one that reaches a message by a way llmfit did not foresee.
_TOKEN_SHAPE = re.compile(r"\bhf_[A-Za-z0-9]{8,}")


def _tokens() -> list[str]:
    """The tokens this run could send: the environment's, and the stored login's."""
    found = [os.environ.get(v, "") for v in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")]
    hub = sys.modules.get("huggingface_hub")
    if hub is not None:
        try:
            found.append(hub.get_token() or "")
        except Exception:  # a token file that cannot be read holds nothing to hide here
            pass
    return [t.strip() for t in found if len(t.strip()) >= 4]


def _private(text: str) -> str:
    """`text` with every credential taken out: a token, and the userinfo of any URL."""
    for token in _tokens():
        text = text.replace(token, "***")
    text = _TOKEN_SHAPE.sub("hf_***", text)
    return _USERINFO.sub(r"\1", text)


def _say(text: str, limit: int | None = None) -> None:
    """One line on stderr, made safe: it is built from outside text (names, revisions, the Hub's
    answers), so it is cleaned of what a terminal would act on and of credentials."""
    line = clean(_private(text)) if limit is None else clean(_private(text), limit)
    click.echo(line, err=True)


def _json_error(message: str, code: int, hint: str | None) -> None:
    """The error as the JSON document a --json run prints instead of its plan (docs/json.md)."""
    from llmfit.render.safe import safe_dumps

    error: dict[str, object] = {"message": clean(_private(message)), "exit": code}
    if hint:
        error["hint"] = clean(_private(hint))
    try:
        click.echo(safe_dumps({"schema": 1, "error": error}))
    except BrokenPipeError:
        pass


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; an LlmfitError becomes its sentence, its hint and its exit code.

    Anything else that escapes is a bug: one sentence and exit 10, the traceback only with
    LLMFIT_DEBUG=1. Each kind of bad input is handled where it is read; this is the last net.
    """
    debug = bool(os.environ.get("LLMFIT_DEBUG"))
    args = sys.argv[1:] if argv is None else argv
    # Under --json (before any `--`, past which the words are a checked command's), an error is a
    # JSON document on stdout too, so that a script reading stdout always reads JSON.
    as_json = "--json" in (args[: args.index("--")] if "--" in args else args)
    try:
        cli.main(args=argv, prog_name="llmfit", standalone_mode=False)
    except LlmfitError as e:
        _say(f"llmfit: {e.message}")
        if e.hint:
            _say(f"hint: {e.hint}")
        if debug:
            raise
        if as_json:
            _json_error(e.message, e.exit_code, e.hint)
        sys.exit(e.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        # click's messages quote the argument as given: each line is cleaned as llmfit's own are.
        import io

        shown = io.StringIO()
        e.show(file=shown)
        for line in shown.getvalue().splitlines():
            _say(line)
        if as_json:
            _json_error(e.format_message(), e.exit_code, None)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:
        if debug:
            import traceback

            for line in traceback.format_exc().splitlines():
                _say(line, limit=10_000)
        message = (
            f"internal error: {type(e).__name__}: {clean(str(e), 300)}; please report it with "
            "LLMFIT_DEBUG=1 output"
        )
        _say(f"llmfit: {message}")
        if as_json:
            _json_error(message, EXIT_INTERNAL, None)
        sys.exit(EXIT_INTERNAL)
