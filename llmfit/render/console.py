"""The one place a rich Console is made, so tests can pin its width and colours."""

from __future__ import annotations

import os

from rich.console import Console

# Piped with no COLUMNS, output is not wrapped: a line as long as it needs (a script or a file
# reads it whole; a pager can wrap it).
UNWRAPPED = 1000


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


def output_encoding() -> str | None:
    """The encoding stdout writes in (None when it is not known): a command's word it cannot
    write is refused, not replaced (render/safe.py)."""
    import sys

    return getattr(sys.stdout, "encoding", None)


def make_console(width: int | None = None) -> Console:
    """A console as wide as the terminal, or piped as wide as COLUMNS says, else unwrapped.

    rich already honours NO_COLOR and drops colour when stdout is not a terminal."""
    if width is None and not os.isatty(1):
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and 20 <= int(columns) <= UNWRAPPED else UNWRAPPED
    return _Console(width=width, highlight=False)
