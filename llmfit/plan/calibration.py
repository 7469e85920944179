"""Calibration on the user's own runs: a pool's (card class × engine) two scales, fitted to what
its benchmarks measured, and applied to every later plan on that pool.

The serving model's figures at a load come from step times (plan/speed.py) turned into a steady
state (plan/load.py). A cluster differs from the model by its kernels, drivers and flags: here
by two factors on the step times, `decode` (a step of decodes alone) and `prefill` (what prompt
tokens add to a step), load.Scales. They multiply the model's own totals, so a fit holds whatever
the step model computes inside.

The fit minimises, over the pool's runs, the squared log errors of output tokens a second, TPOT,
and (weighted less: a mean TTFT is the noisiest of the three, its tail a few prompts that
queued) TTFT, by a grid over the bounds refined by Nelder–Mead.

What the runs identify decides what is fitted. A serving run at one load pins the step time at
the batch it ran, not how that time splits between the step's parts (its fixed costs, the
weights' reads, the per-sequence reads and compute); its TTFT might pin the prefill, but a
published TTFT is often its queue. So runs at one operating point (one load, one pair of
lengths) fit ONE factor on the whole step time, decode and prefill alike: the model's own shape
across loads, moved as a whole. Runs at two operating points or more, or a llama-bench run (its
prompt and its generation measured apart), fit the two scales apart. On the published load
sweeps (benchmarks/calibrate_sweeps.py, docs/accuracy.md) one factor from one run predicts the
sweep's other loads better than two scales from it did, on throughput and TPOT both.

Bounds (physical, docs/fleet.md):
- a scale below the efficiency the engine's constants claim would have the card read its
  weights faster than its datasheet bandwidth (decode: `weight_efficiency`) or multiply faster
  than its datasheet tensor rate (prefill: `prefill_efficiency`), so neither goes below those
  (nor below MIN_SCALE, where a constant is not known);
- a scale past MAX_SCALE (four times slower than modelled) is a server misconfigured, not a
  model to correct: the fit stops there, and its error after says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llmfit.plan import load
from llmfit.plan.load import Replica, Scales
from llmfit.plan.options import Option
from llmfit.plan.settings import Workload

MIN_SCALE = 0.25
MAX_SCALE = 4.0
# TTFT's weight in the fit beside throughput and TPOT.
TTFT_WEIGHT = 0.25
# The fit stops when its triangle is this far across (in the scales' logarithms).
PRECISION = 1e-4
# Outside the batches its runs ran at, a pool's scales count for (batch ratio)^(-1/FADE) of
# themselves (in the logarithm): at 4 times the batch half, at 100 times a tenth. A run pins the
# step time at its own batch; further from it, more of the step is made of parts it did not
# measure. Chosen on the published load sweeps (docs/accuracy.md, issue 36), where 1 to 4 all
# bring the sweeps' median errors below the uncalibrated ones and a factor carried whole does not.
FADE = 2.0


@dataclass(frozen=True)
class Measured:
    """One run's figures: output tokens a second of the whole launch, mean TPOT and TTFT (s)."""

    output_tokens_per_s: float
    tpot_s: float
    ttft_s: float | None


@dataclass(frozen=True)
class Run:
    """A run matched to its plan: the replica it ran on, its workload (lengths), its load (kind:
    "concurrency", "rate" or "requests"; llama-bench's one sequence is "single") and what it
    measured; `cards` the launch's cards (throughput a GPU)."""

    name: str
    replica: Replica
    workload: Workload
    kind: str
    load: float
    cards: int
    measured: Measured


@dataclass(frozen=True)
class Pool:
    """A pool's calibration as the calibration file keeps it."""

    card: str  # the card class (h100-80g)
    engine: str  # the engine's key (vllm)
    scales: Scales
    runs: int
    # The median over its runs of the mean absolute error on throughput and TPOT, before and
    # after the scales.
    error_before: float
    error_after: float
    sources: tuple[str, ...] = ()
    # The least and most sequences decoding a replica at its runs: the scales hold whole there,
    # and fade further from them (`at_batch`). (0, inf): whole at every batch.
    batches: tuple[float, float] = (0.0, math.inf)

    @property
    def key(self) -> tuple[str, str]:
        return (self.card, self.engine)

    def at_batch(self, batch: float, fade: float = FADE) -> Scales:
        """The scales at `batch` sequences decoding a replica: whole within the batches of its
        runs, faded toward the model's own (1, 1) outside them, by `fade` (a batch under one
        counted as one; math.inf: never faded)."""
        lo, hi = self.batches
        b = max(batch, 1.0)
        edge = max(lo, 1.0) if b < lo else max(hi, 1.0) if b > hi else b
        w = (max(b, edge) / min(b, edge)) ** (-1.0 / fade)
        s = self.scales
        return s if w == 1.0 else Scales(s.decode**w, s.prefill**w)


