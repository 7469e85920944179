"""The dataclasses' compiled methods kept from run to run (llmfit/dataclass_cache.py): a class
defined through the cache is the class `@dataclass` makes, a text is compiled once, and a file
that is not the cache's is no cache, never an error."""

from __future__ import annotations

import dataclasses
import importlib.util
import marshal
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from llmfit import dataclass_cache
from tests.conftest import ROOT, around_the_entry_point


def define() -> type:
    @dataclasses.dataclass(frozen=True)
    class Card:
        name: str
        gib: int = 80

    return Card


def test_a_class_defined_through_the_cache_is_the_same_class(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(dataclass_cache, "_codes", {})
    monkeypatch.setattr(dataclasses, "exec", dataclass_cache._exec, raising=False)
    card = define()
    # Frozen, with eq and repr: init, repr, eq, hash, setattr, delattr (3.11 compiles each apart).
    texts = len(dataclass_cache._codes)
    assert texts == (6 if sys.version_info < (3, 13) else 1)  # 3.13 compiles them in one text
    a, b = card("h100"), card("h100", 80)
    assert (a == b, hash(a) == hash(b), repr(a)) == (
        True, True, "define.<locals>.Card(name='h100', gib=80)"
    )  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.gib = 40  # type: ignore[misc]
    # The generated __init__'s annotations are objects, as dataclasses.py's own exec leaves them,
    # not the strings this module's `from __future__ import annotations` would make of them.
    assert card.__init__.__annotations__["return"] is None
    # A second class of the same text compiles nothing new.
    define()
    assert len(dataclass_cache._codes) == texts


def test_what_is_saved_loads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    code = compile("x = 1", "<string>", "exec")
    monkeypatch.setattr(dataclass_cache, "_codes", {"x = 1": code})
    monkeypatch.setattr(dataclass_cache, "_state", {"installed": True, "changed": True})
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "__pycache__" / "cache.dataclasses"
    dataclass_cache._save(str(path))
    assert dataclass_cache._load(str(path)) == {"x = 1": code}
    assert list(tmp_path.rglob("*.tmp")) == []


def test_nothing_is_written_where_bytecode_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(dataclass_cache, "_state", {"installed": True, "changed": True})
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # PYTHONDONTWRITEBYTECODE=1
    dataclass_cache._save(str(tmp_path / "cache.dataclasses"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "data",
    [
        b"",  # empty
        b"not ours at all",
        b"llmfit-dataclasses\n" + b"\x00\x00\x00\x00" + marshal.dumps({}),  # another interpreter
        b"llmfit-dataclasses\n" + importlib.util.MAGIC_NUMBER + b"\xff\xfe",  # truncated
        b"llmfit-dataclasses\n" + importlib.util.MAGIC_NUMBER + marshal.dumps({"x": 1}),
        b"llmfit-dataclasses\n" + importlib.util.MAGIC_NUMBER + marshal.dumps([1, 2]),
    ],
)
def test_a_file_that_is_not_the_cache_is_no_cache(tmp_path: Path, data: bytes):
    path = tmp_path / "cache.dataclasses"
    path.write_bytes(data)
    assert dataclass_cache._load(str(path)) == {}
    assert dataclass_cache._load(str(tmp_path / "missing")) == {}
    assert dataclass_cache._load(str(tmp_path)) == {}  # a directory


def test_only_the_commands_entry_point_installs_it():
    # A program importing llmfit's planner, or its CLI module, keeps the builtin exec; the
    # `llmfit` script's entry point (llmfit.entry:main, and `python -m llmfit`) installs it.
    out = around_the_entry_point(
        "import dataclasses, llmfit.plan.planner, llmfit.cli; print(hasattr(dataclasses, 'exec'))",
        "print(dataclasses.exec.__module__)",
    )
    assert out[0] == "False" and out[-1] == "llmfit.dataclass_cache"


def _saved() -> bytes:
    return (
        b"llmfit-dataclasses\n"
        + importlib.util.MAGIC_NUMBER
        + marshal.dumps({"x = 1": compile("x = 1", "<string>", "exec")})
    )


def test_it_is_written_without_write_for_others_under_any_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Under umask 000 the file was 666 beside 644 bytecode (issue 33). Now the source's mode
    # (this checkout's llmfit/dataclass_cache.py), without write for group and others.
    code = compile("x = 1", "<string>", "exec")
    monkeypatch.setattr(dataclass_cache, "_codes", {"x = 1": code})
    monkeypatch.setattr(dataclass_cache, "_state", {"installed": True, "changed": True})
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "__pycache__" / "cache.dataclasses"
    old = os.umask(0)
    try:
        dataclass_cache._save(str(path))
    finally:
        os.umask(old)
    source = os.stat(dataclass_cache.__file__).st_mode
    assert stat.S_IMODE(path.stat().st_mode) == (source | 0o200) & 0o644
    assert dataclass_cache._load(str(path)) == {"x = 1": code}


@pytest.mark.parametrize("mode", [0o666, 0o664, 0o646, 0o620])
def test_a_file_others_could_write_is_never_loaded(tmp_path: Path, mode: int):
    path = tmp_path / "cache.dataclasses"
    path.write_bytes(_saved())
    path.chmod(mode)
    assert dataclass_cache._load(str(path)) == {}
    path.chmod(0o644)
    assert list(dataclass_cache._load(str(path))) == ["x = 1"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_another_user_owns_is_never_loaded(tmp_path: Path):
    import pwd

    path = tmp_path / "cache.dataclasses"
    path.write_bytes(_saved())
    path.chmod(0o644)
    os.chown(path, pwd.getpwnam("nobody").pw_uid, -1)
    assert dataclass_cache._load(str(path)) == {}


def test_a_fifo_is_no_cache_and_no_wait(tmp_path: Path):
    # A FIFO at the cache's path made every run wait forever for a writer (issue 33). Run in a
    # child with a deadline, so that a regression fails instead of hanging the suite.
    path = tmp_path / "cache.dataclasses"
    os.mkfifo(path)
    probe = f"import sys; from llmfit import dataclass_cache as c; print(c._load({str(path)!r}))"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=20,
        check=True,
    ).stdout  # fmt: skip
    assert out.strip() == "{}"
