"""How close llmfit's disaggregated prefill/decode model comes to measured P/D runs.

The rows of fixtures/calibration/load.jsonl with `pd_disaggregation` set (dstack's
"Benchmarking Prefill-Decode disaggregation ratios": gpt-oss-120b on 8 × H200, SGLang workers
of TP 2 each at 1P3D, 2P2D and 3P1D, NIXL KV transfer, sglang_router round robin; `vllm bench
serve` with 128 or 2,048-token prompts, outputs stopped at EOS, 32, 64 or 128 in flight) are
priced as llmfit plans them: the row's model and checkpoint as benchmarks/accuracy_load.py
reads them, one worker's layout (TP 2 on two H200s) planned by the engine with that layout
pinned, the same replica as prefill and as decode worker (plan/disagg.py), the row's xPyD
pinned, the KV moved over the node's NVLink (every worker on one 8-card node), and the row's
closed loop (`disagg.at_concurrency`). Nothing here is fitted: the step model's constants are
the shipped ones, fitted on aggregated runs only, so every row is one the model never saw.

Reported: each row's estimate and measurement (output tokens a second a GPU, TPOT and TTFT,
means), their errors, and whether the plan orders 1P3D, 2P2D and 3P1D as the measurements do at
each prompt length and concurrency.

--steps sets the decode step apart from the pairing: each row's batch a decode worker held
(Little's law on the run's own figures: its requests a second × the time each spent decoding,
(O − 1) × its mean inter-token latency, over its decode workers), the plan's batch at the row's
concurrency, the run's mean inter-token latency (every gap between two streamed tokens: a decode
step, where TPOT is a mean over requests of (latency − TTFT) / (tokens − 1)), and the step the
plan prices at the run's own batch (`load.decode_round`, decodes alone), with its routed experts'
part and its fixed costs; and the requests the run held in flight on average, N × (TTFT + (O −
1) ITL) / its duration: fewer than its concurrency, for its 500 prompts end in a drain, the last
ones finishing with fewer and fewer beside them, long where answers stop at EOS anywhere up to
2,048 tokens.

--held prices each row at the requests it held in flight on average (above) in place of its
concurrency: the same runs with the drain set apart (docs/accuracy.md).

--expert-efficiency X prices the routed experts at X of the card's bandwidth in place of the
engine's share (SGLang's on NVIDIA cards is vLLM's fitted 0.74, the same Triton kernel's, which
prices MXFP4 experts before Blackwell): what these runs say of that constant, not what a plan
uses (docs/accuracy.md).

Run from the repository root: PYTHONPATH=. python benchmarks/accuracy_disagg.py [--rows]
[--steps] [--held] [--expert-efficiency X]
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_load as al  # noqa: E402

from llmfit.plan import disagg, load  # noqa: E402
from llmfit.plan.model import Shape  # noqa: E402
from llmfit.plan.settings import Workload  # noqa: E402


@dataclass
class PdRow:
    id: str
    prefill_workers: int
    decode_workers: int
    tp: int
    input_len: int
    output_len: int
    concurrency: float
    measured: dict[str, float]
    estimate: dict[str, float] | None = None
    why: str = ""
    # --steps: the decode step apart (see the module's docstring).
    step: dict[str, float] | None = None
    # The requests in flight the row is priced at, where not its concurrency (--held).
    priced_at: float = 0.0


def rows() -> list[tuple[dict, PdRow]]:
    out = []
    for line in al.ROWS.read_text().splitlines():
        r = json.loads(line)
        pd = r.get("pd_disaggregation")
        if not pd:
            continue
        m = r["metrics"]
        out.append((r, PdRow(
            id=r["id"], prefill_workers=pd["prefill_workers"], decode_workers=pd["decode_workers"],
            tp=pd["tp_per_worker"], input_len=round(r["input_len"]["mean"]),
            output_len=round(r["output_len"]["mean"]), concurrency=float(r["concurrency"]),
            measured={"per_gpu": m["output_tok_s_per_gpu"], "tpot": m["tpot_ms_mean"] / 1000,
                      "ttft": m["ttft_ms_mean"] / 1000, "itl": m["itl_ms_mean"] / 1000,
                      "rate": m["request_throughput_req_s"],
                      "held": m["completed_requests"] * (m["ttft_ms_mean"] + (
                          r["output_len"]["mean"] - 1) * m["itl_ms_mean"]) / 1000
                          / m["duration_s"]},
        )))  # fmt: skip
    return out


def price(raw: dict, row: PdRow, expert_efficiency: float | None = None) -> None:
    """The row's estimate, or why there is none."""
    # One worker, as accuracy_load plans a row: its own cards and layout pinned.
    at = row.priced_at or row.concurrency
    one = dict(raw, gpu_count=row.tp, tp=row.tp, pd_disaggregation=None,
               load_kind="max_concurrency", concurrency=at)  # fmt: skip
    parsed = al.parse(one)
    if isinstance(parsed, str):
        row.why = parsed
        return
    why = al.plan_row(parsed)
    if why is not None or parsed.replica is None:
        row.why = why or "no replica"
        return
    worker = parsed.replica
    if expert_efficiency is not None:
        k = replace(worker.inputs.constants, expert_efficiency=expert_efficiency)
        worker = replace(worker, inputs=replace(worker.inputs, constants=k))
    got = al.checkpoint(raw["model"], raw["precision"]["weights"])
    assert not isinstance(got, str)
    shape = Shape.of(got.model)
    w = Workload("row", row.input_len, row.output_len, ttft_s=None, tpot_s=None)
    # All of the row's workers on one 8-card node: the KV crosses its NVLink.
    link = disagg.link_between(worker, worker, same_node=True, fabric=None)
    unit = disagg.Unit(row.prefill_workers, row.decode_workers, worker.cards, worker.cards, 0.0)
    got_in = disagg.at_concurrency(worker, worker, w, shape, link, unit, at)
    if got_in is None:
        row.why = "the worker cannot hold one request"
        return
    gpus = unit.cards
    row.estimate = {"per_gpu": got_in.rate * row.output_len / gpus, "tpot": got_in.tpot_s,
                    "ttft": got_in.ttft_s}  # fmt: skip
    # The batch a decode worker held by Little's law on the run's own figures: requests a
    # second × the time each spends decoding, its O − 1 gaps of the mean ITL (their sum over
    # the run is every request's latency less its TTFT).
    m = row.measured
    held = m["rate"] * (row.output_len - 1) * m["itl"] / row.decode_workers
    tau, cost = load.decode_round(worker, held, w.input_len + w.output_len / 2)
    parts = cost.summed
    experts = max(parts.experts, parts.expert_compute)
    row.step = {"batch": held, "planned_batch": got_in.batch, "tau": tau, "experts": experts,
                "fixed": parts.overhead}  # fmt: skip


