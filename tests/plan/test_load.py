"""The serving model on worked examples, from fixture configs and the card table, each number
worked out by hand in a comment: one decode step and one prefill chunk for a dense model at TP 1
and TP 4, a MoE with expert parallelism over data-parallel attention ranks, and an MLA model with
DP attention; then a replica's TPOT, TTFT and throughput at a rate and at a stated concurrency,
and the replicas a rate needs.

The arithmetic takes its constants as data (each engine's fitted table moves with every refit), so
these examples give round ones (K): weights stream at 0.8 of a card's bandwidth, the KV cache at
the same; 50 µs a layer and 20 µs more a MoE layer; 0.5 ms a step and 30 µs a sequence a step;
prefill at 0.6 of the tensor rate, a MoE's routed experts at half that and streamed at half the
weights' bandwidth; an all-to-all 25 µs; 50 ms before a first token. Cards (plan/cards.py):
H100 SXM 3.35 TB/s, 989.5 dense bf16 TFLOPS, NVLink 450 GB/s one way; H200 4.8 TB/s, 1,979 fp8
TFLOPS, NVLink 450 GB/s.

Each layout's weights are the config's parameters (ParamSplit) at 2 bytes (at 1 for the fp8
DeepSeek-V3, its embedding and head at 2), as the planner spreads a checkpoint's bytes.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from llmfit.plan.artifact import WeightLayout
from llmfit.plan.cards import BY_KEY
from llmfit.plan.curves import curves_for
from llmfit.plan.load import Replica, at_concurrency, at_rate, capacity, serve
from llmfit.plan.model import Model
from llmfit.plan.settings import Workload
from llmfit.plan.speed import (
    Constants,
    SpeedInputs,
    inputs_for,
    round_pair,
    round_total,
    step,
    step_total,
)
from llmfit.sources.config import model_from_config
from tests.conftest import FIXTURES

K = Constants(
    weight_efficiency=0.8, kv_efficiency=0.8, layer_s=50e-6, step_s=0.5e-3, sequence_s=30e-6,
    hop_s=30e-6, prefill_efficiency=0.6, quant_prefill_efficiency=0.6, ttft_s=0.05,
    prefill_chunk=8192, decode_pipelined=True, moe_layer_s=20e-6, expert_efficiency=0.5,
    expert_prefill_efficiency=0.5, all_to_all_s=25e-6,
)  # fmt: skip
H100 = BY_KEY["h100-80g"]
H200 = BY_KEY["h200-141g"]
# A chat request: 2,048 prompt tokens, 512 generated; a decoding sequence is at 2,048 + 256 tokens
# of context on average.
CTX = 2304
MS = 1e-3


def fixture(name: str, elem: int = 2) -> tuple[Model, WeightLayout]:
    """A fixture config's model, with its parameters (the split's sum; a MoE's active ones: all but
    E − k of each E routed experts), and its weights at `elem` bytes a parameter."""
    path = FIXTURES / "src" / f"{name}.json"
    m = model_from_config(json.loads(path.read_text()), path)
    s = m.param_split
    assert s is not None
    params = sum(s.layers) + s.embed + s.output
    m = replace(m, params=params)
    if m.experts and m.experts_active:
        routed = sum(s.experts)
        m = replace(m, active_params=params - routed * (m.experts - m.experts_active) // m.experts)
    layout = WeightLayout(
        tuple(elem * x for x in s.layers),
        tuple(elem * x for x in s.experts),
        2 * s.embed,
        2 * s.output,
        s.tied_embeddings,
    )
    return m, layout


def parts(inp: SpeedInputs, batch: float, chunk: float = 0.0) -> dict[str, float]:
    """One step's parts in ms: `batch` decoding at CTX tokens, `chunk` prompt tokens at 1,024
    tokens before each on average (half a 2,048-token prompt)."""
    c = step(inp, batch, CTX, chunk, 1024 if chunk else 0.0)
    t = c.summed
    return {
        "weights": (t.memory + t.experts) / MS, "kv": t.kv / MS,
        "gemm": (t.compute + t.expert_compute) / MS,
        "attention": t.attention / MS, "overhead": t.overhead / MS, "link": t.link / MS,
        "scheduling": t.scheduling / MS, "total": c.total / MS,
    }  # fmt: skip


def approx(x: float) -> object:
    return pytest.approx(x, rel=2e-4)


# --- Qwen3-8B, dense: 36 layers, hidden 4,096, 32 query and 8 KV heads of 128, MLP 12,288 ---------

# A layer: attention 4,096 × (4,096 + 2 × 1,024) + 4,096 × 4,096 = 41,943,040 parameters, MLP
# 3 × 4,096 × 12,288 = 150,994,944: 192,937,984, 385,875,968 B. The output head 151,936 × 4,096
# and the final norm's 4,096: 622,333,952, 1,244,667,904 B. A card of TP 1 reads 36 layers and the
# head: 15,136,202,752 B at 3.35e12 × 0.8 = 2.68e12 B/s, 5.6478 ms. It multiplies every
# parameter but the embedding's (looked up): 8,190,431,232 − 622,329,856 = 7,568,101,376, two
# FLOPs each a token at 989.5e12 × 0.6 = 5.937e14 FLOP/s: 25.4949 µs a token.
# KV: 2 × 36 layers × 8 heads × 128 × 2 B = 147,456 B a token of context.
QWEN3_8B_KV = 147_456


def qwen3_8b(tp: int = 1) -> SpeedInputs:
    m, layout = fixture("Qwen--Qwen3-8B")
    return inputs_for(
        m, layout, H100, constants=K, context=CTX, kv_bytes_per_token=QWEN3_8B_KV / tp, tp=tp
    )


def test_dense_tp1_decode_step_and_prefill_chunk():
    inp = qwen3_8b()
    s = inp.stages[0]
    assert s.dense_bytes == 36 * 385_875_968 + 1_244_667_904 == 15_136_202_752
    assert s.params == 7_568_101_376
    # 16 sequences decoding at 2,304 tokens of context:
    # weights 5.6478 ms; KV 16 × 2,304 × 147,456 B / 2.68e12 = 2.0283 ms; GEMMs 16 × 25.4949 µs
    # = 0.40792 ms (under the weights); attention 4 FLOPs × 147,456 query elements (36 × 32 × 128)
    # × 16 × 2,304 / 5.937e14 = 0.036623 ms (under the KV); 36 layers × 50 µs = 1.8 ms;
    # 0.5 ms + 16 × 30 µs = 0.98 ms. In all 5.6478 + 2.0283 + 1.8 + 0.98 = 10.4561 ms.
    d = parts(inp, 16)
    assert d["weights"] == approx(5.64784)
    assert d["kv"] == approx(2.02829)
    assert d["gemm"] == approx(0.407915)
    assert d["attention"] == approx(0.0366233)
    assert (d["overhead"], d["scheduling"], d["link"]) == (approx(1.8), approx(0.98), 0.0)
    assert d["total"] == approx(10.4561)
    # The same step carrying a 2,048-token prompt chunk: GEMMs over 2,064 tokens, 52.621 ms, over
    # the weights' 5.65; attention 4 × 147,456 × (16 × 2,304 + 2,048 × 1,024) / 5.937e14 =
    # 2.1201 ms, over the KV's 2.03. 52.621 + 2.1201 + 1.8 + 0.98 = 57.521 ms: compute-bound.
    c = parts(inp, 16, 2048)
    assert c["gemm"] == approx(52.6211)
    assert c["attention"] == approx(2.12008)
    assert c["total"] == approx(57.5211)
    assert step(inp, 16, CTX, 2048, 1024).bound == "compute"


def test_dense_tp4_decode_step_and_prefill_chunk():
    inp = qwen3_8b(tp=4)
    s = inp.stages[0]
    # Each card a quarter: 3,784,050,688 B of weights, 1,892,025,344 parameters, 2 of 8 KV heads.
    assert s.dense_bytes == 15_136_202_752 / 4
    assert s.kv_bytes_per_token == 36_864
    # Weights 1.41196 ms, KV 0.50707, GEMMs 0.10198, attention 0.0091558 (quarters of TP 1's).
    # Two all-reduces a layer over 4 NVLinked cards: 72 × 4.8 µs = 345.6 µs, and a ring's
    # 2 × 3/4 of 16 tokens × 4,096 × 2 B = 131,072 B over 450 GB/s, 72 × 0.43691 µs = 31.457 µs:
    # 377.06 µs. 1.41196 + 0.50707 + 1.8 + 0.37706 + 0.98 = 5.0761 ms.
    d = parts(inp, 16)
    assert d["weights"] == approx(1.41196)
    assert d["kv"] == approx(0.507073)
    assert d["link"] == approx(0.377057)
    assert d["total"] == approx(5.07609)
    # With the 2,048-token chunk: GEMMs 13.1553 ms, attention 0.53002; the all-reduces carry
    # 2,064 tokens: 345.6 µs + 72 × 1.5 × 2,064 × 8,192 B / 450e9 = 4.4036 ms.
    # 13.1553 + 0.53002 + 1.8 + 4.40359 + 0.98 = 20.8689 ms.
    c = parts(inp, 16, 2048)
    assert c["gemm"] == approx(13.1553)
    assert c["link"] == approx(4.40359)
    assert c["total"] == approx(20.8689)


# --- Qwen3-30B-A3B, MoE: 48 layers, hidden 2,048, 32 query and 4 KV heads, 128 experts, 8 a token


def test_moe_with_expert_parallelism_over_four_attention_ranks():
    m, layout = fixture("Qwen--Qwen3-30B-A3B")
    # Four data-parallel attention ranks on 4 H100s sharing the routed experts (DP 4 + EP).
    # KV: 2 × 48 × 4 × 128 × 2 B = 98,304 B a token, each rank its own sequences'.
    inp = inputs_for(
        m, layout, H100, constants=K, context=CTX, kv_bytes_per_token=98_304, ranks=4, ep=True
    )
    s = inp.stages[0]
    # A layer: 623,116,288 parameters, 603,979,776 of them routed experts (128 × 3 × 2,048 × 768).
    # A card holds the rest whole (its rank's attention) and the head: 48 × 2 × 19,136,512 +
    # 2 × 311,166,976 = 2,459,439,104 B; and a quarter of the experts: 48 × 2 × 603,979,776 / 4 =
    # 14,495,514,624 B. A token multiplies 3,041,658,880 parameters (all 3,352,823,808 active but
    # the embedding), 1,811,939,328 of them routed (8 of 128 experts: 48 × 8 × 4,718,592).
    assert s.dense_bytes == 2_459_439_104
    assert s.expert_bytes == 14_495_514_624
    assert (s.params, s.expert_params) == (3_041_658_880, 1_811_939_328)
    # 64 sequences, 16 a rank. Their 64 tokens touch 1 − (120/128)^64 = 0.98392 of the experts:
    # 2,459,439,104 / 2.68e12 + 14,495,514,624 × 0.98392 / (2.68e12 × 0.5) = 0.91770 + 10.6437 =
    # 11.5614 ms. KV: 16 × 2,304 × 98,304 / 2.68e12 = 1.35219 ms. GEMMs, a rank's 16 tokens:
    # 2 × (1,229,719,552 + 1,811,939,328 / 0.5) × 16 / 5.937e14 = 0.26161 ms. Attention
    # 4 × 196,608 (48 × 32 × 128) × 16 × 2,304 / 5.937e14 = 0.048831 ms. 48 × (50 + 20) µs =
    # 3.36 ms. Dispatch and combine a MoE layer: 96 × 25 µs = 2.4 ms, and each token's 8 copies
    # of 4,096 B, 3/4 of them to other cards, a rank's quarter of the 64: 96 × 8 × 4,096 × 3/4 /
    # 4 / 450e9 × 64 = 83.886 µs; 2.48389 ms. 0.5 + 64 × 0.03 = 2.42 ms.
    # 11.5614 + 1.35219 + 3.36 + 2.48389 + 2.42 = 21.1775 ms.
    d = parts(inp, 64)
    assert d["weights"] == approx(11.5614)
    assert d["kv"] == approx(1.35219)
    assert d["gemm"] == approx(0.261605)
    assert d["attention"] == approx(0.0488311)
    assert d["overhead"] == approx(3.36)
    assert d["link"] == approx(2.48389)
    assert d["total"] == approx(21.1774)
    # With a 2,048-token chunk, 2,112 tokens read every expert: 0.91770 + 10.8175 = 11.7352 ms;
    # GEMMs 2 × 4,853,598,208 × 2,112 / 4 / 5.937e14 = 8.6330 ms (under the weights); attention
    # 4 × 196,608 × (64 × 2,304 + 2,048 × 1,024) / 4 / 5.937e14 = 0.74332 ms (under the KV);
    # the all-to-alls 2.4 ms + 96 × 8 × 4,096 × 3/4 / 4 / 450e9 × 2,112 = 5.1682 ms. The dense
    # GEMMs and the experts' grouped GEMM are kernels of their own, one after the other: the
    # dense ones' 2 × 1,229,719,552 × 2,112 / 4 / 5.937e14 = 2.18766 ms outlast the dense
    # weights' 0.91770; the experts' 10.8175 ms of bytes their 6.4453 ms of FLOPs.
    # 2.18766 + 10.8175 + 1.35219 + 3.36 + 5.16824 + 2.42 = 25.3056 ms.
    c = parts(inp, 64, 2048)
    assert c["weights"] == approx(11.7352)
    assert c["gemm"] == approx(8.63298)
    assert c["link"] == approx(5.16824)
    assert c["total"] == approx(25.3056)


# --- DeepSeek-V3, MLA: 61 layers (3 dense, 58 MoE), hidden 7,168, 128 heads, 256 experts, 8 a token


def test_mla_with_data_parallel_attention_against_tensor_parallel():
    m, layout = fixture("deepseek-ai--DeepSeek-V3", elem=1)
    # MLA keeps one latent of 576 a layer a token, every head's: 61 × 576 × 2 B = 70,272 B. Under
    # TP the latent is not split: each of 8 cards holds every sequence's. With DP attention each
    # of 8 ranks holds its own sequences' and the whole attention (DP 8 + EP).
    kw = {"constants": K, "context": CTX, "kv_bytes_per_token": 70_272, "ep": True,
          "compute_dtype": "fp8"}  # fmt: skip
    tp8 = inputs_for(m, layout, H200, tp=8, **kw)
    dp8 = inputs_for(m, layout, H200, ranks=8, **kw)
    # The routed experts, 58 layers × 256 × 3 × 7,168 × 2,048 = 653,908,770,816 B, an eighth a
    # card either way; the rest (attention, 3 dense layers, shared experts, head) an eighth a card
    # under TP, whole on each rank: 17,116,641,280 B.
    assert tp8.stages[0].expert_bytes == dp8.stages[0].expert_bytes == 653_908_770_816 / 8
    assert dp8.stages[0].dense_bytes == 17_116_641_280 == 8 * tp8.stages[0].dense_bytes
    # 64 sequences. 64 tokens touch 1 − (248/256)^64 = 0.86894 of the experts: 81,738,596,352 ×
    # 0.86894 / (4.8e12 × 0.8 × 0.5) = 36.9918 ms. KV, TP 8: every card reads all 64 latents,
    # 64 × 2,304 × 70,272 / 3.84e12 = 2.69844 ms; DP 8: a rank its 8, 0.33731 ms.
    t, d = parts(tp8, 64), parts(dp8, 64)
    assert t["kv"] == approx(2.69844)
    assert d["kv"] == approx(0.337306) == approx(t["kv"] / 8)
    # Weights: TP 8, 2,139,580,160 / 3.84e12 + 36.9918 = 37.5488 ms; DP 8, 17,116,641,280 /
    # 3.84e12 + 36.9918 = 41.4491 ms.
    assert t["weights"] == approx(37.5488)
    assert d["weights"] == approx(41.4491)
    # DP 8's step: attention 4 × 4,497,408 (61 × 128 × 576) × 8 × 2,304 / (1,979e12 × 0.6) =
    # 0.27925 ms, under the KV; 61 × 50 + 58 × 20 µs = 4.21 ms; dispatch and combine 116 × 25 µs
    # = 2.9 ms and 116 × 8 × 14,336 B × 7/8 / 8 / 450e9 × 64 = 0.20696 ms; 2.42 ms.
    # 41.4491 + 0.33731 + 4.21 + 3.10696 + 2.42 = 51.5234 ms.
    assert d["attention"] == approx(0.279253)
    assert d["link"] == approx(3.10695)
    assert d["total"] == approx(51.5234)
    # With a 2,048-token chunk: every expert, 42.5722 + 4.45746 = 47.0297 ms; GEMMs over a rank's
    # 264 tokens, 2 × (16,189,955,072 + 20,434,649,088 / 0.5) × 264 / 1.1874e15 = 25.3725 ms
    # (36,624,604,160 parameters a token, 20,434,649,088 routed: 58 × 8 × 44,040,192); attention
    # 4 × 4,497,408 × (147,456 + 2,097,152) / 8 / 1.1874e15 = 4.2508 ms (over the KV);
    # the all-to-alls 2.9 ms + 116 × 8 × 14,336 × 7/8 / 8 / 450e9 × 2,112 = 9.7297 ms. The
    # dense GEMMs (2 × 16,189,955,072 × 264 / 1.1874e15 = 7.1993 ms) outlast the dense weights'
    # 4.45746; the experts' 42.5722 ms of bytes their grouped GEMM's 18.1732 ms.
    # 7.1993 + 42.5722 + 4.2508 + 4.21 + 9.7297 + 2.42 = 70.382 ms.
    c = parts(dp8, 64, 2048)
    assert c["weights"] == approx(47.0296)
    assert c["gemm"] == approx(25.3725)
    assert c["attention"] == approx(4.25085)
    assert c["link"] == approx(9.72929)
    assert c["total"] == approx(70.3815)


# --- A replica under load: Qwen3-8B on one H100, chat requests (2,048 in, 512 out) ----------------
#
# A decode step of b sequences, where its GEMMs stay under its weights (b < 221) and attention
# under the KV: t(b) = A + B b, A = 5.64784 + 1.8 + 0.5 = 7.94784 ms, B = 126.768 µs of KV
# (2,304 × 147,456 / 2.68e12) + 30 µs = 156.768 µs. A prompt's prefill batch alone (2,048
# tokens, under the 8,192 budget): GEMMs 52.2131 + attention 2.08348 + 1.8 + 0.5 = P = 56.5966 ms.
# A batch of m prompts (they queue and are packed up to the budget) is compute-bound:
# 54.29658 m + 2.3 ms, so each costs V + F / m, V = 54.29658 ms, F = 2.3 ms; at r requests a
# second a batch holds m = 1 + r P of them (those that arrive while one runs), at most 4.
A, B, P = 7.94784e-3, 156.768e-6, 56.5966e-3
V, F = 54.29658e-3, 2.3e-3
DECODING = 511  # a request's tokens after its first


def replica(mixed: bool) -> Replica:
    return Replica(qwen3_8b(), max_batch=256, budget=8192, mixed=mixed)


def batch_cost(rate: float) -> float:
    """A prompt's share of its prefill batch at `rate`: V + F / m, m = 1 + r P (at most 4)."""
    return V + F / min(1 + rate * P, 4)


