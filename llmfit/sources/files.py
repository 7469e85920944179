"""A file from outside (a fleet file, an nvidia-smi or kubectl dump) read within bounds.

`Path.read_text` and `click.File` read whatever a path names: `/dev/zero` or `/dev/urandom` until
memory runs out, a 2 GB file whole, and a FIFO with no writer blocks the open for ever. Here a
path is opened without blocking, a device or a folder is refused before any byte is read, a FIFO
or a pipe (`<(nvidia-smi …)`, `-` for stdin) is read as the stream it is, and no more than the
cap and one byte is ever read.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO


class FileProblem(ValueError):
    """What is wrong with a file, as a phrase the caller puts after its name."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _read_fd(fd: int, cap: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got <= cap:
        chunk = os.read(fd, min(1 << 20, cap + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_capped(path: str | os.PathLike[str], cap: int, what: str = "file") -> bytes:
    """The bytes of `path`, or FileProblem: a device or a folder (refused unread), or more than
    `cap` bytes (of which cap + 1 are read). OSError as os.open raises it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise FileProblem("is a folder, not a file")
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            raise FileProblem("is a device, not a file: nothing is read from it")
        if not stat.S_ISREG(mode):
            # A pipe is read as the stream it is: opened without waiting for a writer, then read
            # waiting for what the writer sends (none left: the end).
            os.set_blocking(fd, True)
        raw = _read_fd(fd, cap)
    finally:
        os.close(fd)
    if len(raw) > cap:
        raise FileProblem(f"is more than {cap:,} bytes, the most llmfit reads of a {what}")
    return raw


def read_stream(stream: BinaryIO, cap: int, what: str = "file") -> bytes:
    """At most `cap` bytes of an open stream (stdin), or FileProblem."""
    raw = stream.read(cap + 1)
    if len(raw) > cap:
        raise FileProblem(f"is more than {cap:,} bytes, the most llmfit reads of a {what}")
    return raw
