"""llmfit's metadata cache as a hostile disk could hold it (issue 12): entries that do not parse,
that are larger than their kind, that list names no repository has, or that lead out of the cache
through a planted link, read as missing; nothing is written outside it."""

from __future__ import annotations

import json

import pytest

from llmfit.sources.metacache import KINDS, MetaCache
from llmfit.sources.repo import load_repo
from tests.hubrepos import gguf_repo

REPO = "org/model"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def meta(tmp_path) -> MetaCache:
    return MetaCache(tmp_path / "llmfit")


def test_a_header_larger_than_its_kind_reads_as_missing_and_is_discarded(meta, monkeypatch):
    monkeypatch.setitem(KINDS, "safetensors", 16)
    path = meta._header_path(REPO, COMMIT, "safetensors", "m.safetensors")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x" * 17)
    assert meta.header(REPO, COMMIT, "m.safetensors", "safetensors") is None
    assert not path.exists()


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"files": ["a"]}',
        b'{"files": {"../../x": 1}}',
        b'{"files": {"/etc/passwd": 1}}',
        b"[" * 100 + b"]" * 100,
        b'{"files": {"a": 1}}'.decode().encode("utf-16"),
    ],
)
def test_a_listing_that_is_not_one_reads_as_missing_and_is_discarded(meta, body):
    path = meta._commit_dir(REPO, COMMIT) / "listing.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(body)
    assert meta.listing(REPO, COMMIT) is None
    assert not path.exists()


def test_listed_sizes_that_are_no_byte_counts_read_as_unknown(meta):
    path = meta._commit_dir(REPO, COMMIT) / "listing.json"
    path.parent.mkdir(parents=True)
    sizes = {"a": -1, "b": True, "c": 1.5, "d": "7", "e": 1 << 70, "f": 12}
    path.write_text(json.dumps({"files": sizes}))
    assert meta.listing(REPO, COMMIT) == {
        "a": None, "b": None, "c": None, "d": None, "e": None, "f": 12,
    }  # fmt: skip


def test_a_link_planted_in_the_cache_is_neither_read_nor_written_through(meta, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "m.safetensors.header").write_bytes(b"{}")
    folder = meta.root / "models--org--model" / COMMIT
    folder.mkdir(parents=True)
    (folder / "safetensors").symlink_to(outside)
    assert meta.header(REPO, COMMIT, "m.safetensors", "safetensors") is None
    meta.put_header(REPO, COMMIT, "n.safetensors", "safetensors", b"{}")
    assert sorted(p.name for p in outside.iterdir()) == ["m.safetensors.header"]


@pytest.mark.parametrize(
    ("repo_id", "commit", "name"),
    [
        ("org/model", "../../../x" + "0" * 30, "m"),
        ("../..", COMMIT, "m"),
        ("org/model", COMMIT, "../../../m"),
        ("org/model", COMMIT, "/etc/m"),
    ],
)
def test_names_that_would_leave_the_cache_are_refused(meta, tmp_path, repo_id, commit, name):
    assert meta.header(repo_id, commit, name, "gguf") is None
    with pytest.raises(ValueError):
        meta.put_header(repo_id, commit, name, "gguf", b"x")
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


# -- GGUF headers, through the Hub ----------------------------------------------------------------


@pytest.fixture(scope="module")
def gguf_fixture(tmp_path_factory):
    return gguf_repo("org/Tiny-Llama-GGUF", tmp_path_factory.mktemp("gguf-src"), tokens=2000)


def test_a_damaged_gguf_header_is_discarded_and_read_again(hubserver, gguf_fixture, monkeypatch):
    hubserver.add(gguf_fixture)
    repo_id, commit = gguf_fixture.repo_id, gguf_fixture.commit
    first = load_repo(repo_id)
    meta = MetaCache()
    name = "Tiny-Llama-Q4_K_M.gguf"
    path = meta._header_path(repo_id, commit, "gguf", name)
    path.write_bytes(b"GGUF\x01\x00\x00\x00")  # GGUF version 1: a header that does not parse
    # Offline, it is discarded, and that quant is said to be uncached rather than failing the plan.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = load_repo(repo_id)
    assert not path.exists()
    assert name not in [a.name for a in offline.artifacts]
    assert any(name in w and "not in llmfit's cache" in w for w in offline.warnings)
    # Online, it is read again, and the plan is the first one.
    monkeypatch.delenv("HF_HUB_OFFLINE")
    hubserver.reset()
    again = load_repo(repo_id)
    assert again.artifacts == first.artifacts
    assert hubserver.count("GET", name) >= 1
    assert meta.header(repo_id, commit, name, "gguf") is not None
