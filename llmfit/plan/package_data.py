"""The package's own data files (llmfit/data/: the card table, the serving constants, the kernel
curves), read as Python reads the package's modules: by its loader, and their parse kept from
run to run beside this module's bytecode, as Python keeps a module's compiled code.

`importlib.resources` reads the files the same way, and more besides (temporary files for
archives, readers for every kind of loader), but importing it brings tempfile, zipfile, shutil
and the compression modules: about 10 ms of a cached plan's 300, more than reading the files.
`pkgutil.get_data` asks the same loader with nothing to import that a plan has not already.

Parsing the card table's TOML took 7 ms of every plan (tomllib is Python), the kernel curves'
JSON 3 ms: a file's parse is kept in `__pycache__` (marshal, as a .pyc keeps code), keyed by the
file's whole text, so an edited file is parsed again, never read stale. As with
llmfit/dataclass_cache.py, anything wrong with the kept file (missing, truncated, another
interpreter's, another text's) is no cache, never an error, and a file anyone but its owner could
have written, or not a regular file, is never read.
"""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import pkgutil
import stat
import sys
import tomllib
from collections.abc import Callable
from typing import Any

# A kept parse past this is not one we wrote (the card table's is about 60 kB).
MAX_BYTES = 4 << 20
_HEADER = b"llmfit-data\n" + importlib.util.MAGIC_NUMBER


def read_text(name: str) -> str:
    """The text of `name` ("data/cards.toml"), relative to the llmfit package."""
    data = pkgutil.get_data("llmfit", name)
    if data is None:  # a loader that reads no files beside its modules
        raise ValueError(f"{name}: llmfit's loader reads no data files")
    return data.decode("utf-8")


def read_toml(name: str) -> dict[str, Any]:
    """`tomllib.loads` of the text of `name`, from the parse kept of the same text if there is
    one (and kept for the next run where bytecode is)."""
    doc: dict[str, Any] = _parsed(name, tomllib.loads)
    return doc


def read_json(name: str) -> Any:
    """`json.loads` of the text of `name`, kept as `read_toml` keeps a parse."""
    return _parsed(name, json.loads)


def _parsed(name: str, parse: Callable[[str], Any]) -> Any:
    text = read_text(name)
    path = _path(name)
    if path is not None:
        kept = _load(path, text)
        if kept is not None:
            return kept
    doc = parse(text)
    if path is not None and not sys.dont_write_bytecode:
        _save(path, text, doc)
    return doc


def _path(name: str) -> str | None:
    try:
        pyc = importlib.util.cache_from_source(__file__)
    except (NotImplementedError, ValueError):  # no cache tag: bytecode is not kept at all
        return None
    return f"{pyc.removesuffix('.pyc')}.{name.replace('/', '.')}.marshal"


def _trusted(st: os.stat_result) -> bool:
    """A regular file, owned by this user or root and writable by its owner alone (see
    llmfit/dataclass_cache.py `_trusted`: what another user could write is never read)."""
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_uid in (os.geteuid(), 0)
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _load(path: str, text: str) -> Any:
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; checked once opened (fstat).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not _trusted(st) or st.st_size > MAX_BYTES:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(MAX_BYTES)
        if not data.startswith(_HEADER):
            return None
        kept = marshal.loads(data[len(_HEADER) :])
    except (OSError, EOFError, ValueError, TypeError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    if not (isinstance(kept, tuple) and len(kept) == 2 and kept[0] == text):
        return None
    doc = kept[1]
    return doc if isinstance(doc, (dict, list)) else None


def _save(path: str, text: str, doc: Any) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        data = _HEADER + marshal.dumps((text, doc))
    except ValueError:  # a value marshal does not keep (a TOML date): no cache
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # O_EXCL: a name someone else left there (a link included) is not written through.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # whole or not at all, whichever run writes last
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