def figures(r: Replica, w: Workload, kind: str, load_: float) -> Measured:
    """What the model says a run measures: the launch's output tokens a second, TPOT, TTFT."""
    copies = r.copies
    out = w.output_len
    if kind == "single":
        # llama-bench: one prompt's prefill, then one sequence generating (no server, no queue).
        # Its generation test starts from an empty context (-d 0): out / 2 tokens on average.
        service, _ = load.prefill_service(r, w, 0.0)
        tau, _ = load.decode_round(r, 1.0, out / 2)
        return Measured(1.0 / tau if tau > 0 else math.inf, tau, service)
    if kind == "rate":
        p = load.at_rate(r, w, load_ / copies)
        if p.stable:
            return Measured(load_ * out, p.tpot_s, p.ttft_s)
        kind, load_ = "requests", max(load_ * 60, 1.0)  # past its capacity: the prompts pile up
    if kind == "requests":
        b = load.burst(r, w, max(1, math.ceil(load_ / copies)))
        if b is None or b.makespan_s <= 0:
            return Measured(0.0, math.inf, math.inf)
        return Measured(b.requests * copies * out / b.makespan_s, b.tpot_s, b.ttft_s)
    p, ttft = load.at_concurrency(r, w, load_ / copies)
    return Measured(p.rate * copies * out, p.tpot_s, ttft)


def decode_batch(run: Run, scales: Scales) -> float:
    """Sequences decoding a replica at the run, as the model has it at `scales` (llama-bench's
    one sequence: one; a rate past the replica's capacity, or a burst: as many as it admits)."""
    r = replace(run.replica, scales=scales)
    w = run.workload
    if run.kind == "single":
        return 1.0
    if run.kind == "rate":
        p = load.at_rate(r, w, run.load / r.copies)
        return p.batch if p.stable else load.admits(r, w)
    if run.kind == "requests":
        return min(math.ceil(run.load / r.copies), load.admits(r, w))
    p, _ = load.at_concurrency(r, w, run.load / r.copies)
    return p.batch


def _log_error(est: float, meas: float) -> float:
    if not (math.isfinite(est) and est > 0 and meas > 0):
        return 5.0  # a point the model cannot serve: far, but finite, so the search moves on
    return math.log(est / meas)


def errors(run: Run, scales: Scales) -> tuple[float, float, float | None]:
    """The run's relative errors (estimate ÷ measured − 1) on throughput, TPOT and TTFT at
    `scales`."""
    m = run.measured
    est = figures(replace(run.replica, scales=scales), run.workload, run.kind, run.load)

    def rel(e: float, v: float) -> float:
        return e / v - 1 if v > 0 and math.isfinite(e) else math.inf

    ttft = rel(est.ttft_s or 0.0, m.ttft_s) if m.ttft_s and est.ttft_s is not None else None
    return rel(est.output_tokens_per_s, m.output_tokens_per_s), rel(est.tpot_s, m.tpot_s), ttft


def run_error(run: Run, scales: Scales) -> float:
    """The figure a run's error is said as: the mean absolute error on throughput and TPOT."""
    tps, tpot, _ = errors(run, scales)
    return (abs(tps) + abs(tpot)) / 2


# What the model says a run measures at some scales: `figures` at the run's replica so scaled,
# or a caller's own reading of a run (benchmarks/calibrate_sweeps.py: the accuracy benchmark's).
Model = Callable[[Run, Scales], Measured]


def _figures_of(run: Run, scales: Scales) -> Measured:
    return figures(replace(run.replica, scales=scales), run.workload, run.kind, run.load)


def _loss(runs: Sequence[Run], scales: Scales, model: Model = _figures_of) -> float:
    total = 0.0
    for run in runs:
        m = run.measured
        est = model(run, scales)
        total += _log_error(est.output_tokens_per_s, m.output_tokens_per_s) ** 2
        total += _log_error(est.tpot_s, m.tpot_s) ** 2
        if m.ttft_s and est.ttft_s is not None:
            total += TTFT_WEIGHT * _log_error(est.ttft_s, m.ttft_s) ** 2
    return total


def bounds(r: Replica) -> tuple[tuple[float, float], tuple[float, float]]:
    """(decode's, prefill's) range: from the efficiency the engine's constants claim (a scale
    below it passes the datasheet's peak) to MAX_SCALE."""
    k = r.inputs.constants
    weights = getattr(k, "weight_efficiency", MIN_SCALE)
    tensor = getattr(k, "prefill_efficiency", MIN_SCALE)
    lo_d = min(max(float(weights), MIN_SCALE), 1.0)
    lo_p = min(max(float(tensor), MIN_SCALE), 1.0)
    return (lo_d, MAX_SCALE), (lo_p, MAX_SCALE)


