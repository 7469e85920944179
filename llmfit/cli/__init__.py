"""The command line: one module per command, each a thin layer over one library call.

Importing the package registers every command on the `llmfit` group (cli/app.py).
"""

from llmfit import dataclass_cache

# Before any of llmfit's nouns is defined: their compiled methods are kept from run to run.
dataclass_cache.install()

from llmfit.cli import calibrate, check, fleet, models, plan  # noqa: E402, F401  (each registers its command)
from llmfit.cli.app import cli, main  # noqa: E402

__all__ = ["cli", "main"]