def tau_apart(rate: float) -> float:
    """TPOT with prefill batches apart: τ = t(b) / (1 − r c), b = r × 511 × τ, c the prompt's
    share of its batch, so τ = A / (1 − r (c + 511 B))."""
    return A / (1 - rate * (batch_cost(rate) + DECODING * B))


def ttft_apart(rate: float) -> float:
    """50 ms, half a decode step in flight (less the prefill's share ρ = r c), the M/D/1 wait
    ρ / (2 (1 − ρ)) × P and the prompt's own batch P."""
    rho = rate * batch_cost(rate)
    return 0.05 + tau_apart(rate) * (1 - rho) / 2 + rho / (2 * (1 - rho)) * P + P


def ttft_closed(rate: float) -> float:
    """A closed loop's: its request is sent as another ends, at the end of a step, so it waits
    for the whole decode step in flight (less the prefill's share), not half of one on average
    (load._step_wait): τ (1 − ρ) / 2 more than `ttft_apart`, every other request decoding."""
    rho = rate * batch_cost(rate)
    return ttft_apart(rate) + tau_apart(rate) * (1 - rho) / 2


def test_tpot_ttft_and_throughput_at_a_rate_with_prefill_batches_apart():
    # At 2 requests a second: a batch holds m = 1 + 2 × 0.0565966 = 1.11319 prompts, each
    # costing 54.29658 + 2.3 / 1.11319 = 56.3627 ms; τ = 7.94784 / (1 − 2 × (0.0563627 +
    # 0.0801084)) = 10.9315 ms; the batch is 2 × 511 × τ = 11.17 sequences. ρ = 0.112725: TTFT
    # 50 + 4.8496 + 3.5951 + 56.5966 = 115.04 ms. Output: 2 × 512 = 1,024 tokens a second.
    p = at_rate(replica(mixed=False), Workload(rate=2.0), 2.0)
    assert p.tpot_s == pytest.approx(tau_apart(2.0), rel=0.01) == pytest.approx(10.9315e-3, 1e-4)
    assert p.batch == pytest.approx(2 * DECODING * p.tpot_s)
    assert p.ttft_s == pytest.approx(ttft_apart(2.0), rel=0.01) == pytest.approx(0.11504, 1e-3)
    s = serve(replica(mixed=False), Workload(rate=2.0))
    assert s.output_tokens_per_s == pytest.approx(1024)
    assert s.meets and s.replicas == 1