def operating_points(runs: Sequence[Run]) -> int:
    """How many distinct operating points the runs measured: their loads and lengths."""
    return len({(r.kind, r.load, r.workload.input_len, r.workload.output_len) for r in runs})


def identifies_both(runs: Sequence[Run]) -> bool:
    """Whether the runs tell decode's scale from prefill's: runs at two operating points or
    more (the step time at two batches or two prompt lengths), or a llama-bench run, whose
    prompt and generation tests are measured apart (no queue in either)."""
    return operating_points(runs) >= 2 or any(r.kind == "single" for r in runs)


def fit(runs: Sequence[Run], model: Model = _figures_of, apart: bool | None = None) -> Scales:
    """The scales that bring the model's figures nearest the runs (all of one pool), within
    `bounds` (the tightest of the runs' replicas'): one factor on the whole step time where the
    runs do not tell decode from prefill (`identifies_both`), else the two apart (`apart`, when
    given, says which instead: benchmarks/calibrate_sweeps.py compares the two)."""
    if not runs:
        return Scales()
    (lo_d, hi_d), (lo_p, hi_p) = bounds(runs[0].replica)
    for run in runs[1:]:
        (a, _), (b, _) = bounds(run.replica)
        lo_d, lo_p = max(lo_d, a), max(lo_p, b)
    if not (identifies_both(runs) if apart is None else apart):
        # One factor on both: no lower than either bound, so neither the weights' reads nor the
        # prompt's multiplications pass the card's datasheet peak.
        least, most = max(lo_d, lo_p), min(hi_d, hi_p)
        one = _fit_one(lambda s: _loss(runs, Scales(s, s), model), least, most)
        return Scales(one, one)
    grid = 9
    best, best_loss = Scales(), math.inf
    for i in range(grid):
        d = math.exp(math.log(lo_d) + (math.log(hi_d) - math.log(lo_d)) * i / (grid - 1))
        for j in range(grid):
            p = math.exp(math.log(lo_p) + (math.log(hi_p) - math.log(lo_p)) * j / (grid - 1))
            loss = _loss(runs, Scales(d, p), model)
            if loss < best_loss:
                best, best_loss = Scales(d, p), loss
    # Then refined by Nelder–Mead in log space (two scales: a triangle), clamped to the bounds:
    # decode and prefill trade off through the throughput, so one at a time would zigzag.
    lo = (math.log(lo_d), math.log(lo_p))
    hi = (math.log(hi_d), math.log(hi_p))
    step = ((hi[0] - lo[0]) / (grid - 1), (hi[1] - lo[1]) / (grid - 1))

    def f(x: tuple[float, float]) -> float:
        return _loss(runs, Scales(math.exp(x[0]), math.exp(x[1])), model)

    # Restarted from where it stopped until a restart gains nothing: a triangle can collapse
    # along the valley where the two trade off, short of its floor.
    x = (math.log(best.decode), math.log(best.prefill))
    fx = f(x)
    for _ in range(8):
        y = _nelder_mead(f, x, step, lo, hi)
        fy = f(y)
        if fy >= fx:
            break
        x, fx = y, fy
        step = (step[0] / 2, step[1] / 2)
    best = Scales(math.exp(x[0]), math.exp(x[1]))
    return best


