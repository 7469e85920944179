"""The dataclasses' compiled methods kept from run to run (llmfit/dataclass_cache.py): a class
defined through the cache is the class `@dataclass` makes, a text is compiled once, and a file
that is not the cache's is no cache, never an error."""

from __future__ import annotations

import dataclasses
import importlib.util
import marshal
import subprocess
import sys
from pathlib import Path

import pytest

from llmfit import dataclass_cache
from tests.conftest import ROOT


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


def test_the_library_alone_leaves_dataclasses_as_they_are():
    # Only the CLI installs it: a program importing llmfit's planner keeps the builtin exec.
    probe = (
        "import dataclasses, llmfit.plan.planner; "
        "print(hasattr(dataclasses, 'exec')); "
        "import llmfit.cli; print(dataclasses.exec.__module__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "llmfit.dataclass_cache"]
