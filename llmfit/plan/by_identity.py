"""What a function gives for an object, kept by the object's identity.

The planner prices the same frozen inputs thousands of times (a rate's fixed point, a layout's
loads), and a frozen dataclass has nowhere of its own to keep what was worked out from it; its
hash walks every field. So the result is kept by the object's `id`, with the object beside it:
while the entry lives the object does, and its id is not reused by another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ByIdentity(Generic[K, V]):
    """`make(key)`, worked out on a key's first use and kept beside the key; past `most` keys the
    cache starts again (a plan uses a few hundred)."""

    __slots__ = ("_found", "_make", "_most")

    def __init__(self, make: Callable[[K], V], most: int) -> None:
        self._make = make
        self._most = most
        self._found: dict[int, tuple[K, V]] = {}

    def __call__(self, key: K) -> V:
        found = self._found.get(id(key))
        if found is None or found[0] is not key:
            if len(self._found) > self._most:
                self._found.clear()
            found = (key, self._make(key))
            self._found[id(key)] = found
        return found[1]
