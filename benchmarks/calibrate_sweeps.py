"""How well a calibration on one run predicts the other runs of the same deployment (issue 36).

The rows of fixtures/calibration/load.jsonl (and speed.jsonl's serving runs) are planned as
benchmarks/accuracy_load.py plans them. A deployment is one model × card × count × engine ×
layout × publisher; its rows are the same server at several loads (and lengths). For each
deployment of two rows or more, each row in turn is the user's one run: the pool's scales are
fitted to it alone (plan/calibration.py `fit`, its bounds included), and the deployment's other
rows are predicted at those scales. Reported: the median absolute error on output tokens a second
a GPU and on TPOT over every (calibrated on, predicted) pair, beside the same pairs' errors with
the model's own figures (no calibration), and the errors on the run calibrated on itself.

A sweep is a deployment's rows at one pair of lengths (its loads); --lengths takes every length of
a deployment together.

Run from the repository root:
    PYTHONPATH=. python benchmarks/calibrate_sweeps.py [--rows] [--lengths]
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import replace

from benchmarks import accuracy_load as al
from llmfit.plan.calibration import Measured, Run, fit
from llmfit.plan.load import Scales
from llmfit.plan.settings import Workload

# --lengths: a deployment's rows at every length together (a calibration at one length
# predicting another), not only the load sweeps of one length.
ACROSS_LENGTHS = "--lengths" in sys.argv


def _nominal(spec: object, mean: int) -> object:
    return spec.get("nominal", mean) if isinstance(spec, dict) else mean


def deployment(row: al.Row) -> tuple[object, ...]:
    """The server a row ran on, and (unless --lengths) the lengths of its sweep."""
    key: tuple[object, ...] = (row.model, row.card, row.count, row.engine, row.tp, row.dp,
                               row.ep, row.source, row.raw.get("engine_version"))  # fmt: skip
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
    return abs(est / meas - 1) if meas > 0 and math.isfinite(est) and est > 0 else 1.0


def main(argv: list[str]) -> int:
    rows, _ = al.load_rows()
    rows = [r for r in rows if "per_gpu" in r.measured and "tpot" in r.measured]
    groups: dict[tuple[object, ...], list[al.Row]] = {}
    for r in rows:
        groups.setdefault(deployment(r), []).append(r)
    sweeps = [g for g in groups.values() if len(g) >= 2]
    by_id = {id(r): r for g in sweeps for r in g}

    def model(run: Run, scales: Scales) -> Measured:
        return predicted(by_id[int(run.name)], scales)

    out: dict[str, list[float]] = {k: [] for k in ("tps0", "tpot0", "tps", "tpot", "self")}
    lines = []
    for g in sweeps:
        for one in g:
            scales = fit([run_of(one)], model)
            for other in g:
                if other is one:
                    continue
                m = other.measured
                own = predicted(other, Scales())
                cal = predicted(other, scales)
                gpus = other.gpus
                out["tps0"].append(rel(own.output_tokens_per_s / gpus, m["per_gpu"]))
                out["tpot0"].append(rel(own.tpot_s, m["tpot"]))
                out["tps"].append(rel(cal.output_tokens_per_s / gpus, m["per_gpu"]))
                out["tpot"].append(rel(cal.tpot_s, m["tpot"]))
                lines.append(
                    f"  {one.raw.get('id')} → {other.raw.get('id')}: decode × {scales.decode:.2f}"
                    f", prefill × {scales.prefill:.2f}; tok/s a GPU {out['tps0'][-1]:.0%} → "
                    f"{out['tps'][-1]:.0%}, TPOT {out['tpot0'][-1]:.0%} → {out['tpot'][-1]:.0%}"
                )
            self_est = predicted(one, scales)
            out["self"].append(
                (rel(self_est.output_tokens_per_s / one.gpus, one.measured["per_gpu"])
                 + rel(self_est.tpot_s, one.measured["tpot"])) / 2
            )  # fmt: skip

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs) * 100:.1f} %" if xs else "—"

    pairs = len(out["tps"])
    print(
        f"{len(sweeps)} deployments with two runs or more ({sum(len(g) for g in sweeps)} runs), "
        f"{pairs} (calibrated on, predicted) pairs"
    )
    print(f"  median error, output tok/s a GPU: {med(out['tps0'])} uncalibrated → "
          f"{med(out['tps'])} calibrated on one run")  # fmt: skip
    print(f"  median error, TPOT:               {med(out['tpot0'])} uncalibrated → "
          f"{med(out['tpot'])} calibrated on one run")  # fmt: skip
    print(f"  the run calibrated on, itself (mean of the two): {med(out['self'])}")
    if "--rows" in argv:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
