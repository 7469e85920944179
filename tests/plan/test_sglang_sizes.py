"""SGLang's memory arithmetic, worked out by hand from the fixture configs and SGLang 0.5.23's code.

The rule (mem_cache/kv_cache_configurator.py _profile_available_bytes, pool_configurator.py
calculate_pool_sizes): the KV pool gets mem_fraction_static × the free memory measured before the
weights load, less the weights, and holds that // cell tokens, the cell being a token's bytes over
the rank's layers. llmfit takes the free memory as the card's CUDA total less 0.6 GiB
(sglang_sizes.PRE_BASELINE = int(0.6 × 2^30) = 644,245,094 B).
"""

from __future__ import annotations

import json

from llmfit.plan.layout import Layout
from llmfit.plan.model import AttentionKind, Shape
from tests.conftest import FIXTURES
from tests.plan.test_model import model

from llmfit.plan.engines import sglang_sizes as s  # isort: skip

H100 = 85_045_477_376  # the card table's h100-80g: 81,105.69 MiB
H200 = 150_278_766_592  # h200-141g: 143,317 MiB
RTX4090 = 25_386_352_640  # rtx4090-24g: 24,210.31 MiB
PRE = 644_245_094


def test_the_free_memory_before_loading_is_the_card_less_the_cuda_context():
    assert s.PRE_BASELINE == PRE
    # 0.88 of (85,045,477,376 − 644,245,094) = 0.88 × 84,401,232,282.
    assert s.static_budget(H100, 0.88) == 74_273_084_408


def test_dense_gqa_llama_31_8b_tokens_at_tp1_and_tp2():
    shape = Shape.of(model("meta-llama/Llama-3.1-8B-Instruct"))
    # 32 layers × 8 KV heads × (128 + 128) × 2 B: the cell of DefaultPoolConfigurator.
    assert s.cells(shape, 1, swa_pool=False) == s.Cells(131_072)
    # At TP 2 each rank keeps 4 of the 8 KV heads.
    assert s.cells(shape, 2, swa_pool=False) == s.Cells(65_536)
    # Static share 0.88 on one H100, the weights 16,060,522,496 B:
    # 74,273,084,408 − 16,060,522,496 = 58,212,561,912 B; // 131,072 = 444,126 tokens. (SGLang
    # logged max_total_num_tokens=444,500 for this model at 0.88 on an 80 GB card whose free
    # memory it measured as 78.81 GiB: fixtures/calibration/sglang-logs.jsonl.)
    budget = s.static_budget(H100, 0.88) - 16_060_522_496
    assert budget == 58_212_561_912
    pool = s.kv_pool(budget, s.Cells(131_072), context_len=131_072)
    assert pool.tokens == 444_126
    # max_running_requests (resolve_max_num_reqs): 444,126 / 131,072 × 512 = 1,734, held up to
    # 2,048; at most half the tokens (222,063): 2,048. Its request table: 2,049 rows of
    # 131,072 + 4 int32s.
    assert pool.max_running_requests == 2048
    assert pool.request_table == 2049 * 131_076 * 4


def test_mla_deepseek_v3_keeps_the_whole_latent_on_every_card():
    shape = Shape.of(model("deepseek-ai/DeepSeek-V3"))
    # 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B, not divided by TP
    # (calculate_mla_kv_cache_dim; the latent is one per token, on every rank).
    assert s.cells(shape, 8, swa_pool=False) == s.Cells(61 * 576 * 2) == s.Cells(70_272)
    # At TP 8 on an H200 with a static share of 0.85: int(0.85 × (150,278,766,592 − 644,245,094))
    # = 127,189,343,273 B, less the card's 1/8 of 688,586,727,753 B (86,073,340,970) =
    # 41,116,002,303 B; // 70,272 = 585,097 tokens.
    budget = s.static_budget(H200, 0.85) - 86_073_340_970
    assert budget == 41_116_002_303
    assert s.kv_pool(budget, s.cells(shape, 8, swa_pool=False), context_len=163_840).tokens == (
        585_097
    )
    # fp8 halves the latent (--kv-cache-dtype fp8_e4m3).
    assert s.cells(Shape.of(model("deepseek-ai/DeepSeek-V3"), "fp8"), 8, swa_pool=False) == (
        s.Cells(35_136)
    )


