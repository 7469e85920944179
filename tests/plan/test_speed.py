"""The step model's arithmetic on worked examples, each number worked out by hand in a comment.

The arithmetic takes its constants as data (each engine's fitted table is in its own module and
moves with every refit), so these examples give their own, round ones: a serving engine that
streams weights at 0.65 of a card's bandwidth with 80 µs a layer, 0.6 ms a step and 63 µs a
sequence a step besides, prefills at 0.73 of the tensor rate and spends 39 ms before a first
token (SERVING below); a llama.cpp that streams at 0.94 with 113 µs a layer and 31 µs a hand-off
(LLAMA). CardSpec figures are the makers' (plan/cards.py): H100 SXM 3.35 TB/s, 989.5 dense bf16
TFLOPS, NVLink 450 GB/s one way; RTX 4090 1,008 GB/s, PCIe 4.0 32 GB/s one way.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from llmfit.plan.artifact import WeightLayout
from llmfit.plan.cards import BY_KEY, override
from llmfit.plan.curves import curves_for
from llmfit.plan.model import AttentionKind, LayerGroup, Model, Shape
from llmfit.plan.speed import (
    Constants,
    SpeedInputs,
    Stage,
    Time,
    _time,
    collective_latency,
    decode_step,
    estimate,
    expert_share,
    inputs_for,
    prefill_time,
    stage_parts,
    stepper,
)

ROOT = Path(__file__).resolve().parents[2]
SERVING = Constants(
    weight_efficiency=0.65, kv_efficiency=0.65, layer_s=80e-6, step_s=0.6e-3, sequence_s=63e-6,
    hop_s=31e-6, prefill_efficiency=0.73, quant_prefill_efficiency=0.73, ttft_s=0.039,
    prefill_chunk=8192, decode_pipelined=True,
)  # fmt: skip
LLAMA = Constants(
    weight_efficiency=0.94, kv_efficiency=0.37, layer_s=113e-6, step_s=0.0, sequence_s=0.0,
    hop_s=31e-6, prefill_efficiency=0.88, quant_prefill_efficiency=0.74, ttft_s=0.0,
    prefill_chunk=512, decode_pipelined=False,
)  # fmt: skip
H100 = BY_KEY["h100-80g"]
RTX4090 = BY_KEY["rtx4090-24g"]

# Llama-3.1-8B at bf16, part by part from its config (32 layers, hidden 4,096, 32 query and 8 KV
# heads of 128, FFN 14,336, vocabulary 128,256, untied): a layer is 4,096 × (2 × 4,096 + 2 × 1,024)
# + 3 × 4,096 × 14,336 + 2 × 4,096 = 218,112,000 parameters, 436,224,000 bytes; the embedding
# 128,256 × 4,096 × 2 = 1,050,673,152 B; the output layer that and its 8,192-byte norm. In all
# 16,060,522,496 B: the published index's total_size (fixtures/hub).
LLAMA8B_LAYER = 436_224_000
LLAMA8B = WeightLayout((LLAMA8B_LAYER,) * 32, (0,) * 32, 1_050_673_152, 1_050_681_344, False)
LLAMA8B_MODEL = Model(
    architecture="LlamaForCausalLM",
    model_type="llama",
    layers=32,
    attention_heads=32,
    kv_heads=8,
    head_dim=128,
    layer_groups=(LayerGroup(AttentionKind.FULL, 32, kv_heads=8, head_dim=128),),
    hidden_size=4096,
    vocab_size=128_256,
    dtype="bfloat16",
    params=8_030_261_248,
)
# 2 (K and V) × 32 layers × 8 heads × 128 × 2 B = 131,072 B a token of context.
LLAMA8B_KV = 131_072


def llama8b(card=H100, **kw) -> SpeedInputs:
    kw.setdefault("context", 4096)
    return inputs_for(
        LLAMA8B_MODEL, LLAMA8B, card, constants=SERVING, kv_bytes_per_token=LLAMA8B_KV, **kw
    )


def test_llama8b_kv_bytes_a_token_is_the_shapes():
    assert Shape.of(LLAMA8B_MODEL).kv_bytes_per_token() == LLAMA8B_KV
    assert LLAMA8B.total == 16_060_522_496


def test_dense_8b_bf16_on_one_h100():
    inp = llama8b()
    (stage,) = inp.stages
    # A step reads the 32 layers and the output head; the embedding is looked up, one row.
    # 32 × 436,224,000 + 1,050,681,344 = 15,009,849,344 B.
    assert stage.dense_bytes == 15_009_849_344
    step = decode_step(inp, 1)
    # + the cache of 4,096 tokens: 131,072 × 4,096 = 536,870,912 B; 15,546,720,256 B in all,
    # at 3.35e12 × 0.65 = 2.1775e12 B/s: 7.1397 ms.
    read = step.parts[0].memory + step.parts[0].kv
    assert read == pytest.approx(15_546_720_256 / 2.1775e12)
    assert round(read * 1e3, 4) == 7.1397
    # Fixed costs: 32 layers × 80 µs + 0.6 ms a step + 63 µs for its one sequence = 3.223 ms.
    assert round(step.total * 1e3, 4) == round(7.1397 + 3.223, 4) == 10.3627
    s = estimate(inp)
    assert round(s.decode_tokens_per_s, 2) == 96.50  # 1 / 10.3627 ms
    assert s.bound == "memory"
    # One sequence, one replica: the total is the single sequence's.
    assert s.decode_tokens_per_s_total == s.decode_tokens_per_s


def test_block_quantized_weights_stream_at_their_own_share_and_the_cache_at_the_plain_one():
    # llama.cpp's mul_mat_vec_q dequantizes every block it reads: such weights stream at
    # quant_weight_efficiency (0.81 here), the KV cache at weight_efficiency × attention's share
    # (0.65 × 1) whatever the weights are.
    k = replace(SERVING, quant_weight_efficiency=0.81)
    inp = replace(llama8b(), constants=k, quantized=True)
    step = decode_step(inp, 1)
    # Weights 15,009,849,344 B at 3.35e12 × 0.81 = 2.7135e12 B/s: 5.531546 ms; the cache
    # 536,870,912 B at 3.35e12 × 0.65 = 2.1775e12 B/s: 0.246554 ms.
    assert step.parts[0].memory == pytest.approx(15_009_849_344 / 2.7135e12)
    assert round(step.parts[0].memory * 1e3, 6) == 5.531546
    assert round(step.parts[0].kv * 1e3, 6) == 0.246554
    # Float weights (quantized False) keep the plain share: 15,009,849,344 / 2.1775e12.
    plain = decode_step(replace(inp, quantized=False), 1)
    assert plain.parts[0].memory == pytest.approx(15_009_849_344 / 2.1775e12)


def test_prefill_and_ttft_of_8192_tokens_on_one_h100():
    t = prefill_time(llama8b(), 8192)
    assert t is not None
    # FLOPs: 2 × 7,504,924,672 parameters a token (8,030,261,248 less the embedding's
    # 525,336,576, which is looked up) × 8,192 = 1.22961e14, and causal attention's 2 × 131,072
    # query elements (32 layers × 32 heads × 128) × 8,192² = 1.75922e13: 1.40553e14 at
    # 989.5e12 × 0.73 = 7.22335e14 FLOP/s: 170.23 ms of GEMMs and 24.35 of attention, 194.58 ms.
    # The weights, read once for the one step of 8,192 tokens, take 6.89 ms under the GEMMs.
    assert round(t.parts[0].compute * 1e3, 2) == 170.23
    assert round(t.parts[0].attention * 1e3, 2) == 24.35
    assert round(t.parts[0].memory * 1e3, 2) == 6.89
    # + 32 layers × 80 µs: 197.14 ms.
    assert round(t.total * 1e3, 2) == 197.14
    s = estimate(llama8b(prompt_tokens=8192))
    assert round(s.ttft_s * 1e3, 2) == 236.14  # + the 39 ms before any first token
    # The prefill rate is the prompt over that time to its first token, so the two agree:
    # 8,192 / 236.14 ms = 34,691 tok/s.
    assert round(s.prefill_tokens_per_s) == 34_691


def test_a_decode_step_with_cpu_and_gpu_overlapped_and_not():
    # The step of test_dense_8b_bf16_on_one_h100 at a batch of 32 sequences of 4,096 tokens.
    # GPU: weights 15,009,849,344 B / 2.1775e12 = 6.89316 ms; the cache 32 × 536,870,912 =
    # 17,179,869,184 B / 2.1775e12 = 7.88972 ms (the GEMMs' 2 × 7,504,924,672 × 32 / 7.22335e14
    # = 0.66494 ms, and attention's 4 × 131,072 × 32 × 4,096 / 7.22335e14 = 0.09513 ms, lie under
    # them); 32 layers × 80 µs = 2.56 ms: 17.34288 ms. CPU: 0.6 ms + 32 × 63 µs = 2.616 ms.
    inp = llama8b()
    serial = decode_step(inp, 32)
    assert round(serial.total * 1e3, 4) == round(17.34288 + 2.616, 4) == 19.9589
    # Overlapped (vLLM's async scheduling, SGLang's overlap scheduler): the larger, the GPU's.
    both = decode_step(replace(inp, overlap=True), 32)
    assert round(both.total * 1e3, 4) == 17.3429
    # At 512 sequences of 4,096 tokens the GPU is the longer: the GEMMs' 2 × 7,504,924,672 × 512
    # / 7.22335e14 = 10.6391 ms outlast the weights, the cache 512 × 536,870,912 / 2.1775e12 =
    # 126.2355 ms, the layers 2.56 ms: 139.435 ms against the CPU's 0.6 + 512 × 0.063 = 32.856.
    big = decode_step(replace(inp, overlap=True), 512)
    assert round(big.total * 1e3, 3) == 139.435
    # A short context makes the CPU the longer: 512 sequences of 16 tokens read 512 × 16 ×
    # 131,072 = 1,073,741,824 B of cache, 0.49311 ms; the GEMMs' 2 × 7,504,924,672 × (512 + 0) /
    # 7.22335e14 = 10.639 ms outlast the weights. GPU ≈ 10.639 + 0.493 + 2.56 = 13.69 ms; CPU
    # 32.856 ms: overlapped, 32.856 ms; in series 46.55 ms.
    short = replace(inp, overlap=True)
    assert round(decode_step(short, 512, 16).total * 1e3, 3) == 32.856
    assert round(decode_step(inp, 512, 16).total * 1e3, 2) == 46.55


def test_a_prefill_never_runs_past_the_cards_peak():
    # An efficiency above 1 is held at 1: a prefill of 8,192 tokens at "120 %" of the tensor
    # rate runs at the card's dense peak, 989.5e12 FLOP/s: 1.40553e14 FLOPs take 142.04 ms, and
    # no less (test_prefill_and_ttft_of_8192_tokens_on_one_h100 has the FLOPs).
    k = replace(SERVING, prefill_efficiency=1.2, quant_prefill_efficiency=1.2, ttft_s=0.0)
    t = prefill_time(replace(llama8b(), constants=k), 8192)
    assert t is not None
    flops = t.parts[0].compute + t.parts[0].attention
    assert round(flops * 1e3, 2) == 142.04
    s = estimate(replace(llama8b(prompt_tokens=8192), constants=k))
    assert s.prefill_tokens_per_s is not None
    # 8,192 tokens × 2 × 7,504,924,672 FLOPs a token at most 989.5e12 FLOP/s: at most 65,914 a
    # second before attention; with it and the layers' 2.56 ms, 8,192 / 144.603 ms = 56,651.
    assert s.prefill_tokens_per_s * 2 * 7_504_924_672 <= H100.bf16_flops
    assert round(s.prefill_tokens_per_s) == 56_651
    # A GEMM's efficiency curve (Constants.gemm_rows): 64 empty tile rows cost 64 tokens' FLOPs,
    # 8,192 / 8,256 of the most at a full chunk: the GEMMs' 142.04 − 17.78 = 124.27 ms become
    # 124.27 × 8,256 / 8,192 = 125.24 ms.
    curved = replace(llama8b(), constants=replace(k, gemm_rows=64.0))
    c = prefill_time(curved, 8192)
    assert c is not None
    assert round(c.parts[0].compute * 1e3, 2) == 125.24
    assert s.bound_prefill == "compute"


def test_faster_cards_rank_first():
    # Issue 15: Llama-3.1-8B at bf16 ranks an H200 or H100 above an A100 and an L40S.
    rate = {k: estimate(llama8b(BY_KEY[k])).decode_tokens_per_s for k in
            ("h200-141g", "h100-80g", "a100-80g", "l40s-48g")}  # fmt: skip
    assert rate["h200-141g"] > rate["h100-80g"] > rate["a100-80g"] > rate["l40s-48g"]


# Qwen3-30B-A3B at bf16, from its config (48 layers, hidden 2,048, 32 query and 4 KV heads of
# 128, 128 experts of FFN 768, 8 a token, untied vocabulary of 151,936): a layer's attention is
# 2,048 × (2 × 4,096 + 2 × 512) = 18,874,368 parameters, its router 2,048 × 128 = 262,144, its
# norms 4,352: 38,281,728 B; its experts 128 × 3 × 2,048 × 768 = 603,979,776 parameters,
# 1,207,959,552 B. Embedding 151,936 × 2,048 × 2 = 622,329,856 B; output that + a 4,096 B norm.
# In all 61,064,245,248 B, the published index's total_size (fixtures/hub).
QWEN_DENSE, QWEN_EXPERTS = 38_281_728, 1_207_959_552
QWEN30B = WeightLayout(
    (QWEN_DENSE + QWEN_EXPERTS,) * 48, (QWEN_EXPERTS,) * 48, 622_329_856, 622_333_952, False
)
QWEN30B_MODEL = replace(
    LLAMA8B_MODEL,
    layers=48,
    kv_heads=4,
    layer_groups=(LayerGroup(AttentionKind.FULL, 48, kv_heads=4, head_dim=128),),
    hidden_size=2048,
    vocab_size=151_936,
    experts=128,
    experts_active=8,
    params=30_532_122_624,
    active_params=3_345_000_000,
)


def test_moe_reads_only_its_active_experts():
    assert QWEN30B.total == 61_064_245_248
    inp = inputs_for(
        QWEN30B_MODEL, QWEN30B, H100, constants=SERVING, context=1, kv_bytes_per_token=0
    )
    (stage,) = inp.stages
    assert (stage.dense_bytes, stage.expert_bytes) == (48 * QWEN_DENSE + 622_333_952,
                                                       48 * QWEN_EXPERTS)  # fmt: skip
    # One token routes to 8 of 128 experts: 48 × (38,281,728 + 1,207,959,552 × 8 / 128) +
    # 622,333,952 = 48 × 113,779,200 + 622,333,952 = 6,083,735,552 B a step, a tenth of 61 GB.
    bw = H100.memory_bandwidth * SERVING.weight_efficiency
    one = decode_step(inp, 1).parts[0]
    assert one.memory + one.experts == pytest.approx(6_083_735_552 / bw)
    # Four sequences route 4 × 8 choices: 1 − (120/128)^4 = 22.75 % of the experts are read.
    assert expert_share(128, 8, 4) == pytest.approx(1 - (120 / 128) ** 4)
    four = 48 * (QWEN_DENSE + QWEN_EXPERTS * (1 - (120 / 128) ** 4)) + 622_333_952
    at4 = decode_step(inp, 4).parts[0]
    assert at4.memory + at4.experts == pytest.approx(four / bw)
    # A batch of 512 tokens (a prefill step) touches every expert: 1 − (15/16)^512 ≈ 1.
    assert expert_share(128, 8, 512) == pytest.approx(1.0)
    # Tensor parallelism splits every part, experts included: half a card each.
    tp2 = inputs_for(QWEN30B_MODEL, QWEN30B, H100, constants=SERVING, context=1,
                     kv_bytes_per_token=0, tp=2)  # fmt: skip
    assert tp2.stages[0].expert_bytes == 48 * QWEN_EXPERTS / 2


def test_a_moe_layer_at_4_and_at_4000_tokens_an_expert():
    # Qwen3-30B-A3B's routed experts on one H100: 48 × 1,207,959,552 = 57,982,058,496 B, and a
    # token multiplies (30,532,122,624 − 3,345,000,000) × 8 / 120 = 1,812,474,841.6 of their
    # parameters (8 of 128 experts). The grouped GEMM reaches half the dense GEMMs' 0.73 of the
    # tensor rate at most (989.5e12 × 0.73 × 0.5 = 3.611675e14 FLOP/s), t / (t + 16) of that at
    # t tokens an expert: 16 empty rows an expert reached, 16 × 128 / 8 = 256 tokens' FLOPs a
    # step that reaches every expert. No fixed cost a MoE layer.
    k = replace(SERVING, expert_prefill_efficiency=0.5, expert_rows=16.0)
    inp = inputs_for(QWEN30B_MODEL, QWEN30B, H100, constants=k, context=1, kv_bytes_per_token=0)
    (stage,) = inp.stages
    assert stage.expert_bytes == 57_982_058_496
    assert stage.expert_params == pytest.approx(1_812_474_841.6)
    # 4 tokens an expert: a decode batch of 64 (64 × 8 / 128 = 4). They reach 1 − (120/128)^64 =
    # 0.983925 of the experts: 57,982,058,496 × 0.983925 / (3.35e12 × 0.65) = 26.1998 ms of
    # bytes; FLOPs 2 × 1,812,474,841.6 × (64 + 256 × 0.983925) / 3.611675e14 = 3.1705 ms, under
    # them: bandwidth-bound.
    few = stage_time(inp, stage, 64, 0)
    assert round(few.experts * 1e3, 4) == 26.1998
    assert round(few.expert_compute * 1e3, 4) == 3.1705
    assert few.gpu == pytest.approx(
        max(few.memory, few.compute) + few.experts + max(few.kv, few.attention) + few.overhead
    )
    # 4,000 tokens an expert: a prefill step of 64,000 tokens reaches every expert, 26.6278 ms
    # of bytes; FLOPs 2 × 1,812,474,841.6 × (64,000 + 256) / 3.611675e14 = 644.9217 ms:
    # tensor-bound, at 4,000 / 4,016 = 99.6 % of the grouped GEMM's most.
    many = stage_time(inp, stage, 0, 0, 64_000, 0)
    assert round(many.experts * 1e3, 4) == 26.6278
    assert round(many.expert_compute * 1e3, 4) == 644.9217
    assert many.bound == "compute"


def stage_time(
    inp: SpeedInputs, s: Stage, batch: float, context: float, chunk: float = 0.0,
    chunk_context: float = 0.0,
) -> Time:  # fmt: skip
    """One stage's share of a step, as the step model prices it (speed.stage_parts)."""
    st = stepper(inp)
    return _time(stage_parts(st, st.coefs[inp.stages.index(s)], batch, context, chunk,
                             chunk_context))  # fmt: skip


