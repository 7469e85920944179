"""Every fixture model planned on a set of fleets, each plan's JSON and table written to a folder,
so that two trees' answers can be compared byte for byte (`diff -r A B`).

A refactor that is meant to change nothing is checked this way: run it on the commit before and
the commit after, and diff. Run from a checkout, with its own interpreter:
    python benchmarks/plans_snapshot.py OUTDIR [--loads]

`--loads` plans at named loads instead, with the disaggregated search under each of its modes
(`--disagg auto` lists an option only where it wins, so a change to the search shows there):
2,592 plans, about half an hour on a shared 2-core machine.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLEETS = (
    "examples/fleet.toml",
    "examples/fleet-4-nodes.toml",
    "examples/fleet-200-nodes.toml",
    "8xh100-80g",
    "2x8xh100-80g@ib0",
    "1xrtx4090-24g,cpu:64g",
    "4x8xa100-80g@ib0,2xl40s-48g",
)
FLAGS = (
    (),
    ("--engine", "sglang"),
    ("--precision", "all", "--all"),
    ("--max-loras", "4", "--max-lora-rank", "16", "--max-num-seqs", "64", "--enforce-eager",
     "--no-enable-prefix-caching", "--commands"),
)  # fmt: skip
# --loads: the fleets the disaggregated search has most to pair on, and loads named each way.
LOAD_FLEETS = (
    "examples/fleet.toml",
    "examples/fleet-4-nodes.toml",
    "examples/fleet-200-nodes.toml",
    "examples/fleet-priced.toml",
    "2x8xh100-80g@ib0",
    "4x8xa100-80g@ib0,2xl40s-48g",
)
LOAD = ("--concurrency", "64", "--input-len", "2000", "--output-len", "500")
RATE = ("--rate", "20", "--input-len", "2000", "--output-len", "500")
LOAD_FLAGS = (
    ("--disagg", "on"),
    ("--disagg", "off"),
    LOAD,
    (*LOAD, "--disagg", "on"),
    RATE,
    (*RATE, "--rank", "throughput"),
    ("--rank", "throughput", "--disagg", "on", "--all"),
    ("--rank", "speed"),
)


def main(out: Path, loads: bool = False) -> None:
    os.environ.update(HF_HUB_CACHE=str(ROOT / "fixtures/hub"), HF_HUB_OFFLINE="1", COLUMNS="120")
    os.chdir(ROOT)
    # This tree's llmfit, whichever checkout the interpreter has installed.
    sys.path.insert(0, str(ROOT))
    for name in [m for m in sys.modules if m == "llmfit" or m.startswith("llmfit.")]:
        del sys.modules[name]
    from llmfit.cli import main as cli

    repos = sorted(
        p.name.removeprefix("models--").replace("--", "/", 1)
        for p in (ROOT / "fixtures/hub").glob("models--*")
    )
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    fleets, sets = (LOAD_FLEETS, LOAD_FLAGS) if loads else (FLEETS, FLAGS)
    for repo in repos:
        for i, fleet in enumerate(fleets):
            for j, flags in enumerate(sets):
                for fmt in ((), ("--json",)):
                    args = [repo, "--fleet", fleet, *flags, *fmt]
                    text, err = io.StringIO(), io.StringIO()
                    code: object = 0
                    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
                        try:
                            cli(args)
                        except SystemExit as e:
                            code = e.code
                    name = f"{repo.replace('/', '__')}.{i}.{j}{'.json' if fmt else '.txt'}"
                    (out / name).write_text(f"exit {code}\n{err.getvalue()}{text.getvalue()}")
                    n += 1
    print(f"{n} plans written to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--loads" in sys.argv[2:])
