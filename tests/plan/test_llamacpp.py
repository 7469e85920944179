"""llama.cpp options: per-device bytes worked out by hand, and the exact llama-server lines.

The models are real GGUF headers (written by gguf's writer into sparse files: the header states
gigabytes, the disk holds kilobytes) with Llama-3.1-8B's and Qwen3-30B-A3B's shapes. Block sizes:
Q4_K 144 B a 256, Q6_K 210 B a 256, Q8_0 34 B a 32, F32 4 B.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.gguf_files import Q, llama_metadata, llama_tensors, write_gguf
from llmfit.plan.fleet import GIB, MIB, Fleet, PoolKind, PoolNode
from llmfit.plan.model import AttentionKind, LayerGroup
from llmfit.plan.planner import PlanSettings, plan
from llmfit.render.commands import commands
from llmfit.sources.gguf import gguf_artifacts, model_from_gguf

TAIL = ["--flash-attn", "on", "--host", "0.0.0.0", "--port", "8080"]


def llama8b(root: Path) -> Path:
    """Llama-3.1-8B's shapes, Q4_K with attn_v, ffn_down and output at Q6_K."""
    md = llama_metadata(32, 4096, 14336, 32, 8, 131072, 15) | {"llama.vocab_size": 128256}
    over = {"attn_v.weight": Q.Q6_K, "ffn_down.weight": Q.Q6_K, "output.weight": Q.Q6_K}
    path = root / "Llama-8B-Q4_K_M.gguf"
    write_gguf(path, "llama", md, llama_tensors(32, 4096, 14336, 128256, 1024, Q.Q4_K,
                                                overrides=over))  # fmt: skip
    return path


# Llama 8B, one layer: norms 2 × 16,384; attn_q and attn_output 65,536 blocks × 144 = 9,437,184
# each; attn_k 16,384 × 144 = 2,359,296; attn_v 16,384 × 210 = 3,440,640; ffn_gate and ffn_up
# 229,376 × 144 = 33,030,144 each; ffn_down 229,376 × 210 = 48,168,960.
L8_LAYER = 32_768 + 2 * 9_437_184 + 2_359_296 + 3_440_640 + 2 * 33_030_144 + 48_168_960
L8_EMBED = 128_256 * 4096 // 256 * 144  # token_embd, Q4_K
L8_OUTPUT = 128_256 * 4096 // 256 * 210 + 16_384  # output (Q6_K) and output_norm
# KV a layer at 8,192 tokens: 8 KV heads × (128 + 128) × 2 B (f16) × 8,192 cells.
L8_KV = 8 * 256 * 2 * 8192
# Compute buffer (ub 512): 4 B × 512 × (4,096 + 14,336), and logits 4 B × 512 × 128,256 on the
# card with the output layer. Runtime overhead: 512 MiB a card.
L8_COMPUTE = 4 * 512 * (4096 + 14_336)
L8_LOGITS = 4 * 512 * 128_256
# Where the host runs the layers, its compute buffer is llama.cpp's CPU backend's, fitted on the
# engine suite: the larger of the logits phase, 4 B × 512 × (128,256 + 2 × 4,096), and a layer's,
# 4 B × 512 × (3 × 14,336 + 4 × 4,096) + the f16 KQ mask 2 B × 512 × 8,192 (130,023,424).
L8_CPU_COMPUTE = 4 * 512 * (128_256 + 2 * 4096)
OVERHEAD = 512 * MIB


