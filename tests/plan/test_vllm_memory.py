"""vLLM's memory on one rank, release by release, worked out by hand from vLLM's code and the
fixture configs (fixtures/hub). Each test names the vLLM file and function it follows; the
releases were read from their PyPI wheels (see llmfit/plan/engines/vllm_versions.py).

Where a value the fixtures do not hold is needed (a checkpoint's total_size), it is built from
the facts that are there and the test says how.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from llmfit.plan.artifact import WeightLayout
from llmfit.plan.engines.vllm_kv import mamba_page_bytes
from llmfit.plan.engines.vllm_memory import (
    GIB,
    LoRA,
    Rank,
    Settings,
    Speculative,
    combine_stages,
    estimate,
    parts_of,
)
from llmfit.plan.engines.vllm_runtime import NON_TORCH, batch_defaults
from llmfit.plan.engines.vllm_versions import VllmVersion
from llmfit.plan.fleet import MIB
from llmfit.plan.layout import Card
from llmfit.plan.model import Shape
from tests.plan.test_model import model

V = VllmVersion.parse
H100 = Card("h100-80g", 85_045_477_376)  # deviceQuery totalGlobalMem
H100_LOGGED = Card("h100-80g", 85_018_877_624)  # int(79.18 GiB), the total llm-d's vLLM printed
H200 = Card("h200-141g", (143_771 - 454) * MIB)  # 139.95 GiB
B200 = Card("b200-180g", int(178.35 * GIB))
A100 = Card("a100-80g", 85_100_068_864)
RTX4090 = Card("rtx4090-24g", 25_386_352_640)

LLAMA_8B_BYTES = 16_060_522_496  # the published index's total_size (fixtures/hub)
# gpt-oss-20b's checkpoint, worked out from config.json (not in the fixtures): per layer,
# attention in bf16 (q 2880 x 4096 + 4096, k and v 2880 x 512 + 512, o 4096 x 2880 + 2880:
# 26,550,080 params = 53,100,160 B, with 64 sinks 53,100,288 B), router 32 x 2880 + 32 (184,384
# B), two norms (11,520 B) and 32 mxfp4 experts (gate_up 5760 x 2880 and down 2880 x 2880 at
# 4.25 bits, + bf16 biases 5760 + 2880: 423,567,360 B) = 476,863,552 B; 24 layers, embedding and
# unembedding 201,088 x 2880 x 2 B each and the final norm:
# 24 x 476,863,552 + 2 x 1,158,266,880 + 5,760 = 13,761,264,768 B = 12.816 GiB, the "12.82 GiB
# stored" of issue 14.
GPT_OSS_BYTES = 24 * 476_863_552 + 2 * 1_158_266_880 + 5_760


def run(repo: str, weight_bytes: int = 0, **kw):
    rank = kw.pop("rank", Rank())
    card = kw.pop("card", H100)
    parts = kw.pop("parts", None)
    kw.setdefault("gpu_memory_utilization", 0.9)
    # The cases here were worked by hand against 0.33's code (0.34's are test_vllm_034.py).
    kw.setdefault("version", "0.33")
    if isinstance(kw.get("version"), str):
        kw["version"] = V(kw["version"])
    return estimate(model(repo), weight_bytes, rank, card, Settings(**kw), parts)


# --- Batch defaults ------------------------------------------------------------------------------


def test_batched_token_defaults_by_card_size_and_release():
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, `vllm serve`: 8,192 tokens and 1,024
    # sequences on cards of >= 70 GiB other than A100s, 2,048 and 256 elsewhere; from 0.28 a card
    # of >= 160 GiB (B200: 178.35 GiB) takes 16,384. An H200 (139.95 GiB) stays at 8,192.
    assert batch_defaults(V("0.33"), H100) == (8192, 1024)
    assert batch_defaults(V("0.33"), H200) == (8192, 1024)
    assert batch_defaults(V("0.33"), A100) == (2048, 256)
    assert batch_defaults(V("0.33"), RTX4090) == (2048, 256)
    assert batch_defaults(V("0.27"), B200) == (8192, 1024)
    assert batch_defaults(V("0.28"), B200) == (16_384, 1024)


# --- Hybrid state layers: Nemotron-H ------------------------------------------------------------

NEMOTRON = "nvidia/Nemotron-H-56B-Base-8K"


def test_nemotron_h_state_page_follows_the_release_ssm_dtype():
    # config.json: mamba_num_heads 256 x mamba_head_dim 64 = 16,384 inner, n_groups 8,
    # ssm_state_size 256, conv_kernel 4. MambaStateShapeCalculator.mamba2_state_shape at TP 1:
    # conv (4 - 1) x (16,384 + 2 x 8 x 256) = 61,440 elements, SSM 256 x 64 x 256 = 4,194,304.
    # The conv state is bf16 (2 B); the SSM state is the model's bf16 in 0.11-0.12, float16 in
    # 0.13-0.19 and float32 from 0.20 (models/config.py NemotronHForCausalLMConfig).
    m = model(NEMOTRON)
    assert mamba_page_bytes(m, V("0.11"), 1) == 61_440 * 2 + 4_194_304 * 2 == 8_511_488
    assert mamba_page_bytes(m, V("0.19"), 1) == 8_511_488
    assert mamba_page_bytes(m, V("0.20"), 1) == 61_440 * 2 + 4_194_304 * 4 == 16_900_096
    # TP 2: n_groups 8 splits evenly; conv (3 x 20,480 / 2) and 128 heads a rank.
    assert mamba_page_bytes(m, V("0.33"), 2) == 3 * 10_240 * 2 + 128 * 64 * 256 * 4
    # TP 16 pads n_groups 8 up to 16 (extra_groups_for_head_shards): conv 3 x (16,384 + 2 x 16
    # x 256) / 16 = 3 x 1,536.
    assert mamba_page_bytes(m, V("0.33"), 16) == 3 * 1_536 * 2 + 16 * 64 * 256 * 4


@pytest.mark.parametrize(
    ("version", "block", "mode", "state_blocks"),
    [
        # 0.11: prefix caching off for hybrids (is_prefix_caching_supported), one state page a
        # request; the bf16 page 8,511,488 B needs an attention block of
        # 16 x cdiv(8,511,488, 16 x 4,096) = 16 x 130 = 2,080 tokens (HybridAttentionMamba-
        # ModelConfig; a token costs 8 KV heads x 256 x 2 B = 4,096 B).
        ("0.11", 2_080, "none", 1),
        # 0.26-0.27: prefix caching on for hybrids and Nemotron-H supports Mamba prefix caching,
        # so 'all' mode: the block is the chunk (lcm(128, 16) = 128) x cdiv(cdiv(16,900,096,
        # 4,096), 128) = 128 x 33 = 4,224 tokens and a request keeps a state page a block of
        # its context: cdiv(8,192, 4,224) = 2 (MambaSpec.max_memory_usage_bytes, interface.py
        # _align_hybrid_block_size).
        ("0.26", 4_224, "all", 2),
        # 0.28: 'align' for every model, two state pages; block 16 x cdiv(16,900,096, 65,536) =
        # 16 x 258 = 4,128.
        ("0.28", 4_128, "align", 2),
        # 0.32 on: Mamba-2's prefill checkpoint page (mamba_mixer2.py get_kv_cache_spec).
        ("0.33", 4_128, "align", 3),
    ],
)
def test_nemotron_h_pages_blocks_and_padded_groups(version, block, mode, state_blocks):
    r = run(NEMOTRON, 112_000_000_000, card=H200, version=version, max_model_len=8192)
    lay = r.layout
    assert lay is not None
    assert (lay.block_size, lay.mamba_mode) == (block, mode)
    # The attention page is the block of 4,096-byte tokens; the state page is padded up to it.
    assert lay.page_bytes == block * 4_096
    # hybrid_override_pattern: 54 Mamba layers ('M'), 10 attention ('*'), 54 MLPs ('-').
    # _get_kv_cache_groups_uniform_page_size: groups of min(54, 10) = 10 layers; the Mamba
    # layers fill cdiv(54, 10) = 6 groups (60 slots, 6 of them padding), attention one.
    (mamba, attention) = lay.kinds
    assert (mamba.kind, mamba.layers, mamba.groups) == ("mamba2", 54, 6)
    assert (attention.kind, attention.layers, attention.groups) == ("full", 10, 1)
    assert lay.group_size == 10 and lay.bytes_per_block == 10 * block * 4_096
    assert mamba.blocks_per_request == state_blocks
    assert attention.blocks_per_request == math.ceil(8192 / block)
    assert lay.blocks_per_request == 6 * state_blocks + math.ceil(8192 / block)
    # kv_cache_utils get_max_concurrency_for_kv_cache_config: blocks / blocks a request.
    assert r.num_blocks == r.kv_budget // lay.bytes_per_block
    assert r.max_concurrency == r.num_blocks / lay.blocks_per_request


def test_nemotron_h_costs_several_times_what_one_bf16_page_a_layer_said():
    # The old plan (model.Shape.fixed_kv_bytes) charged a sequence 54 bf16 state pages
    # (8,511,488 B) and 10 attention layers' 8,192 tokens: 54 x 8,511,488 + 10 x 4,096 x 8,192
    # = 459,620,352 + 335,544,320 = 795,164,672 B. vLLM 0.33 takes 6 x 3 + 2 = 20 blocks of
    # 10 x 16,908,288 B a request: 3,381,657,600 B, 4.25 x as much, so the old concurrency was
    # 4.25 x too high.
    m = model(NEMOTRON)
    shape = Shape.of(m)
    old = shape.kv_bytes_per_token() * 8192 + shape.fixed_kv_bytes(context=8192)
    assert old == 54 * 8_511_488 + 10 * 4_096 * 8_192 == 795_164_672
    r = run(NEMOTRON, 112_000_000_000, card=H200, version="0.33", max_model_len=8192)
    assert r.layout is not None
    per_request = r.layout.blocks_per_request * r.layout.bytes_per_block
    assert per_request == 20 * 10 * 16_908_288 == 3_381_657_600
    assert per_request / old > 4.2


def test_prefix_caching_off_keeps_one_state_page():
    # --no-enable-prefix-caching: mamba_cache_mode 'none' (MambaModelConfig), one page a
    # request, and no checkpoint alignment: block 4,128 as in align mode.
    r = run(NEMOTRON, 112_000_000_000, card=H200, max_model_len=8192, enable_prefix_caching=False)
    assert r.layout is not None
    assert r.layout.mamba_mode == "none"
    assert r.layout.blocks_per_request == 6 * 1 + 2


# --- Qwen3-Next: GDN layers -------------------------------------------------------------------

QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


@pytest.mark.parametrize(
    ("version", "card", "block", "state_blocks"),
    [
        # 0.25: no prefix caching for hybrids, one page. The GDN state at TP 4
        # (gated_delta_net_state_shape): conv 3 x (2 x 16 x 128 + 32 x 128) / 4 = 6,144 and
        # state 8 x 128 x 128 = 131,072 elements, bf16: 274,432 B. A token of attention at TP
        # 4 keeps one of the 2 KV heads: 256 x 2 x 2 B = 1,024 B; the block grows to
        # 16 x cdiv(274,432, 16 x 1,024) = 16 x 17 = 272 tokens.
        ("0.25", H100, 272, 1),
        # 0.28: align mode, two pages.
        ("0.28", H100, 272, 2),
        # 0.33 on Hopper: FlashInfer's GDN prefill exports a checkpoint page and its blocks are
        # multiples of 64 tokens (FLASHINFER_GDN_CHECKPOINT_ALIGNMENT): 64 x cdiv(274,432,
        # 64 x 1,024) = 64 x 5 = 320 tokens, three pages.
        ("0.33", H100, 320, 3),
        # On an A100 the prefill runs on Triton: no checkpoint, 272 tokens, two pages.
        ("0.33", A100, 272, 2),
    ],
)
def test_qwen3_next_gdn_pages(version, card, block, state_blocks):
    r = run(
        QWEN3_NEXT,
        160_000_000_000,
        rank=Rank(tp=4),
        card=card,
        version=version,
        max_model_len=65_536,
    )
    lay = r.layout
    assert lay is not None
    assert lay.block_size == block and lay.page_bytes == block * 1_024
    assert lay.mamba_page_bytes == 274_432
    # 12 full-attention layers (full_attention_interval 4) and 36 GDN: groups of 12, the GDN
    # layers in 3 of them.
    (gdn, full) = lay.kinds
    assert (gdn.layers, gdn.groups, full.layers, full.groups) == (36, 3, 12, 1)
    assert gdn.blocks_per_request == state_blocks
    assert full.blocks_per_request == math.ceil(65_536 / block)


def test_qwen3_next_mtp_is_skipped_until_speculation_runs_it():
    # Qwen3NextForCausalLM skips the mtp.* tensors; with --speculative-config '{"method":
    # "mtp", "num_speculative_tokens": 1}' Qwen3NextMTP loads them on the last stage and its
    # attention layer joins the cache. The test gives the artifact a WeightLayout and puts
    # 3,000,000,000 B of mtp.* outside it (the fixtures hold no index for Qwen3-Next).
    m = model(QWEN3_NEXT)
    layers = tuple([3_300_000_000] * 48)
    experts = tuple([3_200_000_000] * 48)
    layout = WeightLayout(layers, experts, 622_329_856, 622_339_072, False)
    total = layout.total + 3_000_000_000
    plain = estimate(
        m, total, Rank(tp=4), H100, Settings(version=V("0.33"), max_model_len=65_536), layout
    )
    assert plain.weights.skipped == 3_000_000_000 and plain.weights.draft == 0
    spec = Settings(version=V("0.33"), max_model_len=65_536, speculative=Speculative("mtp", 1))
    drafted = estimate(m, total, Rank(tp=4), H100, spec, layout)
    # Qwen3NextMTP is a layer like the last, split as the target's are: its experts (the last
    # layer's share, 3.2 of 3.3 GB: 2,909,090,909 B) and the rest over TP 4, kept whole its
    # router (512 × 2,048), norms (2 × 2,048, and the MTP's own two) in bf16: 2,113,536 B.
    experts = 3_000_000_000 * 3_200_000_000 // 3_300_000_000
    whole = (512 * 2_048 + 2 * 2_048) * 2 + 2 * 2_048 * 2
    split = 3_000_000_000 - experts - whole
    assert drafted.weights.draft == -(-split // 4) + whole + -(-experts // 4) == 751_585_153
    assert drafted.weights.skipped == 0
    # The MTP layer is one more full-attention layer: 13 full and 36 GDN, groups of 13
    # (36 >= 1.5 x 13), GDN in cdiv(36, 13) = 3 of them. One speculative token adds a conv row:
    # (3 + 1) x 2,048 x 2 + 262,144 = 278,528 B, block 64 x cdiv(278,528, 65,536) = 320, and a
    # state block a request (num_speculative_blocks).
    lay = drafted.layout
    assert lay is not None
    (gdn, full) = lay.kinds
    assert (full.layers, gdn.groups, lay.group_size) == (13, 3, 13)
    assert lay.mamba_page_bytes == 4 * 2_048 * 2 + 262_144 and lay.block_size == 320
    assert gdn.blocks_per_request == 3 + 1


# --- Sliding windows and in-flight batches: gemma-3-27b-it --------------------------------------

GEMMA = "google/gemma-3-27b-it"
GEMMA_BYTES = 54_864_813_280  # 2 B x the Hub's 27,432,406,640 parameters (fixtures/hub index)


@pytest.mark.parametrize(
    ("version", "card", "rank", "sliding_blocks"),
    [
        # SlidingWindowSpec.max_memory_usage_bytes, window 1,024, max_model_len 32,768:
        # 0.25 keeps one batch: cdiv(min(1,023 + 8,192, 32,768), 16) + 1 = 576 + 1 = 577.
        ("0.25", H100, Rank(), 577),
        # 0.26: async scheduling keeps 2 batches in flight (VllmConfig.max_in_flight_tokens):
        # cdiv(1,023 + 16,384, 16) + 1 = 1,088 + 1 = 1,089.
        ("0.26", H100, Rank(), 1_089),
        # A B200 (178 GiB) defaults to 16,384 batched tokens from 0.28:
        # cdiv(min(1,023 + 32,768, 32,768), 16) + 1 = 2,049; 0.27 still 8,192 tokens.
        ("0.27", B200, Rank(), 1_089),
        ("0.33", B200, Rank(), 2_049),
        # Model Runner V2 with pipeline parallelism keeps pp + 1 = 3 batches:
        # cdiv(1,023 + 24,576, 16) + 1 = 1,600 + 1 = 1,601 (max_concurrent_batches).
        ("0.33", H100, Rank(pp=2), 1_601),
    ],
)
def test_gemma3_window_reserve_with_in_flight_batches(version, card, rank, sliding_blocks):
    r = run(GEMMA, GEMMA_BYTES, rank=rank, card=card, version=version, max_model_len=32_768)
    lay = r.layout
    assert lay is not None
    sliding, full = lay.kinds
    assert (sliding.kind, sliding.window) == ("sliding", 1024)
    assert sliding.blocks_per_request == sliding_blocks
    assert full.blocks_per_request == 32_768 // 16


def test_gemma3_sliding_layers_are_padded_to_whole_groups():
    # 62 layers, _sliding_window_pattern 6: 10 full, 52 sliding. Groups of min(52, 10) = 10
    # (52 >= 1.5 x 10); the sliding layers take cdiv(52, 10) = 6 groups: 60 slots, so a
    # request's blocks count 6 sliding tables and one full one, and the pool's block is 10
    # layers of 16 tokens x 16 KV heads x 256 x 2 B = 131,072 B (kv_cache_planning.py
    # _get_kv_cache_groups_uniform_page_size, _get_kv_cache_bytes_per_block).
    r = run(GEMMA, GEMMA_BYTES, version="0.26", max_model_len=32_768)
    lay = r.layout
    assert lay is not None
    assert (lay.group_size, lay.groups, lay.page_bytes) == (10, 7, 131_072)
    assert lay.bytes_per_block == 10 * 131_072
    assert lay.blocks_per_request == 6 * 1_089 + 2_048 == 8_582
    assert r.max_concurrency == r.num_blocks / 8_582
    # "GPU KV cache size": 0.20 prints blocks // groups x block size, 0.21 on max concurrency x
    # max_model_len (kv_cache_utils.py).
    assert r.kv_tokens == int(r.num_blocks / 8_582 * 32_768)
    old = run(GEMMA, GEMMA_BYTES, version="0.20", max_model_len=32_768)
    assert old.kv_tokens == old.num_blocks // 7 * 16


def test_gemma3_longest_context_was_overstated():
    # The old plan held a sliding layer to one 8,192-token batch and no padding; on an H100 at
    # 0.33 every sliding layer keeps two batches and 52 layers count as 60, so the longest
    # context the same card holds is well under what the old plan said.
    r = run(GEMMA, GEMMA_BYTES, version="0.33", max_model_len=131_072)
    m = model(GEMMA)
    shape = Shape.of(m)
    per_token = shape.kv_bytes_per_token()  # 10 full layers x 16 x 256 x 2 B = 81,920 B
    assert per_token == 81_920
    # Worst case 52 sliding layers x (cdiv(1,023 + 8,192, 16) + 1) blocks x 16 tokens x 8,192 B.
    fixed = shape.fixed_kv_bytes(context=131_072)
    assert fixed == 52 * 577 * 16 * 8_192
    old_longest = (r.kv_budget - fixed) // per_token
    assert r.max_model_len_fit < 0.8 * old_longest


# --- Chunked local attention: Llama-4-Scout ----------------------------------------------------

SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


@pytest.mark.parametrize(
    ("version", "kinds"),
    [
        # 0.13: the hybrid allocator is off for chunked local attention
        # (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 0), so every layer is
        # full attention: one group, cdiv(131,072, 16) = 8,192 blocks.
        ("0.13", [("full", 48, 1, 8_192)]),
        # 0.14: on. 36 chunked layers keep min(8,192 + 8,192, 131,072) tokens:
        # cdiv(16,384, 16) = 1,024 blocks (ChunkedLocalAttentionSpec), in 3 groups of 12.
        ("0.14", [("chunked", 36, 3, 1_024), ("full", 12, 1, 8_192)]),
        # 0.26: two batches in flight: cdiv(8,192 + 16,384, 16) = 1,536.
        ("0.26", [("chunked", 36, 3, 1_536), ("full", 12, 1, 8_192)]),
    ],
)
def test_llama4_chunked_layers_by_release(version, kinds):
    r = run(SCOUT, 217_000_000_000, rank=Rank(tp=4), version=version, max_model_len=131_072)
    assert r.layout is not None
    got = [(k.kind, k.layers, k.groups, k.blocks_per_request) for k in r.layout.kinds]
    assert got == kinds


def test_llama4_with_eagle_falls_back_to_full_attention():
    # VllmConfig.__post_init__: chunked local attention + EAGLE turns the hybrid allocator off.
    r = run(
        SCOUT,
        217_000_000_000,
        rank=Rank(tp=4),
        max_model_len=131_072,
        speculative=Speculative("eagle", 1, draft_weight_bytes=1 << 30, draft_layers=1),
    )
    assert r.layout is not None
    assert {k.kind for k in r.layout.kinds} == {"full"}
    # The EAGLE head is built with the target's parallel layers: a quarter a rank at TP 4.
    assert r.weights.draft == (1 << 30) // 4


# --- The budget: tensor parallelism, CUDA graphs, activation -----------------------------------

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_tensor_parallelism_adds_no_stale_nccl_charge():
    # gpu_worker.py init_device starts NCCL before the memory snapshot, so vLLM V1 does not count
    # it: the 1.79 GiB a card of a V0 record (PR #10511) is not charged. Non-torch memory is
    # 0.13 GiB at any width, and TP 2's budget is TP 1's plus exactly the weights it no longer
    # holds (activation and graphs are per rank alike).
    one = run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000)
    two = run(LLAMA, LLAMA_8B_BYTES, rank=Rank(tp=2), max_model_len=16_000)
    assert one.non_torch == two.non_torch == NON_TORCH == 139_586_437
    assert two.kv_budget - one.kv_budget == one.weights.total - two.weights.total


def test_cuda_graphs_from_the_model_and_when_they_count():
    # _set_cudagraph_sizes: 1,024 sequences -> up to min(2 x 1,024, 512) = 512 tokens; 0.33
    # captures 1, 2, 4, every 8 to 248 (31) and every 16 from 256 to 512 (17): 51 sizes; 0.11
    # captured 1, 2, 4 and every 8 to 512: 67. A dense layer costs 56 KiB a size and a MoE
    # layer 254 KiB (fitted to Qwen3-0.6B's 0.10 GiB and gpt-oss-20b's 0.39 GiB in llm-d's 0.11
    # records).
    dense = run("Qwen/Qwen3-8B", 16_381_470_720, max_model_len=16_000)
    assert dense.cuda_graphs == 51 * 36 * 56 * 1024 == 105_283_584
    moe = run("Qwen/Qwen3-30B-A3B", 61_064_245_248, max_model_len=16_000)
    assert moe.cuda_graphs == 51 * 48 * 254 * 1024 == 636_715_008
    old = run("Qwen/Qwen3-8B", 16_381_470_720, version="0.11", max_model_len=16_000)
    assert old.cuda_graphs == 67 * 36 * 56 * 1024
    # --enforce-eager captures none.
    eager = run("Qwen/Qwen3-8B", 16_381_470_720, max_model_len=16_000, enforce_eager=True)
    assert eager.cuda_graphs == 0 and eager.kv_budget == dense.kv_budget + dense.cuda_graphs
    # Before 0.20 they were captured after the KV cache (determine_available_memory subtracts
    # the estimate from 0.20): the same Qwen3-30B-A3B (V1 runner in both) has exactly the
    # graphs more budget in 0.19 than in 0.20.
    v19 = run("Qwen/Qwen3-30B-A3B", 61_064_245_248, version="0.19", max_model_len=16_000)
    v20 = run("Qwen/Qwen3-30B-A3B", 61_064_245_248, version="0.20", max_model_len=16_000)
    assert not v19.cuda_graphs_in_budget and v20.cuda_graphs_in_budget
    assert v19.kv_budget - v20.kv_budget == v20.cuda_graphs


def test_gpt_oss_captures_up_to_1024_tokens():
    # GptOssForCausalLMConfig raises the largest capture size to 1,024 (0.12 on): 3 + 31 +
    # 49 (256..1,024 by 16) = 83 sizes over 24 MoE layers.
    r = run("openai/gpt-oss-20b", GPT_OSS_BYTES, max_model_len=16_000)
    assert r.cuda_graphs == 83 * 24 * 254 * 1024


def test_activation_follows_max_num_seqs_and_the_release_sampler():
    # profile_run: a dummy batch of 8,192 tokens over min(8,192, max_num_seqs) requests, then
    # logits for one token a request and the sampler's warm-up. Llama-3.1-8B: vocabulary
    # 128,256, hidden 4,096; the live hidden states 8,192 x 4,096 x 2.75 B = 92,274,688.
    hidden = 8192 * 4096 * 11 // 4
    # 0.11's FlashInfer sampler: 38 B a request a vocabulary entry, 1,024 requests.
    v11 = run(LLAMA, LLAMA_8B_BYTES, version="0.11", max_model_len=16_000)
    assert v11.activation == 38 * 1024 * 128_256 + hidden == 5_082_972_160
    # The logits term follows max_num_seqs, not the batched tokens.
    v11_256 = run(LLAMA, LLAMA_8B_BYTES, version="0.11", max_model_len=16_000, max_num_seqs=256)
    assert v11_256.activation == 38 * 256 * 128_256 + hidden
    # 0.19 (V1 runner, Triton top-k/top-p): 14 B a request a vocabulary entry and the kernel's
    # buffer of a vocabulary row for each of the H100's 132 SMs in fp32.
    v19 = run(LLAMA, LLAMA_8B_BYTES, version="0.19", max_model_len=16_000)
    assert v19.activation == 14 * 1024 * 128_256 + 132 * 128_256 * 4 + hidden
    # Model Runner V2 (Llama's default from 0.23): the warm-up pass holds the bf16 logits and
    # an fp32 copy, 6 B; its penalty state (int32 counts and a bit mask, 4.125 B a request an
    # entry) is a buffer that counts only from 0.27 (mem_utils.memory_profiling).
    v33 = run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000)
    assert v33.model_runner_v2
    assert v33.activation == 6 * 1024 * 128_256 + hidden == 880_279_552
    assert v33.persistent_buffers == 1024 * 128_256 * 33 // 8 == 541_753_344
    v26 = run(LLAMA, LLAMA_8B_BYTES, version="0.26", max_model_len=16_000)
    assert v26.model_runner_v2 and v26.persistent_buffers == 0


def test_the_0_11_records_activation_peaks():
    # llm-d's H100 table (fixtures/calibration/engine-logs.jsonl): Qwen3-0.6B 5.56 GiB,
    # Llama-3.1-8B 4.76, gpt-oss-20b 7.38, each at 8,192 tokens and 1,024 requests.
    # Llama: 5,082,972,160 B = 4.734 GiB (above); gpt-oss-20b: 38 x 1,024 x 201,088 + 8,192 x
    # 2,880 x 2.75 = 7,824,736,256 + 64,880,640 = 7,889,616,896 B = 7.348 GiB.
    r = run("openai/gpt-oss-20b", GPT_OSS_BYTES, version="0.11", max_model_len=16_000)
    assert r.activation == 7_889_616_896
    assert abs(r.activation / GIB - 7.38) < 0.05


# --- Weights a rank -----------------------------------------------------------------------------


def test_gpt_oss_20b_loads_its_padded_mxfp4_experts():
    # The config gives back the checkpoint's bytes exactly (GPT_OSS_BYTES above).
    m = model("openai/gpt-oss-20b")
    p = parts_of(m, GPT_OSS_BYTES, None)
    assert sum(p.layer_bytes) + p.embed_bytes + p.output_bytes == GPT_OSS_BYTES
    assert p.expert_bytes[0] == 423_567_360
    # On an H100 (0.11) the experts' hidden size is padded from 2,880 to 3,072: gate_up
    # 32 x 5,760 x 3,072 and down 32 x 3,072 x 2,880 at 4.25 bits + biases 32 x (5,760 + 3,072)
    # x 2 B = 451,780,608 B a layer, 28,213,248 more; 24 layers: 677,117,952 B. With the YaRN
    # rotary cache (131,072 positions x 64 x 2 B = 16,777,216) the rank loads 14,455,159,936 B
    # = 13.462 GiB; vLLM logged 13.47 (llm-d).
    r = run("openai/gpt-oss-20b", GPT_OSS_BYTES, version="0.11", max_model_len=16_000)
    assert r.weights.mxfp4_padding == 24 * (451_780_608 - 423_567_360) == 677_117_952
    assert r.weights.rope == 131_072 * 64 * 2
    assert r.weights.total == GPT_OSS_BYTES + 677_117_952 + 16_777_216 == 14_455_159_936
    assert abs(r.weights.total / GIB - 13.47) / 13.47 < 0.005
    # On an A100 Marlin pads hidden to 3,072 and intermediate to 2,944 (Mxfp4MoEMethod.
    # create_weights): 32 x (3 x 3,072 x 2,944 x 17/32 + (2 x 2,944 + 3,072) x 2) =
    # 461,815,808 B a layer; vLLM 0.19 logged 13.72 GiB.
    a = run(
        "openai/gpt-oss-20b",
        GPT_OSS_BYTES,
        card=A100,
        version="0.19",
        gpu_memory_utilization=0.65,
        max_model_len=131_072,
    )
    assert a.weights.mxfp4_padding == 24 * (461_815_808 - 423_567_360)
    assert abs(a.weights.total / GIB - 13.72) / 13.72 < 0.005


def deepseek_layout() -> WeightLayout:
    """DeepSeek-V3's parts at 1 B a linear weight and 2 B a 16-bit one (norms, router gates),
    from config.json's shapes, with a 12,000,000,000 B MTP layer 61: round numbers to follow by
    hand (the published index gives only the total)."""
    # layer_params: a dense layer holds 583,483,392 parameters, 16,384 of them 16-bit (norms);
    # a MoE layer 11,507,286,016, 1,851,392 16-bit (router 256 x 7,168 and norms), of which
    # 11,274,289,152 in its 256 routed experts (3 x 7,168 x 2,048 each).
    dense = 583_483_392 - 16_384 + 2 * 16_384
    moe = 11_507_286_016 - 1_851_392 + 2 * 1_851_392
    layers = (dense,) * 3 + (moe,) * 58 + (12_000_000_000,)
    experts = (0,) * 3 + (11_274_289_152,) * 58 + (0,)
    return WeightLayout(layers, experts, 129_280 * 7_168 * 2, 129_280 * 7_168 * 2 + 14_336, False)


def test_deepseek_v3_rank_weights_skip_replicate_and_add():
    layout = deepseek_layout()
    r = run(
        "deepseek-ai/DeepSeek-V3",
        layout.total,
        rank=Rank(tp=8, ep=True),
        card=H200,
        max_model_len=32_768,
        parts=layout,
    )
    w = r.weights
    # The MTP layer (model.layers.61) is not loaded (DeepseekV3ForCausalLM skips it).
    assert w.skipped == 12_000_000_000
    # Replicated on every rank: MLA's fused q_a/kv_a projection (7,168 x (1,536 + 576) =
    # 15,138,816 weights at 1 B, disable_tp), the norms and, in MoE layers, the router gate.
    dense_rep = 15_138_816 + 2 * 16_384
    moe_rep = 15_138_816 + 2 * 1_851_392
    assert w.replicated == 3 * dense_rep + 58 * moe_rep == 1_138_327_552
    # The rest of each layer splits 8 ways; routed experts split over tp x dp = 8 ranks.
    dense_split = 583_499_776 - dense_rep
    moe_split = 11_509_137_408 - 11_274_289_152 - moe_rep
    assert w.layers == 3 * (dense_split // 8) + 58 * (moe_split // 8)
    assert w.experts == 58 * (11_274_289_152 // 8)
    # Vocabulary 129,280 is a multiple of 64: embedding and head split 8 ways, the final norm
    # (14,336 B) whole.
    assert w.embedding == 129_280 * 7_168 * 2 // 8 and w.output == 14_336 + w.embedding
    # MLAAttention.process_weights_after_loading adds W_UK/W_UV: kv_lora_rank 512 x 128 / 8
    # heads x (qk_nope 128 + v_head 128) x 2 B = 4,194,304 B a layer, 61 layers.
    assert w.mla_decompressed == 61 * 512 * 16 * 256 * 2 == 255_852_544
    # The rotary cache: 163,840 positions x qk_rope_head_dim 64 x 2 B.
    assert w.rope == 163_840 * 64 * 2


def test_deepseek_v3_data_parallel_attention_with_expert_parallelism():
    # --data-parallel-size 8 --enable-expert-parallel: tp 1, so attention, norms and the dense
    # MLP are whole on every rank, the routed experts spread over the 8 ranks
    # (FusedMoEParallelConfig flattens tp x dp), and W_UK/W_UV cover all 128 heads.
    layout = deepseek_layout()
    r = run(
        "deepseek-ai/DeepSeek-V3",
        layout.total,
        rank=Rank(tp=1, dp=8, ep=True),
        card=H200,
        max_model_len=32_768,
        parts=layout,
    )
    w = r.weights
    assert w.layers == 3 * (583_499_776 - 15_171_584) + 58 * (
        11_509_137_408 - 11_274_289_152 - 18_841_600
    )
    assert w.experts == 58 * (11_274_289_152 // 8)
    assert w.mla_decompressed == 61 * 512 * 128 * 256 * 2
    # Each rank keeps its own latent cache (MLA: one latent a token, 16-token blocks on Hopper
    # from 0.12): 61 x 16 x 576 x 2 B a block.
    assert r.layout is not None and r.layout.bytes_per_block == 61 * 16 * 576 * 2


def mtp_layout() -> WeightLayout:
    """deepseek_layout with an MTP layer 61 as DeepSeek-V3 stores it: a MoE layer (11,509,137,408
    B, 11,274,289,152 of them routed experts), its eh_proj (2 × 7,168 × 7,168 × 2 B) and two
    norms (2 × 7,168 × 2 B), and its own bf16 embedding and head (2 × 129,280 × 7,168 × 2 B)."""
    base = deepseek_layout()
    mtp = 11_509_137_408 + 205_520_896 + 28_672 + 2 * 1_853_358_080
    return WeightLayout(
        base.layer_bytes[:61] + (mtp,), base.expert_bytes[:61] + (11_274_289_152,),
        base.embed_bytes, base.output_bytes, False,
    )  # fmt: skip


def test_mtp_speculation_loads_the_mtp_layer_and_caches_it():
    layout = mtp_layout()
    spec = Speculative("mtp", 1)

    def draft(rank: Rank) -> int:
        return run(
            "deepseek-ai/DeepSeek-V3", layout.total, rank=rank, card=H200, max_model_len=32_768,
            parts=layout, speculative=spec,
        ).weights.draft  # fmt: skip

    r = run(
        "deepseek-ai/DeepSeek-V3",
        layout.total,
        rank=Rank(tp=8, ep=True),
        card=H200,
        max_model_len=32_768,
        parts=layout,
        speculative=spec,
    )
    # DeepSeekMTP shares the target's embedding and head (llm_base_proposer.py
    # _maybe_share_embeddings, _maybe_share_lm_head); the rest is a MoE layer split as the
    # target's are: kept whole its router and norms in bf16 (2 × 1,851,392 B), its q_a/kv_a
    # (15,138,816 B) and its eh_proj and two norms (205,549,568 B), 224,391,168 B in all; its
    # attention and shared expert (216,006,656 B) over TP 8 and its experts over the 8 ranks;
    # its MLA decompressed like the target's: 512 × 16 heads × 256 × 2 B.
    whole = 2 * 1_851_392 + 15_138_816 + 205_549_568
    assert whole == 224_391_168
    assert r.weights.draft == 216_006_656 // 8 + whole + 11_274_289_152 // 8 + 512 * 16 * 256 * 2
    assert r.weights.skipped == 0
    assert r.layout is not None and r.layout.kinds[0].layers == 62
    # Data-parallel attention with expert parallelism: attention whole on every rank, the experts
    # over 8 and W_UK/W_UV for all 128 heads: 1.75 GiB a rank, not the whole 15.4 GB layer.
    dp = draft(Rank(tp=1, dp=8, ep=True))
    assert dp == 216_006_656 + whole + 11_274_289_152 // 8 + 512 * 128 * 256 * 2 == 1_883_238_400
    assert round(dp / GIB, 2) == 1.75
    # Under pipeline parallelism the last stage has no embedding to lend: the MTP builds its own,
    # an eighth a rank (129,280 is a multiple of 64).
    assert draft(Rank(tp=8, pp=2, stage=1, ep=True)) == r.weights.draft + 1_853_358_080 // 8


def test_an_eagle_head_is_split_over_tensor_parallelism_and_builds_an_embedding_under_pp():
    # eagle.py: the head's layers and output head are the target's parallel layers; under PP the
    # last stage builds the embedding the head would borrow (a checkpoint without one: 128,256 ×
    # 4,096 × 2 B), a quarter a rank at TP 4.
    spec = Speculative(
        "eagle3", 1, draft_weight_bytes=2_000_000_000, draft_layers=1,
        draft_embedding_size=128_256 * 4_096 * 2,
    )  # fmt: skip
    one = run(LLAMA, LLAMA_8B_BYTES, rank=Rank(tp=4), max_model_len=16_000, speculative=spec)
    assert one.weights.draft == 2_000_000_000 // 4
    staged = run(
        LLAMA, LLAMA_8B_BYTES, rank=Rank(tp=4, pp=2, stage=1), max_model_len=16_000,
        speculative=spec,
    )  # fmt: skip
    assert staged.weights.draft == 2_000_000_000 // 4 + 128_256 * 4_096 * 2 // 4
    # A draft whose checkpoint holds its embedding does not build another.
    own = replace(spec, draft_embed_bytes=128_256 * 4_096 * 2)
    again = run(
        LLAMA, LLAMA_8B_BYTES, rank=Rank(tp=4, pp=2, stage=1), max_model_len=16_000,
        speculative=own,
    )  # fmt: skip
    assert again.weights.draft == 2_000_000_000 // 4


def test_a_draft_with_no_safetensors_is_weighed_from_its_config_and_said_so():
    # A draft published as pytorch_model.bin: no size to read, so VllmOptions.with_repo weighs
    # it at its config's parameters × 2 B (Llama-3.1-8B's config: 128,256 × 4,096 embedding and
    # head and the final norm, 32 layers of 4,096 × (2 × 4,096 + 2 × 1,024) + 3 × 4,096 ×
    # 14,336 parameters) and the plan says so: never 0.
    from llmfit.plan.engines.vllm_options import VllmOptions

    opts = VllmOptions(
        speculative_config='{"method": "draft_model", "model": "org/draft", '
        '"num_speculative_tokens": 2}',
    ).checked()
    m = model(LLAMA)
    drafted = opts.with_repo("org/draft", m, ())
    spec = drafted.speculative
    assert isinstance(spec, Speculative)
    params = 2 * 128_256 * 4_096 + 4_096 + 32 * (4_096 * 10_240 + 3 * 4_096 * 14_336)
    assert spec.draft_weight_bytes == 2 * params == 16_059_998_208
    assert spec.draft_unweighed == "org/draft"
    r = run(LLAMA, LLAMA_8B_BYTES, card=H200, max_model_len=16_000, speculative=spec)
    assert r.weights.draft == 16_059_998_208
    assert r.notes == (
        "The draft org/draft publishes no safetensors weights to read: it is counted at its "
        "config's parameters in 16-bit, 14.96 GiB, the most vLLM would load.",
    )


def test_gemma3_vision_tower_and_the_text_only_what_if():
    # gemma-3-27b-it's SigLIP tower (27 layers of 1,152, MLP 4,304, 896 px in 14 px patches)
    # and projector: 423,060,336 parameters, the Hub's 27,432,406,640 less the text model's
    # 27,009,346,304 (62 layers x 412,898,560 + 262,208 x 5,376 embedding + 5,376 norm).
    m = model(GEMMA)
    assert m.shapes is not None and m.shapes.vision_params == 423_060_336
    assert 62 * 412_898_560 + 262_208 * 5_376 + 5_376 + 423_060_336 == 27_432_406_640
    r = run(GEMMA, GEMMA_BYTES, max_model_len=32_768)
    assert r.weights.vision == 423_060_336 * 2 == 846_120_672
    # The encoder's profile run (MultiModalBudget): the budget is max(8,192 batched tokens, 256
    # tokens an image), 32 images of 256 tokens; their outputs, kept while the decoder runs, are
    # 8,192 tokens of the text model's 5,376 in bf16.
    assert (r.encoder.modality, r.encoder.items, r.encoder.tokens_per_item) == ("image", 32, 256)
    assert r.encoder_cache == 8_192 * 5_376 * 2 == 88_080_384
    # The encoder itself, first and alone: 32 images of (896 / 14)² = 4,096 patches, each at
    # the least its pixels (3 × 14 × 14) and, in a layer's MLP, the residual, the normed input,
    # fc1's 4,304 and their activation (2 × 1,152 + 2 × 4,304), all bf16: 131,072 × 23,000 B =
    # 2.81 GiB (the 2.66 GiB without the pixels), over what the decoder's run holds:
    # its activation 8,192 × 5,376 × 2.75 + 1,024 × 262,208 × 6 = 1,732,116,480 B and the
    # outputs.
    assert r.encoder.peak == 131_072 * ((2 * 1_152 + 2 * 4_304) * 2 + 588 * 2) == 3_014_656_000
    assert r.activation == 1_732_116_480
    assert r.encoder_peak == 3_014_656_000 - 1_732_116_480 - 88_080_384 == 1_194_459_136
    # --limit-mm-per-prompt '{"image": 0}': _mark_tower_model builds no tower (0.15 on), so
    # neither the tower nor its encoder run costs anything, and the cache gains all three.
    text = run(GEMMA, GEMMA_BYTES, max_model_len=32_768, limit_mm_per_prompt=(("image", 0),))
    assert text.weights.vision == 0 and text.encoder_cache == 0 and text.encoder_peak == 0
    assert text.kv_budget - r.kv_budget == 846_120_672 + 88_080_384 + 1_194_459_136
    # 0.11 built the tower whatever the limit.
    v11 = run(
        GEMMA,
        GEMMA_BYTES,
        version="0.11",
        max_model_len=32_768,
        limit_mm_per_prompt=(("image", 0),),
    )
    assert v11.weights.vision == 846_120_672
    # Under Model Runner V2 in 0.33 only the first pipeline stage builds it.
    later = run(GEMMA, GEMMA_BYTES, rank=Rank(pp=2, stage=1), max_model_len=32_768)
    assert later.weights.vision == 0


def test_tied_embeddings_are_kept_once():
    # gemma-3 ties its output head to the embedding: on one stage the head is the embedding
    # (only the final norm, 5,376 x 2 B, is the output's own); a last stage that is not the
    # first loads its own copy: 262,208 x 5,376 x 2 B (262,208 = 4,097 x 64, no vocabulary
    # padding).
    one = run(GEMMA, GEMMA_BYTES, max_model_len=32_768)
    assert one.weights.output == 5_376 * 2
    last = run(GEMMA, GEMMA_BYTES, rank=Rank(pp=2, stage=1), max_model_len=32_768)
    assert last.weights.output == 5_376 * 2 + 262_208 * 5_376 * 2
    assert last.weights.embedding == 0
    # A tied checkpoint that stores lm_head.weight anyway (Qwen3-0.6B's does): vLLM skips it.
    m = model(GEMMA)
    head = 262_208 * 5_376 * 2
    layout = WeightLayout((400_000_000,) * 62, (0,) * 62, head, head + 10_752, True)
    r = estimate(
        m,
        layout.total + 846_120_672,
        Rank(),
        H100,
        Settings(version=V("0.33"), max_model_len=32_768),
        layout,
    )
    assert r.weights.skipped == head and r.weights.output == 10_752


def test_quantization_fp8_is_fp8_per_tensor_from_0_31():
    # weight_utils.py get_quant_config: --quantization fp8 on a 16-bit checkpoint warns and
    # resolves to fp8_per_tensor (0.31 on); the weights are the same either way: every linear
    # weight in one byte, the embedding, head and norms kept 16-bit.
    assert V("0.33").quantization_fp8_flag == "fp8_per_tensor"
    bf16 = run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000)
    fp8 = run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000, quantization="fp8")
    per_tensor = run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000, quantization="fp8_per_tensor")
    assert fp8.weights == per_tensor.weights
    assert abs(fp8.weights.layers - bf16.weights.layers / 2) <= 32
    assert fp8.weights.embedding == bf16.weights.embedding


def test_lora_slots():
    # --enable-lora --max-loras 4 --max-lora-rank 16 on Llama-3.1-8B (vllm/lora/layers): a
    # layer's adapters hold, a slot, qkv A 3 x 16 x 4,096 and B 16 x (4,096 + 2 x 1,024), o A
    # 16 x 4,096 and B 4,096 x 16, gate_up A 2 x 16 x 4,096 and B 2 x 14,336 x 16, down A 16 x
    # 14,336 and B 4,096 x 16: 1,310,720 weights; 32 layers x 4 slots x 2 B.
    # LlamaForCausalLM names embed_tokens and lm_head in embedding_modules, so both take slots
    # too: the embedding A 128,256 × 16 and B 4,096 × 16, the head (LogitsProcessorWithLoRA) A
    # 16 × 4,096 and B 128,256 × 16: 4,235,264 weights a slot.
    r = run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000, lora=LoRA(4, 16))
    layers = 32 * 4 * 1_310_720 * 2
    embed_head = 4 * (2 * 128_256 * 16 + 2 * 4_096 * 16) * 2
    assert r.weights.lora == layers + embed_head == 335_544_320 + 33_882_112
    assert dict(r.weights.lora_parts) == {
        "attention": 32 * 4 * (3 * 16 * 4_096 + 16 * 6_144 + 16 * 4_096 + 4_096 * 16) * 2,
        "MLP": 32 * 4 * (2 * 16 * 4_096 + 2 * 14_336 * 16 + 16 * 14_336 + 4_096 * 16) * 2,
        "embedding": 4 * (128_256 * 16 + 4_096 * 16) * 2,
        "output head": 4 * (16 * 4_096 + 128_256 * 16) * 2,
    }
    plain = run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000)
    assert plain.kv_budget - r.kv_budget == 369_426_432
    # 8 slots of rank 256: the embedding's and head's alone are 8 × 2 × (128,256 + 4,096) × 256
    # × 2 B = 1.01 GiB.
    wide = run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000, lora=LoRA(8, 256))
    by = dict(wide.weights.lora_parts)
    assert by["embedding"] + by["output head"] == 8 * 2 * 132_352 * 256 * 2 == 1_084_227_584


# --- The held-out run ----------------------------------------------------------------------------


def qwen3_32b():
    """Qwen3-32B bf16: Qwen3-32B-FP8's config.json (fixtures/hub) without its fp8
    quantisation; 32,762,123,264 parameters (64 layers of 487,598,336 + 2 x 151,936 x 5,120
    embedding and head + 5,120 norm), 65,524,246,528 B."""
    from llmfit.sources.config import load_config, model_from_config
    from tests.conftest import HUB

    path = next((HUB / "models--Qwen--Qwen3-32B-FP8" / "snapshots").iterdir()) / "config.json"
    cfg = load_config(path)
    cfg.pop("quantization_config")
    assert 64 * 487_598_336 + 2 * 151_936 * 5_120 + 5_120 == 32_762_123_264
    return model_from_config(cfg, path)


def test_held_out_qwen3_32b_fits_one_h100_at_16000_tokens():
    # Issue 14: vLLM (llm-d's ~0.11 runs) started Qwen3-32B bf16 on one H100 at 16,000 tokens
    # with 4.45 GiB of KV cache left; the old plan said it does not fit.
    m = qwen3_32b()
    s = Settings(version=V("0.11"), gpu_memory_utilization=0.9, max_model_len=16_000)
    r = estimate(m, 65_524_246_528, Rank(), H100_LOGGED, s)
    # requested = ceil(0.9 x 85,018,877,624) = 76,516,989,862 B (gpu_worker request_memory)
    assert r.requested == 76_516_989_862
    # weights 65,524,246,528 + the rotary cache 40,960 x 128 x 2 B = 65,534,732,288
    assert r.weights.total == 65_534_732_288
    # activation 38 x 1,024 x 151,936 + 8,192 x 5,120 x 2.75 = 5,912,133,632 + 115,343,360
    # = 6,027,476,992; non-torch 0.13 GiB = 139,586,437
    assert r.activation == 6_027_476_992
    # 0.11 captures CUDA graphs after the KV cache: they are not in the budget. No TP charge.
    assert not r.cuda_graphs_in_budget
    assert r.kv_budget == 76_516_989_862 - 65_534_732_288 - 6_027_476_992 - 139_586_437
    assert r.kv_budget == 4_815_194_145  # 4.484 GiB, vLLM logged 4.45
    # 16,000 tokens: 1,000 blocks of 64 layers x 16 tokens x 8 KV heads x 256 x 2 B.
    assert 1_000 * 64 * 16 * 8 * 256 * 2 == 4_194_304_000 < r.kv_budget
    assert r.fits
    # vLLM 0.33 fits it too: its graphs (51 sizes x 64 layers x 56 KiB = 187,170,816 B) come
    # out of the budget, but Model Runner V2's sampler warm-up is far smaller.
    new = estimate(
        m,
        65_524_246_528,
        Rank(),
        H100_LOGGED,
        Settings(version=V("0.33"), gpu_memory_utilization=0.9, max_model_len=16_000),
    )
    assert new.cuda_graphs == 187_170_816 and new.fits


# --- What vLLM reports ---------------------------------------------------------------------------


def test_longest_max_model_len_is_vllms_binary_search():
    # Llama-3.1-8B on an RTX 4090 (25,386,352,640 B), vLLM 0.33, 2,048 tokens and 256 requests:
    # requested ceil(0.9 x 25,386,352,640) = 22,847,717,376; weights 16,060,522,496 + rotary
    # 131,072 x 128 x 2 = 16,094,076,928; activation 6 x 256 x 128,256 + 2,048 x 4,096 x 2.75 =
    # 220,069,888; sampler state 256 x 128,256 x 4.125 = 135,438,336; non-torch 139,586,437;
    # graphs min(2 x 256, 512) -> 51 sizes x 32 layers x 56 KiB = 93,585,408. Budget
    # 6,164,960,379 B; less the null block (2,097,152 B, 0.29 on) 6,162,863,227 holds 2,938
    # blocks of 32 x 16 x 8 x 256 x 2 = 2,097,152 B: 47,008 tokens.
    r = run(LLAMA, LLAMA_8B_BYTES, card=RTX4090, max_model_len=131_072)
    assert r.kv_budget == 6_164_960_379
    assert r.max_model_len_fit == 2_938 * 16 == 47_008
    assert not r.fits  # 131,072 tokens need 8,192 blocks
    assert run(LLAMA, LLAMA_8B_BYTES, card=RTX4090, max_model_len=47_008).fits
    assert not run(LLAMA, LLAMA_8B_BYTES, card=RTX4090, max_model_len=47_009).fits


def test_pipeline_stages_share_the_smallest_block_count():
    # get_kv_cache_configs gives every stage the smallest stage's num_blocks.
    m = model("meta-llama/Meta-Llama-3.1-405B")
    stages = [
        estimate(
            m,
            2 * 405_853_388_800,
            Rank(tp=8, pp=2, stage=s),
            H100,
            Settings(version=V("0.33"), max_model_len=8192, gpu_memory_utilization=0.9),
        )
        for s in (0, 1)
    ]
    # get_pp_indices: 126 layers -> 63 and 63; the embedding on stage 0, the head on stage 1.
    assert stages[0].weights.embedding > 0 and stages[0].weights.output == 0
    assert stages[1].weights.embedding == 0 and stages[1].weights.output > 0
    blocks, conc, tokens = combine_stages(stages)
    assert blocks == min(s.num_blocks for s in stages)
    assert conc == blocks / (8192 // 16) and tokens == int(conc * 8192)


# --- Properties over every fixture model and release ---------------------------------------------

FIXTURE_REPOS = sorted(
    p.name.removeprefix("models--").replace("--", "/", 1)
    for p in (__import__("tests.conftest", fromlist=["HUB"]).HUB).iterdir()
    if (p / "snapshots").is_dir() and any((p / "snapshots").glob("*/config.json"))
)


@pytest.mark.parametrize("repo", FIXTURE_REPOS)
def test_every_fixture_model_plans_under_every_release(repo: str):
    # No model of the fixture cache breaks the arithmetic at any release, and what vLLM would
    # say stays coherent: a longer context never needs fewer blocks nor gets more concurrency,
    # an fp8 cache never holds less than a bf16 one, and what fits at L fits at L / 2.
    m = model(repo)
    if m.task != "generate" or not m.max_context:
        return
    wb = 2 * (m.params or 8_000_000_000)
    ctx = min(m.max_context, 32_768)
    for version in (V("0.11"), V("0.19"), V("0.26"), V("0.28"), V("0.33")):
        for rank in (Rank(), Rank(tp=2), Rank(pp=2, stage=1)):
            s = Settings(version=version, max_model_len=ctx)
            r = estimate(m, wb, rank, H200, s)
            short = estimate(m, wb, rank, H200, Settings(version=version, max_model_len=ctx // 2))
            assert r.layout is not None and short.layout is not None
            assert short.layout.blocks_per_request <= r.layout.blocks_per_request
            assert short.max_concurrency >= r.max_concurrency
            assert short.fits or not r.fits
            assert r.max_model_len_fit >= ctx or not r.fits
            fp8 = estimate(
                m,
                wb,
                rank,
                H200,
                Settings(version=version, max_model_len=ctx, kv_cache_dtype="fp8"),
            )
            assert fp8.max_concurrency >= r.max_concurrency


# --- issue 26: LoRA on experts, the MoE workspace, stage buffers, the encoder's profile run ------

QWEN3_30B = "Qwen/Qwen3-30B-A3B"
QWEN3_30B_BYTES = 61_064_245_248  # the fixture index's total_size
QWEN3_235B = "Qwen/Qwen3-235B-A22B"
QWEN3_235B_BYTES = 470_187_269_120  # the fixture index's total_size


def test_lora_slots_on_a_moes_experts():
    # Qwen3-30B-A3B (48 MoE layers of 128 experts, hidden 2,048, moe_intermediate 768; 32 heads
    # and 4 KV heads of 128), --enable-lora at rank 16 (vllm/lora/layers/fused_moe.py
    # FusedMoEWithLoRA, 0.12 on): a layer's experts, each slot, w13's A (2 × 16 × 2,048) and B
    # (2 × 768 × 16), w2's A (16 × 768) and B (2,048 × 16), 128 experts: 17,301,504 weights;
    # attention 3 × 16 × 2,048 + 16 × 5,120 + 16 × 4,096 + 2,048 × 16 = 278,528; the router
    # (ReplicatedLinear 2,048 → 128) 16 × 2,048 + 128 × 16 = 34,816; Qwen3MoeForCausalLM's
    # embedding and head (151,936 + 2,048) × 16 each. 1.58 GiB a slot, in bf16.
    r = run(QWEN3_30B, QWEN3_30B_BYTES, max_model_len=32_768, lora=LoRA(1, 16))
    experts = 48 * 128 * 16 * (2 * (2_048 + 768) + 768 + 2_048) * 2
    attention = 48 * 278_528 * 2
    router = 48 * 34_816 * 2
    embed = head = (151_936 + 2_048) * 16 * 2
    assert dict(r.weights.lora_parts) == {
        "attention": attention, "experts": experts, "router": router, "embedding": embed,
        "output head": head,
    }  # fmt: skip
    assert experts == 1_660_944_384
    assert r.weights.lora == 1_700_880_384 and round(r.weights.lora / GIB, 2) == 1.58
    # Expert parallelism over 2 ranks keeps whole experts, 64 of them a rank; without it every
    # expert at 768 / 2 of its intermediate width.
    ep = run(QWEN3_30B, QWEN3_30B_BYTES, rank=Rank(tp=2, ep=True), lora=LoRA(1, 16))
    plain_tp = run(QWEN3_30B, QWEN3_30B_BYTES, rank=Rank(tp=2), lora=LoRA(1, 16))
    assert dict(ep.weights.lora_parts)["experts"] == 48 * 64 * 16 * 8_448 * 2
    assert dict(plain_tp.weights.lora_parts)["experts"] == 48 * 128 * 16 * 7_296 * 2
    # 0.11 had no LoRA for the experts, and kept 256 rows more in the embedding's adapter (and
    # their embeddings) and a head padded to 256 rows: 152,064.
    old = run(QWEN3_30B, QWEN3_30B_BYTES, version="0.11", max_model_len=32_768, lora=LoRA(1, 16))
    by = dict(old.weights.lora_parts)
    assert "experts" not in by
    assert by["embedding"] == ((151_936 + 256) * 16 + 2_048 * 16 + 256 * 2_048) * 2
    assert by["output head"] == (16 * 2_048 + 152_064 * 16) * 2


def test_eight_lora_slots_on_qwen3_30b_do_not_start_on_an_h100():
    # The command: 8 slots of rank 16 cost 12.67 GiB beside the 56.87 GiB checkpoint;
    # what is left of 0.92 of the card does not hold one request of 32,768 tokens.
    r = run(
        QWEN3_30B, QWEN3_30B_BYTES, gpu_memory_utilization=None, max_model_len=32_768,
        lora=LoRA(8, 16),
    )  # fmt: skip
    assert r.weights.lora == 8 * 1_700_880_384
    assert not r.fits
    assert run(QWEN3_30B, QWEN3_30B_BYTES, gpu_memory_utilization=None, max_model_len=32_768).fits


def test_the_moe_workspace_holds_every_ranks_batch_under_data_parallel_attention():
    # fused_moe/modular_kernel.py _allocate_buffers (Triton experts' workspace_shapes): M × 8
    # experts a token × (max(1,536, 4,096) + max(3,072, 4,096)) bf16 for Qwen3-235B (hidden
    # 4,096, moe_intermediate 1,536; expert parallelism keeps it whole). With --data-parallel-
    # size 8 the all-gather gives each rank's experts all 8 ranks' 8,192 tokens: 8 GiB a rank;
    # at --tensor-parallel-size 8 the 8,192 tokens every rank holds: 1 GiB.
    dp = run(QWEN3_235B, QWEN3_235B_BYTES, rank=Rank(tp=1, dp=8, ep=True), card=H200,
             max_model_len=40_960)  # fmt: skip
    tp = run(QWEN3_235B, QWEN3_235B_BYTES, rank=Rank(tp=8, ep=True), card=H200,
             max_model_len=40_960)  # fmt: skip
    assert dp.moe_workspace == 8 * 8_192 * 8 * (4_096 + 4_096) * 2 == 8 * GIB
    assert tp.moe_workspace == 8_192 * 8 * 8_192 * 2 == GIB
    # 0.13-0.17 keep it from the profile run too, but sized for at most 16,384 tokens; 0.12
    # frees it after each layer, so it is only a peak that the sampler's warm-up overtops.
    v17 = run(QWEN3_235B, QWEN3_235B_BYTES, rank=Rank(tp=1, dp=8, ep=True), card=H200,
              version="0.17", max_model_len=40_960)  # fmt: skip
    assert v17.moe_workspace == 16_384 * 8 * 8_192 * 2 == 2 * GIB
    v12 = run(QWEN3_235B, QWEN3_235B_BYTES, rank=Rank(tp=1, dp=8, ep=True), card=H200,
              version="0.12", max_model_len=40_960)  # fmt: skip
    assert v12.moe_workspace == 0
    # 0.12's activation: the hidden states 8,192 × 4,096 × 2.75 and the sorting sampler's 24 B ×
    # 1,024 requests × 151,936 (3.48 GiB, more than the 2 GiB transient workspace).
    assert v12.activation == 8_192 * 4_096 * 11 // 4 + 24 * 1_024 * 151_936
    # A dense model has none.
    assert run(LLAMA, LLAMA_8B_BYTES, max_model_len=16_000).moe_workspace == 0


def test_pipeline_stages_after_the_first_keep_the_activations_they_receive():
    # intermediate_tensors: hidden states and residual for 8,192 tokens of the 405B's 16,384 in
    # bf16: 0.5 GiB on every card of the second stage, none on the first. Model Runner V2 makes
    # them at load, which vLLM counts only from 0.27 (the drop in free memory); the V1 runner in
    # its profile run, counted in every release.
    m = "meta-llama/Meta-Llama-3.1-405B"
    later = run(m, 811_706_777_600, rank=Rank(tp=8, pp=2, stage=1), max_model_len=8_192)
    first = run(m, 811_706_777_600, rank=Rank(tp=8, pp=2, stage=0), max_model_len=8_192)
    assert later.stage_buffers == 8_192 * 16_384 * 2 * 2 == GIB // 2
    assert first.stage_buffers == 0
    mrv2_26 = run(m, 811_706_777_600, rank=Rank(tp=8, pp=2, stage=1), version="0.26",
                  max_model_len=8_192)  # fmt: skip
    v1_21 = run(m, 811_706_777_600, rank=Rank(tp=8, pp=2, stage=1), version="0.21",
                max_model_len=8_192)  # fmt: skip
    assert mrv2_26.model_runner_v2 and mrv2_26.stage_buffers == 0
    assert not v1_21.model_runner_v2 and v1_21.stage_buffers == GIB // 2


def test_qwen25_vl_profiles_its_encoder_on_a_video_that_grows_with_max_model_len():
    # qwen2_vl.py: the largest picture is 12,845,056 pixels in 28 × 28 merged tokens, 16,384 of
    # them; a video at 128,000 tokens takes the 14 frames the cap allows, in pairs, 7 × 16,384 =
    # 114,688 tokens, the modality with the most (MultiModalBudget), one item. Its 458,752
    # patches each hold at least its pixels (3 × 2 × 14 × 14 in bf16) and, in the widest layer,
    # the residual, the normed input, the gated MLP's gate and up (2 × 3,420) and its
    # activation (3,420) at hidden 1,280: 12 GiB, where the decoder's profile run held under 1.
    m = model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert m.shapes is not None and m.shapes.vision_params == 676_550_144
    bytes_ = 16_584_333_312
    r = estimate(m, bytes_, Rank(), H100, Settings(version=V("0.33"), max_model_len=128_000))
    assert (r.encoder.modality, r.encoder.items, r.encoder.tokens_per_item) == (
        "video", 1, 114_688,
    )  # fmt: skip
    per_patch = (2 * 1_280 + 3 * 3_420) * 2 + 1_176 * 2
    assert r.encoder.peak == 458_752 * per_patch == 12_841_385_984
    assert r.encoder_cache == 114_688 * 3_584 * 2
    assert r.encoder_peak == r.encoder.peak - r.activation - r.encoder_cache
    # At 32,768 tokens the video is 4 frames, 32,768 tokens.
    short = estimate(m, bytes_, Rank(), H100, Settings(version=V("0.33"), max_model_len=32_768))
    assert short.encoder.tokens_per_item == 32_768
    # --limit-mm-per-prompt '{"image": 0}' leaves video at its default 999: the tower is built
    # and profiled as before; only both at 0 make it text only (config/multimodal.py,
    # _mark_tower_model).
    no_image = estimate(
        m,
        bytes_,
        Rank(),
        H100,
        Settings(version=V("0.33"), max_model_len=128_000, limit_mm_per_prompt=(("image", 0),)),
    )
    assert no_image.weights.vision == r.weights.vision > 0
    assert no_image.encoder == r.encoder
    text = estimate(
        m, bytes_, Rank(), H100,
        Settings(version=V("0.33"), max_model_len=128_000,
    limit_mm_per_prompt=(("image", 0), ("video", 0))),
    )  # fmt: skip
    assert text.weights.vision == 0 and text.encoder_peak == 0


def test_an_mxfp4_moe_pads_each_tensor_parallel_partition():
    # fused_moe/oracle/mxfp4.py rounds intermediate_size_per_partition, after the split: at TP 2
    # on an A100 (Marlin) each rank's 1,440 becomes 1,536 (hidden 2,880 → 3,072): 32 experts ×
    # (3 × 3,072 × 1,536 × 17/32 + (2 × 1,536 + 3,072) × 2) = 241,041,408 B a layer a rank,
    # against half the stored 423,567,360; with expert parallelism 16 whole experts at 2,944.
    tp2 = run("openai/gpt-oss-20b", GPT_OSS_BYTES, rank=Rank(tp=2), card=A100, version="0.19",
              gpu_memory_utilization=0.65, max_model_len=131_072)  # fmt: skip
    assert tp2.weights.mxfp4_padding == 24 * (241_041_408 - 423_567_360 // 2)
    ep2 = run("openai/gpt-oss-20b", GPT_OSS_BYTES, rank=Rank(tp=2, ep=True), card=A100,
              version="0.19", gpu_memory_utilization=0.65, max_model_len=131_072)  # fmt: skip
    assert ep2.weights.mxfp4_padding == 24 * (230_907_904 - 423_567_360 // 2)
