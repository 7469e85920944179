"""`llmfit calibrate RESULT… --fleet F`: the serving model fitted to the user's own benchmark runs.

Each result file (what the benchmark a plan prints writes: docs/fleet.md) is read
(sources/bench_results.py), matched to the plan of its model on the fleet at its workload (the
plan flags given here, or `--command` with the launch that was measured), and each pool's
(card class × engine) scales are fitted to its runs (plan/calibration.py), then written to the
calibration file beside the fleet file, whole or not at all (sources/calibration_file.py).

A run that cannot be read or matched is one sentence and an exit code, and nothing is written:
a calibration is of runs the user knows, all of them, or none.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llmfit.cli.app import cli
from llmfit.cli.shared import engines_option, fleet_option, offline_option
from llmfit.errors import BadInputError, UsageError
from llmfit.render.safe import clean

if TYPE_CHECKING:  # annotations only: the modules load when the command runs
    from llmfit.plan.calibration import Run
    from llmfit.plan.fleet import Fleet
    from llmfit.plan.load import Scales
    from llmfit.plan.settings import Workload
    from llmfit.sources.bench_results import Result


class RunMismatch(BadInputError):
    """A run that is not of the plan it is matched to: another model, another card, an engine the
    plan does not run it on."""


@dataclass(frozen=True)
class _Matched:
    """A measured run matched to the card class and the engine the plan prices it with."""

    run: Run
    card: str
    engine: str
    engine_name: str
    label: str


@cli.command(name="calibrate")
@click.argument("results", nargs=-1, required=True)
@fleet_option("The fleet the runs ran on: its file (the calibration goes beside it) or inline.")
@click.option(
    "--model",
    "model_ref",
    help="The repository the runs served, where a result "
    "file does not name it (SGLang without its server's info, llama-bench).",
)
@click.option("--card", help="The card class the runs ran on, where the fleet has several.")
@click.option(
    "--command",
    "command",
    help="The launch that was measured (vllm serve …), "
    "quoted as one word: matched as `llmfit check` plans it.",
)
@engines_option("The engine the runs were served by (default: the result file's).")
@click.option("--tp", type=click.IntRange(1), help="The layout's tensor-parallel size.")
@click.option("--pp", type=click.IntRange(1), help="The layout's pipeline stages.")
@click.option("--dp", type=click.IntRange(1), help="The layout's data-parallel ranks.")
@click.option("--ep/--no-ep", default=None, help="With (or without) expert parallelism.")
@click.option(
    "--precision",
    type=click.Choice(["all", "stored", "fp8", "kv-fp8"]),
    default="stored",
    show_default=True,
    help="The checkpoint as run.",
)
@click.option(
    "--calibration",
    "out",
    help="The calibration file to write (default: beside "
    "the fleet file; needed with an inline fleet).",
)
@click.option("--dry-run", is_flag=True, help="Print the fit and write nothing.")
@offline_option("Use only what is cached; never touch the network (as HF_HUB_OFFLINE=1).")
def calibrate_cmd(
    results: tuple[str, ...],
    fleet_path: str | None,
    model_ref: str | None,
    card: str | None,
    command: str | None,
    engine_keys: tuple[str, ...],
    tp: int | None,
    pp: int | None,
    dp: int | None,
    ep: bool | None,
    precision: str,
    out: str | None,
    dry_run: bool,
    offline: bool,
) -> None:
    """Fit the serving model to benchmark results measured on your fleet (the files the
    commented `# measure it:` line of `llmfit REPO --commands` writes), and write the scales
    where later plans on that fleet find them.

    \b
    Examples:
      llmfit calibrate llmfit-bench-*.json --fleet fleet.toml
      llmfit calibrate run.jsonl --fleet 8xh100-80g --calibration cal.toml --model Qwen/Qwen3-8B
    """
    from llmfit.plan.calibration import calibrate, identifies_both, merged
    from llmfit.sources.bench_results import read_results
    from llmfit.sources.calibration_file import read_calibration, write_calibration
    from llmfit.sources.fleet import resolve_fleet

    fleet = resolve_fleet(fleet_path)
    target = _target(out, fleet.source, dry_run)
    runs = [r for path in results for r in read_results(path)]
    matched = [
        _match(r, fleet, model_ref, card, command, engine_keys, tp, pp, dp, ep, precision, offline)
        for r in runs
    ]
    pools: dict[tuple[str, str], list[_Matched]] = {}
    for m in matched:
        pools.setdefault((m.card, m.engine), []).append(m)
    fitted = []
    for (card_class, engine_key), ms in pools.items():
        names = sorted({Path(m.run.name).name for m in ms})
        pool = calibrate(card_class, engine_key, [m.run for m in ms], names)
        fitted.append(pool)
        name = ms[0].engine_name
        for m in ms:
            _say_run(m, pool.scales)
        click.echo(
            clean(
                f"{card_class} with {name}: decode × {pool.scales.decode:.3f}, prefill × "
                f"{pool.scales.prefill:.3f}, on {pool.runs} run{'s' if pool.runs != 1 else ''}: "
                f"median error {pool.error_before * 100:.1f} % before, "
                f"{pool.error_after * 100:.1f} % after"
            )
        )
        if not identifies_both([m.run for m in ms]):
            click.echo(
                clean(
                    "  one factor on the whole step: runs at one load pin the step time at its "
                    "batch, not its split between decode and prefill (a run at another load "
                    "fits them apart); plans at other batches get it faded (docs/fleet.md)"
                )
            )
    if target is None:
        click.echo("--dry-run: nothing written.")
        return
    old = read_calibration(target)
    write_calibration(target, merged(old, fitted))
    click.echo(clean(f"wrote {target}: plans on this fleet use it (--no-calibration: not)"))


def _target(out: str | None, source: str, dry_run: bool) -> Path | None:
    from llmfit.sources.calibration_file import beside, fleet_file

    if dry_run:
        return None
    if out is not None:
        return Path(out)
    fleet = fleet_file(source)
    if fleet is None:
        raise UsageError(
            "an inline fleet has no file to keep a calibration beside: name one with "
            "--calibration, and plan with the same --calibration.",
            hint="llmfit calibrate RESULT… --fleet 8xh100-80g --calibration fleet.calibration.toml",
        )
    return beside(fleet)


def _workload(r: Result) -> Workload:
    from llmfit.plan.settings import Workload

    kind = r.kind
    return Workload(
        name="run",
        input_len=r.input_len,
        output_len=r.output_len,
        concurrency=r.load if kind == "concurrency" else None,
        rate=r.load if kind == "rate" else None,
        requests=int(r.load) if kind == "requests" else None,
        ttft_s=None,
        tpot_s=None,
        named=True,
    )


def _match(
    r: Result,
    fleet: Fleet,
    model_ref: str | None,
    card: str | None,
    command: str | None,
    engine_keys: tuple[str, ...],
    tp: int | None,
    pp: int | None,
    dp: int | None,
    ep: bool | None,
    precision: str,
    offline: bool,
) -> _Matched:
    """The run matched to the best plan of its model, engine and card at its workload."""
    from llmfit.advise import advise
    from llmfit.plan.calibration import Measured, Run
    from llmfit.plan.engines import engine
    from llmfit.plan.planner import PlanSettings
    from llmfit.plan.settings import Pins
    from llmfit.render.sentences import label

    if engine_keys and r.engine not in engine_keys:
        raise RunMismatch(
            f"{r.name} is a {engine(r.engine).name} benchmark's result, not "
            f"{', '.join(engine(k).name for k in engine_keys)}'s."
        )
    w = _workload(r)
    if command is not None:
        from llmfit.check import check

        advice = check(shlex.split(command), fleet, offline=offline, workload=w).advice
        repo = advice.repo.id
        if r.model and not _same_model(r.model, repo):
            raise RunMismatch(f"{r.name} measured {r.model}, not {repo}, which --command serves.")
    else:
        repo = _model_of(r, model_ref)
        settings = PlanSettings(
            precision=precision,
            pins=Pins(tp=tp, pp=pp, dp=dp, ep=ep),
            workload=w,
            engines=(r.engine,),
        )
        advice = advise(repo, fleet, settings, offline=offline)
    options = [o for o in advice.plan.options if o.engine == r.engine and o.gpu_class]
    if card is not None:
        options = [o for o in options if o.gpu_class == card]
    if not options:
        where = f" on {card} cards" if card else ""
        raise RunMismatch(
            f"{r.name}: no plan of {repo} on the fleet{where} runs on "
            f"{engine(r.engine).name} at the run's layout, so the run matches no plan of it."
        )
    classes = sorted({o.gpu_class for o in options if o.gpu_class})
    if len(classes) > 1:
        raise UsageError(
            f"{r.name}: {repo} runs on {', '.join(classes)} cards of the fleet; say which the "
            "run used with --card.",
            hint=f"llmfit calibrate {shlex.quote(r.path)} --card {classes[0]} …",
        )
    o = options[0]
    if r.model_file and o.artifact.files:
        names = {Path(f).name for f in o.artifact.files}
        if r.model_file not in names:
            raise RunMismatch(
                f"{r.name} measured {r.model_file}, which is not a file of the plan's {repo} "
                f"({o.artifact.quant or o.artifact.name}): another model's run."
            )
    sv = o.serving
    if sv is None or sv.replica is None:
        raise RunMismatch(f"{r.name}: the plan of {repo} on {o.gpu_class} has no serving figure.")
    measured = Measured(r.output_tokens_per_s, r.tpot_s, r.ttft_s)
    run = Run(r.name, sv.replica, w, r.kind, r.load, o.gpus, measured)
    assert o.gpu_class is not None
    return _Matched(run, o.gpu_class, o.engine, engine(o.engine).name, f"{repo} as {label(o)}")


def _same_model(named: str, repo: str) -> bool:
    """Whether a result's model is the repository: its id, or a path ending in it (a server
    started from a local copy names its path)."""
    a, b = named.rstrip("/"), repo.rstrip("/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _model_of(r: Result, model_ref: str | None) -> str:
    if r.model is None:
        if model_ref is None:
            raise UsageError(
                f"{r.name} does not name the repository it served: give it with --model.",
                hint=f"llmfit calibrate {shlex.quote(r.path)} --model ORG/NAME --fleet …",
            )
        return model_ref
    if model_ref is not None and not _same_model(r.model, model_ref):
        raise RunMismatch(f"{r.name} measured {r.model}, not --model {model_ref}: another model's.")
    return r.model


def _say_run(m: _Matched, scales: Scales) -> None:
    from llmfit.plan.calibration import errors
    from llmfit.plan.load import Scales

    run = m.run
    b_tps, b_tpot, b_ttft = errors(run, Scales())
    a_tps, a_tpot, a_ttft = errors(run, scales)
    me = run.measured
    at = {
        "concurrency": f"{run.load:g} in flight",
        "rate": f"{run.load:g} a second",
        "requests": f"{run.load:g} at once",
        "single": "one sequence",
    }[run.kind]

    def pct(x: float | None) -> str:
        return "-" if x is None or not math.isfinite(x) else f"{x * 100:+.0f} %"

    ttft = f", TTFT {me.ttft_s * 1e3:,.0f} ms" if me.ttft_s else ""
    click.echo(
        clean(
            f"{run.name}: {m.label}, {run.workload.input_len:,} in / "
            f"{run.workload.output_len:,} out at {at}: {me.output_tokens_per_s:,.0f} output "
            f"tok/s, TPOT {me.tpot_s * 1e3:,.1f} ms{ttft}; error throughput {pct(b_tps)} → "
            f"{pct(a_tps)}, TPOT {pct(b_tpot)} → {pct(a_tpot)}, TTFT {pct(b_ttft)} → "
            f"{pct(a_ttft)}",
            10_000,
        )
    )
