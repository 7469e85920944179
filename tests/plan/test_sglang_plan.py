"""SGLang options: per-card bytes, pools and launch lines worked out by hand from the fixtures and
SGLang 0.5.23's rules (see tests/plan/test_sglang_sizes.py for the arithmetic alone)."""

from __future__ import annotations

from llmfit.plan.artifact import Artifact
from llmfit.plan.engines import default_keys, engine, planned
from llmfit.plan.engines.sglang import SglangLaunch
from llmfit.plan.engines.sglang_options import SglangOptions
from llmfit.plan.fleet import GIB, Fleet, PoolKind, PoolNode
from llmfit.plan.model import AttentionKind, LayerGroup, Model
from llmfit.plan.planner import PlanSettings, plan
from llmfit.plan.settings import Pins
from tests.plan.test_model import model

H100 = 85_045_477_376  # the card table's h100-80g
H200 = 150_278_766_592  # h200-141g
PRE = 644_245_094  # int(0.6 GiB): what precedes SGLang's measurement of a card
SGLANG = PlanSettings(precision="stored", engines=("sglang",))


def node(id: str, gpu: str, card: int, gpus: int, fabric: str = ""):
    kind = PoolKind(gpu, card, gpus, gpus)
    return PoolNode(id, (kind,), fabric=fabric, ram_bytes=1024 * GIB, free_ram_bytes=1024 * GIB)


def llama8b() -> tuple[Model, Artifact]:
    return model("meta-llama/Llama-3.1-8B-Instruct"), Artifact(
        "safetensors", "safetensors", 16_060_522_496, quant="bf16"
    )


def argv(o) -> list[str]:
    return list(engine("sglang").commands(o, "org/repo", None)[0].argv)


def test_sglang_is_planned_when_named_not_by_default():
    m, art = llama8b()
    fleet = Fleet((node("h", "h100-80g", H100, 1),))
    assert "sglang" not in default_keys() and {"vllm", "llama.cpp"} <= set(default_keys())
    assert {o.engine for o in plan(m, [art], fleet, PlanSettings(precision="stored")).options} == {
        "vllm"
    }
    assert planned("sglang", ("sglang",)) and planned("vllm", ()) and not planned("sglang", ())
    both = PlanSettings(precision="stored", engines=("vllm", "sglang"))
    assert {o.engine for o in plan(m, [art], fleet, both).options} == {"vllm", "sglang"}


def test_llama_8b_on_one_h100_at_a_static_share_of_088_part_by_part():
    m, art = llama8b()
    fleet = Fleet((node("h", "h100-80g", H100, 1),))
    settings = PlanSettings(
        precision="stored",
        engines=("sglang",),
        engine_options=(SglangOptions(mem_fraction_static=0.88),),
    )
    o = plan(m, [art], fleet, settings).options[0]
    assert (o.engine, o.tp, o.gpus) == ("sglang", 1, 1)
    # What SGLang may use is the whole card (issue 35: need/have means what it means for every
    # engine). Of what it measures, the card less the 0.6 GiB (644,245,094 B) the CUDA context
    # held before (its runtime), 0.88 is the static share: int(84,401,232,282 × 0.88) =
    # 74,273,084,408 B for the weights and the pool; the rest, 85,045,477,376 − 644,245,094 −
    # 74,273,084,408 = 10,128,147,874 B, is its reserve for activations and CUDA graphs.
    assert (o.share, o.have, o.total) == (1.0, H100, H100)
    assert o.per_card.runtime == 644_245_094
    assert o.per_card.reserve == 10_128_147_874
    assert o.per_card.overhead == 644_245_094 + 10_128_147_874
    # The checkpoint, and the fp32 rotary cos/sin cache SGLang builds (RotaryEmbedding keeps it
    # in fp32 on CUDA): 131,072 positions × 128 rotary dims × 4 B = 67,108,864 B.
    assert o.per_card.weights == 16_060_522_496 + 131_072 * 128 * 4 == 16_127_631_360
    # One sequence of the trained 131,072 tokens × 131,072 B (32 layers × 8 heads × 256 × 2 B).
    assert o.per_card.kv_cache == 131_072 * 131_072
    # Free: what the static share leaves of the weights and one sequence, 74,273,084,408 −
    # 16,127,631,360 − 17,179,869,184 = 40,965,583,864 B, as before the share was the card's.
    assert o.room == 40_965_583_864
    # The pool: (74,273,084,408 − 16,127,631,360) // 131,072 = 443,614 tokens, 3.38 sequences
    # of 131,072 tokens.
    assert o.kv_tokens == 443_614
    assert o.held == round(443_614 / 131_072, 2) == 3.38
    assert o.max_context == 131_072
    assert argv(o) == [
        "sglang", "serve", "--model-path", "org/repo", "--tp-size", "1",
        "--context-length", "131072", "--mem-fraction-static", "0.880",
        "--host", "0.0.0.0", "--port", "30000",
    ]  # fmt: skip