def qwen3moe(root: Path) -> Path:
    """Qwen3-30B-A3B's shapes: 48 layers, 128 experts of FFN 768, attention Q8_0, experts Q4_K."""
    md = {
        "general.file_type": 15,
        "qwen3moe.block_count": 48,
        "qwen3moe.context_length": 40960,
        "qwen3moe.embedding_length": 2048,
        "qwen3moe.feed_forward_length": 6144,
        "qwen3moe.expert_feed_forward_length": 768,
        "qwen3moe.attention.head_count": 32,
        "qwen3moe.attention.head_count_kv": 4,
        "qwen3moe.attention.key_length": 128,
        "qwen3moe.attention.value_length": 128,
        "qwen3moe.expert_count": 128,
        "qwen3moe.expert_used_count": 8,
        "qwen3moe.vocab_size": 151936,
    }
    tensors = [("token_embd.weight", (151936, 2048), Q.Q8_0)]
    for i in range(48):
        b = f"blk.{i}."
        tensors += [
            (b + "attn_norm.weight", (2048,), Q.F32),
            (b + "attn_q.weight", (4096, 2048), Q.Q8_0),
            (b + "attn_k.weight", (512, 2048), Q.Q8_0),
            (b + "attn_v.weight", (512, 2048), Q.Q8_0),
            (b + "attn_output.weight", (2048, 4096), Q.Q8_0),
            (b + "attn_q_norm.weight", (128,), Q.F32),
            (b + "attn_k_norm.weight", (128,), Q.F32),
            (b + "ffn_norm.weight", (2048,), Q.F32),
            (b + "ffn_gate_inp.weight", (128, 2048), Q.F32),
            (b + "ffn_gate_exps.weight", (128, 768, 2048), Q.Q4_K),
            (b + "ffn_up_exps.weight", (128, 768, 2048), Q.Q4_K),
            (b + "ffn_down_exps.weight", (128, 2048, 768), Q.Q4_K),
        ]
    tensors += [("output_norm.weight", (2048,), Q.F32), ("output.weight", (151936, 2048), Q.Q8_0)]
    path = root / "Qwen3-30B-A3B-Q4_K_M.gguf"
    write_gguf(path, "qwen3moe", md, tensors)
    return path


# Qwen3 MoE, one layer: experts 3 × 128 × 768 × 2,048 / 256 × 144 = 3 × 113,246,208; norms
# 2,048 × 4 × 2 + 128 × 4 × 2 = 17,408; the router 128 × 2,048 × 4 = 1,048,576; attn_q and
# attn_output 8,388,608 / 32 × 34 = 8,912,896 each; attn_k and attn_v 1,114,112 each.
Q3_EXPERTS = 3 * 113_246_208
Q3_LAYER = Q3_EXPERTS + 17_408 + 1_048_576 + 2 * 8_912_896 + 2 * 1_114_112
Q3_EMBED = 151_936 * 2048 // 32 * 34
Q3_OUTPUT = Q3_EMBED + 2048 * 4
# KV a layer at 32,768 tokens: 4 heads × 256 × 2 B × 32,768 = 64 MiB (3 GiB over 48 layers, as
# the ik_llama.cpp calibration log of this model at 32k says: "CUDA0 KV buffer size = 3072 MiB").
Q3_KV = 4 * 256 * 2 * 32_768
Q3_COMPUTE = 4 * 512 * (2048 + 6144)
Q3_LOGITS = 4 * 512 * 151_936


def card_node(id: str, gpus: int, card: int, *, ram: int = 64 * GIB, fabric: str = "") -> PoolNode:
    return PoolNode(id, (PoolKind("x-card", card, gpus, gpus),), fabric, ram, ram)


def cpu_node(id: str, ram: int, free: int | None = None) -> PoolNode:
    return PoolNode(id, (), "", ram, ram if free is None else free)


def plan_file(path: Path, nodes: list[PoolNode], context: int, precision: str = "stored"):
    found = gguf_artifacts(path.parent)
    model = model_from_gguf(found.first_headers)
    # A file on this disk, named by its path as a local directory's files are.
    settings = PlanSettings(context=context, precision=precision, local_paths=True)
    return plan(model, found.artifacts, Fleet(tuple(nodes)), settings)


def test_hand_worked_sizes():
    assert L8_LAYER == 138_936_320
    assert (L8_EMBED, L8_OUTPUT) == (295_501_824, 430_956_544)
    assert L8_KV == 33_554_432
    assert (L8_COMPUTE, L8_LOGITS) == (37_748_736, 262_668_288)
    assert Q3_LAYER == 360_858_624 and Q3_EXPERTS == 339_738_624
    assert Q3_EMBED == 330_612_736 and Q3_KV == 67_108_864
    assert Q3_COMPUTE + Q3_LOGITS == 327_942_144  # 312.75 MiB


