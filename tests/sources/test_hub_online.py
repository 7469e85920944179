"""The real huggingface_hub client against the loopback Hub: metadata only, cached, then offline."""

from __future__ import annotations

import json

from llmfit.sources.repo import load_repo
from tests.hubrepos import header_bytes


def test_a_repo_nobody_downloaded_is_planned_from_its_metadata(hubserver):
    repo = load_repo("Qwen/Qwen3-8B")
    assert repo.source == "hub"
    assert repo.commit == hubserver.repos["Qwen/Qwen3-8B"].commit
    (art,) = repo.artifacts
    assert art.bytes == 16_381_470_720
    assert art.shards == 5
    # Exact, from the five headers: the parameter count the Hub reports for Qwen3-8B.
    assert art.params == 8_190_735_360
    assert repo.model.params == 8_190_735_360


def test_only_metadata_is_sent(hubserver):
    load_repo("Qwen/Qwen3-8B")
    fixture = hubserver.repos["Qwen/Qwen3-8B"]
    weights = sum(s.length for n, s in fixture.files.items() if n.endswith(".safetensors"))
    assert weights == 16_381_470_720 + header_bytes(fixture)
    sent_for = {}
    for r in hubserver.requests:
        sent_for[r.path] = sent_for.get(r.path, 0) + r.sent
    shard_bytes = sum(v for k, v in sent_for.items() if k.endswith(".safetensors"))
    # 8 bytes of length and the JSON header of each of the five shards, nothing of the weights.
    assert shard_bytes == header_bytes(fixture) == 45_952
    small = sum(
        len(fixture.files[f].content) for f in ("config.json", "model.safetensors.index.json")
    )
    info = sum(v for k, v in sent_for.items() if k.startswith("/api/"))
    assert hubserver.bytes_sent == shard_bytes + small + info
    assert hubserver.bytes_sent < 200_000


def test_the_small_files_land_in_the_hugging_face_cache(hubserver, tmp_path):
    repo = load_repo("Qwen/Qwen3-8B")
    folder = tmp_path / "hf-cache" / "models--Qwen--Qwen3-8B"
    assert (folder / "refs" / "main").read_text() == repo.commit
    snap = folder / "snapshots" / repo.commit
    assert json.loads((snap / "config.json").read_text())["model_type"] == "qwen3"
    assert (snap / "model.safetensors.index.json").is_file()
    assert not list(snap.glob("*.safetensors"))


def test_offline_after_online_is_the_same_repo_and_asks_nothing(hubserver, monkeypatch):
    online = load_repo("Qwen/Qwen3-8B")
    hubserver.reset()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = load_repo("Qwen/Qwen3-8B")
    assert hubserver.requests == []
    assert offline.source == "cache"
    assert (offline.model, offline.artifacts, offline.commit) == (
        online.model,
        online.artifacts,
        online.commit,
    )


def test_a_second_online_run_of_the_same_commit_reads_no_headers(hubserver):
    load_repo("Qwen/Qwen3-8B")
    hubserver.reset()
    again = load_repo("Qwen/Qwen3-8B")
    assert again.artifacts[0].params == 8_190_735_360
    assert hubserver.count(contains=".safetensors") == 0
    assert hubserver.count(contains="/resolve/") == 0
    # One request: which commit is main now.
    assert [r.path for r in hubserver.requests] == ["/api/models/Qwen/Qwen3-8B"]


def test_an_index_naming_a_shard_the_repo_lacks_is_one_sentence(hubserver, tmp_path):
    import pytest

    from llmfit.errors import WeightsError
    from tests.hubserver import FileSpec

    fixture = hubserver.repos["Qwen/Qwen3-8B"]
    index = json.loads(fixture.files["model.safetensors.index.json"].content)
    index["weight_map"]["lm_head.weight"] = "../../outside.safetensors"
    fixture.files["model.safetensors.index.json"] = FileSpec(json.dumps(index).encode())
    with pytest.raises(WeightsError) as e:
        load_repo("Qwen/Qwen3-8B")
    assert e.value.message == (
        "Qwen/Qwen3-8B/model.safetensors.index.json: weight_map gives tensor 'lm_head.weight' the "
        "file '../../outside.safetensors', which cannot be a file of the repository: it has an "
        "empty, '.' or '..' part."
    )
    assert e.value.exit_code == 3
    assert hubserver.count(contains="outside") == 0
    # Refused before it was kept: the index that does not parse is not in the cache, so the
    # next run asks for it again (twice this run: the copy found bad was fetched once more).
    assert hubserver.count("GET", "model.safetensors.index.json") == 2
    assert not list(
        tmp_path.glob("hf-cache/models--Qwen--Qwen3-8B/snapshots/*/model.safetensors.index.json")
    )
