"""A cached plan against the compiled peer's on the same question, side by side, and where
llmfit's time goes.

The peer is the Rust tool published on the package index as `llmfit` (not this project: ours is
`llmfit-fleet`); its `plan` answers "what does this model need at this context" from a database
compiled into it. Install it apart, never beside this project:

    python3 -m venv /tmp/peer && /tmp/peer/bin/pip install llmfit
    python benchmarks/peer.py --peer /tmp/peer/bin/llmfit [--pairs 20]

The same question to both: Qwen/Qwen3-235B-A22B at its trained context of 40,960 tokens, llmfit
on the example fleet from the bundled cache (offline), the peer from its database. The two are
run in turn, A B A B …, each a fresh process with its output read and thrown away, and the ratio
is taken pair by pair, so that a machine speeding up or slowing down moves both; the median of
the ratios is the figure. Then, in one process, the phases of llmfit's run: the interpreter's
start, importing the CLI, reading the repository and planning, and rendering the table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPO, CONTEXT = "Qwen/Qwen3-235B-A22B", 40_960
FLEET = str(ROOT / "examples" / "fleet.toml")


def env() -> dict[str, str]:
    # As a user's run: bytecode (and the dataclasses' compiled methods, dataclass_cache.py) is
    # written by the warm-up run and read after, whatever this shell says of writing it.
    kept = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {
        **kept, "HF_HUB_CACHE": str(ROOT / "fixtures" / "hub"), "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }  # fmt: skip


def wall(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(
        argv, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - t


def phases() -> dict[str, float]:
    """Seconds of each phase of one plan, in this process (imports fresh)."""
    out: dict[str, float] = {}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=False)
    out["interpreter start (python -c pass)"] = time.perf_counter() - t
    os.environ.update(HF_HUB_CACHE=str(ROOT / "fixtures" / "hub"), HF_HUB_OFFLINE="1")
    sys.path.insert(0, str(ROOT))
    t = time.perf_counter()
    import llmfit.cli  # noqa: F401

    out["import the CLI (click, the plan's settings)"] = time.perf_counter() - t
    t = time.perf_counter()
    from llmfit.advise import advise
    from llmfit.plan.settings import PlanSettings
    from llmfit.sources.fleet import resolve_fleet

    out["import the planner and the readers"] = time.perf_counter() - t
    t = time.perf_counter()
    advice = advise(REPO, resolve_fleet(FLEET), PlanSettings(), offline=True)
    out["read the cache, plan the fleet"] = time.perf_counter() - t
    t = time.perf_counter()
    from llmfit.render.console import make_console
    from llmfit.render.table import render_text

    out["import the table renderer (rich)"] = time.perf_counter() - t
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        render_text(advice, make_console(120))
    out["render the table"] = time.perf_counter() - t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True, help="the peer's `llmfit` program")
    ap.add_argument("--pairs", type=int, default=20)
    args = ap.parse_args()
    ours = [sys.executable, "-m", "llmfit", REPO, "--fleet", FLEET]
    theirs = [args.peer, "plan", REPO, "--context", str(CONTEXT)]
    wall(ours), wall(theirs)  # warm the caches
    a, b = [], []
    for _ in range(args.pairs):
        a.append(wall(ours))
        b.append(wall(theirs))
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    print(f"{args.pairs} pairs, wall seconds, median (min–max)")
    print(f"  llmfit (this tree) {statistics.median(a):.3f} ({min(a):.3f}–{max(a):.3f})")
    print(f"  peer `llmfit plan` {statistics.median(b):.3f} ({min(b):.3f}–{max(b):.3f})")
    print(f"  ratio, pair by pair: median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}–{max(ratios):.2f})")  # fmt: skip
    print("where llmfit's time goes (one process):")
    for name, seconds in phases().items():
        print(f"  {seconds * 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
