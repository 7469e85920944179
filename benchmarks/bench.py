"""How long `llmfit` takes end to end on the bundled fixture cache: medians over repeated runs.

Each case is a fresh process (`python -m llmfit …`), as a user or a script in a loop would run it,
so start-up and imports count. Run from the repository root:

    python benchmarks/bench.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ST = "Qwen/Qwen3-235B-A22B"
GGUF = "llmfit-fixtures/Tiny-Llama-GGUF"
EXAMPLE = ["--fleet", "examples/fleet.toml"]
BIG = ["--fleet", "examples/fleet-200-nodes.toml"]
CASES = [
    ("safetensors, example fleet", [ST, *EXAMPLE]),
    ("safetensors, example fleet, --json", [ST, *EXAMPLE, "--json"]),
    ("safetensors, 200-node fleet", [ST, *BIG]),
    ("gguf, example fleet", [GGUF, *EXAMPLE]),
    ("gguf, 200-node fleet", [GGUF, *BIG]),
]


def run(args: list[str], runs: int) -> tuple[float, list[str]]:
    env = dict(os.environ, HF_HUB_CACHE=str(ROOT / "fixtures" / "hub"), HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = str(ROOT)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "llmfit", *args], cwd=ROOT, env=env, capture_output=True
        )
        times.append(time.perf_counter() - start)
        if r.returncode not in (0, 1):
            return float("nan"), [r.stderr.decode().strip()]
    imported = subprocess.run(
        [sys.executable, "-c", "import runpy, sys; sys.argv = ['llmfit', *sys.argv[1:]];"
         "import llmfit.cli as c\ntry: c.main(sys.argv[1:])\nexcept SystemExit: pass\n"
         "print(','.join(m for m in ('numpy', 'gguf', 'huggingface_hub.file_download', 'httpx2')"
         " if m in sys.modules), file=sys.stderr)", *args],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    return statistics.median(times), [imported.stderr.strip().splitlines()[-1:] or [""]][0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    runs = ap.parse_args().runs
    print(f"| case | median of {runs} runs | heavy modules imported |")
    print("|---|---|---|")
    for name, args in CASES:
        if not all((ROOT / a).exists() for a in args if a.startswith("examples/")):
            continue
        median, mods = run(args, runs)
        print(f"| {name} | {median * 1000:.0f} ms | {', '.join(m for m in mods if m) or 'none'} |")


if __name__ == "__main__":
    main()