def test_sliding_window_gpt_oss_keeps_its_windows_in_a_pool_of_their_own():
    m = model("openai/gpt-oss-20b")
    assert s.hybrid_swa(m.architecture)  # GptOssForCausalLM is in SWA_SINK_ARCHS
    shape = Shape.of(m)
    # 12 full and 12 sliding layers, 8 KV heads × 64, bf16; at TP 2, 4 heads a rank:
    # 12 × 4 × (64 + 64) × 2 B = 12,288 B a token in each kind.
    c = s.cells(shape, 2, swa_pool=True)
    assert c == s.Cells(full=12_288, swa=12_288)
    # A token of max_total_num_tokens costs the full layers' 12,288 B and 0.8 × the sliding
    # layers' (the SWA pool holds 0.8 tokens for each full one): 22,118.4 B. A 10 GiB budget:
    # 10,737,418,240 // 22,118.4 = 485,451 full tokens, and int(485,451 × 0.8) = 388,360 in the
    # SWA pool (HybridSWAPoolConfigurator._solve_pool_sizes).
    pool = s.kv_pool(10 * 2**30, c, context_len=131_072)
    assert pool.cell == 22_118.4
    assert (pool.tokens, pool.swa_tokens) == (485_451, 388_360)


def test_gemma_3s_sliding_layers_are_given_the_full_context():
    # SGLang turns its hybrid SWA pool off for Gemma 2 and 3 (model_overrides/gemma2_gemma3.py:
    # disable_hybrid_swa_memory), so all 62 layers keep every token: 62 × 16 KV heads × 256 × 2 B
    # = 507,904 B a token, where vLLM keeps only the 10 full layers' 81,920 B growing.
    m = model("google/gemma-3-27b-it")
    assert not s.hybrid_swa(m.architecture)
    assert s.cells(Shape.of(m), 1, swa_pool=False) == s.Cells(507_904)
    assert Shape.of(m).kv_bytes_per_token() == 81_920


def test_hybrid_linear_qwen3_next_splits_the_pool_between_states_and_tokens():
    shape = Shape.of(model("Qwen/Qwen3-Next-80B-A3B-Thinking"))
    # 12 full-attention layers (every fourth of 48), 2 KV heads × 256: at TP 4 one head a rank,
    # 12 × 1 × 512 × 2 B = 12,288 B a token.
    assert s.cells(shape, 4, swa_pool=False) == s.Cells(12_288)
    # 36 gated-delta-net layers: conv (4 − 1) × (2 × 128 × 16 + 128 × 32) = 24,576 and state
    # 32 × 128 × 128 = 524,288 elements, 1,097,728 B at bf16; SGLang keeps the state in fp32 (the
    # whole is charged at 4 B: 2,195,456 B), split over TP 4: 548,864 B a layer, 19,759,104 B a
    # request.
    p = 36 * 548_864
    assert s.state_bytes(shape, 4) == p == 19_759_104
    # A 40 GiB budget: 0.9 / 1.9 of it, 20,344,055,612.6 B, to state slots:
    # (20,344,055,612.6 − p) // p = 1,028 slots, 1,029 with the padding one (20,332,118,016 B);
    # the rest, 22,617,554,944 B, // 12,288 = 1,840,621 tokens. Requests: 2,048 by the tokens,
    # but 1,028 slots // 5 a request (3, and the extra buffer's two tracking slots) = 205.
    pool = s.kv_pool(40 * 2**30, s.Cells(12_288), state_per_request=p, context_len=262_144)
    assert (pool.state_slots, pool.state_bytes) == (1_028, 1_029 * p)
    assert pool.tokens == (40 * 2**30 - 1_029 * p) // 12_288 == 1_840_621
    assert pool.max_running_requests == 205


