"""NVIDIA's aiconfigurator beside llmfit on the same measured serving runs, side by side.

Opt-in: aiconfigurator is not a dependency of llmfit. Install it in an environment of its own
(it brings pandas, pyarrow, plotly, matplotlib and an 82 MB database of kernel timings):

    python3 -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator==0.12

then, from the repository root:

    PYTHONPATH=. python benchmarks/aiconfigurator_compare.py --aic /tmp/aic/bin/aiconfigurator

Every row benchmarks/accuracy_load.py prices is given, where aiconfigurator covers it, to
`aiconfigurator cli estimate` (aggregated serving, its database as shipped) with the row's
model, card, engine, layout, mean input and output lengths and its concurrency as the batch;
its TTFT, TPOT and tokens a second a GPU are compared with what the row measured, and with
llmfit's estimate for the row by a fit that never saw the row's publisher nor its model × card
family (accuracy_load.unseen_estimates): runs neither tool was fitted to (aiconfigurator's
tables are kernel timings, not these serving runs). It says how many rows each could price. A
row aiconfigurator cannot do is said why (its card: only NVIDIA H100, H200, B200, A100 here; its
load kind: a rate is not a batch; its run failing, with its last line).

aiconfigurator takes about 13 s a row on this machine's CPU (2 cores); answers are kept in
--cache (default /tmp/aic-answers.json) so that a second run costs nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_load as al  # noqa: E402

SYSTEMS = {"h200-141g": "h200_sxm", "h100-80g": "h100_sxm", "b200-180g": "b200_sxm",
           "a100-80g": "a100_sxm"}  # fmt: skip


# Models aiconfigurator ships a config of (aiconfigurator_core/model_configs): named by their id.
# The others are given as a directory holding the config the benchmark reads (offline, it
# cannot fetch one).
MODELS = Path("/tmp/aic-models")


def model_path(name: str) -> str:
    for where in (al.CONFIGS, al.SOURCES):
        config = where / f"{name.replace('/', '--')}.json"
        if config.exists():
            folder = MODELS / name.replace("/", "--")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text(config.read_text())
            return str(folder)
    return name


def args_of(row: al.Row) -> list[str] | str:
    """aiconfigurator's arguments for the row, or why it has none."""
    system = SYSTEMS.get(row.card)
    if system is None:
        return f"aiconfigurator has no database for {row.card}"
    if row.kind == "rate":
        return "a request rate, where aiconfigurator estimates a batch"
    precision = al.checkpoint(row.model, row.raw["precision"]["weights"])
    if isinstance(precision, str):
        return precision
    name, _ = al.SIBLINGS.get(row.model, (row.model, None))
    out = ["--model-path", model_path(name), "--system", system, "--backend", row.engine,
           "--isl", str(row.input_len), "--osl", str(row.output_len),
           "--estimate-mode", "agg"]  # fmt: skip
    replicas = row.replica.copies if row.replica else 1
    batch = max(1, round(row.load / replicas))
    out += ["--batch-size", str(batch), "--tp-size", str(row.tp)]
    moe = precision.model.is_moe
    if moe:
        if row.dp > 1:
            out += ["--attention-dp-size", str(row.dp)]
        width = row.tp * row.dp
        if row.ep:
            out += ["--moe-ep-size", str(width), "--moe-tp-size", "1"]
        else:
            out += ["--moe-tp-size", str(width), "--moe-ep-size", "1"]
    quant = precision.precision
    if quant == "fp8":
        out += ["--gemm-quant-mode", "fp8_block"] + (["--moe-quant-mode", "fp8_block"] if moe
                                                    else [])  # fmt: skip
    elif quant == "mxfp4":
        out += ["--moe-quant-mode", "w4a16_mxfp4"]
    elif quant == "int4":
        out += ["--gemm-quant-mode", "int4_wo"] + (["--moe-quant-mode", "int4_wo"] if moe
                                                  else [])  # fmt: skip
    return out


FIELDS = {"ttft": r"TTFT:\s+([\d.,]+) ms", "tpot": r"TPOT:\s+([\d.,]+) ms",
          "per_gpu": r"tokens/s/gpu:\s+([\d.,]+)"}  # fmt: skip


