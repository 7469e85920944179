"""Run `-m slow` fuzz targets for a time budget each: pytest again and again with new seeds.

    python tests/fuzz/run_long.py --seconds 600 tests/test_fuzz.py::test_configs_long ...

Hypothesis stops a test after max_examples; a budget in time is what "ran ten minutes" means, so
each target is run with a fresh seed until its budget is spent, and the examples hypothesis
reports as run (passing, and any failing) are added up. A failure stops that target and is
printed. One line per target at the end: its time, its runs, its examples, and what failed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

_RUN = re.compile(r"(\d+) passing, (\d+) failing")


def run_target(target: str, seconds: float) -> str:
    started = time.monotonic()
    runs = examples = 0
    failed = ""
    seed = 1
    while time.monotonic() - started < seconds and not failed:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-m", "slow", target, "-p", "no:cacheprovider",
             f"--hypothesis-seed={seed}", "--hypothesis-show-statistics"],
            capture_output=True, text=True,
        )  # fmt: skip
        runs += 1
        seed += 1
        for passing, failing in _RUN.findall(done.stdout):
            examples += int(passing) + int(failing)
        if done.returncode != 0:
            failed = done.stdout[-4000:]
    took = time.monotonic() - started
    line = f"{target}: {took:.0f} s, {runs} runs, {examples:,} examples, "
    return line + ("FAILED\n" + failed if failed else "no failure")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+")
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda t: run_target(t, args.seconds), args.targets):
            print(line, flush=True)


if __name__ == "__main__":
    main()
