"""How well a calibration on one run predicts the other runs of the same deployment (issue 36).

The rows of fixtures/calibration/load.jsonl (and speed.jsonl's serving runs) are planned as
benchmarks/accuracy_load.py plans them. A deployment is one model × checkpoint precision × card ×
count × engine × layout × publisher; its rows are the same server at several loads (and lengths).
For each deployment of two rows or more, each row in turn is the user's one run: the pool's scales
are fitted to it alone (plan/calibration.py `fit`, its bounds included), and the deployment's
other rows are predicted at those scales.

Printed, as medians over (calibrated on, predicted) pairs of the error on output tokens a second a
GPU and on TPOT, absolute and signed (estimate ÷ measured − 1: + is the model too fast on
throughput, too slow on TPOT):
- uncalibrated: the model's own figures on the same pairs;
- one run, as `llmfit calibrate` fits it (one factor on the whole step time), calibrated on each
  sweep's lowest load, its middle one (sweeps of three or more), its highest, and on every run in
  turn; and on every run in turn with two scales fitted apart (what one run was fitted with before);
- two runs, each sweep's lowest and highest load, predicting the loads between (sweeps of three
  or more): the two scales fitted apart;
- hindsight: the scales fitted to every run of the sweep at once, then each run's error: the
  least error any calibration by these scales reaches, a bound on what one run could do;
then the same, sweep by sweep (the median of its pairs), and the run calibrated on itself.

A sweep is a deployment's rows at one pair of lengths (its loads); --lengths takes every length of
a deployment together. --rows prints every pair of the one-run calibration. --fade prints the
errors at other FADEs (plan/calibration.py) and a choice of it left one sweep out.

Run from the repository root (about a minute):
    PYTHONPATH=. python benchmarks/calibrate_sweeps.py [--rows] [--lengths] [--fade]
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import replace

from benchmarks import accuracy_load as al
from llmfit.plan.calibration import Measured, Pool, Run, decode_batch, fit, span
from llmfit.plan.load import Scales
from llmfit.plan.settings import Workload

# --lengths: a deployment's rows at every length together (a calibration at one length
# predicting another), not only the load sweeps of one length.
ACROSS_LENGTHS = "--lengths" in sys.argv


def _nominal(spec: object, mean: int) -> object:
    return spec.get("nominal", mean) if isinstance(spec, dict) else mean


def deployment(row: al.Row) -> tuple[object, ...]:
    """The server a row ran on, and (unless --lengths) the lengths of its sweep."""
    # The checkpoint's precision too: the SGLang docs' BF16 and FP8 cells of one model are two
    # servers, not one at two loads.
    precision = row.raw.get("precision") or {}
    key: tuple[object, ...] = (row.model, row.card, row.count, row.engine, row.tp, row.dp,
                               row.ep, row.source, row.raw.get("engine_version"),
                               precision.get("weights"), precision.get("kv_cache"))  # fmt: skip
    if not ACROSS_LENGTHS:
        key += (_nominal(row.raw.get("input_len"), row.input_len),
                _nominal(row.raw.get("output_len"), row.output_len))  # fmt: skip
    return key


def measured(row: al.Row) -> Measured:
    m = row.measured
    return Measured(m["per_gpu"] * row.gpus, m["tpot"], m.get("ttft"))


def run_of(row: al.Row) -> Run:
    assert row.replica is not None
    w = Workload("row", row.input_len, row.output_len, ttft_s=None, tpot_s=None)
    # Named by the row's identity: the model below finds the row again by it.
    return Run(str(id(row)), row.replica, w, row.kind, row.load, row.gpus, measured(row))


def predicted(row: al.Row, scales: Scales) -> Measured:
    assert row.replica is not None
    est = al.predict(replace(row, replica=replace(row.replica, scales=scales)))
    return Measured(est["per_gpu"] * row.gpus, est["tpot"], est["ttft"])


def rel(est: float, meas: float) -> float:
    """estimate ÷ measured − 1; a figure the model cannot give counts as 100 % off."""
    return est / meas - 1 if meas > 0 and math.isfinite(est) and est > 0 else 1.0


class Pairs:
    """Signed errors of (calibrated on, predicted) pairs: throughput a GPU and TPOT."""

    def __init__(self) -> None:
        self.tps: list[float] = []
        self.tpot: list[float] = []
        # The same pairs' errors with the model's own figures.
        self.own: list[tuple[float, float]] = []

    def add(self, row: al.Row, est: Measured, own: Measured | None = None) -> None:
        def errs(e: Measured) -> tuple[float, float]:
            return (rel(e.output_tokens_per_s / row.gpus, row.measured["per_gpu"]),
                    rel(e.tpot_s, row.measured["tpot"]))  # fmt: skip

        tps, tpot = errs(est)
        self.tps.append(tps)
        self.tpot.append(tpot)
        self.own.append(errs(own if own is not None else est))

    def before(self) -> str:
        """The same pairs' median absolute errors with the model's own figures."""
        if not self.own:
            return "—"
        a = statistics.median(abs(x) for x, _ in self.own)
        b = statistics.median(abs(y) for _, y in self.own)
        return f"{a * 100:.1f} %, {b * 100:.1f} %"

    def cells(self) -> str:
        def one(xs: list[float]) -> str:
            if not xs:
                return "— | —"
            return (f"{statistics.median(abs(x) for x in xs) * 100:.1f} % | "
                    f"{statistics.median(xs) * 100:+.1f} %")  # fmt: skip

        return f"{one(self.tps)} | {one(self.tpot)} | {len(self.tps)}"


def main(argv: list[str]) -> int:
    rows, _ = al.load_rows()
    rows = [r for r in rows if "per_gpu" in r.measured and "tpot" in r.measured]
    groups: dict[tuple[object, ...], list[al.Row]] = {}
    for r in rows:
        groups.setdefault(deployment(r), []).append(r)
    # Each sweep from its lowest load to its highest (then by lengths, across lengths).
    sweeps = [sorted(g, key=lambda r: (r.load, r.input_len, r.output_len))
              for g in groups.values() if len(g) >= 2]  # fmt: skip
    by_id = {id(r): r for g in sweeps for r in g}

    def model(run: Run, scales: Scales) -> Measured:
        return predicted(by_id[int(run.name)], scales)

    whole = "one run, one factor carried whole to every load: each in turn"
    apart = "one run, two scales apart carried whole (before): each in turn"
    names = ("uncalibrated", "one run: the lowest load", "one run: the middle load",
             "one run: the highest load", "one run: each in turn", whole, apart,
             "two runs (lowest, highest): the loads between",
             "hindsight: every run of the sweep")  # fmt: skip
    total = {n: Pairs() for n in names}
    per_sweep: list[tuple[al.Row, dict[str, Pairs]]] = []
    selves: list[float] = []
    lines = []
    for g in sweeps:
        mine = {n: Pairs() for n in names}
        n = len(g)
        own = {id(r): predicted(r, Scales()) for r in g}
        # Each run's batch as a plan at its load has it (the model's own figures): what a
        # calibration's scales are faded by (Pool.at_batch).
        batch = {id(r): decode_batch(run_of(r), Scales()) for r in g}
        for i, one in enumerate(g):
            scales = fit([run_of(one)], model)
            pool = Pool("", "", scales, 1, 0.0, 0.0, (), span([run_of(one)], scales))
            two = fit([run_of(one)], model, apart=True)
            picks = ["one run: each in turn"]
            picks += ["one run: the lowest load"] if i == 0 else []
            picks += ["one run: the highest load"] if i == n - 1 else []
            picks += ["one run: the middle load"] if n >= 3 and i == (n - 1) // 2 else []
            for other in g:
                if other is one:
                    continue
                at = pool.at_batch(batch[id(other)])
                cal = predicted(other, at)
                carried = predicted(other, scales)
                mod = own[id(other)]
                for d in (total, mine):
                    d["uncalibrated"].add(other, mod)
                    for p in picks:
                        d[p].add(other, cal, mod)
                    d[whole].add(other, carried, mod)
                    d[apart].add(other, predicted(other, two), mod)
                b, a = mine["uncalibrated"], mine["one run: each in turn"]
                lines.append(
                    f"  {one.raw.get('id')} → {other.raw.get('id')}: × {scales.decode:.2f}, "
                    f"at its batch × {at.decode:.2f}; "
                    f"tok/s a GPU {b.tps[-1]:+.0%} → {a.tps[-1]:+.0%}, "
                    f"TPOT {b.tpot[-1]:+.0%} → {a.tpot[-1]:+.0%}"
                )
            est = predicted(one, scales)
            m = one.measured
            selves.append((abs(rel(est.output_tokens_per_s / one.gpus, m["per_gpu"]))
                           + abs(rel(est.tpot_s, m["tpot"]))) / 2)  # fmt: skip
        if n >= 3:
            ends = [run_of(g[0]), run_of(g[-1])]
            scales = fit(ends, model)
            pool = Pool("", "", scales, 2, 0.0, 0.0, (), span(ends, scales))
            for other in g[1:-1]:
                est = predicted(other, pool.at_batch(batch[id(other)]))
                for d in (total, mine):
                    d["two runs (lowest, highest): the loads between"].add(
                        other, est, own[id(other)]
                    )
        every = fit([run_of(r) for r in g], model)
        for other in g:
            est = predicted(other, every)
            for d in (total, mine):
                # Weighted as the pairs are: each run stands for the n − 1 that predict it.
                for _ in range(n - 1):
                    d["hindsight: every run of the sweep"].add(other, est, own[id(other)])
        per_sweep.append((g[0], mine))

    print(f"{len(sweeps)} sweeps of two runs or more ({sum(len(g) for g in sweeps)} runs), "
          f"{len(total['uncalibrated'].tps)} (calibrated on, predicted) pairs; medians over "
          "pairs, absolute | signed")  # fmt: skip
    print()
    print("| | tok/s a GPU | signed | TPOT | signed | pairs | sweeps' median: tok/s a GPU | TPOT "
          "| uncalibrated, the same pairs: tok/s a GPU, TPOT |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for n in names:
        # The median over sweeps of each sweep's median: a sweep of six runs (30 pairs) counts
        # as much as one of two (2 pairs).
        mids = [d[n] for _, d in per_sweep if d[n].tps]
        tps = statistics.median(statistics.median(abs(x) for x in m.tps) for m in mids)
        tpot = statistics.median(statistics.median(abs(x) for x in m.tpot) for m in mids)
        print(f"| {n} | {total[n].cells()} | {tps * 100:.1f} % ({len(mids)}) | "
              f"{tpot * 100:.1f} % | {total[n].before()} |")  # fmt: skip
    print()
    print("Sweep by sweep (the median of its pairs; absolute | signed), uncalibrated → calibrated "
          "on one run, each in turn:")  # fmt: skip
    print()
    print("| sweep | runs | tok/s a GPU | | TPOT | | → tok/s a GPU | | → TPOT | |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for first, d in per_sweep:
        u, c = d["uncalibrated"].cells(), d["one run: each in turn"].cells()
        runs = len(d["uncalibrated"].tps)
        size = (1 + math.isqrt(1 + 4 * runs)) // 2  # n (n − 1) pairs
        print(f"| {_sweep_name(first)} | {size} | {u.rsplit(' | ', 1)[0]} | "
              f"{c.rsplit(' | ', 1)[0]} |")  # fmt: skip
    if "--fade" in argv:
        _fades(sweeps, model)
    print()
    print(f"the run calibrated on, itself (mean of its two errors): "
          f"{statistics.median(selves) * 100:.1f} % (median)")  # fmt: skip
    if "--rows" in argv:
        print("\n".join(lines))
    return 0


def _fades(sweeps: list[list[al.Row]], model: Callable[[Run, Scales], Measured]) -> None:
    """--fade: one run's factor at each FADE (plan/calibration.py), over every pair, and the
    FADE each sweep would get were it chosen on the other sweeps (leave one sweep out), with
    that sweep's errors at it: how much of the gain is the choice fitted to these sweeps."""
    fades = (0.5, 1.0, 2.0, 3.0, 4.0, math.inf)
    # errs[f][sweep]: the sweep's pairs at FADE f.
    errs: dict[float, list[Pairs]] = {f: [] for f in fades}
    for g in sweeps:
        batch = {id(r): decode_batch(run_of(r), Scales()) for r in g}
        mine = {f: Pairs() for f in fades}
        for one in g:
            scales = fit([run_of(one)], model)
            pool = Pool("", "", scales, 1, 0.0, 0.0, (), span([run_of(one)], scales))
            for other in g:
                if other is not one:
                    for f in fades:
                        mine[f].add(other, predicted(other, pool.at_batch(batch[id(other)], f)))
        for f in fades:
            errs[f].append(mine[f])

    def score(ps: list[Pairs]) -> float:
        """The pairs' median absolute errors, throughput's and TPOT's, added."""
        tps = [abs(x) for p in ps for x in p.tps]
        tpot = [abs(x) for p in ps for x in p.tpot]
        return statistics.median(tps) + statistics.median(tpot)

    print()
    print("FADE | tok/s a GPU | TPOT (medians over pairs, absolute)")
    for f in fades:
        ps = errs[f]
        tps = statistics.median(abs(x) for p in ps for x in p.tps)
        tpot = statistics.median(abs(x) for p in ps for x in p.tpot)
        print(f"{f:g} | {tps * 100:.1f} % | {tpot * 100:.1f} %")
    held = Pairs()
    chosen = []
    for i in range(len(sweeps)):
        best = min(fades, key=lambda f: score([p for j, p in enumerate(errs[f]) if j != i]))
        chosen.append(best)
        held.tps += errs[best][i].tps
        held.tpot += errs[best][i].tpot
    tps = statistics.median(abs(x) for x in held.tps)
    tpot = statistics.median(abs(x) for x in held.tpot)
    print(f"left one sweep out: FADE chosen {sorted(set(chosen))}, the sweeps held out at it: "
          f"{tps * 100:.1f} % on tok/s a GPU, {tpot * 100:.1f} % on TPOT")  # fmt: skip


def _sweep_name(row: al.Row) -> str:
    """A sweep's name: its first run's id less the load it ran at."""
    name = str(row.raw.get("id"))
    head, _, tail = name.rpartition("-")
    return head if tail.startswith("c") and tail[1:].isdigit() else name


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
