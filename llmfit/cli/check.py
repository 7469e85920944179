"""`llmfit check -- <engine command>`: exactly the layout a command asks for, planned."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, NoReturn

import click

from llmfit.cli.app import HIDDEN, cli, say, tokens
from llmfit.cli.output import show_check
from llmfit.cli.shared import (
    CheckWithKnobs,
    engine_options,
    fleet_option,
    hub_progress,
    json_option,
    offline_option,
    refuse_unhonoured,
    split_knobs,
    workload_options,
)
from llmfit.errors import (
    EXIT_FITS,
    EXIT_NOT_SERVED,
    EXIT_NOTHING_FITS,
    EXIT_USAGE,
    UsageError,
)
from llmfit.plan.settings import Workload
from llmfit.render.commands import CONTAINER_FORMATS

if TYPE_CHECKING:
    from llmfit.plan.fleet import Fleet


@cli.command(
    name="check",
    cls=CheckWithKnobs,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@fleet_option()
@json_option()
@offline_option()
@workload_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(CONTAINER_FORMATS),
    default="shell",
    show_default=True,
    help="Also print the launch as `docker run` lines or Kubernetes YAML, the verdict as comments.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def check_cmd(
    fleet_path: str | None,
    json_: bool,
    offline: bool,
    workload: Workload,
    fmt: str,
    command: tuple[str, ...],
    **knob_values: object,
) -> None:
    """Plan exactly the layout a `vllm serve` or `llama-server` command asks for.

    Prints whether it fits the fleet, what each card holds, its KV pool, the longest context and
    how many sequences it holds, and how it serves the workload (--input-len, --rate, …: TTFT,
    TPOT, throughput, replicas); flags that do not change memory are listed as not modelled.
    Exit 0 when it fits (and serves the named load), 1 when it does not fit, 12 when it fits
    but one server of it does not serve the named load within its targets.

    \b
    Examples (on the bundled fixtures: HF_HUB_CACHE=fixtures/hub HF_HUB_OFFLINE=1):
      llmfit check --fleet 2xh100-80g -- vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2
      llmfit check --fleet 8xh200-141g -- vllm serve deepseek-ai/DeepSeek-V3 -dp 8 \\
          --enable-expert-parallel --max-model-len 32768
      llmfit check --fleet 1xrtx4090-24g -- \\
          llama-server -hf llmfit-fixtures/Tiny-Llama-GGUF:Q8_0 -c 4096
      llmfit check --fleet 2xh100-80g --format k8s -- vllm serve Qwen/Qwen3-8B -tp 2
      llmfit check --fleet 1xh100-80g --rate 4 --tpot 30 -- vllm serve Qwen/Qwen3-8B

    A disaggregated pair: the prefill command, a bare --, then the decode command; each is
    checked as one, and the pair by the rules its engine applies to the two sides.
    """
    from llmfit.check import check, credentials, split_pair
    from llmfit.plan.engines import for_argv, split_env
    from llmfit.sources.fleet import resolve_fleet

    HIDDEN.extend(credentials(command))
    started = for_argv(split_env(command)[1])
    if started is not None:
        refuse_unhonoured((started.key,), knob_values, checking=True)
    fleet = resolve_fleet(fleet_path)
    pair = split_pair(command)
    if pair is not None:
        _check_pair(pair, fleet, json_, fmt, offline, workload, knob_values)
    with hub_progress(offline) as progress:
        checked = check(
            command, fleet, offline=offline, progress=progress,
            options=engine_options(split_knobs(knob_values)), workload=workload,
            known=tokens(),
        )  # fmt: skip
    show_check(checked, json=json_, fmt=fmt)
    if not checked.fits:
        sys.exit(EXIT_NOTHING_FITS)
    sys.exit(EXIT_NOT_SERVED if checked.serves is False else EXIT_FITS)


def _check_pair(
    pair: tuple[tuple[str, ...], tuple[str, ...]],
    fleet: Fleet,
    json_: bool,
    fmt: str,
    offline: bool,
    workload: Workload,
    knob_values: dict[str, object],
) -> NoReturn:
    """A prefill command and a decode command: each checked as one command is, then the pair by
    its engine's rules for the two sides (llmfit/check.py `pair_rules`), refused in one
    sentence where the engine would refuse it. With --json, the pair's document (docs/json.md)
    whether or not it is refused, the refusal's sentence on stderr besides and its exit code."""
    from llmfit.check import check, credentials, pair_rules
    from llmfit.render.check import render_check
    from llmfit.render.console import make_console

    if fmt != "shell":
        raise UsageError(
            "a pair of commands is checked in words or --json: --format takes one command."
        )
    checked = []
    for words in pair:
        HIDDEN.extend(credentials(words))
        with hub_progress(offline) as progress:
            checked.append(check(
                words, fleet, offline=offline, progress=progress,
                options=engine_options(split_knobs(knob_values)), workload=workload,
                known=tokens(),
            ))  # fmt: skip
    prefill, decode = checked
    rules = pair_rules(prefill, decode)
    why = next((r.why for r in rules if r.holds is False), None)
    refused = f"the pair of commands cannot run as prefill and decode: {why}."
    fits = prefill.fits and decode.fits
    if json_:
        from llmfit.render.json import render_pair_json

        rows = [(r.rule, r.holds, r.why) for r in rules]
        click.echo(render_pair_json(rows, why, prefill.advice, decode.advice))
        if why is not None:
            say(refused)
            sys.exit(EXIT_USAGE)
        sys.exit(EXIT_FITS if fits else EXIT_NOTHING_FITS)
    if why is not None:
        raise UsageError(refused)
    console = make_console()
    for side, c in (("prefill", prefill), ("decode", decode)):
        console.print(f"# {side}", markup=False, highlight=False)
        render_check(c.argv, c.request, c.advice, console)
    console.print(
        "the pair: one disaggregated deployment its engine launches"
        if fits
        else "the pair: its engine would pair them, but both must fit",
        markup=False,
        highlight=False,
    )
    sys.exit(EXIT_FITS if fits else EXIT_NOTHING_FITS)
