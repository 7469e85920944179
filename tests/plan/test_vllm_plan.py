"""vLLM options: per-card bytes worked out by hand from the fixtures, and the engine's rules."""

from __future__ import annotations

from dataclasses import replace

from llmfit.plan.artifact import Artifact
from llmfit.plan.engines.vllm_options import VllmOptions
from llmfit.plan.fleet import GIB, MIB, Fleet, PoolKind, PoolNode
from llmfit.plan.model import AttentionKind, LayerGroup, Model
from llmfit.plan.planner import PlanSettings as Settings
from llmfit.plan.planner import plan
from llmfit.plan.settings import Pins
from tests.plan.test_model import model


def PlanSettings(**kw) -> Settings:  # noqa: N802
    """The plan settings, at vLLM 0.33: the release these cases were worked by hand against."""
    return Settings(**kw).with_options(VllmOptions(version="0.33"))


H200 = (143_771 - 454) * MIB  # nvidia-smi total less the framebuffer reserve
H100 = 85_045_477_376  # deviceQuery totalGlobalMem
L40S = 47_803_596_800


def node(id: str, gpu: str, card: int, gpus: int, free: int | None = None, fabric: str = ""):
    kind = PoolKind(gpu, card, gpus, gpus if free is None else free)
    return PoolNode(id, (kind,), fabric=fabric, ram_bytes=1024 * GIB, free_ram_bytes=1024 * GIB)


def test_llama_8b_on_one_l40s_card_part_by_part():
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    fleet = Fleet((node("l40s", "l40s-48g", L40S, 4),))
    p = plan(m, [art], fleet, PlanSettings(precision="stored", rank="cards"))
    o = p.options[0]
    assert (o.gpu_class, o.tp, o.pp) == ("l40s-48g", 1, 1)
    # The checkpoint, and the rotary cache vLLM builds beside it: 131,072 positions × 128 dims
    # × 2 B (vllm_memory.rank_weights).
    assert o.per_card.weights == 16_060_522_496 + 131_072 * 128 * 2 == 16_094_076_928
    # One sequence of 131,072 tokens (the trained context): 8,192 blocks of 16 × 32 layers × 8
    # heads × 256 × 2 B.
    assert o.per_card.kv_cache == 131_072 * 131_072 == 17_179_869_184
    # The rest is vLLM 0.33's profile run on a 44.5 GiB card (2,048 batched tokens, 256
    # sequences), its sampler's buffers, memory outside torch and CUDA graphs, each worked out
    # by hand in tests/plan/test_vllm_memory.py.
    m = o.launch.memory
    assert (m.max_num_batched_tokens, m.max_num_seqs) == (2048, 256)
    assert (
        o.per_card.overhead
        == (m.activation + m.persistent_buffers + m.non_torch + m.cuda_graphs)
        == 588_680_069
    )
    assert o.have == 43_023_237_120 == 47_803_596_800 * 9 // 10
    assert not o.expert_parallel