def ask(aic: str, argv: list[str], timeout: int) -> dict[str, float] | str:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    try:
        done = subprocess.run([aic, "cli", "estimate", *argv], capture_output=True, text=True,
                              timeout=timeout, env=env, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"no answer in {timeout} s"
    text = done.stdout + done.stderr
    got = {}
    for key, pattern in FIELDS.items():
        m = re.search(pattern, text)
        if m:
            got[key] = float(m.group(1).replace(",", ""))
    if len(got) < 3:
        last = [line for line in text.splitlines() if line.strip()][-1:] or ["no output"]
        return f"it failed: {last[0][-160:]}"
    # Its TTFT and TPOT are in ms; its tokens a second are output tokens (its seq/s × OSL).
    return {"ttft": got["ttft"] / 1000, "tpot": got["tpot"] / 1000, "per_gpu": got["per_gpu"]}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--aic", default="aiconfigurator", help="the aiconfigurator program")
    p.add_argument("--cache", default="/tmp/aic-answers.json")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--limit", type=int, default=0, help="at most this many rows (0: all)")
    p.add_argument(
        "--estimates",
        help="llmfit's never-seen estimates kept by accuracy_load.py --fit --save (else refitted)",
    )
    p.add_argument(
        "--leave-out",
        action="store_true",
        help="without the runs accuracy_load.py --leave-out leaves out by their sources' account",
    )
    a = p.parse_args(argv)
    cache: dict[str, object] = {}
    if Path(a.cache).exists():
        cache = json.loads(Path(a.cache).read_text())
    rows, unpriced = al.load_rows()
    if a.estimates:
        held = json.loads(Path(a.estimates).read_text())
    else:
        held, _ = al.unseen_estimates(rows)
    out = ["| row | measured: tok/s a GPU, TPOT ms, TTFT ms | aiconfigurator | llmfit (unseen) |",
           "|---|---|---|---|"]  # fmt: skip
    both: dict[str, tuple[list[float], list[float]]] = {m: ([], []) for m in al.METRICS}
    cannot: list[tuple[str, str]] = []
    for n, row in enumerate(rows):
        if a.limit and n >= a.limit:
            break
        rid = row.raw["id"]
        argv_ = args_of(row)
        if isinstance(argv_, str):
            cannot.append((rid, argv_))
            continue
        key = " ".join(argv_)
        if key not in cache:
            cache[key] = ask(a.aic, argv_, a.timeout)
            Path(a.cache).write_text(json.dumps(cache, indent=1))
        got = cache[key]
        if isinstance(got, str):
            cannot.append((rid, got))
            continue
        assert isinstance(got, dict)
        aic = {"per_gpu": got["per_gpu"], "tpot": got["tpot"], "ttft": got["ttft"]}
        ours = held[rid]
        cells = []
        for who in (row.measured, aic, ours):
            cells.append(", ".join(f"{who[m] * (1 if m == 'per_gpu' else 1000):,.1f}"
                                   if m in who and math.isfinite(who[m]) else "–"
                                   for m in al.METRICS))  # fmt: skip
        out.append(f"| {rid} | " + " | ".join(cells) + " |")
        for m in al.METRICS:
            if m in row.measured:
                meas = row.measured[m]
                both[m][0].append(abs(aic[m] / meas - 1))
                e = ours[m]
                both[m][1].append(abs(e / meas - 1) if e > 0 and math.isfinite(e) else 1.0)
    print("\n".join(out))
    print()
    total = len(rows) + len(unpriced)
    priced_aic = len(rows) - len(cannot) if not a.limit else len(out) - 2
    print(f"Of {total} runs: llmfit prices {len(rows)}, aiconfigurator {priced_aic} (of those "
          f"llmfit prices; it is not asked the rest).")  # fmt: skip
    print()
    print("| measure | rows both priced | aiconfigurator median abs error | llmfit, never "
          "seen (publisher and cell left out) |")  # fmt: skip
    print("|---|---|---|---|")
    for m in al.METRICS:
        a_errs, o_errs = both[m]
        if a_errs:
            print(
                f"| {m} | {len(a_errs)} | {statistics.median(a_errs) * 100:.1f} % | "
                f"{statistics.median(o_errs) * 100:.1f} % |"
            )
    print()
    print("| row | why aiconfigurator does not price it |")
    print("|---|---|")
    for rid, why in cannot:
        print(f"| {rid} | {why} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