def test_a_cap_on_the_pool_and_on_requests():
    # --max-total-tokens caps the pool; --max-running-requests is per data-parallel rank.
    pool = s.kv_pool(
        10 * 2**30, s.Cells(131_072), context_len=8192, max_total_tokens=50_000,
        max_running_requests=64, attn_dp=8,
    )  # fmt: skip
    assert (pool.tokens, pool.max_running_requests) == (50_000, 8)


def test_sglangs_default_static_share_on_an_h100_at_tp1():
    # memory_hook.handle_gpu_memory_settings on an 81,105.69 MiB card, TP 1: chunked prefill
    # 8,192, decode graphs up to batch 256, prefill graphs for 58 token counts up to 8,192.
    # reserved = 512 + 8,192 × 1.5 + 1 / 8 × 1,024 + 256 × 2 + 58 × 8 = 13,904 MiB (over the
    # 10 GiB floor); share = round((81,105.69 − 13,904) / 81,105.69, 3) = round(0.82857) = 0.829.
    assert s.prefill_graph_sizes(8192) == 8 + 14 + 8 + 8 + 12 + 8 == 58
    r = s.default_reserve(H100, s.ServerSizes(1), mla=False)
    assert (r.chunked_prefill_size, r.decode_max_bs, r.prefill_graphs) == (8192, 256, True)
    assert r.reserved_mib == 13_904
    assert r.mem_fraction_static == 0.829


def test_data_parallel_attention_reserves_graph_room_for_every_rank():
    # DeepSeek-V3 (MLA) on 8 H200 as --tp-size 8 --attn-dp-size 8: decode graphs up to 512
    # (TP ≥ 4), 512 × 2 + 512 × 8 × 3 + 512 × 8 × 1.5 (past 300) MiB, and 1.5 GiB for an MLA
    # model's prefill graphs: reserved = 512 + 12,288 + 8 / 8 × 1,024 + 1,024 + 12,288 + 6,144 +
    # 1,536 = 34,816 MiB; share = round((143,317 − 34,816) / 143,317, 3) = 0.757.
    sizes = s.server_sizes(Layout(tp=1, dp=8, ep=True), moe=True)
    assert sizes == s.ServerSizes(tp_size=8, attn_dp_size=8, ep_size=8)
    assert sizes.attn_tp == 1 and sizes.ranks == 8
    r = s.default_reserve(H200, sizes, mla=True)
    assert r.reserved_mib == 34_816
    assert r.mem_fraction_static == 0.757


def test_a_24_gb_card_reserves_by_its_smaller_batches():
    # RTX 4090 (24,210.31 MiB) at TP 1: chunked prefill 4,096, decode graphs up to 48, prefill
    # graphs for the 50 token counts up to 4,096: reserved = 512 + 6,144 + 128 + 96 + 400 =
    # 7,280 MiB (no floor under 60 GiB); share = round(16,930.31 / 24,210.31, 3) = 0.699.
    r = s.default_reserve(RTX4090, s.ServerSizes(1), mla=False)
    assert (r.chunked_prefill_size, r.decode_max_bs, r.reserved_mib) == (4096, 48, 7_280)
    assert r.mem_fraction_static == 0.699


def test_a_vision_encoder_lowers_the_share():
    # Qwen2.5-VL-7B's vision tower: `depth` 32 × hidden 1,280. Prefill graphs are off for a
    # multimodal model not on SGLang's list, so on an H100 at TP 1 reserved = 512 + 12,288 + 128 +
    # 512 = 13,440 MiB: round(0.83429, 3) = 0.834; then × 0.95 × (1 − 0.1 × (32 × 1,280² /
    # (24 × 1,024²) − 1)) = 0.95 × 0.8916667 (adjust_mem_fraction_for_vlm): 0.7064675.
    m = model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert m.vision_tower == (32, 1280)
    r = s.default_reserve(
        H100, s.ServerSizes(1), mla=False, vision_tower=m.vision_tower, architecture=m.architecture
    )
    assert r.reserved_mib == 13_440 and not r.prefill_graphs
    assert abs(r.mem_fraction_static - 0.7064675) < 1e-9
    # Gemma 3 carries a vision tower too, but SGLang serves it as text only unless asked
    # (--enable-multimodal): no reduction, prefill graphs on.
    g = model("google/gemma-3-27b-it")
    assert g.vision_tower == (27, 1152) and not s.multimodal(g.architecture, g.vision_tower)
    r = s.default_reserve(
        H100, s.ServerSizes(1), mla=False, vision_tower=g.vision_tower, architecture=g.architecture
    )
    assert r.prefill_graphs and r.mem_fraction_static == 0.829