def test_tp2_all_reduce_over_nvlink_against_pcie():
    nvlink = llama8b(tp=2)
    pcie = llama8b(override(H100, {"link": "pcie5", "link_gbs": 64}), tp=2)
    # Two all-reduces a layer of one token's activations, 4,096 × 2 B = 8,192 B; a ring moves
    # 2 × (2 − 1)/2 of it. NVLink: 32 × 2 × (3.7 µs + 8,192 / 450e9 s) = 64 × 3.718204 µs
    # = 237.97 µs. PCIe 5.0: 64 × (42.56 µs + 8,192 / 64e9 s) = 64 × 42.688 µs = 2,732.03 µs.
    assert round(decode_step(nvlink, 1).parts[0].link * 1e6, 2) == 237.97
    assert round(decode_step(pcie, 1).parts[0].link * 1e6, 2) == 2732.03
    # Each card reads half the weights; all else equal, PCIe costs the step 2.494 ms more.
    gap = decode_step(pcie, 1).total - decode_step(nvlink, 1).total
    assert round(gap * 1e3, 3) == 2.494
    assert estimate(nvlink).decode_tokens_per_s > estimate(pcie).decode_tokens_per_s


def test_prefill_over_pcie_at_tp8_is_link_bound():
    # 8,192 tokens × 4,096 × 2 B = 67,108,864 B an all-reduce; a ring moves 7/4 of it: over
    # PCIe 5.0 at 64 GB/s, 1.835 ms, × 64 all-reduces = 117 ms, against 194.58 / 8 = 24.3 ms of
    # compute a card. Over NVLink (450 GB/s): 16.7 ms, so compute bounds it.
    pcie = prefill_time(llama8b(override(H100, {"link": "pcie5", "link_gbs": 64}), tp=8), 8192)
    nvlink = prefill_time(llama8b(tp=8), 8192)
    assert pcie is not None and nvlink is not None
    assert round(pcie.parts[0].link * 1e3) == 120  # + 64 × 42.56 µs of latency
    assert (pcie.bound, nvlink.bound) == ("link", "compute")


