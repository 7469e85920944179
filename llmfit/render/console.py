"""The one place a rich Console is made, so tests can pin its width and colours."""

from __future__ import annotations

import os

from rich.console import Console

# The width a line is drawn to when nothing says otherwise: piped with no COLUMNS and no terminal
# to ask (a pager reading `llmfit … | less` then shows lines as drawn, not wrapped again).
FALLBACK = 80
# Widths past sense (a mistyped COLUMNS) are not taken; nor, below the narrowest a table is drawn.
NARROWEST, WIDEST = 20, 1000


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # The reader went away (`llmfit … | head`): it has what it wanted. Quietly and with 0,
        # not rich's 1, which is llmfit's "nothing fits".
        quiet_exit()


def quiet_exit() -> None:
    """Stop without another word: stdout is pointed at /dev/null first, so that the interpreter's
    last flush does not complain of the broken pipe on stderr."""
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise SystemExit(0)


def output_width() -> int:
    """How wide to draw: COLUMNS where it is set (as rich and most tools read it), else the width
    of the terminal the output is headed for (stdout's, or, piped, the terminal stderr or stdin
    is on: `llmfit … | less` runs in one), else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and NARROWEST <= int(columns) <= WIDEST:
        return int(columns)
    for fd in (1, 2, 0):
        try:
            width = os.get_terminal_size(fd).columns
        except (OSError, ValueError):
            continue
        if NARROWEST <= width <= WIDEST:
            return width
    return FALLBACK


def make_console(width: int | None = None) -> Console:
    """A console as wide as `output_width` says (a test pins `width`).

    rich already honours NO_COLOR and drops colour when stdout is not a terminal."""
    return _Console(width=width or output_width(), highlight=False)