def _fit_one(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The least of f over [lo, hi]: a grid in log space, then golden sections of the best
    cell and its neighbours down to PRECISION (in the logarithm)."""
    a, b = math.log(lo), math.log(hi)
    grid = 17
    xs = [a + (b - a) * i / (grid - 1) for i in range(grid)]
    vals = [f(math.exp(x)) for x in xs]
    best = min(range(grid), key=lambda i: vals[i])
    a, b = xs[max(best - 1, 0)], xs[min(best + 1, grid - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    while b - a > PRECISION:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(math.exp(d))
    x = (a + b) / 2
    # The grid's best where the sections' end is no better (a loss flat at a bound).
    return math.exp(x) if f(math.exp(x)) <= vals[best] else math.exp(xs[best])


def _nelder_mead(
    f: Callable[[tuple[float, float]], float],
    start: tuple[float, float],
    step: tuple[float, float],
    lo: tuple[float, float],
    hi: tuple[float, float],
) -> tuple[float, float]:
    """The least of f near `start`, by Nelder–Mead on a triangle of `step`'s size, every point
    clamped to [lo, hi]; stops when the triangle is PRECISION across or after 200 steps."""

    def clamp(x: tuple[float, float]) -> tuple[float, float]:
        return (min(max(x[0], lo[0]), hi[0]), min(max(x[1], lo[1]), hi[1]))

    pts = [
        clamp(start),
        clamp((start[0] + step[0], start[1])),
        clamp((start[0], start[1] + step[1])),
    ]
    vals = [f(p) for p in pts]
    for _ in range(200):
        order = sorted(range(3), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        size = max(abs(pts[i][k] - pts[0][k]) for i in (1, 2) for k in (0, 1))
        if size < PRECISION:
            break
        c = ((pts[0][0] + pts[1][0]) / 2, (pts[0][1] + pts[1][1]) / 2)

        worst = pts[2]

        def toward(
            t: float, c: tuple[float, float] = c, w: tuple[float, float] = worst
        ) -> tuple[float, float]:
            return clamp((c[0] + t * (w[0] - c[0]), c[1] + t * (w[1] - c[1])))

        r = toward(-1.0)
        fr = f(r)
        if fr < vals[0]:
            e = toward(-2.0)
            fe = f(e)
            pts[2], vals[2] = (e, fe) if fe < fr else (r, fr)
        elif fr < vals[1]:
            pts[2], vals[2] = r, fr
        else:
            k = toward(0.5)
            fk = f(k)
            if fk < vals[2]:
                pts[2], vals[2] = k, fk
            else:  # shrink toward the best
                for i in (1, 2):
                    pts[i] = ((pts[0][0] + pts[i][0]) / 2, (pts[0][1] + pts[i][1]) / 2)
                    vals[i] = f(pts[i])
    return pts[min(range(3), key=lambda i: vals[i])]


def calibrate(card: str, engine: str, runs: Sequence[Run], sources: Sequence[str]) -> Pool:
    """A pool's calibration from its runs."""
    # Imported here, where a calibration is fitted: statistics brings fractions, decimal and
    # random, which every plan (that only applies a calibration) would otherwise import.
    import statistics

    scales = fit(runs)
    before = statistics.median(run_error(r, Scales()) for r in runs)
    after = statistics.median(run_error(r, scales) for r in runs)
    return Pool(card, engine, scales, len(runs), before, after, tuple(sources),
                span(runs, scales))  # fmt: skip


def span(runs: Sequence[Run], scales: Scales) -> tuple[float, float]:
    """The least and most sequences decoding a replica at the runs: at the scales fitted (what
    a calibrated plan has) and at the model's own (a plan's batch is read before its
    calibration), so that the runs' own batches are whole either way."""
    batches = [decode_batch(r, s) for r in runs for s in (scales, Scales())]
    batches = [b for b in batches if math.isfinite(b)]
    return (min(batches), max(batches)) if batches else (0.0, math.inf)


def merged(old: Sequence[Pool], new: Sequence[Pool]) -> tuple[Pool, ...]:
    """The calibration file's pools with `new` in place of the same pools' old entries: one card
    class's calibration never moves another's."""
    keys = {p.key for p in new}
    return tuple(sorted([*(p for p in old if p.key not in keys), *new], key=lambda p: p.key))


def pool_of(o: Option[Any], pools: Sequence[Pool]) -> Pool | None:
    """The calibration of the option's pool (its card class, its engine), if any."""
    if o.gpu_class is None:
        return None
    for p in pools:
        if p.card == o.gpu_class and p.engine == o.engine:
            return p
    return None


def calibrated(options: Sequence[Option[Any]], pools: Sequence[Pool]) -> list[Option[Any]]:
    """The options with their serving figures worked out again at their pool's scales (a thin
    layer over the engines' own serving: their replica, its scales set)."""
    out = []
    for o in options:
        p = pool_of(o, pools)
        sv = o.serving
        if p is None or sv is None or sv.replica is None or p.scales.identity:
            out.append(o)
            continue
        # At the batch the model's own figures put the option at: the pool's scales whole
        # within its runs' batches, faded outside them (Pool.at_batch).
        r = replace(sv.replica, scales=p.at_batch(sv.batch))
        out.append(replace(o, serving=load.serve(r, sv.workload)))
    return out


def calibration_notes(
    options: Sequence[Option[Any]], pools: Sequence[Pool], engine_name: str
) -> list[str]:
    """What a plan says of the calibrations it applied, one note a pool."""
    out = []
    for p in pools:
        if any(pool_of(o, [p]) is p and o.serving is not None for o in options):
            out.append(
                f"serving figures on {p.card} with {engine_name} calibrated on {p.runs} run"
                f"{'s' if p.runs != 1 else ''} of yours (median error {p.error_after * 100:.0f} %, "
                f"{p.error_before * 100:.0f} % before; --no-calibration for the model's own)"
            )
    return out
