"""`llmfit REPO` (`llmfit plan REPO`): every way REPO could run on the fleet, ranked."""

from __future__ import annotations

import sys

import click

from llmfit.cli.app import cli
from llmfit.cli.output import View, show_plan
from llmfit.cli.shared import (
    RegistryHelp,
    WithKnobs,
    budget_option,
    context_option,
    engine_options,
    fleet_option,
    hub_progress,
    json_option,
    offline_option,
    planned_engines_option,
    priced_budget,
    rank_option,
    refuse_unhonoured,
    split_knobs,
    taken_by,
    workload_options,
)
from llmfit.cli.values import context_tokens, finite, wants_trained
from llmfit.errors import EXIT_FITS, EXIT_NOTHING_FITS, UsageError
from llmfit.plan.settings import PRECISIONS, Disagg, Pins, Workload
from llmfit.render.commands import FORMATS


def disagg_settings(
    mode: str, prefill_tp: int | None, decode_tp: int | None, xpyd: str | None
) -> Disagg:
    """--disagg and its pins, with --xpyd read ("2:1": 2 prefill workers to 1 decode worker)."""
    pair: tuple[int, int] | None = None
    if xpyd is not None:
        x, sep, y = xpyd.strip().partition(":")
        if not sep or not x.strip().isdigit() or not y.strip().isdigit():
            raise UsageError(
                f"--xpyd {xpyd!r} is not X:Y, the prefill workers to the decode workers of a "
                "unit (2:1)."
            )
        pair = (int(x), int(y))
        if min(pair) < 1 or max(pair) > 64:
            raise UsageError(f"--xpyd {xpyd}: each side must be 1 to 64 workers.")
    pinned = prefill_tp is not None or decode_tp is not None or pair is not None
    if mode == "off" and pinned:
        raise UsageError(
            "--disagg off plans no disaggregated layout, so --prefill-tp, --decode-tp and "
            "--xpyd pin nothing: drop them or --disagg off."
        )
    return Disagg(mode, prefill_tp, decode_tp, pair)


def option_number(
    given: str | None, commands: bool, json_: bool, explain: bool
) -> tuple[int | None, int | None]:
    """--option: an option's number ("4"), or a disaggregated option's name ("D1", as the plan's
    disaggregated block calls it), whose launch only --commands prints. (number, None), (None,
    D's number), or (None, None) where none was given."""
    if given is None:
        return None, None
    text = given.strip()
    if text.isascii() and text.isdigit() and int(text) >= 1:
        return int(text), None
    if text[:1] in ("D", "d") and text[1:].isascii() and text[1:].isdigit() and int(text[1:]) >= 1:
        if not commands or json_ or explain:
            raise UsageError(
                f"--option {text} picks a disaggregated option's launch, which --commands "
                "prints (with --format shell, docker, k8s, llm-d, kserve or dynamo); the plan's "
                "text shows D1 in full and --json every one.",
                hint="add --commands",
            )
        return None, int(text[1:])
    raise UsageError(
        f"--option {given!r} is neither an option's number (4) nor a disaggregated option's "
        "name (D1)."
    )


