"""KV bytes per token, worked out by hand from the fixture configs."""

from __future__ import annotations

import pytest

from llmfit.plan.model import Shape
from llmfit.sources.config import load_config, model_from_config
from tests.conftest import HUB


def model(repo: str):
    folder = HUB / ("models--" + repo.replace("/", "--")) / "snapshots"
    path = next(folder.iterdir()) / "config.json"
    return model_from_config(load_config(path), path)


def test_qwen3_235b_kv_per_token_is_two_kv_layers_heads_dim_bytes():
    # config.json: 94 layers, 4 KV heads, head_dim 128, bfloat16.
    assert Shape.of(model("Qwen/Qwen3-235B-A22B")).kv_bytes_per_token() == 2 * 94 * 4 * 128 * 2
    assert 2 * 94 * 4 * 128 * 2 == 192_512


def test_llama_31_8b_kv_per_token():
    # 32 layers, 8 KV heads, hidden 4096 / 32 heads = 128.
    assert Shape.of(model("meta-llama/Llama-3.1-8B-Instruct")).kv_bytes_per_token() == 131_072


def test_deepseek_v3_mla_latent_is_stored_once_and_not_split():
    shape = Shape.of(model("deepseek-ai/DeepSeek-V3"))
    # 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B, no factor two.
    assert shape.kv_bytes_per_token() == 61 * (512 + 64) * 2 == 70_272
    # Every tensor-parallel rank holds the whole latent cache.
    assert shape.kv_bytes_per_token(tp=8) == 70_272


def test_kv_heads_split_until_one_per_rank_then_replicated():
    shape = Shape.of(model("Qwen/Qwen3-235B-A22B"))
    assert shape.kv_bytes_per_token(tp=2) == 94 * 2 * 256 * 2
    assert shape.kv_bytes_per_token(tp=4) == 94 * 1 * 256 * 2
    # Past the 4 KV heads each of 8 ranks still keeps one whole head.
    assert shape.kv_bytes_per_token(tp=8) == 94 * 1 * 256 * 2 == 48_128


def test_pipeline_stages_keep_their_own_layers():
    shape = Shape.of(model("meta-llama/Llama-3.1-8B-Instruct"))
    # 32 layers over 2 stages, 8 KV heads over tp 8: 16 × 1 × 256 × 2 B.
    assert shape.kv_bytes_per_token(tp=8, pp=2) == 16 * 1 * 256 * 2
    # 94 layers over 3 stages: the largest stage has 32.
    assert Shape.of(model("Qwen/Qwen3-235B-A22B")).kv_bytes_per_token(4, 3) == 32 * 256 * 2


def test_text_config_is_read_for_a_multimodal_model():
    m = model("google/gemma-3-27b-it")
    # text_config: 62 layers, 32 heads, 16 KV heads, head_dim 128 (not 5376 / 32 = 168).
    assert (m.layers, m.attention_heads, m.kv_heads, m.head_dim) == (62, 32, 16, 128)
    assert m.max_context == 131_072
    assert m.dtype == "bfloat16"  # the top-level "dtype" of a transformers 4.56 config
    assert m.model_type == "gemma3"
    assert m.architecture == "Gemma3ForConditionalGeneration"


@pytest.mark.parametrize(
    ("repo", "experts", "active", "shared"),
    [
        ("Qwen/Qwen3-235B-A22B", 128, 8, None),  # num_experts
        ("mistralai/Mixtral-8x7B-v0.1", 8, 2, None),  # num_local_experts
        ("deepseek-ai/DeepSeek-V3", 256, 8, 1),  # n_routed_experts, n_shared_experts
        ("meta-llama/Llama-3.1-8B-Instruct", None, None, None),
    ],
)
def test_experts_under_any_of_their_names(repo, experts, active, shared):
    m = model(repo)
    assert (m.experts, m.experts_active, m.shared_experts) == (experts, active, shared)


def test_trained_context_and_quantisation():
    ds = model("deepseek-ai/DeepSeek-V3")
    assert ds.max_context == 163_840
    assert ds.quantization == "fp8"
    assert model("Qwen/Qwen3-235B-A22B").max_context == 40_960


def test_a_model_hashes_by_its_names_and_sizes_and_equals_by_every_field():
    """Model.__hash__ reads five fields (the engines' caches look a plan's model up 380 times);
    == still reads them all: a model that differs only in its notes hashes the same, is not
    equal, and is its own key."""
    from dataclasses import replace

    qwen = model("Qwen/Qwen3-235B-A22B")
    noted = replace(qwen, notes=(*qwen.notes, "read with a note"))
    same = replace(qwen)
    # config.json: Qwen3MoeForCausalLM, qwen3_moe, 94 layers, hidden 4096; params unread (None).
    assert hash(qwen) == hash(("Qwen3MoeForCausalLM", "qwen3_moe", 94, 4096, None))
    assert hash(noted) == hash(qwen) and noted != qwen
    assert same == qwen and hash(same) == hash(qwen)
    assert {qwen: 1, noted: 2, same: 3} == {qwen: 3, noted: 2}
