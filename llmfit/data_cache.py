"""The parses of llmfit's data files (llmfit/plan/package_data.py), kept from run to run beside
this module's bytecode, as Python keeps a module's compiled code.

Parsing the card table's TOML took 7 ms of every plan, the kernel curves' JSON 3 ms. A file's parse
is kept in `__pycache__` (marshal, as a .pyc keeps code), keyed by the file's whole text, so an
edited file is parsed again, never read stale. As with llmfit/dataclass_cache.py, anything wrong
with the kept file (missing, truncated, another interpreter's, another text's) is no cache, never
an error, and a file anyone but its owner could have written, or not a regular file, is never read.

Only the `llmfit` command's entry point installs it (llmfit/entry.py), so the core (llmfit/plan)
writes nothing, and a program that imports llmfit's library parses every time.
"""

from __future__ import annotations

import importlib.util
import marshal
import sys
from typing import Any

from llmfit.dataclass_cache import read_kept, write_kept
from llmfit.plan import package_data

# A kept parse past this is not one we wrote (the card table's is about 60 kB).
MAX_BYTES = 4 << 20
_HEADER = b"llmfit-data\n" + importlib.util.MAGIC_NUMBER


class MarshalKeeper:
    """package_data.Keeper over marshal files in __pycache__."""

    def get(self, name: str, text: str) -> Any:
        path = _path(name)
        return None if path is None else _load(path, text)

    def put(self, name: str, text: str, doc: Any) -> None:
        path = _path(name)
        if path is not None and not sys.dont_write_bytecode:
            _save(path, text, doc)


def install() -> None:
    """Keep the data files' parses from now on (once a process, before the card table is read)."""
    if package_data.KEEPER is None:
        package_data.KEEPER = MarshalKeeper()


def _path(name: str) -> str | None:
    try:
        pyc = importlib.util.cache_from_source(__file__)
    except (NotImplementedError, ValueError):  # no cache tag: bytecode is not kept at all
        return None
    return f"{pyc.removesuffix('.pyc')}.{name.replace('/', '.')}.marshal"


def _load(path: str, text: str) -> Any:
    kept = read_kept(path, _HEADER, MAX_BYTES)
    if not (isinstance(kept, tuple) and len(kept) == 2 and kept[0] == text):
        return None
    doc = kept[1]
    return doc if isinstance(doc, (dict, list)) else None


def _save(path: str, text: str, doc: Any) -> None:
    try:
        data = _HEADER + marshal.dumps((text, doc))
    except ValueError:  # a value marshal does not keep (a TOML date): no cache
        return
    write_kept(path, data, 0o644)
