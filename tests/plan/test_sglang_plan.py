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
    # What a card offers: 0.88 of the card; of it, the weights and the pool's share are
    # 0.88 × (card − 0.6 GiB) = 74,273,084,408 B, and the rest of the 0.88 (0.88 × 0.6 GiB) is
    # what the CUDA context takes from the static share.
    assert o.have == int(H100 * 0.88) == 74_840_020_090
    assert o.per_card.overhead == 74_840_020_090 - 74_273_084_408 == 566_935_682
    assert o.per_card.weights == 16_060_522_496
    # One sequence of the trained 131,072 tokens × 131,072 B (32 layers × 8 heads × 256 × 2 B).
    assert o.per_card.kv_cache == 131_072 * 131_072
    # The pool: (74,273,084,408 − 16,060,522,496) // 131,072 = 444,126 tokens, 3.39 sequences
    # of 131,072 tokens.
    assert o.kv_tokens == 444_126
    assert o.concurrency == round(444_126 / 131_072, 2) == 3.39
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
    # 0.829 on an H100 at TP 1 (test_sglang_sizes).
    launch = o.launch
    assert isinstance(launch, SglangLaunch) and launch.default_share
    assert launch.mem_fraction_static == 0.829 == o.share
    assert "0.829" in argv(o)
    assert o.kv_tokens == (int((H100 - PRE) * 0.829) - 16_060_522_496) // 131_072


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
    assert (o.tp, o.per_card.weights) == (2, 16_381_470_720 // 2)
    # 36 layers × 4 KV heads a rank × 256 × 1 B (fp8): 36,864 B a token. 0.85 of the free
    # memory: int(0.85 × 84,401,232,282) = 71,741,047,439 B, less 8,190,735,360 of weights =
    # 63,550,312,079 B // 36,864 = 1,723,912 tokens; 128 requests at most.
    assert o.kv_per_token == 36_864
    assert o.kv_tokens == 63_550_312_079 // 36_864 == 1_723_912
    assert o.concurrency == 128
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
    assert o.concurrency == round(8 * min(one.kv_tokens / 40_960, 2048), 2)
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
    assert dp8.concurrency == round(8 * dp8.kv_tokens / 32_768, 2)
    assert dp8.concurrency > tp8.concurrency
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
    # SGLang's default for Qwen2.5-VL-7B on an H100 is 0.834 × 0.8470833 = 0.7064675
    # (test_sglang_sizes); the command passes three places, 0.706, and the plan holds that.
    m = model("Qwen/Qwen2.5-VL-7B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_584_333_312, quant="bf16")
    o = plan(m, [art], Fleet((node("h", "h100-80g", H100, 1),)), SGLANG).options[0]
    assert o.share == 0.706 and "0.706" in argv(o)
    assert o.have == int(H100 * 0.706)
    # 28 layers × 4 KV heads × 256 × 2 B = 57,344 B a token; SGLang keeps 100 MiB of the budget
    # back for its multimodal cache.
    assert o.kv_tokens == (int((H100 - PRE) * 0.706) - 16_584_333_312 - 100 * 2**20) // 57_344