def test_collective_latency_by_link_and_width():
    # sgl-project/sglang#2904: vLLM's custom all-reduce, 3.7/4.8/5.9 µs at 2/4/8 H100s.
    assert [collective_latency("nvlink", n) for n in (1, 2, 4, 8, 16)] == [
        0.0, 3.7e-6, 4.8e-6, 5.9e-6, 5.9e-6,
    ]  # fmt: skip
    assert collective_latency("pcie", 2) == 42.56e-6  # NVIDIA/nccl#1530, 8 RTX 4090s
    assert collective_latency("none", 8) == 0.0


# A dense model of 40 layers of 100 MB each, an embedding and an output layer of 50 MB each,
# hidden size 4,096: round numbers for llama.cpp's partial offload.
FORTY = WeightLayout((100_000_000,) * 40, (0,) * 40, 50_000_000, 50_000_000, False)
FORTY_MODEL = replace(
    LLAMA8B_MODEL,
    layers=40,
    layer_groups=(LayerGroup(AttentionKind.FULL, 40, kv_heads=8, head_dim=128),),
    params=2_100_000_000,
)


def forty(gpu_layers: int | None) -> SpeedInputs:
    return inputs_for(FORTY_MODEL, FORTY, RTX4090, constants=LLAMA, context=1,
                      kv_bytes_per_token=0, gpu_layers=gpu_layers, ram_bandwidth=100e9)  # fmt: skip


