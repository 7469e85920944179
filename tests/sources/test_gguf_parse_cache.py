"""The parse of a GGUF blob of the Hugging Face cache is kept by blob (issue 17): the next read of
the same blob, through any snapshot, is that parse, equal to a fresh one to the type; an entry that
does not agree with its blob, or does not load, is parsed again and replaced."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from fixtures.gguf_files import write_gguf
from llmfit.errors import WeightsError
from llmfit.sources import gguf as gguf_module
from llmfit.sources.gguf import parse_gguf, read_header
from tests.sources.test_gguf import tiny_llama


def as_blob(cache: Path, file: Path, name: str) -> Path:
    """`file` moved into a Hugging Face cache: blobs/<sha256>, and a snapshot link to it."""
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    blob = cache / "blobs" / digest
    blob.parent.mkdir(parents=True, exist_ok=True)
    os.replace(file, blob)
    link = cache / "snapshots" / "abc" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    return link


def typed(value: object) -> object:
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(typed(v) for v in value)
    return (type(value).__name__, value)


@pytest.fixture
def parses(monkeypatch):
    seen: list[str] = []
    real = gguf_module.parse_gguf

    def counting(buf, where, **kw):
        seen.append(where)
        return real(buf, where, **kw)

    monkeypatch.setattr(gguf_module, "parse_gguf", counting)
    return seen


def test_a_blob_is_parsed_once_and_its_parse_read_back_to_the_type(tmp_path, parses):
    # Arrays of every kind a header holds: numbers, strings (kept as a count), arrays of arrays.
    md = {"tokenizer.ggml.tokens": ["a", "b", "c"], "x.scores": [0.5, 1.5],
          "x.nested": [[1, 2], [3]], "x.flag": True}  # fmt: skip
    link = as_blob(tmp_path / "hub", tiny_llama(tmp_path / "t.gguf", **md), "t-Q4_K_M.gguf")
    first = read_header(link)
    assert parses == [str(link)]
    (kept,) = (Path(os.environ["LLMFIT_CACHE"]) / "gguf-parsed").iterdir()
    assert kept.name == f"{Path(os.path.realpath(link)).name}.v1"
    second = read_header(link)
    assert parses == [str(link)]  # not parsed again
    assert typed(second.metadata) == typed(first.metadata)
    assert (second.path, second.tensors, second.header_bytes, second.data_offset) == (
        first.path, first.tensors, first.header_bytes, first.data_offset,
    )  # fmt: skip
    # Through another snapshot's link to the same blob: the same parse, under that link's path.
    other = tmp_path / "hub" / "snapshots" / "def" / "u.gguf"
    other.parent.mkdir(parents=True)
    other.symlink_to(os.path.realpath(link))
    assert read_header(other).path == other and parses == [str(link)]


def test_a_file_outside_the_cache_is_parsed_each_time_and_nothing_kept(tmp_path, parses):
    path = tiny_llama(tmp_path / "t.gguf")
    read_header(path)
    read_header(path)
    assert parses == [str(path)] * 2
    assert not (Path(os.environ["LLMFIT_CACHE"]) / "gguf-parsed").exists()


def test_an_entry_that_does_not_agree_or_load_is_parsed_again(tmp_path, parses):
    link = as_blob(tmp_path / "hub", tiny_llama(tmp_path / "t.gguf"), "t.gguf")
    fresh = read_header(link)
    (kept,) = (Path(os.environ["LLMFIT_CACHE"]) / "gguf-parsed").iterdir()
    kept.write_bytes(b"not marshal")
    assert read_header(link) == fresh and len(parses) == 2
    # A blob cut short since (a copy interrupted): its size disagrees, and it is truncated.
    blob = Path(os.path.realpath(link))
    blob.write_bytes(blob.read_bytes()[:-100])
    with pytest.raises(WeightsError) as e:
        read_header(link)
    assert "is truncated" in e.value.message and len(parses) == 3


def test_a_header_that_does_not_parse_is_never_kept(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    link = as_blob(tmp_path / "hub", bad, "bad.gguf")
    for _ in range(2):
        with pytest.raises(WeightsError):
            read_header(link)
    assert not (Path(os.environ["LLMFIT_CACHE"]) / "gguf-parsed").exists()


def test_a_header_past_the_cap_is_one_sentence(tmp_path, monkeypatch):
    """The mapping holds the first 64 MB; a header that goes on past them is refused as the
    growing window refused it."""
    monkeypatch.setattr(gguf_module, "MAX_HEADER", 4096)
    md = {"tokenizer.ggml.tokens": [f"token-{i}" for i in range(2000)]}
    path = tmp_path / "m.gguf"
    write_gguf(path, "llama", {"llama.block_count": 1} | md, [("w", (32,), gguf_module_q())])
    with pytest.raises(WeightsError) as e:
        read_header(path)
    assert e.value.message == f"{path}: the header is larger than 0 MB, the most llmfit reads."
    assert parse_gguf  # the real parser stays importable beside the patched cap


def gguf_module_q():
    from fixtures.gguf_files import Q

    return Q.F32


def test_a_file_that_cannot_be_mapped_is_read_in_a_growing_window(tmp_path, monkeypatch):
    """Some file systems refuse mmap: the header is then read as a remote one is, and is the
    same header."""
    import mmap

    path = tiny_llama(tmp_path / "t.gguf", **{"tokenizer.ggml.tokens": ["x"] * 30_000})
    mapped = read_header(path)

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(mmap, "mmap", refuse)
    assert read_header(path) == mapped