def test_qwen3_235b_on_h200_takes_four_cards_with_expert_parallelism():
    m = model("Qwen/Qwen3-235B-A22B")
    art = Artifact("safetensors", "safetensors", 470_187_269_120, quant="bf16")
    fleet = Fleet(tuple(node(f"h200-{i}", "h200-141g", H200, 8, fabric="ib0") for i in (1, 2)))
    o = plan(m, [art], fleet, PlanSettings(precision="stored", rank="cards")).options[0]
    assert (o.tp, o.pp, o.gpus) == (4, 1, 4)
    # A quarter of the checkpoint, but for what every rank keeps whole: each layer's router
    # (4,096 × 128 × 2 B) and norms (2 × 4,096 × 2 B), 94 × 1,064,960 B; and the rotary cache,
    # 40,960 × 128 × 2 B. (Each layer's share rounds up, a few KiB over 94 layers.)
    whole = 94 * 1_064_960 + 40_960 * 128 * 2
    assert 0 <= o.per_card.weights - ((470_187_269_120 - 94 * 1_064_960) // 4 + whole) < 8192
    # One KV head a rank: 94 × 1 × (128 + 128) × 2 B × 40,960 tokens.
    assert o.per_card.kv_cache == 94 * 256 * 2 * 40_960 == 1_971_322_880
    assert o.expert_parallel
    assert o.hosts == 2 and o.free_now


def test_a_data_parallel_launch_takes_prompts_through_a_server_a_rank_from_0_15():
    # vllm serve --data-parallel-size 2 starts two API servers from 0.15 (vllm#32525), one in
    # 0.14: the serving model's replica says so (its two ranks share one replica, a MoE's).
    m = model("Qwen/Qwen3-235B-A22B")
    art = Artifact("safetensors", "safetensors", 470_187_269_120, quant="bf16")
    fleet = Fleet((node("h200", "h200-141g", H200, 8),))
    got = {}
    for version in ("0.14", "0.34"):
        s = Settings(precision="stored", pins=Pins(tp=4, dp=2, ep=True)).with_options(
            VllmOptions(version=version)
        )
        o = plan(m, [art], fleet, s).options[0]
        assert (o.tp, o.dp, o.gpus) == (4, 2, 8) and o.serving is not None
        r = o.serving.replica
        assert r is not None and (r.copies, r.inputs.ranks) == (1, 2)
        got[version] = r.frontends
    assert got == {"0.14": 1, "0.34": 2}
    # --api-server-count says so outright, whatever the release.
    s = Settings(precision="stored", pins=Pins(tp=4, dp=2, ep=True)).with_options(
        VllmOptions(version="0.34", api_server_count=1)
    )
    o = plan(m, [art], fleet, s).options[0]
    assert o.serving is not None and o.serving.replica is not None
    assert o.serving.replica.frontends == 1


def test_two_cards_are_refused_when_they_cannot_hold_it():
    m = model("Qwen/Qwen3-235B-A22B")
    art = Artifact("safetensors", "safetensors", 470_187_269_120, quant="bf16")
    p = plan(
        m, [art], Fleet((node("h200-1", "h200-141g", H200, 8),)), PlanSettings(precision="stored")
    )
    sized = {r.where: r.need for r in p.rejected if r.need}
    # Half the weights a card on two cards (235 GB, more than the 126 GiB counted on), plus the
    # KV of 2 heads a rank and the rest.
    assert sized["2 × h200-141g (tp2+ep)"] > 470_187_269_120 // 2 + 94 * 2 * 256 * 2 * 40_960
    assert sized["2 × h200-141g (tp2+ep)"] > int(H200 * 0.9)


def test_deepseek_v3_on_eight_h200_keeps_the_whole_latent_cache_on_every_card():
    m = model("deepseek-ai/DeepSeek-V3")
    art = Artifact("safetensors", "safetensors", 688_586_727_753, quant="fp8")
    opts = plan(
        m, [art], Fleet((node("h200-1", "h200-141g", H200, 8),)), PlanSettings(precision="stored")
    ).options
    o = next(o for o in opts if o.tp == 8)
    # 70,272 B a token on every rank (not divided by 8) × 163,840 tokens.
    assert o.per_card.kv_cache == 70_272 * 163_840 == 11_513_364_480
    # vLLM does not load the MTP layer (layer 61) unless it speculates with it: a MoE layer's
    # 11,505,434,624 linear weights at the checkpoint's rate (fp8 and its block scales,
    # 1.00026 B a weight: 11,508,445,929 B), its 16-bit router, norms and eh_proj (104,626,176
    # × 2 B) and its own bf16 embedding and head (2 × 129,280 × 7,168 × 2 B); and it adds each
    # MLA layer's decompressed W_UK/W_UV: 512 × 16 heads a rank × (128 + 128) × 2 B × 61 layers
    # (tests/plan/test_vllm_memory.py works both out).
    w = o.launch.memory.weights
    assert w.skipped == 11_508_445_929 + 104_626_176 * 2 + 2 * 129_280 * 7_168 * 2
    assert w.mla_decompressed == 512 * 16 * 256 * 2 * 61 == 255_852_544


def test_a_width_that_does_not_divide_the_heads_is_refused_with_vllms_sentence():
    # Qwen2.5-VL-7B's text model: 28 attention heads, 4 KV heads.
    m = Model(
        "Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", 28, 28, 4, 128,
        (LayerGroup(AttentionKind.FULL, 28, kv_heads=4, head_dim=128),),
        max_context=128_000, dtype="bfloat16",
    )  # fmt: skip
    art = Artifact("safetensors", "safetensors", 400 * GIB, quant="bf16")
    p = plan(m, [art], Fleet((node("n", "h100-80g", H100, 8),)), PlanSettings(precision="stored"))
    reasons = [r.reason for r in p.rejected]
    assert (
        "Total number of attention heads (28) must be divisible by tensor parallel size (8)."
        in reasons
    )
    # Eight cards are still reached the way vLLM allows: tensor parallel 4 × two pipeline stages
    # within the node, each stage 14 of the 28 layers. The config gives no sizes, so the 400 GiB
    # are 28 equal layers of 15,339,168,914 B, the 8 B left over one each to the first eight:
    # the first stage holds 14 × 15,339,168,914 + 8 B, a quarter of it on each of its cards.
    assert [(o.tp, o.pp, o.gpus) for o in p.options] == [(4, 2, 8)]
    assert 28 * 15_339_168_914 + 8 == 400 * GIB
    # Each layer's quarter rounds up on its own: 3,834,792,229 B a layer on each card.
    assert p.options[0].per_card.weights == 14 * -(-15_339_168_915 // 4) == 53_687_091_206


def test_kv_heads_that_neither_divide_nor_are_divided_refuse_the_width():
    m = Model(
        "X", "x", 32, 48, 12, 128, (LayerGroup(AttentionKind.FULL, 32, kv_heads=12, head_dim=128),),
        max_context=4096, dtype="bfloat16",
    )  # fmt: skip
    # 400 GiB does not fit four 80 GB cards, so eight are tried, and refused.
    art = Artifact("safetensors", "safetensors", 400 * GIB, quant="bf16")
    p = plan(m, [art], Fleet((node("n", "h100-80g", H100, 8),)), PlanSettings(precision="stored"))
    assert "12 KV heads can be neither split evenly across nor replicated evenly over 8 cards." in [
        r.reason for r in p.rejected
    ]


def test_multi_node_only_within_one_fabric():
    m = model("deepseek-ai/DeepSeek-V3")
    art = Artifact("safetensors", "safetensors", 688_586_727_753, quant="fp8")
    split = Fleet(
        (node("a", "h100-80g", H100, 8, fabric="ib0"), node("b", "h100-80g", H100, 8, fabric="ib1"))
    )
    assert not plan(m, [art], split, PlanSettings(precision="stored")).options
    joined = Fleet(
        (node("a", "h100-80g", H100, 8, fabric="ib0"), node("b", "h100-80g", H100, 8, fabric="ib0"))
    )
    opts = plan(m, [art], joined, PlanSettings(precision="stored")).options
    o = next(o for o in opts if o.pp == 2)
    assert (o.tp, o.pp, o.nodes, o.fabric, o.node_ids) == (8, 2, 2, "ib0", ("a", "b"))
    # vLLM gives the odd layer to the first stage (get_pp_indices: 31 + 30 of the 61), but the
    # first three layers are dense and light, so the fuller stage is the second: 30 MoE layers
    # and the output head. Its card is the one checked, with 30 layers' latent cache.
    assert o.per_card.kv_cache == 30 * 576 * 2 * 163_840
    # The other ways across the two nodes are DeepSeek's data-parallel attention with expert
    # parallelism, which hold more sequences (sixteen ranks of one card) or decode faster (wider
    # ranks) than the two pipeline stages.
    others = [o for o in opts if o.pp == 1]
    assert others and all(x.dp > 1 and x.expert_parallel and x.nodes == 2 for x in others)
    assert max(x.held for x in others) > o.held
    assert all(x.held > o.held or x.speed.decode_tokens_per_s
               > o.speed.decode_tokens_per_s for x in others)  # fmt: skip


def test_nodes_without_a_fabric_are_islands():
    m = model("deepseek-ai/DeepSeek-V3")
    art = Artifact("safetensors", "safetensors", 688_586_727_753, quant="fp8")
    islands = Fleet((node("a", "h100-80g", H100, 8), node("b", "h100-80g", H100, 8)))
    p = plan(m, [art], islands, PlanSettings(precision="stored"))
    assert not p.options
    assert "these nodes have no fabric, so a replica cannot span them" in [
        r.reason for r in p.rejected
    ]


def test_any_number_of_nodes_not_only_powers_of_two():
    m = model("deepseek-ai/DeepSeek-V3")
    art = Artifact("safetensors", "safetensors", 688_586_727_753, quant="fp8")
    # 4 cards of 80 GB a node: two nodes cannot hold it, three can.
    fleet = Fleet(tuple(node(f"n{i}", "h100-80g", H100, 4, fabric="ib0") for i in range(4)))
    settings = PlanSettings(precision="stored", context=8192, rank="cards")
    opts = plan(m, [art], fleet, settings).options
    assert (4, 3, 3) in [(o.tp, o.pp, o.nodes) for o in opts]
    assert not [o for o in opts if o.nodes == 2 and o.pp == 2]


def test_mig_instances_never_join_each_other():
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    # Seven 10 GB instances hold 70 GB together, but a replica may use only one.
    mig = PoolKind("a100-80g-mig-1g.10gb", 10 * GIB, 7, 7)
    fleet = Fleet((PoolNode("mig", (mig,), fabric="ib0"), PoolNode("mig2", (mig,), fabric="ib0")))
    p = plan(m, [art], fleet, PlanSettings(precision="stored", context=4096))
    assert not p.options
    assert [(r.where, r.reason) for r in p.rejected] == [
        (
            "several a100-80g-mig-1g.10gb",
            "a MIG instance cannot be joined with others, on its node or across nodes",
        ),
        ("1 × a100-80g-mig-1g.10gb", ""),
    ]


def test_busy_is_not_unfit_and_free_now_breaks_ties_only():
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    fleet = Fleet((node("busy", "h100-80g", H100, 8, free=0), node("l40s", "l40s-48g", L40S, 1)))
    settings = PlanSettings(precision="stored", context=8192, rank="cards")
    opts = plan(m, [art], fleet, settings).options
    one_card = [(o.gpu_class, o.free_now) for o in opts if o.gpus == 1]
    assert one_card == [("l40s-48g", True), ("h100-80g", False)]


def test_fewest_cards_rank_first_then_room():
    m = model("meta-llama/Meta-Llama-3.1-70B")
    art = Artifact("safetensors", "safetensors", 141_107_412_992, quant="bf16")
    fleet = Fleet((node("h100", "h100-80g", H100, 8), node("h200", "h200-141g", H200, 8)))
    settings = PlanSettings(precision="stored", context=8192, rank="cards")
    opts = plan(m, [art], fleet, settings).options
    # Fewest cards first; among as many cards, the most sequences held. Per class: the narrowest
    # fit, each wider width that holds more, and the narrowest replicated to fill the node.
    assert [(o.gpu_class, o.tp, o.dp) for o in opts] == [
        ("h200-141g", 2, 1),
        ("h100-80g", 2, 1),
        ("h200-141g", 4, 1),
        ("h100-80g", 4, 1),
        ("h200-141g", 8, 1),
        ("h200-141g", 2, 4),
        ("h100-80g", 8, 1),
        ("h100-80g", 2, 4),
    ]


def test_unhealthy_cards_are_not_capacity():
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    sick = PoolKind("l40s-48g", L40S, 1, 0, unhealthy_gpus=1)
    p = plan(
        m, [art], Fleet((PoolNode("x", (sick,)),)), PlanSettings(precision="stored", context=4096)
    )
    assert not p.options
    assert p.unplaced[0].reason == "the fleet has no GPU that vLLM could use"


def test_max_context_and_concurrency_on_one_card():
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    o = plan(
        m,
        [art],
        Fleet((node("l40s", "l40s-48g", L40S, 1),)),
        PlanSettings(precision="stored", context=8192),
    ).options[0]
    # 0.90 of the card less the weights (the checkpoint and its rotary cache) and the rest.
    budget = 43_023_237_120 - 16_094_076_928 - 588_680_069
    assert budget == o.launch.memory.kv_budget == 26_340_480_123
    # Blocks of 16 tokens × 32 layers × 8 heads × 256 × 2 B = 2 MiB: 12,560 of them, 512 a
    # sequence of 8,192 tokens.
    assert budget // (2 << 20) == 12_560
    assert o.held == round(12_560 / 512, 2) == 24.53
    # Room for 200,960 tokens, more than the trained 131,072 it is capped at.
    assert o.max_context == 131_072


def test_gpu_memory_utilization_sets_the_share_counted_on():
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    o = plan(
        m,
        [art],
        Fleet((node("l40s", "l40s-48g", L40S, 1),)),
        PlanSettings(precision="stored", context=8192, gpu_memory_utilization=0.5),
    ).options[0]
    assert o.have == int(47_803_596_800 * 0.5)
    assert replace(o).share == 0.5
    assert o.launch.gpu_memory_utilization == 0.5


def test_fp8_what_if_of_a_bf16_checkpoint_saves_cards_and_ranks_first():
    m = model("Qwen/Qwen3-235B-A22B")
    art = Artifact("safetensors", "safetensors", 470_187_269_120, quant="bf16")
    fleet = Fleet((node("h200-1", "h200-141g", H200, 8),))
    opts = plan(m, [art], fleet, PlanSettings(rank="cards")).options
    best = opts[0]
    # vLLM 0.33 spells online fp8 fp8_per_tensor (an alias since 0.31).
    assert (best.what_if, best.tp, best.engine_flags) == (
        "fp8 weights",
        2,
        ("--quantization", "fp8_per_tensor"),
    )
    # --quantization fp8 stores every linear weight in one byte; the embedding and head
    # (151,936 × 4,096 × 2 B each, the head with its 8 KiB norm) and what every rank keeps whole
    # (94 layers' routers and norms, 1,064,960 B each) stay 16-bit. Each of two ranks holds half
    # of the linear weights, embedding and head, all of the rest, and the rotary cache.
    embed, head, whole = 1_244_659_712, 1_244_667_904, 94 * 1_064_960
    linear = 470_187_269_120 - embed - head - whole
    assert (
        best.per_card.weights
        == (linear // 2 // 2 + whole + embed // 2 + 8192 + (head - 8192) // 2 + 40_960 * 128 * 2)
        == 118_254_718_720
    )
    # On the same four cards, the checkpoint as shipped ranks before its what-ifs.
    four = [(o.what_if, o.tp) for o in opts if o.tp == 4]
    assert four[0] == (None, 4)


def test_fp8_kv_what_if_halves_the_cache():
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    fleet = Fleet((node("l40s", "l40s-48g", L40S, 1),))
    opts = plan(m, [art], fleet, PlanSettings(precision="kv-fp8")).options
    assert [o.what_if for o in opts] == ["fp8 KV cache"]
    # 131,072 tokens × 32 layers × 8 heads × 256 × 1 B.
    assert opts[0].per_card.kv_cache == 131_072 * 32 * 8 * 256 == 8_589_934_592
    assert opts[0].engine_flags == ("--kv-cache-dtype", "fp8")


def test_a_quantised_checkpoint_gets_no_fp8_weight_what_if():
    m = model("deepseek-ai/DeepSeek-V3")
    art = Artifact("safetensors", "safetensors", 688_586_727_753, quant="fp8")
    fleet = Fleet((node("h200-1", "h200-141g", H200, 8),))
    whats = {o.what_if for o in plan(m, [art], fleet, PlanSettings()).options}
    assert whats == {None, "fp8 KV cache"}


def test_when_nothing_fits_the_longest_context_that_would_is_said():
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    card = PoolKind("rtx3090-24g", 25_327_697_920, 1, 1)
    box = Fleet((PoolNode("box", (card,)),))
    p = plan(m, [art], box, PlanSettings(precision="stored", context=131_072))
    assert not p.options
    u = p.unplaced[0]
    # 0.90 of the card, less the weights (with the rotary cache) and the rest of vLLM 0.33's
    # budget, less the one block it keeps back (its null block), in blocks of 16 tokens × 131,072 B.
    budget = 22_794_928_128 - 16_094_076_928 - 588_680_069 - (2 << 20)
    assert budget == 6_110_073_979
    assert (u.fits_at, u.fits_where) == (budget // (2 << 20) * 16, "1 × rtx3090-24g")
    assert u.fits_at == 46_608


def test_at_the_trained_context_the_shipped_checkpoint_is_offered_at_the_longest_it_holds():
    # No --context: the trained 131,072 tokens fit nowhere, so the checkpoint as shipped is
    # planned at the longest context it holds (worked out in the test above), and marked so.
    m = model("meta-llama/Llama-3.1-8B-Instruct")
    art = Artifact("safetensors", "safetensors", 16_060_522_496, quant="bf16")
    box = Fleet((PoolNode("box", (PoolKind("rtx3090-24g", 25_327_697_920, 1, 1),)),))
    (o,) = plan(m, [art], box, PlanSettings(precision="stored")).options
    assert (o.what_if, o.context, o.changes) == ("shorter context", 46_608, 1)