def test_llamacpp_with_20_layers_on_the_host():
    inp = forty(20)  # -ngl 20: llama.cpp offloads the LAST 20 layers; the output stays on the host
    assert inp.host is not None
    (card,) = inp.stages
    assert (card.layers, card.dense_bytes) == (20, 2_000_000_000)
    assert (inp.host.layers, inp.host.dense_bytes) == (20, 2_050_000_000)
    # Host → card for the layers, card → host for the output layer: two crossings a token.
    assert inp.host.crossings == 2
    step = decode_step(inp, 1)
    host = step.parts[2]
    # The host reads 2.05e9 B at 100e9 × 0.94 B/s: 21.809 ms; 20 layers × 113 µs = 2.26 ms, two
    # hand-offs × 31 µs; 2 × 8,192 B over PCIe 4.0 at 32e9 B/s: 0.512 µs.
    assert round(host.memory * 1e3, 3) == 21.809
    assert round(host.overhead * 1e3, 3) == 2.322
    assert host.link == pytest.approx(2 * 8192 / 32e9)
    # The card reads 2.0e9 B at 1,008e9 × 0.94 = 947.52e9 B/s: 2.111 ms, and 20 × 113 µs.
    assert round(step.parts[0].memory * 1e3, 3) == 2.111
    # 21.809 + 2.322 + 0.0005 + 2.111 + 2.26 = 28.502 ms: 35.09 tokens a second.
    assert round(step.total * 1e3, 3) == 28.502
    assert round(estimate(inp).decode_tokens_per_s, 2) == 35.09
    # Every layer and the output on the card: 4.05e9 B / 947.52e9 = 4.274 ms + 40 × 113 µs
    # = 8.794 ms, 113.7 tokens a second: the host's RAM, not the card, sets the pace above.
    assert round(estimate(forty(None)).decode_tokens_per_s, 1) == 113.7
    assert forty(None).host is None


