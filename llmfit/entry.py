"""The `llmfit` command's entry point (the script and `python -m llmfit`).

Only here, before any of llmfit's nouns is defined, are dataclasses' compiled methods kept from
run to run (llmfit/dataclass_cache.py), and the data files' parses (llmfit/data_cache.py):
importing llmfit, its CLI included, changes nothing in the importing program and writes nothing.
The cyclic collector is paced for a command's run here alone as well (`main`).
"""

from __future__ import annotations

import gc

# Allocations between two collections of the youngest generation (Python's default is 700).
YOUNG_THRESHOLD = 50_000


def main() -> None:
    # A run is one short process whose modules, classes and functions live to its end, and whose
    # plan makes hundreds of thousands of small objects, few of them in cycles: the collector,
    # run every 700 allocations, walked them again and again (55 collections, 13 ms of a cached
    # --json plan's 250). The youngest generation is collected every 50,000 allocations instead
    # (none in a cached plan), and what the start loads is set apart from every collection once
    # loaded (gc.freeze). Cycles are still collected: a command that runs long (`llmfit models`
    # over a large cache) does not grow without bound.
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    from llmfit import data_cache, dataclass_cache

    dataclass_cache.install()
    data_cache.install()
    from llmfit.cli import main as run

    gc.freeze()
    run()
