"""sources/listing.py: the cache's model repositories, and the Hub's search with a timeout."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from huggingface_hub import HfApi

from llmfit.errors import HubTimeout
from llmfit.sources.listing import Listed, cached_models, search_models
from tests.conftest import HUB


def test_the_cache_lists_its_model_repositories_by_id():
    listing = cached_models(HUB)
    ids = [r.repo_id for r in listing.repos]
    assert ids == sorted(ids)
    assert Listed("Qwen/Qwen3-8B") in listing.repos
    assert Listed("llmfit-fixtures/Tiny-Llama-GGUF") in listing.repos
    assert listing.problems == ()


def test_no_cache_is_an_empty_listing(tmp_path):
    assert cached_models(tmp_path / "nothing").repos == ()


def test_a_repository_cached_by_commit_only_is_listed_at_that_commit(tmp_path):
    commit = "a" * 40
    snap = tmp_path / "models--org--m" / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert cached_models(tmp_path).repos == (Listed("org/m", commit),)


def test_search_asks_for_the_most_downloaded_first(monkeypatch):
    asked = {}

    def list_models(self, **kwargs):
        asked.update(kwargs)
        return iter([SimpleNamespace(id="a/b"), SimpleNamespace(id="c/d")])

    monkeypatch.setattr(HfApi, "list_models", list_models)
    assert search_models("qwen", 5) == (Listed("a/b"), Listed("c/d"))
    assert asked == {"filter": None, "search": "qwen", "sort": "downloads", "limit": 5}


def test_a_search_the_hub_does_not_answer_in_time_is_a_timeout(monkeypatch):
    release = threading.Event()

    def list_models(self, **kwargs):
        release.wait(5)
        return iter([])

    monkeypatch.setattr(HfApi, "list_models", list_models)
    try:
        with pytest.raises(HubTimeout, match="did not answer the search for 'qwen' within 0.1 s"):
            search_models("qwen", 5, timeout=0.1)
    finally:
        release.set()


def test_a_search_whose_hub_name_does_not_resolve_says_so(monkeypatch):
    # huggingface_hub tries again until the time is up; the name not resolving is the cause
    # (issue 34: the sentence blamed a time-out).
    import socket

    from huggingface_hub import constants

    from llmfit.errors import HubUnreachable

    release = threading.Event()

    def list_models(self, **kwargs):
        release.wait(5)
        return iter([])

    def getaddrinfo(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(HfApi, "list_models", list_models)
    monkeypatch.setattr(constants, "ENDPOINT", "https://hub.example.invalid")
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    try:
        with pytest.raises(HubUnreachable, match="the name 'hub.example.invalid' does not resolve"):
            search_models("qwen", 5, timeout=0.1)
    finally:
        release.set()
