"""Real configs from shared/fixtures, read as vLLM reads them.

Every expected value is worked out by hand from the config.json in fixtures/src (the comment says
from which fields), not by running the code. Parameters are None for every config-only snapshot:
their index is not at hand, and a count is never taken from a repository's name.
"""

from __future__ import annotations

import pytest

from llmfit.plan.model import AttentionKind, Shape
from llmfit.sources.repo import load_repo
from tests.conftest import HUB


def read(repo: str):
    return load_repo(repo, HUB).model


def kinds(m) -> dict[str, int]:
    out: dict[str, int] = {}
    for g in m.layer_groups:
        name = "chunked" if g.chunked else g.kind.value
        out[name] = out.get(name, 0) + g.layers
    return out


# repo, layers, {kind: layers}, KV bytes a token (tp = pp = 1, planned KV dtype), experts,
# experts active, trained context, quantisation
MODELS = [
    # MLA: 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B, no factor two.
    # Context: YaRN, original_max_position_embeddings 4096 × factor 40 = 163,840.
    ("deepseek-ai/DeepSeek-V3", 61, {"mla": 61}, 61 * 576 * 2, 256, 8, 4096 * 40, "fp8"),
    ("deepseek-ai/DeepSeek-R1", 61, {"mla": 61}, 70_272, 256, 8, 163_840, "fp8"),
    # kimi_k2 is an MLA type: 61 × 576 × 2 B; YaRN 4096 × 32 = 131,072; 384 experts, 8 active.
    ("moonshotai/Kimi-K2-Instruct", 61, {"mla": 61}, 70_272, 384, 8, 4096 * 32, "fp8"),
    # 2 × 32 layers × 8 KV heads × (4096 / 32 = 128) × 2 B; llama3 rope is already in
    # max_position_embeddings (131,072), so it is not scaled again.
    ("meta-llama/Llama-3.1-8B-Instruct", 32, {"full": 32}, 2 * 32 * 8 * 128 * 2, None, None,
     131_072, None),
    # 2 × 126 × 8 × (16384 / 128 = 128) × 2 B.
    ("meta-llama/Meta-Llama-3.1-405B", 126, {"full": 126}, 2 * 126 * 8 * 128 * 2, None, None,
     131_072, None),
    # 2 × 94 × 4 × 128 × 2 B = 192,512.
    ("Qwen/Qwen3-235B-A22B", 94, {"full": 94}, 192_512, 128, 8, 40_960, None),
    ("Qwen/Qwen3-235B-A22B-FP8", 94, {"full": 94}, 192_512, 128, 8, 40_960, "fp8"),
    # 2 × 48 × 4 × 128 × 2 B.
    ("Qwen/Qwen3-30B-A3B-FP8", 48, {"full": 48}, 2 * 48 * 4 * 128 * 2, 128, 8, 40_960, "fp8"),
    # 2 × 64 × 8 × 128 × 2 B.
    ("Qwen/Qwen3-32B-FP8", 64, {"full": 64}, 2 * 64 * 8 * 128 * 2, None, None, 40_960, "fp8"),
    # layer_types: 12 sliding (window 128) and 12 full; only the full ones grow:
    # 2 × 12 × 8 × 64 × 2 B = 24,576. YaRN 4096 × 32 = 131,072. mxfp4 experts: 32, 4 active.
    ("openai/gpt-oss-20b", 24, {"sliding": 12, "full": 12}, 24_576, 32, 4, 131_072, "mxfp4"),
    # 18 full of 36: 2 × 18 × 8 × 64 × 2 B = 36,864 (ENGINES.md: 36 KiB).
    ("openai/gpt-oss-120b", 36, {"sliding": 18, "full": 18}, 36_864, 128, 4, 131_072, "mxfp4"),
    # text_config.layer_types: every sixth of 62 layers is full (10), the rest sliding (52):
    # 2 × 10 × 16 × 128 × 2 B. Gemma 3's 131,072 already includes its rope scaling (factor 8).
    ("google/gemma-3-27b-it", 62, {"sliding": 52, "full": 10}, 2 * 10 * 16 * 128 * 2, None,
     None, 131_072, None),
    # Gemma 2 alternates, sliding first: 21 sliding (4096) and 21 full; 2 × 21 × 8 × 256 × 2 B.
    ("google/gemma-2-9b-it", 42, {"sliding": 21, "full": 21}, 2 * 21 * 8 * 256 * 2, None, None,
     8192, None),
    # full_attention_interval 4: 12 full layers (2 KV heads × 256) and 36 gated-delta-net ones:
    # 2 × 12 × 2 × 256 × 2 B = 24,576. 512 experts, 10 active.
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", 48, {"full": 12, "linear": 36}, 24_576, 512, 10,
     262_144, None),
    # hybrid_override_pattern: 54 M (Mamba-2), 10 * (attention), 54 - (MLP, no cache);
    # 2 × 10 × 8 × (8192 / 64 = 128) × 2 B.
    ("nvidia/Nemotron-H-56B-Base-8K", 118, {"full": 10, "linear": 54}, 2 * 10 * 8 * 128 * 2,
     None, None, 8192, None),
    # attention_chunk_size 8192, no no_rope_layers: every fourth layer (12) is global, 36 are
    # chunked; 2 × 12 × 8 × 128 × 2 B. llama3 rope: 10,485,760 as given.
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 48, {"chunked": 36, "full": 12},
     2 * 12 * 8 * 128 * 2, 16, 1, 10_485_760, None),
    # ModelOpt FP8 (hf_quant_config.json, producer modelopt, quant_algo FP8), calibrated for an
    # FP8 cache (kv_cache_quant_algo FP8): 2 × 80 × 8 × 128 × 1 B.
    ("nvidia/Llama-3.1-70B-Instruct-FP8", 80, {"full": 80}, 2 * 80 * 8 * 128 * 1, None, None,
     131_072, "modelopt"),
    # ModelOpt NVFP4, FP8 cache: 2 × 94 × 4 × 128 × 1 B.
    ("nvidia/Qwen3-235B-A22B-NVFP4", 94, {"full": 94}, 2 * 94 * 4 * 128 * 1, 128, 8, 40_960,
     "modelopt_fp4"),
    # 28 layers, 4 KV heads × (3584 / 28 = 128); mrope carries no factor, so 128,000 stands.
    ("Qwen/Qwen2.5-VL-7B-Instruct", 28, {"full": 28}, 2 * 28 * 4 * 128 * 2, None, None,
     128_000, None),
    # sliding_window null: all 32 layers full; 2 × 32 × 8 × 128 × 2 B.
    ("mistralai/Mistral-7B-Instruct-v0.3", 32, {"full": 32}, 131_072, None, None, 32_768, None),
    # 2 × 46 × 8 × 128 × 2 B (the MTP layer is not counted); 128 routed experts, 8 active.
    ("zai-org/GLM-4.5-Air", 46, {"full": 46}, 2 * 46 * 8 * 128 * 2, 128, 8, 131_072, None),
    # sliding_window 131,072 but use_sliding_window false: 80 full layers; 2 × 80 × 8 × 128 × 2 B.
    ("Qwen/Qwen2.5-72B", 80, {"full": 80}, 2 * 80 * 8 * 128 * 2, None, None, 131_072, None),
    # Mixtral: sliding_window null, so 32 full layers of 8 KV heads × 128.
    ("mistralai/Mixtral-8x7B-v0.1", 32, {"full": 32}, 131_072, 8, 2, 32_768, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("repo", "layers", "by_kind", "kv", "experts", "active", "context", "quant"),
    MODELS,
    ids=[m[0] for m in MODELS],
)
def test_model_read_as_vllm_reads_it(repo, layers, by_kind, kv, experts, active, context, quant):
    m = read(repo)
    assert m.layers == layers
    assert kinds(m) == by_kind
    assert Shape.of(m).kv_bytes_per_token() == kv
    assert (m.experts, m.experts_active) == (experts, active)
    assert m.max_context == context
    assert m.quantization == quant
    assert m.params is None and m.active_params is None