def test_tpot_at_a_rate_with_prompt_chunks_riding_in_decode_steps():
    # Chunked prefill: each prompt rides whole in one step (the budget leaves room for 2,048), so
    # r τ of the steps carry one, at c(b) = C + D b, C = 52.2131 + 2.08348 + 2.3 = 56.5966 ms (the
    # chunk's GEMMs and attention over the weights and KV), D = 25.4949 + 2.28928 + 30 µs =
    # 57.7842 µs. τ = t(b) + r τ (c(b) − t(b)), b = 1,022 τ at r = 2:
    # 2 × 1,022 (D − B) τ² + (2 (C − A) + 1,022 B − 1) τ + A = 0,
    # −0.202323 τ² − 0.742485 τ + 0.00794784 = 0: τ = 10.6734 ms.
    a2 = 2 * 1022 * (57.7842e-6 - B)
    b1 = 2 * (P - A) + 1022 * B - 1
    tau = (-b1 - (b1 * b1 - 4 * a2 * A) ** 0.5) / (2 * a2)
    assert tau == pytest.approx(10.6734e-3, rel=1e-4)
    p = at_rate(replica(mixed=True), Workload(rate=2.0), 2.0)
    assert p.tpot_s == pytest.approx(tau, rel=0.01)


def test_throughput_and_tpot_at_a_stated_concurrency():
    # 16 requests in flight (a closed loop): the rate whose requests in the replica,
    # r × (TTFT + 511 τ), are 16. At r = 2.5315: c = 54.29658 + 2.3 / 1.14327 = 56.3083 ms,
    # τ = 7.94784 / (1 − 2.5315 × (0.0563083 + 0.0801084)) = 12.140 ms, TTFT 116.5 ms at
    # Poisson arrivals and 5.4 ms more in a closed loop (the whole step in flight, τ (1 − ρ) / 2
    # more, ρ = 0.1126): 121.9 ms, r × (0.1219 + 511 × 0.012140) = 16.0. The search stops within
    # 2 % of that rate
    # (load.TOLERANCE), where the requests in the replica, growing faster than the rate (τ grows
    # with it), are within 3 %.
    w = Workload(concurrency=16)
    p, client_ttft = at_concurrency(replica(mixed=False), w, 16)
    assert p.admitted == pytest.approx(16, rel=0.03)
    assert p.rate * (p.ttft_s + DECODING * p.tpot_s) == pytest.approx(p.admitted)
    assert p.rate == pytest.approx(2.5315, rel=0.02)
    assert p.tpot_s == pytest.approx(tau_apart(p.rate), rel=0.01)
    assert p.ttft_s == pytest.approx(ttft_closed(p.rate), rel=0.01)
    assert p.ttft_s == pytest.approx(0.1219, rel=0.01)
    assert client_ttft == p.ttft_s  # all 16 admitted: none waits outside
    s = serve(replica(mixed=False), w)
    assert s.concurrency == 16
    assert s.output_tokens_per_s == pytest.approx(p.rate * 512, rel=0.01)
    assert s.tpot_s == pytest.approx(12.140e-3, rel=0.01)


