"""The models of 2026 read from what their configs say, not from a list of names.

Each figure is worked out by hand from the real config.json (fixtures/calibration/configs, copies
of the shared fixtures) and the vLLM 0.34.0 wheel's code, named beside it. A token's KV bytes are
those of the layers that grow with the context, at the model's bf16 (2 B an element).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from llmfit.plan.engines.vllm_kv import mamba_page_bytes
from llmfit.plan.engines.vllm_memory import GIB, Rank, Settings, estimate
from llmfit.plan.engines.vllm_versions import VllmVersion
from llmfit.plan.layout import Card
from llmfit.plan.model import AttentionKind, Shape
from llmfit.sources.config import KNOWN_TYPES, load_config, model_from_config

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
CONFIGS = ROOT / "calibration" / "configs"
H100 = Card("h100-80g", 85_045_477_376)
H200 = Card("h200-141g", 150_754_820_096)


def model(name: str):
    path = CONFIGS / f"{name}.json"
    return model_from_config(load_config(path), path)


def per_token(name: str) -> int:
    return Shape.of(model(name)).kv_bytes_per_token()


def test_glm_4_7_flash_is_mla_though_no_list_of_llmfit_names_it():
    # glm4_moe_lite: kv_lora_rank 512 + qk_rope_head_dim 64 = a 576-element latent a layer
    # (vllm/transformers_utils/model_arch_config_convertor.py is_deepseek_mla lists it):
    # 47 layers × 576 × 2 B.
    m = model("zai-org--GLM-4.7-Flash")
    assert per_token("zai-org--GLM-4.7-Flash") == 47 * 576 * 2 == 54_144
    assert (m.kv_heads, m.head_dim) == (1, 576)
    # No note about head_dim from hidden_size / heads (2048 / 20): MLA's heads are its own.
    assert m.notes == ()


def test_sparse_attention_indexers_cache_their_keys_beside_the_latent():
    # vllm/models/deepseek_v32/attention.py DeepseekV32Indexer: index_head_dim 128 fp8 bytes and
    # a 4-byte scale per 128 (uint8 DeepseekV32IndexerCache), on every layer with an indexer.
    assert per_token("deepseek-ai--DeepSeek-V3.2") == 61 * (1_152 + 132) == 78_324
    assert per_token("zai-org--GLM-5-FP8") == 78 * (1_152 + 132) == 100_152
    # GLM-5.2 shares the top-k: indexer_types names 21 "full" layers of 78
    # (vllm/model_executor/models/utils.py compute_skip_topk_layers).
    assert per_token("zai-org--GLM-5.2-FP8") == 78 * 1_152 + 21 * 132 == 92_628
    g = model("zai-org--GLM-5.2-FP8").layer_groups[0]
    assert (g.kind, g.indexer_layers, g.indexer_bytes) == (AttentionKind.MLA, 21, 132)


def test_kimi_linear_mla_on_its_full_layers_and_kda_state_on_the_rest():
    # linear_attn_config: full_attn_layers [4, 8, ..., 27] (7 layers, MLA), kda_layers the 20
    # others (numbered from 1: KimiLinearConfig.is_kda_layer).
    m = model("moonshotai--Kimi-Linear-48B-A3B-Instruct")
    assert per_token("moonshotai--Kimi-Linear-48B-A3B-Instruct") == 7 * 1_152 == 8_064
    # kda_state_shape: conv (4 - 1) × 3 × 32 heads × 128 in bf16 = 73,728 B, recurrent 32 × 128
    # × 128 in fp32 (kda_state_dtype, auto) = 2,097,152 B; 20 layers: 43.4 MB a sequence.
    kda = next(g for g in m.layer_groups if g.kind is AttentionKind.LINEAR)
    assert (kda.layers, kda.state_kind) == (20, "kda")
    assert kda.state_bytes == 3 * 3 * 32 * 128 * 2 + 32 * 128 * 128 * 4 == 2_170_880
    assert Shape.of(m).fixed_kv_bytes(1, 1, 32_768) == 20 * 2_170_880 == 43_417_600
    # vLLM's page for one KDA layer is the same state at TP 1, a half of each at TP 2.
    v = VllmVersion.parse("0.33")
    assert mamba_page_bytes(m, v, 1) == 2_170_880
    assert mamba_page_bytes(m, v, 2) == 2_170_880 // 2
    assert not any("KDA" in n for n in m.notes)


def test_gemma_4_global_layers_have_their_own_heads():
    # models/gemma4.py Gemma4DecoderLayer takes each layer's per_layer_config: a global layer has
    # num_global_key_value_heads of global_head_dim. gemma-4-31B: 10 global layers × 4 × 512 × 2
    # (K and V) × 2 B; 26B-A4B: 5 × 2 × 512 × 2 × 2.
    assert per_token("google--gemma-4-31B-it") == 10 * 4 * 512 * 2 * 2 == 81_920
    assert per_token("google--gemma-4-26B-A4B-it") == 5 * 2 * 512 * 2 * 2 == 20_480
    # The sliding layers keep 16 (8) KV heads of 256.
    g31 = {g.kind: g for g in model("google--gemma-4-31B-it").layer_groups}
    assert (g31[AttentionKind.SLIDING].kv_heads, g31[AttentionKind.SLIDING].head_dim) == (16, 256)
    # gemma-4-E2B: its last num_kv_shared_layers 20 reuse earlier layers' K and V and cache none;
    # of the 15 that cache, 3 are global (1 head, num_global_key_value_heads null, of 512).
    e2b = model("google--gemma-4-E2B-it")
    assert sum(g.layers for g in e2b.layer_groups) == 15
    assert per_token("google--gemma-4-E2B-it") == 3 * 1 * 512 * 2 * 2 == 6_144


def test_gemma_4_sliding_blocks_grow_to_the_global_page():
    # kv_cache_planning.py unify_kv_cache_spec_page_size: a global layer's page (16 tokens × 4
    # heads × 1,024 × 2 B = 131,072 B) is what a sliding layer's 16 × 16 × 512 × 2 = 262,144 B
    # is not; the global layers' blocks grow 2 × to 32 tokens, so both pages are 262,144 B.
    r = estimate(
        model("google--gemma-4-31B-it"),
        62_000_000_000,
        Rank(),
        H200,
        Settings(version=VllmVersion.parse("0.33"), max_model_len=32_768),
    )
    assert r.layout is not None
    assert r.layout.page_bytes == 16 * 16 * 256 * 2 * 2 == 262_144
    kinds = {k.kind: k for k in r.layout.kinds}
    assert kinds["full"].block_size == 32 and kinds["sliding"].block_size == 0
    # A request of 32,768 tokens: 1,024 blocks of 32 in the global group.
    assert kinds["full"].blocks_per_request == 1_024


def test_qwen3_5_state_in_the_dtype_its_config_names():
    # Qwen3_5ForConditionalGenerationConfig (vllm/model_executor/models/config.py) sets
    # --mamba-ssm-cache-dtype to the config's mamba_ssm_dtype, float32: per GDN layer a conv
    # (4 - 1) × (2 × 16 × 128 + 32 × 128) × 2 B = 49,152 B and a 32 × 128 × 128 × 4 B =
    # 2,097,152 B state; 30 layers: 64.4 MB a sequence.
    m = model("Qwen--Qwen3.5-35B-A3B")
    assert Shape.of(m).fixed_kv_bytes(1, 1, 32_768) == 30 * (49_152 + 2_097_152) == 64_389_120
    assert mamba_page_bytes(m, VllmVersion.parse("0.33"), 1) == 49_152 + 2_097_152


def test_glm_4_7_flash_mtp_layer_is_not_loaded_with_its_embedding_and_head():
    # The checkpoint: 31,221,488,576 parameters in bf16 (62,442,977,152 B, 58.15 GiB). Its MTP
    # layer 47 (glm4_moe_lite_mtp.py) carries a MoE layer and its own embedding and shared head
    # (154,880 × 2,048 each); vLLM skips all of it without speculative decoding, 55.8 GiB loaded.
    m = model("zai-org--GLM-4.7-Flash")
    total = 31_221_488_576 * 2
    r = estimate(m, total, Rank(), H100, Settings(version=VllmVersion.parse("0.33")))
    loaded = (total - r.weights.skipped) / GIB
    assert loaded == pytest.approx(55.8, rel=0.05)
    assert r.weights.skipped >= 2 * 154_880 * 2_048 * 2


def test_deepseek_v3_2_indexer_is_whole_on_every_rank():
    # DeepseekV32Indexer's wq_b is a ReplicatedLinear and wk_weights_proj disable_tp: whole on
    # each of 8 ranks. The checkpoint's 642.13 GiB (163 files, the fixture's meta.json): 80.42 GiB
    # a rank at TP 8 (80.10 when the indexer was split).
    m = model("deepseek-ai--DeepSeek-V3.2")
    r = estimate(
        m, int(642.13 * GIB), Rank(tp=8), H200, Settings(version=VllmVersion.parse("0.33"))
    )
    assert r.weights.total / GIB == pytest.approx(80.42, rel=0.05)
    # Per layer, replicated: wq_b 1,536 × 128 × 64 at fp8, wk_weights_proj 7,168 × (128 + 64)
    # and k_norm in bf16.
    per_layer = 1_536 * 128 * 64 + (7_168 * 192 + 256) * 2
    assert m.shapes is not None and len(m.shapes.indexer_layers) == 61
    assert r.weights.replicated > 61 * per_layer


def all_configs() -> list[Path]:
    return sorted(CONFIGS.glob("*.json")) + sorted((ROOT / "src").glob("*[!g].json"))


@pytest.mark.parametrize("path", all_configs(), ids=lambda p: p.stem)
def test_every_fixture_model_is_modelled_or_says_what_is_not(path: Path):
    cfg = json.loads(path.read_text())
    if "num_hidden_layers" not in {**cfg, **(cfg.get("text_config") or {})}:
        pytest.skip("not a model config")
    m = model_from_config(cfg, path)
    text = cfg.get("text_config") or cfg
    merged = {**cfg, **text}
    # A config with MLA's keys is never planned as plain attention.
    if merged.get("kv_lora_rank") and merged.get("qk_rope_head_dim"):
        assert all(g.kind is not AttentionKind.FULL for g in m.layer_groups)
    # A model type llmfit has not checked is named in a note; keys it does not model are named.
    if (text.get("model_type") or cfg.get("model_type")) not in KNOWN_TYPES:
        assert any("model_type" in n for n in m.notes)
    for key in m.unmodelled:
        assert any(key in n and "estimate" in n for n in m.notes)
    assert m.unmodelled == UNMODELLED.get(path.stem, ())


# What each fixture config gives that changes what vLLM 0.34 holds and llmfit does not model,
# found by reading every key of every fixture config against the 0.34.0 wheel's model code:
# - Gemma 4 (26B-A4B, 31B): attention_k_eq_v. Their global layers ship k_proj only and
#   vllm/model_executor/models/gemma4.py _gemma4_layer_weights_mapper loads K into the V slot
#   of a whole QKVParallelLinear: 10 × 4 × 512 × 5,376 × 2 B = 220 MB more on the card than the
#   checkpoint for 31B (5 × 2 × 512 × 2,816 × 2 B = 29 MB for 26B-A4B). E2B gives it false.
# Read and found to leave memory as modelled: MiniMax-M2.x's use_mtp / num_mtp_modules (its
# checkpoint, 228.7 B parameters, holds no MTP layers; minimax_m2.py drops layers.62+ anyway);
# GLM-5.2's indexer_types / index_topk_freq / index_skip_topk_offset (modelled, utils.py
# compute_skip_topk_layers) and mlp_layer_types (its first_k_dense_replace says the same 3
# dense layers); index_share_for_mtp_iteration (read only under MTP speculation); Kimi-Linear's
# mla_use_nope (the cache is still kv_lora_rank + qk_rope_head_dim, get_head_size);
# index_topk's top-k indices buffer (modelled, vllm_runtime.indexer_topk_buffer); Gemma 4's
# hidden_size_per_layer_input, use_double_wide_mlp and enable_moe_block, Llama 4's
# intermediate_size_mlp, Qwen3.5's output_gate_type and attn_output_gate (weights the
# checkpoint holds as the card does); Nemotron-H's time_step_* and chunk_size, gemma-2's
# cache_implementation, softcapping and rope keys (no memory of their own).
UNMODELLED = {
    "google--gemma-4-26B-A4B-it": ("attention_k_eq_v",),
    "google--gemma-4-31B-it": ("attention_k_eq_v",),
}


def test_gemma_4_k_eq_v_is_named_and_the_plan_an_estimate():
    m = model("google--gemma-4-31B-it")
    assert (
        "The config's attention_k_eq_v changes what the engine keeps, which llmfit does not "
        "model: the memory figures are estimates."
    ) in m.notes


def test_deepseek_v3_2_keeps_its_top_k_indices_for_a_step_of_tokens():
    # vllm/model_executor/models/deepseek_v2.py DeepseekV2Model.__init__: an int32 buffer of
    # max_num_batched_tokens × index_topk (2,048): at 8,192 tokens, 8,192 × 2,048 × 4 B.
    m = model("deepseek-ai--DeepSeek-V3.2")
    settings = Settings(version=VllmVersion.parse("0.33"), max_num_batched_tokens=8192)
    r = estimate(m, int(642.13 * GIB), Rank(tp=8), H200, settings)
    assert m.shapes is not None
    no_topk = replace(m, shapes=replace(m.shapes, index_topk=0))
    plain = estimate(no_topk, int(642.13 * GIB), Rank(tp=8), H200, settings)
    assert r.persistent_buffers - plain.persistent_buffers == 8_192 * 2_048 * 4


def test_a_key_llmfit_does_not_model_is_named_and_the_plan_an_estimate():
    cfg = {
        "model_type": "deepseek_v4", "num_hidden_layers": 4, "num_attention_heads": 8,
        "hidden_size": 1024, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "compress_ratios": [4, 128, 4, 128],
    }  # fmt: skip
    m = model_from_config(cfg, Path("config.json"))
    assert m.unmodelled == ("compress_ratios",)
    assert (
        "The config's compress_ratios changes what the engine keeps, which llmfit does not "
        "model: the memory figures are estimates."
    ) in m.notes