def test_at_least_fifteen_real_configs_cover_every_kind():
    assert len(MODELS) >= 15
    seen = set()
    for repo, *_ in MODELS:
        seen |= set(kinds(read(repo)))
    assert seen == {"full", "mla", "sliding", "chunked", "linear"}


def test_gpt_oss_sliding_layers_cost_a_window_a_sequence_not_the_context():
    shape = Shape.of(read("openai/gpt-oss-20b"))
    # min(128 - 1 + 8192 batched tokens, 131,072) = 8,319 tokens → 520 blocks of 16, + 1 = 521
    # blocks = 8,336 tokens, × 12 layers × 8 KV heads × (64 + 64) × 2 B.
    assert shape.fixed_kv_bytes(1, 1, 131_072) == 8_336 * 12 * 8 * 128 * 2 == 204_865_536
    # The same at any longer context: it does not grow.
    assert shape.fixed_kv_bytes(1, 1, 1_000_000) == 204_865_536


def test_gemma3_sliding_layers_are_charged_a_window_not_the_context():
    shape = Shape.of(read("google/gemma-3-27b-it"))
    # min(1024 - 1 + 8192, 131,072) = 9,215 tokens → 576 blocks + 1 = 577 = 9,232 tokens,
    # × 52 sliding layers × 16 KV heads × 256 × 2 B.
    assert shape.fixed_kv_bytes(1, 1, 131_072) == 9_232 * 52 * 16 * 256 * 2 == 3_932_684_288
    # Charged for the whole context they would have cost 52 × 8,192 B × 131,072 tokens.
    assert 52 * 8_192 * 131_072 == 55_834_574_848
    # A short context costs only what it holds: min(9,215, 512) = 512 → 32 + 1 blocks.
    assert shape.fixed_kv_bytes(1, 1, 512) == 33 * 16 * 52 * 8_192


