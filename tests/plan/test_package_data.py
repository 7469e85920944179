"""The package's data files read by its loader (llmfit/plan/package_data.py), and a TOML file's
parse kept from run to run by the command's keeper (llmfit/data_cache.py): the same dict as
parsing it, never another text's, never from a file someone else could have written."""

from __future__ import annotations

import os
import sys
import tomllib

import pytest

from llmfit import data_cache
from llmfit.plan import cards, package_data
from tests.conftest import ROOT

TEXT = 'answer = 42\nname = "h100"\n[[card]]\nkey = "x"\nflops = 1.5e15\n'
DOC = {"answer": 42, "name": "h100", "card": [{"key": "x", "flops": 1.5e15}]}


@pytest.fixture
def kept(monkeypatch, tmp_path):
    """TEXT as the file read, its parse kept at a temporary path, bytecode written."""
    path = tmp_path / "kept.marshal"
    monkeypatch.setattr(package_data, "read_text", lambda name: TEXT)
    monkeypatch.setattr(data_cache, "_path", lambda name: str(path))
    monkeypatch.setattr(package_data, "KEEPER", data_cache.MarshalKeeper())
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return path


def test_the_card_table_is_read_as_the_file_says():
    text = (ROOT / "llmfit" / "data" / "cards.toml").read_text(encoding="utf-8")
    assert package_data.read_text(cards.DATA_FILE) == text
    assert package_data.read_toml(cards.DATA_FILE) == tomllib.loads(text)


def test_a_parse_is_kept_and_read_back_without_parsing(kept, monkeypatch):
    assert package_data.read_toml("t.toml") == DOC
    assert kept.is_file()

    def no_parse(text: str) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(tomllib, "loads", no_parse)
    assert package_data.read_toml("t.toml") == DOC


def test_another_texts_parse_is_not_read(kept, monkeypatch):
    package_data.read_toml("t.toml")
    # The file edited: "answer = 43" is parsed, not the 42 kept for the old text.
    monkeypatch.setattr(package_data, "read_text", lambda name: TEXT.replace("42", "43"))
    assert package_data.read_toml("t.toml")["answer"] == 43


def test_a_file_others_could_write_or_not_ours_is_no_cache(kept, monkeypatch):
    package_data.read_toml("t.toml")
    os.chmod(kept, 0o664)  # group-writable: never read
    assert data_cache._load(str(kept), TEXT) is None
    os.chmod(kept, 0o644)
    assert data_cache._load(str(kept), TEXT) == DOC
    kept.write_bytes(b"not ours")
    assert data_cache._load(str(kept), TEXT) is None
    kept.write_bytes(data_cache._HEADER + b"\x00truncated")
    assert data_cache._load(str(kept), TEXT) is None
    kept.unlink()
    os.mkfifo(kept)  # opened without waiting for a writer, and not a regular file
    assert data_cache._load(str(kept), TEXT) is None
    assert package_data.read_toml("t.toml") == DOC


def test_nothing_is_written_where_bytecode_is_not(kept, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert package_data.read_toml("t.toml") == DOC
    assert not kept.exists()


def test_the_kernel_curves_are_read_as_the_file_says():
    import json

    text = (ROOT / "llmfit" / "data" / "kernel_curves.json").read_text(encoding="utf-8")
    assert package_data.read_json("data/kernel_curves.json") == json.loads(text)


def test_the_library_keeps_nothing_the_command_keeps(kept, monkeypatch):
    # Importing llmfit (its plan, its CLI) installs no keeper: only the entry point does, so a
    # program using the library writes nothing beside llmfit's bytecode.
    monkeypatch.setattr(package_data, "KEEPER", None)
    assert package_data.read_toml("t.toml") == DOC
    assert not kept.exists()
    data_cache.install()
    assert isinstance(package_data.KEEPER, data_cache.MarshalKeeper)
    assert package_data.read_toml("t.toml") == DOC
    assert kept.is_file()
