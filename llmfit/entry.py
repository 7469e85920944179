"""The `llmfit` command's entry point (the script and `python -m llmfit`).

Only here, before any of llmfit's nouns is defined, are dataclasses' compiled methods kept from
run to run (llmfit/dataclass_cache.py): importing llmfit, its CLI included, changes nothing in the
importing program.
"""

from __future__ import annotations


def main() -> None:
    from llmfit import dataclass_cache

    dataclass_cache.install()
    from llmfit.cli import main as run

    run()
