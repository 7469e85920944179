"""The one place a rich Console is made, so tests can pin its width and colours."""

from __future__ import annotations

from rich.console import Console

from llmfit.render.streams import output_width, quiet_exit, rich_environ


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # The reader went away (`llmfit … | head`): it has what it wanted. Quietly and with 0,
        # not rich's 1, which is llmfit's "nothing fits".
        quiet_exit()


def make_console(width: int | None = None) -> Console:
    """A console as wide as `output_width` says (a test pins `width`).

    rich already honours NO_COLOR and drops colour when stdout is not a terminal."""
    return _Console(width=width or output_width(), highlight=False, _environ=rich_environ())