def test_llamacpp_on_the_cpu_alone():
    # -ngl 0: every layer and the output on the host, 4.05e9 B at 200e9 × 0.94 B/s = 21.543 ms;
    # its cache, 1e5 B a token for the 40 layers × 2,048 tokens = 2.048e8 B, 1.089 ms; 40 × 113 µs
    # = 4.52 ms. No card: nothing crosses PCIe, and no prefill figure without the CPU's FLOPs.
    inp = inputs_for(FORTY_MODEL, FORTY, RTX4090, constants=LLAMA, context=2048,
                     kv_bytes_per_token=1e5, gpu_layers=0, ram_bandwidth=200e9)  # fmt: skip
    assert inp.stages == () and inp.host is not None
    assert (inp.host.layers, inp.host.kv_bytes_per_token, inp.host.crossings) == (40, 1e5, 0)
    s = estimate(inp)
    assert round(1000 / s.decode_tokens_per_s, 3) == round(21.543 + 1.089 + 4.52, 3)
    assert s.prefill_tokens_per_s is None


def test_llamacpp_n_cpu_moe_keeps_experts_on_the_host():
    # Four layers of 1 MB of attention and 8 experts of 1 MB, 2 a token; --n-cpu-moe 2.
    moe = WeightLayout((9_000_000,) * 4, (8_000_000,) * 4, 500_000, 500_000, False)
    model = replace(FORTY_MODEL, layers=4, experts=8, experts_active=2,
                    layer_groups=(LayerGroup(AttentionKind.FULL, 4, 8, 128),))  # fmt: skip
    inp = inputs_for(model, moe, RTX4090, constants=LLAMA, context=1, kv_bytes_per_token=0,
                     cpu_moe=2, ram_bandwidth=100e9)  # fmt: skip
    assert inp.host is not None
    # The card: every layer's attention (4 MB) and the output (0.5 MB); the last two layers'
    # experts (16 MB). The host: the first two layers' experts, 16 MB, of which a token reads
    # 2/8: 4 MB at 94 GB/s. Two crossings for each of those two layers.
    assert (inp.stages[0].dense_bytes, inp.stages[0].expert_bytes) == (4_500_000, 16_000_000)
    assert (inp.host.layers, inp.host.dense_bytes, inp.host.expert_bytes) == (0, 0, 16_000_000)
    assert inp.host.crossings == 4
    assert decode_step(inp, 1).parts[2].memory == pytest.approx(4_000_000 / 94e9)


