"""The `llmfit` command's entry point (the script and `python -m llmfit`).

Only here, before any of llmfit's nouns is defined, are dataclasses' compiled methods kept from
run to run (llmfit/dataclass_cache.py), and the data files' parses (llmfit/data_cache.py):
importing llmfit, its CLI included, changes nothing in the importing program and writes nothing.
"""

from __future__ import annotations


def main() -> None:
    from llmfit import data_cache, dataclass_cache

    dataclass_cache.install()
    data_cache.install()
    from llmfit.cli import main as run

    run()
