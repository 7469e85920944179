"""Progress of remote metadata reads, drawn on stderr only when stderr is a terminal.

`sources.hub` reports steps (resolve, config, headers) through its `Progress` protocol; this draws
them with rich, transient, so that nothing of it is left in the output. Piped, nothing is drawn.
"""

from __future__ import annotations

import sys
from typing import Any


def make_progress() -> Any | None:
    """A progress display for stderr, or None when stderr is not a terminal."""
    if not sys.stderr.isatty():
        return None
    return RichProgress()


class RichProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        from llmfit.render.streams import rich_environ

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=Console(stderr=True, _environ=rich_environ()),
            transient=True,
        )
        self._task: Any = None
        self._started = False

    def begin(self, label: str, total: int) -> None:
        if not self._started:
            self._progress.start()
            self._started = True
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(label, total=total)

    def advance(self, n: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, n)

    def end(self) -> None:
        if self._started:
            self._progress.stop()
            self._started = False
            self._task = None