def test_replicas_multiply_the_total_and_big_batches_are_compute_bound():
    # Eight independent copies, eight sequences: each copy decodes one, eight times the rate.
    one = estimate(llama8b())
    eight = estimate(llama8b(replicas=8, batch=8))
    assert eight.decode_tokens_per_s_total == pytest.approx(8 * one.decode_tokens_per_s)
    # 1,024 sequences of 64 tokens on one H100: 2 × 7.5e9 × 1,024 FLOPs = 21.3 ms at 7.22e14
    # FLOP/s, more than the 10.8 ms the weights and 8.6 GB of cache take to read; and the
    # engine's own work, 0.6 ms + 1,024 × 63 µs = 65.1 ms, counts with compute.
    big = estimate(llama8b(context=64, batch=1024))
    step = decode_step(llama8b(context=64), 1024)
    assert round(step.parts[0].compute * 1e3, 1) == 21.3
    assert round((step.parts[0].memory + step.parts[0].kv) * 1e3, 1) == 10.8
    assert round(step.parts[-1].scheduling * 1e3, 1) == 65.1
    assert big.bound_total == "compute"
    assert big.decode_tokens_per_s_total > 20 * one.decode_tokens_per_s


def test_pipeline_stages_overlap_batches_in_vllm_but_not_one_sequence():
    # Two stages of 16 layers over two nodes: a single sequence waits for both stages in turn,
    # so it is no faster than on one card; 64 sequences keep both stages busy.
    pp = llama8b(pp=2, nodes=2, batch=64)
    assert [s.layers for s in pp.stages] == [16, 16]
    one = llama8b(batch=64)
    assert estimate(pp).decode_tokens_per_s < estimate(one).decode_tokens_per_s
    assert estimate(pp).decode_tokens_per_s_total > estimate(one).decode_tokens_per_s_total


def test_kv_without_flash_attention_reads_slower():
    # llama.cpp without flash attention reads its cache at 0.37 of the bandwidth, not 0.94.
    inp = replace(forty(None), stages=(Stage(40, 4.05e9, kv_bytes_per_token=1e5),), context=4096)
    off = decode_step(replace(inp, flash_attention=False), 1).parts[0].kv
    on = decode_step(inp, 1).parts[0].kv
    kv = 1e5 * 4096
    assert off - on == pytest.approx(kv / (1008e9 * 0.37) - kv / (1008e9 * 0.94))


def test_assumptions_are_stated():
    s = estimate(llama8b(batch=4, prompt_tokens=1000))
    assert "decode at 4,096 tokens of context a sequence" in s.assumptions
    assert "flash attention on" in s.assumptions
    assert "4 sequences decoding at once over 1 replica, no prefill between" in s.assumptions


def test_no_flops_no_prefill():
    card = override(None, {"memory_bandwidth_gbs": 500}, key="x-24g")
    s = estimate(llama8b(card))
    assert s.prefill_tokens_per_s is None and s.ttft_s is None and s.bound_prefill is None
    assert s.decode_tokens_per_s > 0


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        estimate(replace(llama8b(), tp=0))
    with pytest.raises(ValueError, match="at least one stage"):
        estimate(replace(llama8b(), stages=(), host=None))