def test_cpu_only(tmp_path):
    path = llama8b(tmp_path)
    nodes = [cpu_node("cpu-1", 64 * GIB, free=4 * GIB), cpu_node("cpu-2", 8 * GIB, free=2 * GIB)]
    p = plan_file(path, nodes, 8192)
    (o,) = p.options
    assert o.cpu and o.engine == "llama.cpp"
    # Everything in RAM: every layer, token_embd and the output layer; all 32 layers' KV; the
    # CPU backend's compute buffer, here its logits phase.
    assert o.per_card.weights == 32 * L8_LAYER + L8_EMBED + L8_OUTPUT == 5_172_420_608
    assert o.per_card.kv_cache == 32 * L8_KV
    assert o.per_card.overhead == L8_CPU_COMPUTE == 279_445_504
    assert o.have == int(64 * GIB * 0.85)
    # Both nodes could (85% of 8 GiB is 7.3 GB), and neither has 6.5 GB free now.
    assert o.per_card.need == 6_525_607_936 and o.hosts == 2
    assert not o.free_now
    (cmd,) = commands(o, "org/Llama-GGUF")
    assert list(cmd.argv) == [
        "llama-server", "-m", str(path), "--ctx-size", "8192", "--n-gpu-layers", "0", *TAIL,
    ]  # fmt: skip


