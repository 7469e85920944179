"""The one place a rich Console is made, so tests can pin its width and colours."""

from __future__ import annotations

import os

from rich.console import Console


def make_console(width: int | None = None) -> Console:
    # rich already honours NO_COLOR and drops colour when stdout is not a terminal; a fixed width
    # when piped keeps the table from wrapping at rich's default of 80 columns.
    if width is None and not os.isatty(1):
        width = int(os.environ.get("COLUMNS", "120"))
    return Console(width=width, highlight=False)
