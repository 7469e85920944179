"""A GGUF-only repository nobody downloaded, planned from the Hub: headers by growing range only,
cached by commit, and planned again offline with no request at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llmfit.sources.gguf import parse_gguf
from llmfit.sources.repo import load_repo
from tests.conftest import EXAMPLE_FLEET
from tests.hubrepos import gguf_header_bytes, gguf_repo
from tests.hubserver import FixtureRepo

REPO = "org/Tiny-Llama-GGUF"


@pytest.fixture(scope="module")
def gguf_fixture(tmp_path_factory) -> FixtureRepo:
    # 30,000 tokens make each full header 471,724 bytes, the size of a small real vocabulary's.
    return gguf_repo(REPO, tmp_path_factory.mktemp("gguf-src"))


@pytest.fixture
def served(hubserver, gguf_fixture) -> FixtureRepo:
    hubserver.add(gguf_fixture)
    return gguf_fixture


def gguf_sent(hubserver) -> int:
    return sum(r.sent for r in hubserver.requests if r.path.endswith(".gguf"))


def test_a_gguf_only_repository_is_planned_from_its_headers(hubserver, served):
    repo = load_repo(REPO)
    assert repo.source == "hub" and repo.commit == served.commit
    assert repo.model.architecture == "llama" and repo.model.layers == 4
    assert repo.model.vocab_size == 30_000
    assert [(a.name, a.quant, a.shards, a.path) for a in repo.artifacts] == [
        ("Tiny-Llama-Q4_K_M.gguf", "Q4_K_M", 1, None),
        ("Tiny-Llama-Q6_K.gguf", "Q6_K", 1, None),
        ("Tiny-Llama-Q8_0.gguf", "Q8_0", 2, None),
    ]
    # The bytes each file's header states, to the byte, and both parts of the split one.
    stated = {
        n: parse_gguf(s.content, n).data_bytes for n, s in served.files.items() if ".gguf" in n
    }
    by_name = {a.name: a.bytes for a in repo.artifacts}
    assert by_name["Tiny-Llama-Q4_K_M.gguf"] == stated["Tiny-Llama-Q4_K_M.gguf"]
    assert by_name["Tiny-Llama-Q8_0.gguf"] == (
        stated["Tiny-Llama-Q8_0-00001-of-00002.gguf"]
        + stated["Tiny-Llama-Q8_0-00002-of-00002.gguf"]
    )
    # By hand: 1,118,175,232 Q6_K weights at 210 B a 256, and 36,864 f32 norm weights.
    assert by_name["Tiny-Llama-Q6_K.gguf"] == 917_253_120 + 147_456


def test_only_the_headers_are_read_within_a_tenth_more(hubserver, served):
    load_repo(REPO)
    headers = gguf_header_bytes(served)
    assert headers == 471_724 * 2 + 470_703 + 1_262
    weights = sum(s.length for n, s in served.files.items() if n.endswith(".gguf"))
    assert weights > 2.7e9
    # Per file: a 64 KB first window, then to the parser's estimate (the tokens at the length
    # seen so far, the tensor infos at the least they take, never less than an 8 KB step), so
    # the three full headers are read in four requests each and at most 8 KB past their end:
    # 476,128 + 476,128 + 475,536 bytes; the second part's header is 1,262 bytes, and its
    # 64 KB first window is the rest.
    assert gguf_sent(hubserver) == 476_128 * 2 + 475_536 + (64 << 10) == 1_493_328
    assert len([r for r in hubserver.requests if r.path.endswith(".gguf")]) == 3 * 4 + 1
    assert gguf_sent(hubserver) <= 1.1 * headers
    # Besides the headers, one request: the repository's info (its file list with sizes).
    assert [r.path for r in hubserver.requests if not r.path.endswith(".gguf")] == [
        f"/api/models/{REPO}"
    ]


def test_offline_after_online_is_the_same_plan_and_asks_nothing(hubserver, served, monkeypatch):
    online = load_repo(REPO)
    hubserver.reset()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = load_repo(REPO)
    assert hubserver.requests == []
    assert offline.source == "cache"
    assert (offline.model, offline.artifacts) == (online.model, online.artifacts)


def test_a_second_online_run_reads_no_header(hubserver, served):
    first = load_repo(REPO)
    hubserver.reset()
    again = load_repo(REPO)
    assert gguf_sent(hubserver) == 0
    assert [r for r in hubserver.requests if ".gguf" in r.path] == []
    assert again.artifacts == first.artifacts


def test_offline_without_a_cached_header_says_so(hubserver, served, monkeypatch, tmp_path):
    load_repo(REPO)
    cache = Path(os.environ["LLMFIT_CACHE"])
    (victim,) = cache.rglob("Tiny-Llama-Q6_K.gguf.header")
    victim.unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = load_repo(REPO)
    assert [a.quant for a in repo.artifacts] == ["Q4_K_M", "Q8_0"]
    assert repo.warnings == (
        "Tiny-Llama-Q6_K.gguf: the header of Tiny-Llama-Q6_K.gguf is not in llmfit's cache, so it "
        "is not planned (one online run reads it).",
    )


def test_the_command_fetches_the_quant_by_its_tag(run_online, served):
    code, out, err = run_online(REPO, "--fleet", str(EXAMPLE_FLEET), "--context", "4096", "--json",
                                "--rank", "cards")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    best = doc["options"][0]
    assert best["artifact"] == "Tiny-Llama-Q8_0.gguf"
    # Not on disk: llama-server fetches both parts by the quant's tag.
    assert best["commands"][0]["argv"] == [
        "llama-server", "-hf", f"{REPO}:Q8_0", "--ctx-size", "4096", "--n-gpu-layers", "5",
        "--flash-attn", "on", "--host", "0.0.0.0", "--port", "8080",
    ]  # fmt: skip