def test_the_default_share_is_sglangs_own_on_every_recorded_case():
    # fixtures/engines/sglang-0.5.23-defaults.json: what SGLang 0.5.23's own argument resolution
    # (ServerArgs.resolve_once) picked for 19 cards, models and layouts, the card's memory given
    # as the card table's (dump_sglang_defaults.py).
    doc = json.loads((FIXTURES / "engines" / "sglang-0.5.23-defaults.json").read_text())
    assert doc["sglang"] == s.VERSION and len(doc["cases"]) == 19
    for case in doc["cases"]:
        flags = dict(zip(case["flags"][::2], case["flags"][1::2], strict=True))
        sizes = s.ServerSizes(
            tp_size=int(flags.get("--tp-size", 1)),
            pp_size=int(flags.get("--pp-size", 1)),
            dp_size=int(flags.get("--dp-size", 1)),
            attn_dp_size=int(flags.get("--attn-dp-size", 1)),
            ep_size=int(flags.get("--ep-size", 1)),
        )
        m = model(case["model"].replace("--", "/"))
        r = s.default_reserve(
            int(case["card_mib"] * s.MIB),
            sizes,
            mla=any(g.kind is AttentionKind.MLA for g in m.layer_groups),
            chunked_prefill_size=int(flags.get("--chunked-prefill-size", 0)) or None,
            max_running_requests=int(flags.get("--max-running-requests", 0)) or None,
            vision_tower=m.vision_tower,
            architecture=m.architecture,
        )
        got = (
            round(r.mem_fraction_static, 9),
            r.chunked_prefill_size // sizes.attn_dp_size,  # SGLang divides it among DP ranks
            r.decode_max_bs,
            "breakable" if r.prefill_graphs else "disabled",
        )
        want = (
            round(case["mem_fraction_static"], 9),
            case["chunked_prefill_size"],
            case["decode_max_bs"],
            case["prefill_graphs"],
        )
        assert got == want, case


def test_sglang_splits_uneven_pipelines_towards_the_last_stages():
    from llmfit.plan.engines.sglang import pp_partition

    # get_pp_indices: 126 layers over 4 stages, 31 each and the remainder 2 to the last two.
    assert pp_partition(126, 4) == (31, 31, 32, 32)
    assert pp_partition(61, 2) == (30, 31)


