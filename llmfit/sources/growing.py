"""Reading a header whose length only its parser knows: a window that grows until it is enough.

Used for GGUF headers, locally (from a file) and remotely (by HTTP range): the parser is given the
bytes held so far and answers with its result, or `NeedMore` with the bytes it needs at least.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from llmfit.errors import WeightsError

T = TypeVar("T")

# A GGUF header (metadata, then tensor infos) is read in a window that starts here and grows until
# the parser has what it needs, never past the cap. A 32k-token vocabulary makes a header of about
# 0.7 MB and a 256k one of several MB; past 64 MB it is not a header worth planning from. The first
# window is small because the parser's estimate (from the token count and the tokens seen) steers
# the rest, and the second and later parts of a split file hold tensor infos only, tens of KB: a
# first window past a header is bytes read for nothing.
GGUF_FIRST_WINDOW = 64 << 10
GGUF_MAX_WINDOW = 64 << 20


class NeedMore:
    """A parser's answer when the window ends too soon: the bytes it needs in all, if it knows.

    `total` is a lower bound on the header's length (from the offset it reached and what the next
    field says, or an estimate from the items still to come); None when it cannot tell.
    """

    __slots__ = ("total",)

    def __init__(self, total: int | None = None) -> None:
        self.total = total

    def __repr__(self) -> str:
        return f"NeedMore({self.total})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NeedMore) and other.total == self.total

    def __hash__(self) -> int:
        return hash(self.total)


def read_growing(
    fetch: Callable[[int, int], bytes],
    parse: Callable[[bytes], T | NeedMore],
    *,
    first: int = GGUF_FIRST_WINDOW,
    cap: int = GGUF_MAX_WINDOW,
    size: int | None = None,
    where: str = "file",
) -> tuple[T, bytes]:
    """Read a file's head in a growing window until `parse` has all it needs: (result, the bytes).

    `fetch(start, stop)` returns bytes [start, stop) of the file (fewer at its end). `parse(window)`
    returns its result, or `NeedMore` when the window ends before what it needs, and raises on bytes
    that are wrong. Each round fetches only the bytes not yet held. The window grows to what the
    parser says it needs when it says so (then the bytes read are the header's, plus at most the
    first window), else by half, so a parser without hints still costs O(log h) requests; the cap
    stops a hostile or broken header from making the planner read the whole file.
    """
    held = b""
    limit = cap if size is None else min(cap, size)
    window = min(first, limit)
    ended = False
    while True:
        if window > len(held):
            more = fetch(len(held), window)
            ended = len(held) + len(more) < window
            held += more
        result = parse(held)
        if not isinstance(result, NeedMore):
            return result, held
        if ended or (size is not None and len(held) >= size):
            raise WeightsError(f"{where}: the header runs past the end of the file.")
        if len(held) >= limit or (result.total is not None and result.total > cap):
            raise WeightsError(
                f"{where}: the header is larger than {cap // (1 << 20)} MB, the most llmfit reads."
            )
        grown = len(held) + max(len(held) // 2, 1)
        wanted = result.total if result.total is not None and result.total > len(held) else grown
        window = min(wanted, limit)