def _benchmark():
    spec = importlib.util.spec_from_file_location(
        "accuracy_speed", ROOT / "benchmarks" / "accuracy_speed.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["accuracy_speed"] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


def test_constants_reproduce_the_stated_medians():
    # docs/accuracy.md, "Speed": the medians the constants in speed.py give on the fixture rows.
    bench = _benchmark()
    priced, _ = bench.load()
    got = {k: (round(v[0] * 100, 1), v[1]) for k, v in bench.medians(priced).items()}
    # llama.cpp's constants are fitted to these rows (llamacpp_speed.py); vLLM's and SGLang's to
    # the serving runs of load.jsonl and these (serving_speed.py), so their "fit" and "holdout"
    # here are this file's split, not their fit's.
    assert got[("llama.cpp", "fit")] == (5.9, 43)
    assert got[("llama.cpp", "holdout")] == (6.9, 13)
    assert got[("vLLM/SGLang", "fit")] == (30.6, 9)
    assert got[("vLLM/SGLang", "holdout")] == (6.9, 4)
    # The target for llama.cpp: 10 % left out by source (docs/accuracy.md: 10.7 %), so at most
    # that on the rows it was fitted to.
    assert got[("llama.cpp", "fit")][0] <= 10


# --- Priced by the card's measured kernels (plan/curves.py) ------------------------------------
# aiconfigurator 0.12.0's H100 tables under SGLang, as llmfit/data/kernel_curves.json holds them:
# each part takes its roofline (bytes at the datasheet 3.35 TB/s, FLOPs at the dense 989.5e12)
# over the efficiency measured at its size. The points read here, from the file: GEMM (bf16) 0.7504
# at 32 tokens and 0.73 at 8,192; grouped MoE GEMM (bf16) 0.8668 at 4 tokens an expert, and
# between 0.213 at 2,048 and 0.2051 at 4,096; attention decode 0.5644 at 65,536 sequences ×
# context tokens and 0.7436 at 262,144; a prompt's attention 0.5838 at 8,192 tokens.
SGLANG_H100 = curves_for("h100-80g", "hopper", "sglang")


def test_a_moe_layer_at_4_and_at_4000_tokens_an_expert_on_measured_kernels():
    # Qwen3-30B-A3B's routed experts on one H100 (test_a_moe_layer_at_4_and_at_4000_tokens_an_
    # expert has the bytes and parameters): 57,982,058,496 B, 1,812,474,841.6 parameters a token.
    k = replace(SERVING, curve_share=1.0)
    inp = inputs_for(QWEN30B_MODEL, QWEN30B, H100, constants=k, context=1, kv_bytes_per_token=0,
                     curves=SGLANG_H100)  # fmt: skip
    (stage,) = inp.stages
    # 4 tokens an expert (a batch of 64: 64 × 8 / 128): 0.983925 of the experts reached,
    # 57,982,058,496 × 0.983925 / 3.35e12 = 17.02984 ms of roofline, over 0.8668: 19.6468 ms;
    # FLOPs 2 × 1,812,474,841.6 × 64 / 989.5e12 = 0.234459 ms / 0.8668 = 0.2705 ms, under them.
    few = stage_time(inp, stage, 64, 0)
    assert round(few.experts * 1e3, 4) == 19.6468
    assert round(few.expert_compute * 1e3, 4) == 0.2705
    # 4,000 tokens an expert (a prefill step of 64,000): every expert, 17.30808 ms of bytes; FLOPs
    # 2 × 1,812,474,841.6 × 64,000 / 989.5e12 = 234.4586 ms, over the efficiency between 2,048
    # and 4,096 in log size: 0.213 + (ln 4,000 − ln 2,048) / ln 2 × (0.2051 − 0.213) = 0.205370:
    # 1,141.6383 ms, tensor-bound (the bytes take 17.30808 / 0.205370 = 84.2774 ms).
    many = stage_time(inp, stage, 0, 0, 64_000, 0)
    assert round(many.experts * 1e3, 4) == 84.2774
    assert round(many.expert_compute * 1e3, 4) == 1141.6383
    assert many.bound == "compute"
    # Only the grouped GEMM by its curve (accuracy_load.py --curves-experts): the experts as
    # above, the rest at the constants' shares: the dense weights, 48 × 38,281,728 + 622,333,952
    # = 2,459,856,896 B, at 3.35e12 × 0.65 = 1.12967 ms.
    hybrid = replace(inp, curves_experts_only=True)
    few2 = stage_time(hybrid, hybrid.stages[0], 64, 0)
    assert round(few2.experts * 1e3, 4) == 19.6468
    assert round(few2.memory * 1e3, 5) == 1.12967
    # Experts cut 8 ways (tensor parallelism without expert parallelism, as
    # accuracy_load.py --sliced-experts prices a run): the H100's SGLang grouped GEMM measured at
    # moe_tp 8, 0.7514 at 4 tokens an expert (kernel_curves.json moe_sliced "8" bf16), not the
    # whole experts' 0.8668: 17.029850 ms / 0.7514 = 22.6642 ms.
    sliced = replace(hybrid, expert_slices=8)
    assert round(stage_time(sliced, sliced.stages[0], 64, 0).experts * 1e3, 4) == 22.6642


def test_a_decode_step_with_cpu_and_gpu_overlapped_and_not_on_measured_kernels():
    # Llama-3.1-8B at a batch of 32 sequences of 4,096 tokens on one H100. The weights,
    # 15,009,849,344 B / 3.35e12 = 4.48055 ms, over the GEMM's 0.7504 at 32 tokens: 5.97088 ms
    # (their FLOPs, 2 × 7,504,924,672 × 32 / 989.5e12 = 0.48541 ms, under them). The cache,
    # 32 × 4,096 × 131,072 = 17,179,869,184 B / 3.35e12 = 5.12832 ms, over attention's
    # efficiency at 131,072 tokens (halfway in log size from 65,536 to 262,144: 0.654):
    # 7.84147 ms. The layers' 32 × 80 µs = 2.56 ms. GPU 16.37235 ms; CPU 0.6 + 32 × 0.063 =
    # 2.616 ms: in series 18.98835 ms, overlapped the GPU's 16.37235.
    inp = llama8b(curves=SGLANG_H100)
    assert round(decode_step(inp, 32).total * 1e3, 4) == 18.9884
    assert round(decode_step(replace(inp, overlap=True), 32).total * 1e3, 4) == 16.3724


def test_a_prefill_on_measured_kernels_never_runs_past_the_cards_peak():
    # Llama-3.1-8B's 8,192-token prompt on one H100 in one step: the GEMMs' 1.22961e14 FLOPs,
    # 124.26547 ms at the dense peak, over the GEMM's 0.73 at 8,192 tokens: 170.2267 ms; the
    # attention's 1.75922e13, 17.77886 ms at the peak, over 0.5838 at a prompt of 8,192: 30.4537.
    inp = llama8b(curves=SGLANG_H100)
    t = prefill_time(inp, 8192)
    assert t is not None
    assert round(t.parts[0].compute * 1e3, 4) == 170.2267
    assert round(t.parts[0].attention * 1e3, 4) == 30.4537
    # An engine fitted at twice the measured efficiencies is held at the card's peak: the GEMMs
    # take 124.2655 ms and the attention 17.7789 ms (2 × 0.73 and 2 × 0.5838 both held at 1),
    # and no less.
    fast = replace(inp, constants=replace(SERVING, curve_share=2.0, ttft_s=0.0))
    t2 = prefill_time(fast, 8192)
    assert t2 is not None
    assert round(t2.parts[0].compute * 1e3, 4) == 124.2655
    assert round(t2.parts[0].attention * 1e3, 4) == 17.7789
    s = estimate(replace(fast, prompt_tokens=8192))
    assert s.prefill_tokens_per_s is not None
    assert s.prefill_tokens_per_s * 2 * 7_504_924_672 <= H100.bf16_flops


def test_fitted_constants_that_say_so_price_the_experts_by_the_measured_curve(monkeypatch):
    # serving_speed.toml's `expert_curves` (off until a fit with --curves-experts sets it): an
    # engine's speed inputs then carry the card's measured tables, for the experts alone, and the
    # experts' kernel by the weights' dtype (Qwen3-30B-A3B at bf16: 2 bytes a parameter).
    from llmfit.plan.engines import serving
    from llmfit.plan.layout import Layout

    def inputs(on: bool) -> SpeedInputs | None:
        k = replace(SERVING, expert_curves=on)
        monkeypatch.setattr(serving.serving_speed, "for_card", lambda table, key: k)
        return serving.speed_inputs(
            serving.serving_speed.SGLANG, QWEN30B_MODEL, QWEN30B, H100, Layout(1), 4096, 0, 1,
            False, lambda layers, pp: (layers,), curves_backend="sglang",
        )  # fmt: skip

    off, on = inputs(False), inputs(True)
    assert off is not None and on is not None
    assert off.curves is None
    assert on.curves == SGLANG_H100 and on.curves_experts_only and on.curve_dtype == "bf16"
    # On AMD (no table) the shares price everything whatever the constants say.
    monkeypatch.setattr(serving.serving_speed, "for_card",
                        lambda table, key: replace(SERVING, expert_curves=True))  # fmt: skip
    amd = serving.speed_inputs(serving.serving_speed.SGLANG, QWEN30B_MODEL, QWEN30B,
                               BY_KEY["mi300x-192g"], Layout(1), 4096, 0, 1, False,
                               lambda layers, pp: (layers,), curves_backend="sglang")  # fmt: skip
    assert amd is not None and amd.curves is None


def test_an_mxfp4_checkpoints_experts_before_blackwell_keep_the_shares():
    # MXFP4 experts before Blackwell keep the fitted shares (None); on Blackwell, aiconfigurator's
    # w4a16 curve. dstack's gpt-oss-120b P/D runs on H200s were priced at +193 % TPOT by the w4a16
    # curve, +65 % by the shares (docs/accuracy.md); by the kernel each engine runs (Triton's
    # matmul_ogs on Hopper, Marlin on Ampere: tests/plan/test_expert_kernels.py) runs never seen
    # were no closer.
    from llmfit.plan.engines.serving import expert_kernel

    assert expert_kernel("mxfp4", True, False, "hopper") is None
    assert expert_kernel("mxfp4", True, False, "ampere") is None
    assert expert_kernel("mxfp4", True, False, "blackwell") == "w4a16"
    assert expert_kernel("awq", True, False, "hopper") == "w4a16"
    assert expert_kernel("fp8", False, True, "hopper") == "fp8"
    assert expert_kernel(None, False, False, "hopper") == "bf16"


def test_a_table_without_a_grouped_gemm_takes_the_same_cards_other_engine():
    # aiconfigurator 0.12 measured no MoE kernel under vLLM on the A100: its SGLang grouped GEMM
    # on the same card (bf16 and w4a16), not the priors' lowest of every card.
    from llmfit.plan import curves

    kc = curves.curves_for("a100-80g", "ampere", "vllm")
    assert kc.measured and sorted(kc.moes) == ["bf16", "w4a16"]
    assert kc.source.endswith("its grouped GEMM measured under sglang")