def test_one_card_holds_every_layer_and_the_output(tmp_path):
    path = llama8b(tmp_path)
    p = plan_file(path, [card_node("box", 1, 24 * GIB)], 8192)
    o = next(o for o in p.options if not o.cpu)
    assert (o.gpus_per_node, o.launch.gpu_layers, o.launch.tensor_split) == (1, 33, ())
    assert o.per_card.weights == 32 * L8_LAYER + L8_OUTPUT == 4_876_918_784
    assert o.per_card.kv_cache == 32 * L8_KV == 1 * GIB
    assert o.per_card.overhead == L8_COMPUTE + L8_LOGITS + OVERHEAD
    assert o.have == int(24 * GIB * 0.90)
    # The longest context: the KV budget over 131,072 B a token, in whole 256s, up to 131,072.
    budget = o.have - o.per_card.weights - o.per_card.overhead
    assert o.max_context == min(budget // (32 * 8 * 256 * 2) // 256 * 256, 131_072) == 131_072
    (cmd,) = commands(o, "org/Llama-GGUF")
    assert cmd.shell == (
        f"llama-server -m {path} --ctx-size 8192 --n-gpu-layers 33 --flash-attn on "
        "--host 0.0.0.0 --port 8080"
    )


def test_two_cards_split_by_layer_count_with_the_output_on_the_last(tmp_path):
    path = llama8b(tmp_path)
    # A 4 GiB card holds 3.86 GB (90%): one card is too small, two of a node hold it.
    p = plan_file(path, [card_node("box", 2, 4 * GIB)], 8192)
    o = next(o for o in p.options if not o.cpu)
    assert (o.gpus_per_node, o.launch.gpu_layers, o.launch.tensor_split) == (2, 33, (1, 1))
    # 33 units (32 layers and the output) over 2 cards: unit il goes to card ⌊il × 2 / 33⌋, so
    # layers 0-16 on the first, 17-31 and the output on the second, which is the fuller.
    assert o.per_card.weights == 15 * L8_LAYER + L8_OUTPUT == 2_515_001_344
    assert o.per_card.kv_cache == 15 * L8_KV
    assert o.per_card.overhead == L8_COMPUTE + L8_LOGITS + OVERHEAD
    assert o.per_card.need == 3_855_605_760 <= o.have == 3_865_470_566
    (cmd,) = commands(o, "org/Llama-GGUF")
    assert list(cmd.argv) == [
        "llama-server", "-m", str(path), "--ctx-size", "8192", "--n-gpu-layers", "33",
        "--tensor-split", "1,1", *TAIL,
    ]  # fmt: skip
    one = next(r for r in p.rejected if r.where == "1 × x-card")
    assert one.need == 32 * L8_LAYER + L8_OUTPUT + 32 * L8_KV + L8_COMPUTE + L8_LOGITS + OVERHEAD


def test_partial_offload_puts_the_most_layers_that_fit_on_the_card(tmp_path):
    path = llama8b(tmp_path)
    p = plan_file(path, [card_node("box", 1, 4 * GIB)], 8192)
    o = next(o for o in p.options if not o.cpu)
    # The last N layers on the card, each with its KV; the output layer stays in RAM, so no
    # logits on the card: N × 172,490,752 + 37,748,736 + 512 MiB ≤ 3,865,470,566 → N = 19.
    assert o.launch.gpu_layers == 19
    assert o.per_card.weights == 19 * L8_LAYER
    assert o.per_card.kv_cache == 19 * L8_KV
    assert o.per_card.overhead == L8_COMPUTE + OVERHEAD
    assert o.per_card.need == 3_851_943_936
    # The host keeps token_embd, 13 layers with their KV, the output layer, and its compute.
    assert (
        o.host_bytes
        == L8_EMBED + 13 * L8_LAYER + L8_OUTPUT + 13 * L8_KV + L8_CPU_COMPUTE
        == 3_248_283_648
    )
    (cmd,) = commands(o, "org/Llama-GGUF")
    assert cmd.shell == (
        f"llama-server -m {path} --ctx-size 8192 --n-gpu-layers 19 --flash-attn on "
        "--host 0.0.0.0 --port 8080"
    )


def test_partial_offload_needs_the_host_ram_for_the_rest(tmp_path):
    path = llama8b(tmp_path)
    p = plan_file(path, [card_node("box", 1, 4 * GIB, ram=2 * GIB)], 8192)
    assert not [o for o in p.options if not o.cpu]
    assert any("with the rest in RAM" in r.where for r in p.rejected)


def test_moe_experts_of_the_fewest_layers_stay_in_ram(tmp_path):
    path = qwen3moe(tmp_path)
    p = plan_file(path, [card_node("box", 1, 16 * GIB)], 32_768)
    o = next(o for o in p.options if not o.cpu)
    # Every layer on the card but the experts of the first K: 21,737,873,408 − K × 339,738,624
    # ≤ int(16 GiB × 0.9) = 15,461,882,265 → K = 19.
    full = 48 * Q3_LAYER + Q3_OUTPUT + 48 * Q3_KV + Q3_COMPUTE + Q3_LOGITS + OVERHEAD
    assert full == 21_737_873_408
    assert (o.launch.gpu_layers, o.launch.cpu_moe_layers) == (49, 19)
    assert o.per_card.weights == 48 * Q3_LAYER + Q3_OUTPUT - 19 * Q3_EXPERTS
    assert o.per_card.kv_cache == 48 * Q3_KV
    assert o.per_card.need == full - 19 * Q3_EXPERTS == 15_282_839_552
    # The host runs no layer: its compute buffer is the graph's inputs, an f32 KQ mask of
    # 32,768 × 512 and the ubatch's embeddings, 4 B × 512 × (32,768 + 2,048).
    assert o.host_bytes == Q3_EMBED + 19 * Q3_EXPERTS + 4 * 512 * (32_768 + 2048)
    (cmd,) = commands(o, "org/Qwen3-GGUF")
    assert list(cmd.argv) == [
        "llama-server", "-m", str(path), "--ctx-size", "32768", "--n-gpu-layers", "49",
        "--n-cpu-moe", "19", *TAIL,
    ]  # fmt: skip


def test_several_nodes_of_a_fabric_over_rpc(tmp_path):
    path = llama8b(tmp_path)
    nodes = [card_node(f"n{i}", 1, 4 * GIB, fabric="ib0") for i in (1, 2)]
    p = plan_file(path, nodes, 8192)
    o = next(o for o in p.options if o.nodes == 2)
    assert (o.gpus_per_node, o.launch.gpu_layers, o.launch.tensor_split, o.fabric) == (
        1,
        33,
        (1, 1),
        "ib0",
    )
    assert o.per_card.need == 3_855_605_760  # as two cards of one node
    worker, head = commands(o, "org/Llama-GGUF")
    assert (worker.role, worker.node, worker.shell) == (
        "worker", "n2", "rpc-server -H 0.0.0.0 -p 50052",
    )  # fmt: skip
    assert (head.role, head.node) == ("head", "n1")
    assert head.shell == (
        f"llama-server -m {path} --ctx-size 8192 --n-gpu-layers 33 --tensor-split 1,1 "
        "--rpc n2:50052 --flash-attn on --host 0.0.0.0 --port 8080"
    )
    # One node with the rest in RAM ranks first: fewer cards.
    assert p.options[0].launch.gpu_layers == 19 and p.options[0].nodes == 1
    # Who can reach the workers' rpc-server is said (issue 34, item 7).
    assert (
        "llama.cpp across nodes: each worker's rpc-server -H 0.0.0.0 listens on every address, "
        "with no authentication, and runs what it is sent: let only the head reach port 50052 "
        "(a firewall, or -H the worker's fabric address)"
    ) in p.notes


def test_not_on_disk_uses_the_hub_tag(tmp_path):
    from dataclasses import replace

    path = llama8b(tmp_path)
    p = plan_file(path, [card_node("box", 1, 24 * GIB)], 8192)
    o = p.options[0]
    o = replace(o, launch=replace(o.launch, model_path=None))
    (cmd,) = commands(o, "org/Llama-GGUF")
    assert cmd.argv[:3] == ("llama-server", "-hf", "org/Llama-GGUF:Q4_K_M")


@pytest.mark.parametrize(
    ("group", "context", "expected"),
    [
        # Full: KV heads × (K + V) × 2 B × pad256(context).
        (LayerGroup(AttentionKind.FULL, 1, kv_heads=16, head_dim=128), 32_768, 268_435_456),
        (LayerGroup(AttentionKind.FULL, 1, kv_heads=8, head_dim=128), 1000, 8 * 256 * 2 * 1024),
        # Sliding window 1024: pad256(min(32,768, 1,024 × 4 slots + 512)) = 4,608 cells.
        (
            LayerGroup(AttentionKind.SLIDING, 1, kv_heads=16, head_dim=128, window=1024),
            32_768,
            16 * 256 * 2 * 4608,
        ),
        # A window longer than the context holds the context.
        (
            LayerGroup(AttentionKind.SLIDING, 1, kv_heads=16, head_dim=128, window=4096),
            2048,
            16 * 256 * 2 * 2048,
        ),
        # MLA: K only, 576 a token.
        (
            LayerGroup(AttentionKind.MLA, 1, kv_heads=1, head_dim=576, latent_dim=576),
            32_768,
            576 * 2 * 32_768,
        ),
        # Recurrent: the f32 state of each of 4 slots, whatever the context.
        (LayerGroup(AttentionKind.LINEAR, 1, state_bytes=2_195_456), 1_000_000, 8_781_824),
    ],
)
def test_kv_bytes_a_layer(group, context, expected):
    from llmfit.plan.engines.llamacpp_sizes import layer_kv_bytes

    assert layer_kv_bytes(group, context) == expected


def test_more_context_never_needs_less_kv(tmp_path):
    from llmfit.plan.engines.llamacpp_sizes import Placement, estimate

    found = gguf_artifacts(llama8b(tmp_path).parent)
    layout = found.artifacts[0].layout
    needs = [estimate(layout, Placement(33, 2), c).worst_card().total for c in (1, 512, 513, 9000)]
    assert needs == sorted(needs)


def test_labels_say_what_stays_in_ram(tmp_path):
    from llmfit.render.sentences import label

    p = plan_file(llama8b(tmp_path), [card_node("box", 1, 4 * GIB)], 8192)
    assert label(p.options[0]) == "1 × x-card + 13 of 32 layers in RAM"
    q = plan_file(qwen3moe(tmp_path / "q"), [card_node("box", 1, 16 * GIB)], 32_768)
    assert label(q.options[0]) == "1 × x-card + experts of 19 layers in RAM"


def test_the_projector_is_charged_to_the_first_card_or_the_host(tmp_path):
    from llmfit.plan.engines.llamacpp_sizes import Placement, estimate

    layout = gguf_artifacts(llama8b(tmp_path).parent).artifacts[0].layout
    bare = estimate(layout, Placement(33, 2), 8192)
    with_mmproj = estimate(layout, Placement(33, 2), 8192, projector=1_000_000)
    assert with_mmproj.cards[0].weights == bare.cards[0].weights + 1_000_000
    assert with_mmproj.cards[1] == bare.cards[1]
    cpu = estimate(layout, Placement(0, 0), 8192, projector=1_000_000)
    assert cpu.host.weights == 32 * L8_LAYER + L8_EMBED + L8_OUTPUT + 1_000_000


def test_nodes_without_ram_get_no_partial_offload(tmp_path):
    path = llama8b(tmp_path)
    p = plan_file(path, [card_node("box", 1, 4 * GIB, ram=0)], 8192)
    assert p.options == ()
    (r,) = [r for r in p.rejected if "with the rest in RAM" in r.where]
    assert r.reason == (
        "no RAM is given for these nodes (ram_gb in a fleet file; inline, +RAM as in "
        "1xh100-80g+512g), so none is counted on"
    )
    assert p.unplaced[0].wants_ram == "llama.cpp"


def _layout(n: int, experts: bool, tied: bool):
    from llmfit.plan.artifact import GgufLayout

    return GgufLayout(
        layer_bytes=tuple(1000 + 7 * i for i in range(n)),
        expert_bytes=tuple(600 + i for i in range(n)) if experts else (0,) * n,
        embed_bytes=5000,
        output_bytes=7000,
        tied_embeddings=tied,
        kv_layout=(
            LayerGroup(AttentionKind.SLIDING, n // 2, kv_heads=2, head_dim=64, window=128),
            LayerGroup(AttentionKind.FULL, n - n // 2, kv_heads=2, head_dim=64),
        ),
        vocab=1000,
        embedding=64,
        feed_forward=256,
    )


def test_every_byte_is_placed_once_whatever_the_placement():
    # Property (gguf-parser-go style): moving layers or experts between cards and the host never
    # creates or loses a byte, except the tied-embedding copy on the output layer's card.
    from hypothesis import given
    from hypothesis import strategies as st

    from llmfit.plan.engines.llamacpp_sizes import Placement, estimate, layer_kv_bytes

    @given(
        n=st.integers(1, 12),
        ngl=st.integers(0, 13),
        cards=st.integers(1, 4),
        cpu_moe=st.integers(0, 12),
        experts=st.booleans(),
        tied=st.booleans(),
        context=st.integers(1, 20_000),
    )
    def check(n, ngl, cards, cpu_moe, experts, tied, context):
        layout = _layout(n, experts, tied)
        ngl, cpu_moe = min(ngl, n + 1), min(cpu_moe, n)
        e = estimate(layout, Placement(ngl, cards, cpu_moe), context)
        output_on_card = ngl >= n + 1
        copy = layout.embed_bytes if tied and output_on_card else 0
        total = sum(layout.layer_bytes) + layout.embed_bytes + layout.output_bytes + copy
        assert sum(d.weights for d in e.cards) + e.host.weights == total
        kinds = [g for g in layout.kv_layout for _ in range(g.layers)]
        kv = sum(layer_kv_bytes(g, context) for g in kinds)
        assert sum(d.kv_cache for d in e.cards) + e.host.kv_cache == kv
        # Layers on cards are the last ngl, and the output goes with them only when all do.
        on_cards = sorted(il for d in e.cards for il in d.layers)
        assert on_cards == list(range(max(n - ngl, 0), n + (1 if output_on_card else 0)))

    check()


def test_more_layers_on_the_cards_never_need_less_of_them():
    from llmfit.plan.engines.llamacpp_sizes import Placement, estimate

    layout = _layout(10, False, False)
    card = [sum(d.total for d in estimate(layout, Placement(g, 2), 4096).cards) for g in range(12)]
    assert card == sorted(card)


def test_q8_0_kv_what_if_halves_the_cache_and_passes_its_flags(tmp_path):
    path = llama8b(tmp_path)
    nodes = [cpu_node("cpu-1", 64 * GIB)]
    (o,) = plan_file(path, nodes, 8192, precision="kv-fp8").options
    assert o.what_if == "q8_0 KV cache"
    assert o.engine_flags == ("--cache-type-k", "q8_0", "--cache-type-v", "q8_0")
    # A cell's K row is 8 KV heads × 128 = 1,024 elements: 32 blocks of 34 B; V the same.
    # 2 × 1,088 B × 8,192 cells × 32 layers, against 4,096 B × 8,192 × 32 at f16.
    assert o.per_card.kv_cache == 2 * 1088 * 8192 * 32 == 570_425_344
    assert L8_KV * 32 == 4096 * 8192 * 32
    both = plan_file(path, nodes, 8192, precision="all").options
    assert [x.what_if for x in both] == [None, "q8_0 KV cache"]