def test_gemma2_at_its_8k_context_sliding_costs_as_much_as_full_plus_a_block():
    shape = Shape.of(read("google/gemma-2-9b-it"))
    # min(4096 - 1 + 8192, 8192) = 8192 → 512 blocks + 1 = 8,208 tokens × 21 × 8 × 512 × 2 B.
    assert shape.fixed_kv_bytes(1, 1, 8192) == 8_208 * 21 * 8_192 == 1_412_038_656


def test_llama4_chunked_layers_cost_a_chunk_and_the_batch():
    shape = Shape.of(read("meta-llama/Llama-4-Scout-17B-16E-Instruct"))
    # min(8192 + 8192, 10,485,760) = 16,384 tokens = 1,024 blocks, × 36 × 8 × 256 × 2 B.
    assert shape.fixed_kv_bytes(1, 1, 10_485_760) == 16_384 * 36 * 4_096 == 2_415_919_104


def test_qwen3_next_linear_layers_keep_a_fixed_state_split_by_tensor_parallelism():
    m = read("Qwen/Qwen3-Next-80B-A3B-Thinking")
    (linear,) = [g for g in m.layer_groups if g.kind is AttentionKind.LINEAR]
    # conv: (linear_conv_kernel_dim 4 - 1) × (2 × 128 × 16 key heads + 128 × 32 value heads)
    # = 24,576; temporal: 32 value heads × 128 × 128 = 524,288; × 2 B (bfloat16).
    assert linear.state_bytes == (3 * (2 * 128 * 16 + 128 * 32) + 32 * 128 * 128) * 2
    assert linear.state_bytes == 1_097_728
    shape = Shape.of(m)
    assert shape.fixed_kv_bytes(1, 1, 262_144) == 36 * 1_097_728 == 39_518_208
    assert shape.fixed_kv_bytes(1, 1, 1024) == 39_518_208
    assert shape.fixed_kv_bytes(2, 1, 1024) == 36 * 548_864


def test_nemotron_h_mamba2_state():
    m = read("nvidia/Nemotron-H-56B-Base-8K")
    (mamba,) = [g for g in m.layer_groups if g.kind is AttentionKind.LINEAR]
    # conv: (conv_kernel 4 - 1) × (256 heads × 64 + 2 × n_groups 8 × ssm_state_size 256)
    # = 3 × 20,480; temporal: 256 × 64 × 256; × 2 B.
    assert mamba.state_bytes == (3 * 20_480 + 256 * 64 * 256) * 2 == 8_511_488
    assert Shape.of(m).fixed_kv_bytes(1, 1, 8192) == 54 * 8_511_488


def test_deepseek_v3_mla_is_not_divided_by_tensor_parallelism():
    shape = Shape.of(read("deepseek-ai/DeepSeek-V3"))
    assert shape.kv_bytes_per_token(tp=8) == shape.kv_bytes_per_token() == 70_272
    assert shape.fixed_kv_bytes(8, 1, 163_840) == 0


def test_fp8_kv_cache_halves_every_growing_layer():
    shape = Shape.of(read("deepseek-ai/DeepSeek-V3"), "fp8")
    # 61 × 576 × 1 B (ENGINES.md: 576 B a layer at fp8).
    assert shape.kv_bytes_per_token() == 61 * 576 == 35_136


def test_modelopt_checkpoints_say_so():
    m = read("nvidia/Llama-3.1-70B-Instruct-FP8")
    assert (m.quantization, m.kv_cache_dtype, m.dtype) == ("modelopt", "fp8", "bfloat16")
