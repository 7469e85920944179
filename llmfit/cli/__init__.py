"""The command line: one module per command, each a thin layer over one library call.

Importing the package registers every command on the `llmfit` group (cli/app.py).
"""

from llmfit.cli import calibrate, check, fleet, models, plan  # noqa: F401  (each registers its command)
from llmfit.cli.app import cli, main

__all__ = ["cli", "main"]