def order(group: list[PdRow]) -> tuple[list[str], list[str]]:
    """The xPyD labels of a group best first by output tokens a GPU: measured, estimated."""

    def label(r: PdRow) -> str:
        return f"{r.prefill_workers}P{r.decode_workers}D"

    measured = sorted(group, key=lambda r: -r.measured["per_gpu"])
    estimated = sorted(group, key=lambda r: -(r.estimate or {}).get("per_gpu", 0.0))
    return [label(r) for r in measured], [label(r) for r in estimated]


def main(argv: list[str]) -> int:
    share = None
    if "--expert-efficiency" in argv:
        share = float(argv[argv.index("--expert-efficiency") + 1])
    priced = []
    for raw, row in rows():
        if "--held" in argv:
            row.priced_at = row.measured["held"]
        price(raw, row, share)
        priced.append(row)
    left = [r for r in priced if r.estimate is None]
    for r in left:
        print(f"not priced: {r.id}: {r.why}")
    done = [r for r in priced if r.estimate is not None]
    if "--rows" in argv:
        print(f"{'row':<58} {'tok/s/GPU':>17} {'TPOT ms':>13} {'TTFT ms':>15}")
        for r in done:
            e, m = r.estimate or {}, r.measured
            print(f"{r.id:<58} {e['per_gpu']:>8.0f}/{m['per_gpu']:<8.0f} "
                  f"{e['tpot'] * 1e3:>6.2f}/{m['tpot'] * 1e3:<6.2f} "
                  f"{e['ttft'] * 1e3:>7.0f}/{m['ttft'] * 1e3:<7.0f}")  # fmt: skip
    print(f"{len(done)} of {len(priced)} P/D rows priced; errors (estimate / measured - 1):")
    for what in ("per_gpu", "tpot", "ttft"):
        errs = [(r.estimate or {})[what] / r.measured[what] - 1 for r in done]
        if not errs:
            continue
        within = sum(1 for e in errs if abs(e) <= 0.20)
        print(f"  {what:<8} median |err| {statistics.median(abs(e) for e in errs):6.1%}, "
              f"mean err {statistics.mean(errs):+6.1%}, worst {max(errs, key=abs):+6.1%}, "
              f"within 20 %: {within} of {len(errs)}")  # fmt: skip
    groups: dict[tuple[int, float], list[PdRow]] = {}
    for r in done:
        groups.setdefault((r.input_len, r.concurrency), []).append(r)
    same = 0
    for (i, c), group in sorted(groups.items()):
        measured, estimated = order(group)
        same += measured == estimated
        print(
            f"  {i:>5}-token prompts, {c:>4.0f} in flight: measured {' > '.join(measured)}; "
            f"planned {' > '.join(estimated)}{'' if measured == estimated else '  (differs)'}"
        )
    print(f"orders as measured: {same} of {len(groups)} groups")
    if "--steps" in argv:
        steps(done)
    return 0


def steps(done: list[PdRow]) -> None:
    """The decode step apart: the run's batch and ITL against the plan's step at that batch."""
    print(f"{'row':<58} {'held':>5} {'batch run/plan':>15} {'ITL ms':>7} {'step ms':>8} "
          f"{'x ITL':>6} {'experts':>8} {'fixed':>6}")  # fmt: skip
    ratios, batches = [], []
    for r in done:
        s = r.step or {}
        ratios.append(s["tau"] / r.measured["itl"])
        batches.append(s["planned_batch"] / s["batch"] - 1)
        print(f"{r.id:<58} {r.measured['held']:>5.1f} "
              f"{s['batch']:>7.1f}/{s['planned_batch']:<7.1f} "
              f"{r.measured['itl'] * 1e3:>7.2f} {s['tau'] * 1e3:>8.2f} {ratios[-1]:>6.2f} "
              f"{s['experts'] * 1e3:>8.2f} {s['fixed'] * 1e3:>6.2f}")  # fmt: skip
    print(
        f"the plan's batch against the run's: median |err| "
        f"{statistics.median(abs(b) for b in batches):.1%}, worst {max(batches, key=abs):+.1%}"
    )
    print(
        f"the plan's step at the run's batch over the run's ITL: median "
        f"{statistics.median(ratios):.2f}, from {min(ratios):.2f} to {max(ratios):.2f}"
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