def test_sglangs_default_share_is_passed_on():
    m, art = llama8b()
    fleet = Fleet((node("h", "h100-80g", H100, 1),))
    o = plan(m, [art], fleet, SGLANG).options[0]
    # SGLang sizes its default by nvidia-smi's memory.total, 81,559 MiB on an H100 (not CUDA's
    # 81,105.69): its reserve at TP 1 is 13,904 MiB (test_sglang_sizes), so the share is
    # (81,559 − 13,904) / 81,559 = 0.8295, 0.830 to three places (0.829 of CUDA's total).
    launch = o.launch
    assert isinstance(launch, SglangLaunch) and launch.default_share
    assert launch.mem_fraction_static == 0.83 and o.share == 1.0
    assert "0.830" in argv(o)
    assert o.kv_tokens == (int((H100 - PRE) * 0.83) - 16_127_631_360) // 131_072 == 411_418


def test_qwen3_8b_at_tp2_with_its_own_flags():
    m = model("Qwen/Qwen3-8B")
    art = Artifact("safetensors", "safetensors", 16_381_470_720, quant="bf16")
    fleet = Fleet((node("h", "h100-80g", H100, 2),))
    settings = PlanSettings(
        precision="stored", engines=("sglang",), context=8192, pins=Pins(tp=2),
        kv_cache_dtype="fp8", engine_options=(SglangOptions(mem_fraction_static=0.85,
                                                   max_running_requests=128),),
    )  # fmt: skip
    o = plan(m, [art], fleet, settings).options[0]
    # Half the checkpoint, but what SGLang keeps whole on both ranks: the norms (36 layers × 2 ×
    # 4,096 × 2 B = 589,824 B, and the final norm's 8,192 B) count once more by half, and the fp32
    # rotary cache (40,960 × 128 × 4 B = 20,971,520 B) is every rank's own:
    # 16,381,470,720 / 2 + 598,016 / 2 + 20,971,520 = 8,212,005,888 B.
    assert (o.tp, o.per_card.weights) == (2, 16_381_470_720 // 2 + 598_016 // 2 + 20_971_520)
    # 36 layers × 4 KV heads a rank × 256 × 1 B (fp8): 36,864 B a token. 0.85 of the free
    # memory: int(0.85 × 84,401,232,282) = 71,741,047,439 B, less 8,212,005,888 of weights =
    # 63,529,041,551 B // 36,864 = 1,723,335 tokens; 128 requests at most.
    assert o.kv_per_token == 36_864
    assert o.kv_tokens == 63_529_041_551 // 36_864 == 1_723_335
    assert o.held == 128
    assert argv(o)[4:] == [
        "--tp-size", "2", "--context-length", "8192", "--mem-fraction-static", "0.850",
        "--kv-cache-dtype", "fp8_e4m3", "--max-running-requests", "128",
        "--host", "0.0.0.0", "--port", "30000",
    ]  # fmt: skip


def test_a_dense_model_fills_a_node_with_replicas():
    m = model("Qwen/Qwen3-8B")
    art = Artifact("safetensors", "safetensors", 16_381_470_720, quant="bf16")
    fleet = Fleet((node("h", "h100-80g", H100, 8),))
    opts = plan(m, [art], fleet, SGLANG).options
    o = next(o for o in opts if o.dp == 8)
    assert (o.tp, o.replicas) == (1, 8)
    one = next(o for o in opts if o.gpus == 1)
    # Eight replicas, each its own pool: eight times one card's sequences.
    assert o.held == round(8 * min(one.kv_tokens / 40_960, 2048), 2)
    assert argv(o)[4:8] == ["--tp-size", "1", "--dp-size", "8"]


def test_deepseek_v3_data_parallel_attention_on_eight_h200():
    m = model("deepseek-ai/DeepSeek-V3")
    art = Artifact("safetensors", "safetensors", 688_586_727_753, quant="fp8")
    fleet = Fleet((node("h", "h200-141g", H200, 8),))
    settings = PlanSettings(
        precision="stored", engines=("sglang",), context=32_768, every_layout=True,
        engine_options=(SglangOptions(mem_fraction_static=0.9),),
    )  # fmt: skip
    opts = plan(m, [art], fleet, settings).options
    tp8 = next(o for o in opts if o.tp == 8)
    dp8 = next(o for o in opts if o.dp == 8)
    # TP 8: every card keeps the latent of every token of its one pool (70,272 B a token).
    static = int((H200 - PRE) * 0.9)
    assert tp8.kv_tokens == (static - tp8.per_card.weights) // 70_272
    # Attention DP 8: each card is a rank of its own, with the whole attention (1/1) and 1/8 of
    # the routed experts, and a pool of its own; eight pools hold eight times the sequences.
    assert dp8.kv_tokens == (static - dp8.per_card.weights) // 70_272
    assert dp8.held == round(8 * dp8.kv_tokens / 32_768, 2)
    assert dp8.held > tp8.held
    assert argv(dp8)[4:12] == [
        "--tp-size", "8", "--attn-dp-size", "8", "--ep-size", "8", "--context-length", "32768",
    ]  # fmt: skip
    # The config names custom code (auto_map), so the command trusts it.
    assert "--trust-remote-code" in argv(dp8)


def test_pipeline_stages_across_nodes_launch_by_rank():
    m = model("meta-llama/Meta-Llama-3.1-405B")
    art = Artifact("safetensors", "safetensors", 811_706_777_600, quant="bf16")
    fleet = Fleet(tuple(node(f"n{i}", "h100-80g", H100, 8, fabric="ib0") for i in range(4)))
    settings = PlanSettings(precision="stored", engines=("sglang",), context=8192,
                            pins=Pins(tp=8, pp=2))  # fmt: skip
    o = plan(m, [art], fleet, settings).options[0]
    assert (o.tp, o.pp, o.nodes, o.node_ids) == (8, 2, 2, ("n0", "n1"))
    cmds = engine("sglang").commands(o, "meta-llama/Meta-Llama-3.1-405B", None)
    assert [(c.role, c.node) for c in cmds] == [("head", "n0"), ("worker", "n1")]
    assert cmds[1].argv[-6:] == (
        "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "n0:50000",
    )  # fmt: skip
    ray = engine("sglang").commands(o, "meta-llama/Meta-Llama-3.1-405B", None, ray=True)
    assert [c.argv[:2] for c in ray[:2]] == [("ray", "start"), ("ray", "start")]
    assert ray[-1].argv[-3:] == ("--nnodes", "2", "--use-ray")


def test_a_width_the_heads_refuse_is_refused_with_sglangs_rule():
    m = Model(
        "X", "x", 32, 48, 12, 128, (LayerGroup(AttentionKind.FULL, 32, kv_heads=12, head_dim=128),),
        max_context=4096, dtype="bfloat16",
    )  # fmt: skip
    art = Artifact("safetensors", "safetensors", 400 * GIB, quant="bf16")
    p = plan(m, [art], Fleet((node("n", "h100-80g", H100, 8),)), SGLANG)
    assert (
        "SGLang's attention asserts its 12 KV heads divide evenly over 8 cards, or 8 cards over "
        "them." in [r.reason for r in p.rejected]
    )


def test_what_ifs_use_sglangs_spellings():
    m, art = llama8b()
    fleet = Fleet((node("h", "h100-80g", H100, 1),))
    opts = plan(m, [art], fleet, PlanSettings(engines=("sglang",), context=8192)).options
    flags = {o.what_if: o.engine_flags for o in opts}
    assert flags["fp8 KV cache"] == ("--kv-cache-dtype", "fp8_e4m3")
    assert flags["fp8 weights"] == ("--quantization", "fp8")


def test_a_vision_towers_share_is_planned_as_the_command_passes_it():
    # SGLang's default for Qwen2.5-VL-7B on an H100, from nvidia-smi's 81,559 MiB: a reserve of
    # 512 + 8,192 × 1.5 + 128 + 256 × 2 = 13,440 MiB (no prefill graphs for this multimodal
    # model), (81,559 − 13,440) / 81,559 = 0.835, × the tower's 0.8470833 (test_sglang_sizes) =
    # 0.7073; the command passes three places, 0.707, and the plan holds that.
    m = model("Qwen/Qwen2.5-VL-7B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_584_333_312, quant="bf16")
    o = plan(m, [art], Fleet((node("h", "h100-80g", H100, 1),)), SGLANG).options[0]
    assert o.launch.mem_fraction_static == 0.707 and "0.707" in argv(o)
    assert (o.share, o.have) == (1.0, H100)
    # The checkpoint and the fp32 rotary cache, 128,000 × 128 × 4 B = 65,536,000 B.
    assert o.per_card.weights == 16_584_333_312 + 65_536_000
    # 28 layers × 4 KV heads × 256 × 2 B = 57,344 B a token; SGLang keeps 100 MiB of the budget
    # back for its multimodal cache.
    assert o.kv_tokens == (int((H100 - PRE) * 0.707) - 16_649_869_312 - 100 * 2**20) // 57_344
    # The multimodal cache is the card's activations part.
    assert o.per_card.activations == 100 * 2**20


# --- issue 26: data-parallel attention splits what is not attention over every rank ------------


def test_deepseek_v3_under_data_parallel_attention_splits_mlps_embedding_and_head():
    # DeepSeek-V3's parts at 1 B a linear weight and 2 B a 16-bit one, with a 12 GB MTP layer
    # 61 (tests/plan/test_vllm_memory.py deepseek_layout). SGLang's deepseek_v2.py under
    # --tp-size 8 --attn-dp-size 8: attention within its group of 1, the dense MLPs and shared
    # experts (DeepseekV2MLP, parallel_group "tp") and the routed experts over all 8; norms, the
    # router gates and MLA's fused q/kv-a projection whole; the head over 8, the embedding
    # within the attention's group of 1 (get_embedding_tp_kwargs: use_attn_tp_group), whole.
    from llmfit.plan.engines import sglang_sizes as sizes
    from llmfit.plan.engines.sglang import rank_weights
    from llmfit.plan.engines.vllm_weights import parts_of
    from tests.plan.test_vllm_memory import deepseek_layout

    m = model("deepseek-ai/DeepSeek-V3")
    layout = deepseek_layout()
    p = parts_of(m, layout.total, layout)
    dp8 = sizes.ServerSizes(tp_size=8, attn_dp_size=8, ep_size=8)
    # A dense layer: attention 187,107,328 parameters, 15,138,816 of them q_a/kv_a (replicated)
    # and 2,048 norms; its MLP 3 × 7,168 × 18,432 = 396,361,728. A MoE layer: the same
    # attention, shared experts 3 × 7,168 × 2,048 = 44,040,192, 256 routed experts of
    # 3 × 7,168 × 2,048 each.
    attention = 61 * (187_107_328 - 15_138_816 - 2_048)
    mlps = 3 * 396_361_728 + 58 * 44_040_192
    experts = 58 * 256 * 44_040_192
    replicated = 3 * (15_138_816 + 2 * 16_384) + 58 * (15_138_816 + 2 * 1_851_392)
    embed = head = 129_280 * 7_168 * 2
    # w_kc/w_vc in bf16 for all 128 heads: 61 × 512 × 128 × (128 + 128) × 2 B; the fp32 rotary
    # cache 163,840 × 64 × 4 B.
    kc_vc = 61 * 512 * 128 * 256 * 2
    rope = 163_840 * 64 * 4
    want = (
        attention + mlps // 8 + experts // 8 + replicated + embed + 14_336 + head // 8
        + kc_vc + rope
    )  # fmt: skip
    assert rank_weights(m, p, 0, 61, True, True, dp8) == want == 98_008_610_816
    # The MTP layer 61 is not built: it is in none of it. --enable-dp-lm-head keeps the head
    # within each group: the whole head on every rank.
    assert rank_weights(m, p, 0, 61, True, True, dp8, dp_lm_head=True) == want - head // 8 + head


def test_sglang_keeps_the_mtp_layer_out_of_the_weights():
    # The DeepSeek-V3 fixture's 688,586,727,753 B include the MTP layer 61 (num_nextn_predict_
    # layers 1), which DeepseekV3ForCausalLM builds only for speculative decoding: a rank of
    # attention DP 8 holds the 61 layers' share, not the 62's.
    from llmfit.plan.engines import sglang_sizes as sizes
    from llmfit.plan.engines.sglang import rank_weights
    from llmfit.plan.engines.vllm_weights import parts_of

    m = model("deepseek-ai/DeepSeek-V3")
    p = parts_of(m, 688_586_727_753, None)
    assert p.mtp_bytes > 12 * GIB
    dp8 = sizes.ServerSizes(tp_size=8, attn_dp_size=8, ep_size=8)
    with_mtp = rank_weights(m, p, 0, 61, True, True, dp8)
    # The 61 layers' share is an eighth of them plus what each rank holds whole (attention,
    # the embedding: 12.93 GiB); the MTP layer's own share would add at least its 1.7 GiB.
    assert with_mtp < (688_586_727_753 - p.mtp_bytes) // 8 + 13 * GIB


def test_llama_8b_on_one_mi300x_takes_085_of_its_share_past_8192_tokens():
    # One MI300X: SGLang's default share is 0.867 (test_sglang_sizes: no prefill graphs on ROCm),
    # which the command passes; aiter then uses 0.85 of it at the trained 131,072 tokens, so the
    # plan holds 0.867 × 0.85 of the card. At 8,192 tokens the share stands.
    m, art = llama8b()
    card = 206_141_652_992  # the card table's mi300x-192g: HIP's 196,592 MiB
    fleet = Fleet((node("m", "mi300x-192g", card, 1),))
    long = plan(m, [art], fleet, SGLANG).options[0]
    assert long.launch.mem_fraction_static == 0.867 and "0.867" in argv(long)
    # Issue 32: the static share the plan counts on is the one SGLang applies (0.737), not the
    # 0.867 the command passes (17.6 % more); issue 35: SGLang may use the whole card, and the
    # rest of what it measures beside that static share is its reserve.
    assert (long.share, long.have) == (1.0, card)
    assert long.per_card.reserve == card - PRE - int((card - PRE) * 0.867 * 0.85)
    weights = 16_060_522_496 + 131_072 * 128 * 4
    assert long.kv_tokens == (int((card - PRE) * 0.867 * 0.85) - weights) // 131_072
    short = plan(m, [art], fleet, PlanSettings(precision="stored", engines=("sglang",),
                                               context=8192)).options[0]  # fmt: skip
    assert (short.share, short.have) == (1.0, card)
    assert short.per_card.reserve == card - PRE - int((card - PRE) * 0.867)


def test_enable_dp_lm_head_is_read_and_passed_on():
    from llmfit.plan.engines.sglang_command import read

    req = read(
        ["sglang", "serve", "--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8",
         "--attn-dp-size", "8", "--enable-dp-lm-head"],
        PlanSettings(),
    )  # fmt: skip
    opts = req.settings.options(SglangOptions)
    assert opts.enable_dp_lm_head
    from llmfit.plan.engines import knobs

    assert knobs.argv(opts) == ["--enable-dp-lm-head"]


def test_deepseek_v3_attention_dp8_pool_at_sglangs_default_share():
    # Issue 32: SGLang 0.5.23's default share for DeepSeek-V3 at attention DP 8 on H200 is 0.758
    # (test_sglang_sizes); each rank holds the whole embedding (its attention group is one card),
    # so the pool is what 0.758 of the card less 0.6 GiB leaves beside 91.3 GiB of weights, in
    # 70,272-byte cells: 219,004 tokens (242,081 when the embedding was split over 8).
    from llmfit.plan.engines import sglang_sizes as sizes
    from llmfit.plan.engines.sglang import rank_weights
    from llmfit.plan.engines.vllm_weights import parts_of

    m = model("deepseek-ai/DeepSeek-V3")
    art = Artifact("safetensors", "safetensors", 688_586_727_753, quant="fp8")
    fleet = Fleet((node("h", "h200-141g", H200, 8),))
    settings = PlanSettings(precision="stored", engines=("sglang",), context=32_768,
                            every_layout=True)  # fmt: skip
    dp8 = next(o for o in plan(m, [art], fleet, settings).options if o.dp == 8)
    assert dp8.launch.mem_fraction_static == 0.758
    ss = sizes.ServerSizes(tp_size=8, attn_dp_size=8, ep_size=8)
    w = rank_weights(m, parts_of(m, 688_586_727_753, None), 0, 61, True, True, ss)
    assert dp8.per_card.weights == w
    static = int((H200 - PRE) * 0.758)
    assert dp8.kv_tokens == (static - w) // 70_272 == 219_004
