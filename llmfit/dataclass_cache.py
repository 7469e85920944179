"""The compiled methods of dataclasses, kept from one run to the next as Python keeps a module's.

`@dataclass` writes each class's `__init__`, `__repr__`, `__eq__`, `__hash__` and, frozen, its
`__setattr__` and `__delattr__` as source text and compiles them when the class is defined, on
every start: Python 3.11 compiles each method apart. A plan defines about 90 classes (llmfit's
nouns, and rich's), and those compiles were a third of a cached plan's run: more than the plan
itself. The texts are the same from run to run, so their compiled code is kept beside this
module's bytecode (`__pycache__`, the same trust as the .pyc files Python runs from it), keyed
by the exact text: a text compiles to the same code whether compiled here or by `exec`, so no
class differs by a byte in what it does.

The command's entry point installs it (llmfit/entry.py, the `llmfit` script and `python -m
llmfit`) before any noun is defined; a program that imports llmfit's library or its CLI module is
left alone. It shadows the one name the dataclasses module calls, `exec`,
rather than copying one of its private functions, so it holds on 3.11 to 3.13. Anything wrong
with the file (missing, another interpreter's, truncated, not ours) is no cache, never an error;
and a file anyone but its owner could have written, or not a regular file, is never read
(`_trusted`: code in it would run as whoever runs llmfit).
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import importlib.util
import marshal
import os
import stat
import sys
from types import CodeType
from typing import Any

# A file past this is not one we wrote (about 0.8 MB holds every class llmfit and rich define).
MAX_BYTES = 16 << 20
# Past this many texts (classes edited many times over in a checkout), a save keeps only the
# run's own.
MAX_TEXTS = 5000
_HEADER = b"llmfit-dataclasses\n" + importlib.util.MAGIC_NUMBER

_codes: dict[str, CodeType] = {}
_used: set[str] = set()
_state = {"installed": False, "changed": False}


def _path() -> str | None:
    try:
        return importlib.util.cache_from_source(__file__).removesuffix(".pyc") + ".dataclasses"
    except (NotImplementedError, ValueError):  # no cache tag: bytecode is not kept at all
        return None


def _trusted(st: os.stat_result) -> bool:
    """Whether an opened file is one to execute code from: a regular file (not a FIFO or a
    device, which a read could wait on forever), owned by this user or root, and writable by its
    owner alone. Anyone else who could have written it could have written code that would then
    run as this user (issue 33: a 666 file left by umask 000, rewritten by `nobody`, ran as
    root)."""
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_uid in (os.geteuid(), 0)
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def read_kept(path: str, header: bytes, max_bytes: int) -> Any:
    """What a kept file at `path` holds past `header` (marshal), or None where anything is
    wrong with it: missing, not `_trusted`, past `max_bytes`, another header, truncated.
    llmfit/data_cache.py keeps its parses with the same rules."""
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; O_NOCTTY: a terminal is not
        # made ours. What was opened is checked before a byte is read (fstat, not the path,
        # which another process could swap in between).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not _trusted(st) or st.st_size > max_bytes:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(max_bytes)
        if not data.startswith(header):
            return None
        return marshal.loads(data[len(header) :])
    except (OSError, EOFError, ValueError, TypeError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def write_kept(path: str, data: bytes, mode: int) -> None:
    """`data` written to `path` whole or not at all; a failure is no cache, never an error."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # O_EXCL: a name someone else left there (a link included) is not written through.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # whole or not at all, whichever run writes last
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _load(path: str) -> dict[str, CodeType]:
    codes = read_kept(path, _HEADER, MAX_BYTES)
    if not isinstance(codes, dict) or not all(
        isinstance(k, str) and isinstance(v, CodeType) for k, v in codes.items()
    ):
        return {}
    return codes


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """`exec` as the dataclasses module calls it, compiling each text once."""
    if isinstance(source, str):
        code = _codes.get(source)
        if code is None:
            # dont_inherit: compiled as dataclasses.py's own exec compiles it, without this
            # module's `from __future__ import annotations` (which would turn the generated
            # methods' annotations into strings).
            code = compile(source, "<string>", "exec", dont_inherit=True)
            _codes[source] = code
            _state["changed"] = True
        _used.add(source)
        source = code
    builtins.exec(source, globals, locals)


def _mode() -> int:
    """The mode Python gives this module's bytecode (importlib's _calc_mode: the source's mode,
    owner-writable), without write for group or others: a file they could write is never loaded
    (`_trusted`), so it is never written so. The umask still applies, as it does to a .pyc."""
    try:
        mode = os.stat(__file__).st_mode | stat.S_IWUSR
    except OSError:
        mode = 0o644
    return mode & 0o644


def _save(path: str) -> None:
    if not _state["changed"] or sys.dont_write_bytecode:
        return
    codes = _codes if len(_codes) <= MAX_TEXTS else {k: _codes[k] for k in _used}
    write_kept(path, _HEADER + marshal.dumps(codes), _mode())


def install() -> None:
    """Keep dataclasses' compiled methods from now on (once a process)."""
    if _state["installed"]:
        return
    _state["installed"] = True
    path = _path()
    if path is None:
        return
    _codes.update(_load(path))
    setattr(dataclasses, "exec", _exec)  # noqa: B010  (a module global, shadowing the builtin)
    atexit.register(_save, path)