def test_replicas_for_a_rate():
    # Within TPOT 12 ms: 1 − r (c + 511 B) = A / 12 ms, with c = 54.29658 + 2.3 / (1 + r P):
    # r = 2.4753 requests a second a replica (c = 56.3140 ms; TTFT 116 ms there, under its 2 s).
    # 10 a second need ceil(10 / 2.4753) = 5 replicas; one alone cannot keep up with all 10.
    # The capacity is found to 2 % below the true one (load.TOLERANCE).
    w = Workload(rate=10.0, tpot_s=0.012, ttft_s=2.0)
    cap = capacity(replica(mixed=False), w)
    assert cap is not None and cap.rate == pytest.approx(2.4753 * 0.99, rel=0.01)
    s = serve(replica(mixed=False), w)
    assert s.replicas == 5
    assert s.capacity_rate == cap.rate
    # At all 10 (m = 1.566, ρ = 0.558 of prefill), 1 − r (c + 511 B) = 1 − 1.359 < 0: no TPOT
    # is long enough.
    assert s.misses == (
        "it cannot keep up (its steps lengthen with its batch faster than the batch drains)",
    )
    assert s.headroom == pytest.approx(5 * cap.rate / 10)
    # Two copies of the replica in the option (a dense model's DP 2) serve twice as much each.
    s2 = serve(replace(replica(mixed=False), copies=2), w)
    assert s2.replicas == 3 and s2.capacity_rate == pytest.approx(2 * cap.rate)


