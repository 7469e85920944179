"""Resolving repositories in a real cache layout, and sizing weights from index and headers."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from llmfit.errors import RepoNotFound, UsageError, WeightsError
from llmfit.sources.cache import RepoRef, find_snapshot, parse_ref, require_snapshot
from llmfit.sources.repo import load_repo
from llmfit.sources.safetensors import read_header
from tests.conftest import HUB

LLAMA_COMMIT = (HUB / "models--meta-llama--Llama-3.1-8B-Instruct" / "refs" / "main").read_text()


def test_parse_ref_reads_a_revision():
    assert parse_ref("Qwen/Qwen3-8B@v1.0") == RepoRef("Qwen/Qwen3-8B", "v1.0")
    assert parse_ref("Qwen/Qwen3-8B") == RepoRef("Qwen/Qwen3-8B", None)


def test_parse_ref_refuses_what_is_not_a_repo_id():
    with pytest.raises(UsageError) as e:
        parse_ref("not a repo")
    assert e.value.message == (
        "'not a repo' is neither a directory nor a repository id like Qwen/Qwen3-8B[@revision]."
    )


def test_main_resolves_through_refs_and_a_commit_resolves_directly():
    snap = find_snapshot(RepoRef("meta-llama/Llama-3.1-8B-Instruct"), HUB)
    assert snap.commit == LLAMA_COMMIT
    by_commit = find_snapshot(RepoRef("meta-llama/Llama-3.1-8B-Instruct", LLAMA_COMMIT), HUB)
    assert by_commit.path == snap.path


def test_hf_home_is_respected(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    (tmp_path / "hub").symlink_to(HUB)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    repo = load_repo("Qwen/Qwen3-8B")
    assert repo.source == "cache"
    assert repo.artifacts[0].bytes == 16_381_470_720


def test_a_repo_not_in_the_cache_names_itself_and_the_cache():
    with pytest.raises(RepoNotFound) as e:
        require_snapshot(RepoRef("nobody/nothing", "v2"), HUB)
    assert e.value.message == (
        f"nobody/nothing at revision v2 is not in the local Hugging Face cache ({HUB})."
    )
    assert e.value.hint == (
        "hf download nobody/nothing --include config.json '*.safetensors.index.json' --revision v2"
    )


def test_index_total_size_and_shard_count_from_the_names(hub):
    repo = load_repo("Qwen/Qwen3-235B-A22B")
    art = repo.artifacts[0]
    assert (art.bytes, art.shards, art.quant) == (470_187_269_120, 118, "bf16")
    assert repo.commit == (hub / "models--Qwen--Qwen3-235B-A22B" / "refs" / "main").read_text()
    # Only the index is cached, so the parameter count is unknown rather than guessed.
    assert repo.model.params is None


def write_dir(tmp_path, tensors):
    cfg = json.loads(
        (HUB / "models--Qwen--Qwen3-8B" / "snapshots").glob("*/config.json").__next__().read_text()
    )
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})


def test_single_file_header_gives_bytes_and_parameters(tmp_path):
    write_dir(
        tmp_path,
        {"a": np.zeros((3, 4), dtype=np.float16), "b": np.zeros((5,), dtype=np.float32)},
    )
    repo = load_repo(str(tmp_path))
    art = repo.artifacts[0]
    # 3 × 4 × 2 B + 5 × 4 B of data; 12 + 5 parameters.
    assert art.bytes == 44
    assert repo.model.params == 17
    assert repo.source == "path"


def test_local_directory_without_config_is_one_sentence(tmp_path):
    with pytest.raises(Exception) as e:
        load_repo(str(tmp_path))
    assert e.value.message == f"{tmp_path} has no config.json ({tmp_path})."


def test_header_length_past_the_file_is_refused(tmp_path):
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(struct.pack("<Q", 10_000) + b"{}")
    with pytest.raises(WeightsError) as e:
        read_header(bad)
    assert e.value.message == (
        f"{bad}: the safetensors header claims 10000 bytes, but the file holds 2 after the "
        "length and the format allows at most 100000000."
    )


def test_a_dtype_that_is_not_a_string_is_one_sentence_found_by_fuzzing():
    from llmfit.sources.safetensors import parse_header

    raw = json.dumps({"": {"dtype": [], "shape": [], "data_offsets": [0, 0]}}).encode()
    with pytest.raises(WeightsError) as e:
        parse_header(raw, "x.safetensors")
    assert (
        e.value.message
        == "x.safetensors: tensor '' has dtype [], which is not a safetensors dtype."
    )


def test_a_byte_range_that_disagrees_with_the_shape_is_refused():
    from llmfit.sources.safetensors import parse_header

    raw = json.dumps({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 10]}}).encode()
    with pytest.raises(WeightsError) as e:
        parse_header(raw, "x.safetensors")
    assert e.value.message == (
        "x.safetensors: tensor 'w' spans 10 bytes, but BF16 of shape [2, 3] needs 12."
    )
