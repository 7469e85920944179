"""Broken and hostile configs and indexes: each one sentence, or an answer with its assumption said.

Every case here is a row of docs/reliability.md.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from llmfit.errors import CacheDamaged, ConfigError, WeightsError
from llmfit.sources.config import load_config, model_from_config
from llmfit.sources.repo import load_repo
from tests.conftest import HUB

BASE = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "model_type": "llama"}


def bad(cfg: dict) -> str:
    with pytest.raises(ConfigError) as e:
        model_from_config(cfg, "config.json")  # type: ignore[arg-type]
    return e.value.message


def test_config_that_is_not_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{'layers': 2}")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert e.value.message == (
        f"{p} is not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)."
    )


def test_config_that_is_a_json_array(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("[1, 2]")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert e.value.message == f"{p} holds a JSON list, not an object."


def test_config_that_is_a_git_lfs_pointer(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 12\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert e.value.message == f"{p} is a Git LFS pointer, not the config itself."
    assert e.value.hint == "fetch the file itself: git lfs pull, or hf download"


def test_config_link_to_a_missing_blob(tmp_path):
    (tmp_path / "config.json").symlink_to(tmp_path / "blobs" / "abc")
    with pytest.raises(CacheDamaged) as e:
        load_repo(str(tmp_path))
    assert e.value.message == (
        f"{tmp_path}: config.json links to {tmp_path / 'blobs' / 'abc'}, which is not there: "
        "the cache is damaged."
    )


def test_zero_layers():
    assert bad({**BASE, "num_hidden_layers": 0}) == (
        "config.json: num_hidden_layers is 0, which must be positive."
    )


def test_negative_heads():
    assert bad({**BASE, "num_attention_heads": -8}) == (
        "config.json: num_attention_heads is -8, which must be positive."
    )


def test_a_size_that_is_a_string():
    assert bad({**BASE, "hidden_size": "4096"}) == (
        "config.json: hidden_size is '4096', not a whole number."
    )


def test_heads_that_do_not_divide_into_kv_heads():
    assert bad({**BASE, "num_key_value_heads": 3}) == (
        "config.json: 4 attention heads do not divide into 3 KV heads, so the config describes "
        "no model an engine can load."
    )


def test_hidden_size_that_does_not_divide_by_the_heads_is_said():
    m = model_from_config({**BASE, "hidden_size": 66}, "config.json")  # type: ignore[arg-type]
    assert m.head_dim == 16
    assert (
        "hidden_size 66 does not divide by 4 heads: head_dim is taken as 16, as vLLM's integer "
        "division takes it."
    ) in m.notes


def test_a_model_type_that_is_not_a_name():
    assert bad({**BASE, "model_type": ["llama"]}) == (
        "config.json: model_type is ['llama'], not a name."
    )


def test_an_mla_rank_that_is_not_a_number():
    cfg = {**BASE, "model_type": "deepseek_v3", "kv_lora_rank": "512"}
    assert bad(cfg) == "config.json: kv_lora_rank is '512', not a whole number."


def test_shared_experts_that_are_not_a_number():
    cfg = {**BASE, "num_experts": 8, "n_shared_experts": "one"}
    assert bad(cfg) == "config.json: n_shared_experts is 'one', not a whole number."


def test_a_config_without_layers():
    assert bad({"num_attention_heads": 4, "hidden_size": 64}) == (
        "config.json gives no num_hidden_layers, so the model's memory cannot be sized."
    )


def test_an_index_total_size_that_disagrees_with_the_headers_is_said_and_headers_win(tmp_path):
    cfg = json.loads(
        next((HUB / "models--Qwen--Qwen3-8B" / "snapshots").glob("*/config.json")).read_text()
    )
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(
        {"w": np.zeros((4, 4), dtype=np.float16)},
        str(tmp_path / "model-00001-of-00001.safetensors"),
    )
    index = {
        "metadata": {"total_size": 999},
        "weight_map": {"w": "model-00001-of-00001.safetensors"},
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    repo = load_repo(str(tmp_path))
    # 4 × 4 × 2 B in the header.
    assert repo.artifacts[0].bytes == 32
    assert (
        "model.safetensors.index.json says metadata.total_size is 999 bytes, but the shards' "
        "headers hold 32: the headers are used."
    ) in repo.warnings


def test_an_index_with_a_negative_total_size(tmp_path):
    from llmfit.sources.safetensors import read_index

    p = tmp_path / "model.safetensors.index.json"
    p.write_text(json.dumps({"metadata": {"total_size": -5}, "weight_map": {}}))
    with pytest.raises(WeightsError) as e:
        read_index(p)
    assert e.value.message == f"{p}: metadata.total_size is -5, not a positive byte count."


def test_a_safetensors_file_shorter_than_its_length_field(tmp_path):
    from llmfit.sources.safetensors import read_header

    p = tmp_path / "model.safetensors"
    p.write_bytes(struct.pack("<Q", 8)[:5])
    with pytest.raises(WeightsError) as e:
        read_header(p)
    assert e.value.message == f"{p}: too short to be a safetensors file (5 bytes)."