@pytest.mark.parametrize("chunk", [0.0, 2048.0])
@pytest.mark.parametrize("batch", [1.0, 16.0, 300.0])
def test_a_steps_total_is_the_sum_of_its_parts(batch, chunk):
    m, layout = fixture("Qwen--Qwen3-30B-A3B")
    for inp in (
        qwen3_8b(),
        qwen3_8b(tp=4),
        inputs_for(m, layout, H100, constants=K, context=CTX, kv_bytes_per_token=98_304, ranks=4),
        replace(qwen3_8b(), eager=True, constants=replace(K, eager_layer_s=400e-6)),
        replace(qwen3_8b(), ubatch=512),
        # Priced by the card's measured kernels (plan/curves.py), a MoE with attention ranks.
        replace(
            inputs_for(
                m,
                layout,
                H100,
                constants=K,
                context=CTX,
                kv_bytes_per_token=98_304,
                ranks=4,
                curves=curves_for("h100-80g", "hopper", "vllm"),
            ),
            overlap=True,
        ),  # fmt: skip
        # Past the largest captured graph, overlapped CPU work, the GEMMs' efficiency curves.
        replace(
            qwen3_8b(),
            graph_batch=8,
            overlap=True,
            constants=replace(K, eager_layer_s=400e-6, gemm_rows=64.0),
        ),
        replace(
            inputs_for(
                m,
                layout,
                H100,
                constants=replace(K, expert_rows=16.0, gemm_rows=64.0),
                context=CTX,
                kv_bytes_per_token=98_304,
            ),
            overlap=True,
        ),
    ):
        whole = step(inp, batch, CTX, chunk, 1024).total
        assert step_total(inp, batch, CTX, chunk, 1024) == pytest.approx(whole, rel=1e-12)


@pytest.mark.parametrize("batch", [1.0, 16.0, 300.0])
def test_a_round_with_and_without_a_chunk_in_one_pass(batch):
    m, layout = fixture("Qwen--Qwen3-30B-A3B")
    for inp in (
        qwen3_8b(),
        qwen3_8b(tp=4),
        inputs_for(m, layout, H100, constants=K, context=CTX, kv_bytes_per_token=98_304, ranks=4),
        inputs_for(m, layout, H100, constants=K, context=CTX, kv_bytes_per_token=98_304, pp=2),
        replace(
            inputs_for(
                m,
                layout,
                H100,
                constants=replace(K, expert_rows=16.0, gemm_rows=64.0),
                context=CTX,
                kv_bytes_per_token=98_304,
            ),
            overlap=True,
            graph_batch=512,
        ),
    ):
        plain, full = round_pair(inp, batch, CTX, 2048, 1024)
        assert plain == pytest.approx(round_total(inp, batch, CTX), rel=1e-12)
        assert full == pytest.approx(round_total(inp, batch, CTX, 2048, 1024), rel=1e-12)
