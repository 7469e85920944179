"""How long a big fleet takes: a fleet file of N single [[node]] tables parsed (as TOML, and the
same document as JSON), summarised, and planned against, for N up to 100,000. Cost should grow
linearly with N.

Run from the repository root:  python benchmarks/fleet_bench.py

The repositories come from the bundled fixture cache (fixtures/hub), so it runs offline. Each
time is the best of a few runs, in milliseconds of this process's CPU time (so that a busy
machine slows it less).
"""

from __future__ import annotations

import json
import os
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_CACHE", str(ROOT / "fixtures" / "hub"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from llmfit.plan.fleet_summary import summarize  # noqa: E402
from llmfit.plan.planner import PlanSettings, plan  # noqa: E402
from llmfit.sources.fleet import parse_fleet  # noqa: E402
from llmfit.sources.repo import load_repo  # noqa: E402

SIZES = (1_250, 10_000, 100_000)
REPEAT = 3
REPOS = (("deepseek-ai/DeepSeek-V3", 8192), ("Qwen/Qwen3-235B-A22B", None))


def fleet_text(n: int) -> str:
    """n nodes, one [[node]] table each: H100 and H200 nodes on eight fabrics (some busy, a few
    with a broken card), A100 nodes with MIG instances beside whole cards, and CPU nodes."""
    out = []
    for i in range(n):
        kind = i % 10
        out.append(f'[[node]]\nname = "n{i}"\nram_gb = 2048\n')
        if kind < 6:
            free = 8 if i % 3 else 4
            bad = 1 if i % 97 == 0 else 0
            out.append(
                f'gpu = "h100-80g"\ngpus = 8\nfree_gpus = {free - bad}\nunhealthy_gpus = {bad}\n'
                f'fabric = "ib{i % 8}"\n'
            )
        elif kind < 8:
            out.append(f'gpu = "h200-141g"\ngpus = 8\nfabric = "ib{i % 8}"\n')
        elif kind == 8:
            out.append(
                '  [[node.devices]]\n  gpu = "a100-80g-mig-3g.40gb"\n  gpus = 4\n'
                '  [[node.devices]]\n  gpu = "a100-80g"\n  gpus = 6\n'
            )
        # kind 9: a CPU node
        out.append("\n")
    return "".join(out)


def best(fn, repeat: int = REPEAT) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t = time.process_time()
        result = fn()
        times.append(time.process_time() - t)
    return min(times) * 1000, result


def main() -> None:
    repos = [(load_repo(r), ctx) for r, ctx in REPOS]
    header = ["nodes", "file KB", "parse ms", "JSON parse ms", "summary ms"]
    header += [f"plan {r.id.split('/')[1]} ms" for r, _ in repos]
    header += ["total ms", "µs a node"]
    rows = []
    for n in SIZES:
        text = fleet_text(n)
        parse_ms, fleet = best(lambda text=text: parse_fleet(text, "bench.toml"))
        assert len(fleet.nodes) == n
        doc = json.dumps(tomllib.loads(text))
        json_ms, same = best(lambda doc=doc: parse_fleet(doc, "bench.json"))
        assert same.nodes == fleet.nodes
        summary_ms, _ = best(lambda fleet=fleet: summarize(fleet))
        plan_ms = []
        for repo, ctx in repos:
            ms, p = best(
                lambda repo=repo, ctx=ctx, fleet=fleet: plan(
                    repo.model, repo.artifacts, fleet, PlanSettings(context=ctx)
                )
            )
            assert p.options, f"{repo.id} should fit this fleet"
            plan_ms.append(ms)
        total = parse_ms + summary_ms + sum(plan_ms)
        rows.append(
            [f"{n:,}", f"{len(text) / 1024:,.0f}", f"{parse_ms:.1f}", f"{json_ms:.1f}"]
            + [f"{summary_ms:.1f}"]
            + [f"{ms:.1f}" for ms in plan_ms]
            + [f"{total:.1f}", f"{total * 1000 / n:.1f}"]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