@cli.command(name="plan", cls=WithKnobs)
@click.argument("repo")
@fleet_option(
    "Fleet file (TOML) or inline fleet (4x8xh100-80g@ib0,cpu:512g); "
    "default: ./fleet.toml, then $LLMFIT_FLEET, then this machine."
)
@context_option(
    "Token pool to plan for (32768, 32k, 1m, or trained); default: the trained context, or "
    "16k on a fleet of consumer cards (GeForce, Radeon, Apple)."
)
@click.option(
    "--gpu-memory-utilization",
    type=click.FloatRange(0.05, 1.0),
    callback=finite,
    default=0.90,
    show_default=True,
    cls=RegistryHelp,
    help_of=lambda: (
        f"Share of each card the plan counts on; {taken_by('--gpu-memory-utilization')}."
    ),
)
@click.option(
    "--kv-cache-dtype",
    type=click.Choice(["auto", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2"]),
    default="auto",
    show_default=True,
    cls=RegistryHelp,
    help_of=lambda: (
        f"KV cache dtype to plan (auto: the checkpoint's); {taken_by('--kv-cache-dtype')}."
    ),
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
    "--disagg",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Disaggregated prefill and decode: auto lists it where it serves more a card within "
    "the targets, on lists it anyway, off never.",
)
@click.option(
    "--prefill-tp", type=click.IntRange(1), help="Disaggregated: the prefill workers' TP."
)
@click.option("--decode-tp", type=click.IntRange(1), help="Disaggregated: the decode workers' TP.")
@click.option(
    "--xpyd",
    metavar="X:Y",
    help="Disaggregated: X prefill workers to Y decode workers in a unit (2:1).",
)
@workload_options
@budget_option()
@rank_option(
    "What best means: the fewest cards (or lowest cost) that serve the workload, the fewest "
    "that hold the context, the most sequences held, the fastest single sequence, the most "
    "tokens a second a card at the workload, or the shortest request."
)
@planned_engines_option("Plan for this engine only (repeatable)")
@json_option()
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
    "--option",
    "number",
    metavar="N|DN",
    help="Which option (default: the best); D1, D2, … a disaggregated one's launch, with "
    "--commands.",
)
@click.option(
    "--ray", is_flag=True, cls=RegistryHelp,
    help_of=lambda: f"Multi-node commands in the Ray form; {taken_by('--ray')}.",
)  # fmt: skip
@click.option(
    "--replicas",
    type=click.IntRange(1, 10_000),
    help="Copies of the option the launch starts (default: as many as the named load needs).",
)
@click.option(
    "--local-paths",
    is_flag=True,
    cls=RegistryHelp,
    help_of=lambda: (
        "Launch the model by this machine's file paths, not its repository's id; "
        f"{taken_by('--local-paths')}."
    ),
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="shell",
    show_default=True,
    help="The launch as shell commands, `docker run` lines or Kubernetes YAML; of a "
    "disaggregated option (--option D1), also llm-d's modelservice values, a KServe "
    "LLMInferenceService or an NVIDIA Dynamo DynamoGraphDeployment.",
)
@click.option(
    "--calibration",
    "calibration_path",
    help="Calibration file (`llmfit calibrate`); default: the one beside the fleet file.",
)
@click.option(
    "--no-calibration", is_flag=True, help="The serving model's own figures, not calibrated."
)
@offline_option("Use only what is cached; never touch the network (as HF_HUB_OFFLINE=1).")
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
    disagg: str,
    prefill_tp: int | None,
    decode_tp: int | None,
    xpyd: str | None,
    workload: Workload,
    budget: float | None,
    rank_by: str,
    engine_keys: tuple[str, ...],
    json_: bool,
    show_all: bool,
    commands_only: bool,
    explain: bool,
    why_not: bool,
    number: str | None,
    ray: bool,
    replicas: int | None,
    local_paths: bool,
    fmt: str,
    calibration_path: str | None,
    no_calibration: bool,
    offline: bool,
    revision: str | None,
    **knob_values: object,
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
      llmfit Qwen/Qwen3-8B --fleet 8xh100-80g --input-len 2000 --output-len 500 --rate 20 \\
          --ttft 2 --tpot 50
    """
    from llmfit.advise import advise
    from llmfit.plan.planner import PlanSettings
    from llmfit.sources.calibration_file import for_fleet
    from llmfit.sources.fleet import resolve_fleet

    refuse_unhonoured(engine_keys, knob_values, repo)
    fleet = resolve_fleet(fleet_path)
    if no_calibration and calibration_path is not None:
        raise UsageError("--calibration and --no-calibration ask for opposite things: give one.")
    calibration = () if no_calibration else for_fleet(fleet.source, calibration_path)
    options = engine_options(split_knobs(knob_values))
    asked = context_tokens(context)
    settings = PlanSettings(
        context=asked,
        gpu_memory_utilization=gpu_memory_utilization,
        utilization_given=click.get_current_context().get_parameter_source("gpu_memory_utilization")
        in (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT),
        kv_cache_dtype={"bf16": "bfloat16"}.get(kv_cache_dtype, kv_cache_dtype),
        precision=precision,
        pins=Pins(tp=tp, pp=pp, dp=dp, ep=ep, gpus=gpus),
        workload=workload,
        rank=rank_by,
        engines=engine_keys,
        every_layout=show_all,
        local_paths=local_paths,
        engine_options=options,
        calibration=calibration,
        replicas=replicas,
        budget=priced_budget(budget, fleet),
        desktop=not wants_trained(context),
        disagg=disagg_settings(disagg, prefill_tp, decode_tp, xpyd),
    )
    with hub_progress(offline) as progress:
        advice = advise(
            repo, fleet, settings, offline=offline, revision=revision, progress=progress
        )
    if not engine_keys:
        # Which engines run the repository was its files' to say: now they have.
        refuse_unhonoured(engine_keys, knob_values, repo, ran=advice.plan.ran)
    which, disagg_number = option_number(number, commands_only, json_, explain)
    options = advice.plan.options
    if which is not None and which > len(options):
        raise UsageError(f"--option {which}: there are only {len(options)} options.")
    offers = advice.plan.disaggregated
    if disagg_number is not None and disagg_number > len(offers):
        listed = (
            f"the plan lists only {len(offers)} (D1 to D{len(offers)})"
            if len(offers) > 1
            else "the plan lists only D1"
            if offers
            else "the plan lists no disaggregated option (--disagg on lists those its engines "
            "launch, winning or not)"
        )
        raise UsageError(f"--option D{disagg_number}: {listed}.")
    show_plan(
        advice,
        View(
            json=json_, commands=commands_only, fmt=fmt, explain=explain, why_not=why_not,
            every=show_all, number=which or 1, ray=ray, disagg=disagg_number,
        ),
    )  # fmt: skip
    sys.exit(EXIT_FITS if options else EXIT_NOTHING_FITS)