def test_one_sequence_needs_its_tokens_and_with_states_their_share_beside_them():
    assert s.sequence_bytes(s.Cells(131_072), 0, 32_768) == 32_768 * 131_072
    # With states the KV part is 1 / 1.9 of the budget.
    need = s.sequence_bytes(s.Cells(12_288), 19_759_104, 32_768)
    assert need == -(-32_768 * 12_288 * 19 // 10)
    pool = s.kv_pool(need, s.Cells(12_288), state_per_request=19_759_104, context_len=32_768)
    assert pool.tokens >= 32_768 and pool.max_running_requests >= 1


def test_a_reserve_past_the_card_leaves_no_share():
    # 32 attention-DP ranks on H100s: 512 × 32 × 4.5 MiB of decode graphs alone (73,728 MiB)
    # is most of an 81,106 MiB card; SGLang's share would be negative and it would not start.
    r = s.default_reserve(H100, s.ServerSizes(32, attn_dp_size=32, ep_size=32), mla=True)
    assert r.reserved_mib > H100 / s.MIB and r.mem_fraction_static == 0.0


# --- issue 26: what SGLang splits, what it keeps, and where it differs on AMD -------------------


def test_the_default_share_reads_the_card_as_nvidia_smi_does():
    # utils/common.py get_device_memory_capacity: nvidia-smi's memory.total, 81,559 MiB on an H100
    # (shared/fixtures/fleet/gpu-memory-totals.md), not CUDA's 81,105.69 MiB; a class whose
    # nvidia-smi total is not known keeps its own (an MI300X's HIP total).
    assert s.smi_bytes("h100-80g", H100) == 81_559 * 2**20
    assert s.smi_bytes("h200-141g", H200) == 143_771 * 2**20
    assert s.smi_bytes("mi300x-192g", 206_141_652_992) == 206_141_652_992


def test_prefill_graphs_are_reserved_on_cuda_only():
    # One MI300X (HIP's 196,592 MiB), Llama-3.1-8B at TP 1: chunked prefill 16,384 (a card of
    # 160 GiB or more), decode graphs up to 512; reserved 512 + 16,384 × 1.5 + 128 + 512 × 2 =
    # 26,240 MiB and no prefill graphs on ROCm, so (196,592 − 26,240) / 196,592 = 0.8665. On a
    # CUDA card of that size the 74 prefill graph sizes up to 16,384 add 74 × 8 = 592 MiB.
    card = 196_592 * 2**20
    sizes = s.ServerSizes(tp_size=1)
    rocm = s.default_reserve(card, sizes, mla=False, backend="rocm")
    cuda = s.default_reserve(card, sizes, mla=False, backend="cuda")
    assert (rocm.prefill_graphs, rocm.reserved_mib) == (False, 26_240)
    assert round(rocm.mem_fraction_static, 3) == round((196_592 - 26_240) / 196_592, 3) == 0.867
    assert (cuda.prefill_graphs, cuda.reserved_mib) == (True, 26_240 + 74 * 8)


def test_aiter_takes_085_of_the_share_past_8192_tokens_on_rocm():
    # attention_hook.py: aiter, the default attention backend on ROCm for MHA models and for MLA
    # at 16 or 128 heads a rank, scales mem_fraction_static by 0.85 once the context is over
    # 8,192, a share given on the command line too.
    assert s.aiter_scaled("rocm", False, 8, 131_072)
    assert not s.aiter_scaled("rocm", False, 8, 8192)
    assert not s.aiter_scaled("cuda", False, 8, 131_072)
    assert s.aiter_scaled("rocm", True, 16, 32_768) and not s.aiter_scaled("rocm", True, 32, 32_768)


def test_a_gdn_state_keeps_its_convolution_in_bf16_and_its_temporal_state_in_fp32():
    # configs/mamba_utils.py mamba2_state_dtype: conv bf16, temporal fp32. Qwen3-Next's GDN:
    # conv (4 − 1) × (2 × 16 × 128 + 32 × 128) = 24,576 elements × 2 B, temporal 32 × 128 × 128
    # = 524,288 × 4 B: 2,146,304 B a layer at TP 1 over its 36 GDN layers (the whole at fp32, as
    # before, was 2 × 1,097,728 = 2,195,456 B a layer).
    m = model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert m.shapes is not None
    shape = Shape.of(m)
    assert s.state_bytes(shape, 1, m.shapes.mamba) == 36 * (24_576 * 2 + 524_288 * 4)
    assert 36 * (24_576 * 2 + 524_288 * 4) == 77_266_944
    assert s.state_bytes(shape, 1) == 36 * 2 * 1_097_728
    # TP 2 halves both.
    assert s.state_bytes(shape, 2, m.shapes.mamba) == 36 * (12_288 * 2 + 262_144 * 4)


def test_the_hybrid_swa_architectures_are_sglangs_whole_list():
    # configs/model_config.py is_hybrid_swa_model (0.5.23): the SWA-sink families, MiMo-V2,
    # Step 3.5/3.7, Gemma 4 and the rest, 28 in all.
    assert len(s.HYBRID_SWA_ARCHITECTURES) == 28
    assert {"BeamForCausalLM", "IQuestQ1ForCausalLM", "MuseGlimmerForCausalLM"} <= (
        s.HYBRID_SWA_ARCHITECTURES
    )
