"""Disaggregated prefill and decode (plan/disagg.py) on worked examples.

The workers are tests/plan/test_load.py's, whose steps are worked out there by hand with round
constants (K): Qwen3-8B on one H100 (a decode step of b sequences at 2,304 tokens of context
t(b) = A + B b, A = 7.94784 ms, B = 156.768 µs; a prefill batch of m 2,048-token prompts
54.29658 m + 2.3 ms, one alone P = 56.5966 ms), and DeepSeek-V3 (fp8) on eight H200s as eight
data-parallel attention ranks with expert parallelism (a decode step of 64 sequences 51.5234
ms). Chat requests: 2,048 prompt tokens, 512 generated.
"""

from __future__ import annotations

import pytest

from llmfit.plan import disagg, load, speed
from llmfit.plan.engines import engine
from llmfit.plan.layout import Layout, PairKind
from llmfit.plan.model import AttentionKind, LayerGroup, Shape
from llmfit.plan.settings import Workload
from llmfit.plan.speed import inputs_for
from tests.plan.test_load import CTX, H200, K, fixture, replica

NVLINK = disagg.Link("node", 450e9, 0.002, "NVLink")
RDMA = disagg.Link("rdma", 400e9 / 8, 0.002, "RDMA")


def qwen3_8b_shape() -> Shape:
    # 36 full-attention layers, 8 KV heads of 128, bf16: 2 × 36 × 8 × 128 × 2 = 147,456 B a token.
    m, _ = fixture("Qwen--Qwen3-8B")
    return Shape.of(m)


def deepseek_v3_shape() -> Shape:
    # 61 MLA layers of one 576-wide latent (512 + 64 rope), bf16: 61 × 576 × 2 = 70,272 B a token.
    m, _ = fixture("deepseek-ai--DeepSeek-V3", elem=1)
    return Shape.of(m)


def deepseek_dp8() -> load.Replica:
    m, layout = fixture("deepseek-ai--DeepSeek-V3", elem=1)
    inp = inputs_for(m, layout, H200, ranks=8, constants=K, context=CTX,
                     kv_bytes_per_token=70_272, ep=True, compute_dtype="fp8")  # fmt: skip
    return load.Replica(inp, max_batch=64, budget=8192, mixed=False)


# --- The KV transfer of one 8,192-token prompt --------------------------------------------------


def test_kv_transfer_of_an_8k_prompt_dense_over_nvlink_and_rdma():
    shape = qwen3_8b_shape()
    assert shape.kv_bytes_per_token() == 147_456
    # 8,192 × 147,456 = 1,207,959,552 B; over NVLink (450 GB/s one way) 2.68435 ms + 2 ms;
    # over one 400 Gb/s RDMA port a card (50 GB/s) 24.1592 ms + 2 ms.
    nv = disagg.kv_transfer(shape, 8192, 1, 1, NVLINK)
    assert nv.bytes == nv.per_decode_card == nv.per_prefill_card == 1_207_959_552
    assert nv.seconds == pytest.approx(0.00468435, rel=1e-5)
    ib = disagg.kv_transfer(shape, 8192, 1, 1, RDMA)
    assert ib.seconds == pytest.approx(0.0261592, rel=1e-5)
    # A decode worker of TP 4 holds 2 of the 8 KV heads a card: each card receives a quarter,
    # 301,989,888 B, but the one prefill card sends all 1,207,959,552: the time is the sender's.
    split = disagg.kv_transfer(shape, 8192, 1, 4, NVLINK)
    assert split.per_decode_card == 301_989_888
    assert split.per_prefill_card == split.bytes == 1_207_959_552
    assert split.seconds == nv.seconds
    # Prefill TP 4 to decode TP 4: a quarter each way, 0.67109 ms + 2 ms.
    even = disagg.kv_transfer(shape, 8192, 4, 4, NVLINK)
    assert even.per_prefill_card == 301_989_888
    assert even.seconds == pytest.approx(0.00267109, rel=1e-5)


def test_kv_transfer_of_an_8k_prompt_mla_over_nvlink_and_rdma():
    shape = deepseek_v3_shape()
    assert shape.kv_bytes_per_token() == 70_272
    # One decode rank (data-parallel attention: the request's rank holds its whole latent):
    # 8,192 × 70,272 = 575,668,224 B, under half the dense model's 1.2 GB though DeepSeek-V3 is
    # 80 times its size; NVLink 1.27926 ms + 2 ms, RDMA 11.5134 ms + 2 ms.
    nv = disagg.kv_transfer(shape, 8192, 1, 1, NVLINK)
    assert nv.bytes == 575_668_224
    assert nv.seconds == pytest.approx(0.00327926, rel=1e-5)
    ib = disagg.kv_transfer(shape, 8192, 1, 1, RDMA)
    assert ib.seconds == pytest.approx(0.0135134, rel=1e-5)
    # A decode worker of TP 8 keeps the latent whole on every card: each reads 575,668,224 B,
    # all from the one prefill card of TP 1, which sends it 8 times (4,605,345,792 B: 10.234 ms
    # + 2 ms over NVLink). From a prefill of TP 8 each prefill card sends one copy.
    wide = disagg.kv_transfer(shape, 8192, 1, 8, NVLINK)
    assert wide.per_decode_card == 575_668_224
    assert wide.per_prefill_card == wide.bytes == 8 * 575_668_224
    assert wide.seconds == pytest.approx(0.002 + 4_605_345_792 / 450e9, rel=1e-9)
    assert disagg.kv_transfer(shape, 8192, 8, 8, NVLINK).seconds == nv.seconds


def test_kv_transfer_of_windows_and_states():
    # 10 sliding layers of a 1,024-token window (8 heads of 128, bf16: 4,096 B a token a layer)
    # move at most their window: 10 × 4,096 × 1,024 = 41,943,040 B; 4 linear layers of a
    # 1,000,000-byte state split over 2 ranks, 500,000 each: 2,000,000 B a card.
    shape = Shape(
        layer_groups=(
            LayerGroup(AttentionKind.SLIDING, 10, kv_heads=8, head_dim=128, window=1024),
            LayerGroup(AttentionKind.LINEAR, 4, state_bytes=1_000_000),
        ),
        attention_heads=32, kv_heads=8, kv_dtype="bfloat16",
    )  # fmt: skip
    t = disagg.kv_transfer(shape, 8192, 2, 2, NVLINK)
    # A card of TP 2: half the heads of the window (20,971,520 B) and half each state.
    assert t.per_decode_card == 20_971_520 + 2_000_000


# --- One prefill worker's and one decode worker's capacity, and the ratio -------------------------


def test_dense_decode_worker_capacity():
    # Within a TPOT of 12 ms: A + B b = 12 ms, b = 4.05216 / 0.156768 = 25.8481 sequences (its
    # batch of 256 holds them); Rd = b / (511 × 12 ms) = 4.21529 requests a second.
    w = Workload(input_len=2048, output_len=512, tpot_s=0.012, ttft_s=0.2)
    d = disagg.decode_capacity(replica(mixed=False), w)
    assert d is not None
    assert d.batch == pytest.approx(25.8481, rel=1e-4)
    assert d.tpot_s == pytest.approx(0.012, rel=1e-6)
    assert d.rate == pytest.approx(4.21529, rel=1e-4)
    # The KV pool is the concurrency limit: one of 20 × 2,304 tokens holds 20 sequences at their
    # mean context, Rd = 20 / (511 × 11.0832 ms) = 3.53138.
    held = disagg.decode_capacity(load.Replica(replica(False).inputs, kv_tokens=20 * CTX), w)
    assert held is not None and held.batch == 20
    assert held.rate == pytest.approx(3.53138, rel=1e-4)
    # A TPOT target one sequence alone misses (A = 7.95 ms): none.
    assert disagg.decode_capacity(replica(False), Workload(tpot_s=0.007)) is None


def test_sglang_decode_keeps_512_tokens_free_a_request():
    # SGLang's decode side admits a request where its pool, less 512 tokens for each request it
    # holds, holds the prompt and 512 more (disaggregation/decode.py): a pool of 20 × 2,304
    # tokens holds 46,080 / (2,304 + 512) = 16.3636 requests, not 20. At that batch the step is
    # A + B b = 7.94784 + 0.156768 × 16.3636 = 10.51313 ms (within the 12 ms TPOT), so
    # Rd = 16.3636 / (511 × 10.51313 ms) = 3.04598 requests a second.
    assert engine("sglang").layouts.pairs.decode_reserve == 512
    assert engine("vllm").layouts.pairs.decode_reserve == 0
    w = Workload(input_len=2048, output_len=512, tpot_s=0.012, ttft_s=0.2)
    r = load.Replica(replica(False).inputs, kv_tokens=20 * CTX)
    assert disagg.decode_admits(r, w, 512) == pytest.approx(16.3636, rel=1e-5)
    assert disagg.decode_admits(r, w, 0) == 20 == load.admits(r, w)
    held = disagg.decode_capacity(r, w, 512)
    assert held is not None
    assert held.batch == pytest.approx(16.3636, rel=1e-5)
    assert held.tpot_s == pytest.approx(0.01051313, rel=1e-5)
    assert held.rate == pytest.approx(3.04598, rel=1e-4)
    # A pool with no limit (0) and a batch of 256: the reserve changes nothing.
    assert disagg.decode_admits(replica(False), w, 512) == 256


def test_dense_prefill_worker_capacity():
    # A prompt alone takes P = 56.5966 ms; prompts that queue are packed 4 to the 8,192-token
    # budget, 4 × 54.29658 + 2.3 = 219.4863 ms: 37,323.5 prompt tokens a second. Within a TTFT of
    # 200 ms, with the transfer over NVLink (2,048 × 147,456 B / 450e9 = 0.67109 ms, + 2 ms) and
    # half the decode worker's 12 ms step: 50 + 56.5966 + 2.67109 + 6 = 115.2677 ms fixed, the
    # M/D/1 wait ρ / (2 (1 − ρ)) × P may take 84.7323 ms: a = 1.497127, ρ = 2a / (1 + 2a) =
    # 0.749640; Rp = ρ × 37,323.5 / 2,048 = 13.6617 requests a second.
    w = Workload(input_len=2048, output_len=512, tpot_s=0.012, ttft_s=0.2)
    xfer = disagg.kv_transfer(qwen3_8b_shape(), 2048, 1, 1, NVLINK)
    assert xfer.seconds == pytest.approx(0.00267109, rel=1e-5)
    p = disagg.prefill_capacity(replica(mixed=False), w, xfer.seconds, 0.012)
    assert p is not None
    assert p.service_s == pytest.approx(0.0565966, rel=1e-5)
    assert p.tokens_per_s == pytest.approx(37323.5, rel=1e-5)
    assert p.busy == pytest.approx(0.749640, rel=1e-5)
    assert p.rate == pytest.approx(13.6617, rel=1e-4)
    assert p.ttft_s == pytest.approx(0.2, rel=1e-9)
    # A target under the fixed part (115 ms) is missed by one prompt alone.
    assert (
        disagg.prefill_capacity(replica(False), Workload(ttft_s=0.1), xfer.seconds, 0.012) is None
    )


def test_dense_xpyd_and_the_unit():
    # Rp 13.6617 and Rd 4.21529 on one card each: 1P3D serves min(13.6617, 12.6459) = 12.6459
    # requests a second on 4 cards, 3.16147 a card; 1P4D min(13.6617, 16.8612) / 5 = 2.7323,
    # 2P7D 27.3234 / 9 = 3.0359, 2P6D the same as 1P3D on twice the cards (the tie goes to fewer).
    unit = disagg.match(13.6617, 4.21529, 1, 1)
    assert unit is not None and unit.label == "1P3D" and unit.cards == 4
    assert unit.rate == pytest.approx(12.6459, rel=1e-5)
    # On a fleet of 3 such cards: 1P2D, min(13.6617, 8.43058) / 3 = 2.81019 a card, over 1P1D's
    # 4.21529 / 2 = 2.10765 and 2P1D's 4.21529 / 3.
    small = disagg.match(13.6617, 4.21529, 1, 1, room=lambda x, y: x + y <= 3)
    assert small is not None and small.label == "1P2D"
    assert small.rate == pytest.approx(8.43058)
    assert disagg.match(13.6617, 4.21529, 1, 1, room=lambda x, y: False) is None
    # Pinned 2:1, prefill's 2 × 13.6617 are far more than decode's 4.21529.
    pinned = disagg.match(13.6617, 4.21529, 1, 1, pinned=(2, 1))
    assert pinned is not None and pinned.rate == pytest.approx(4.21529)
    # The whole pair: the same unit, its decode worker at 12.6459 / 3 = 4.21529 a second (its
    # capacity), each TTFT under the 200 ms since the one prefill worker runs under its Rp.
    w = Workload(input_len=2048, output_len=512, tpot_s=0.012, ttft_s=0.2)
    link = disagg.link_between(replica(False), replica(False), same_node=True, fabric=None)
    assert link == NVLINK
    d = disagg.disaggregate(replica(False), replica(False), w, qwen3_8b_shape(), link)
    assert d is not None and d.unit.label == "1P3D"
    assert d.prefill_capacity == pytest.approx(13.6617, rel=1e-4)
    assert d.decode_capacity == pytest.approx(4.21529, rel=1e-4)
    assert d.tpot_s == pytest.approx(0.012, rel=1e-4)
    assert d.ttft_s < 0.2
    assert d.transfer.seconds == pytest.approx(0.00267109, rel=1e-5)
    assert d.cards_per_rate == pytest.approx(4 / 12.6459, rel=1e-4)


def test_mla_decode_and_prefill_worker_capacity_and_ratio():
    w = Workload(input_len=2048, output_len=512, tpot_s=0.060, ttft_s=0.5)
    r = deepseek_dp8()
    # Decode: its batch of 64 (8 a rank) at 51.5234 ms a step is within the 60 ms TPOT:
    # Rd = 64 / (511 × 51.5234 ms) = 2.43083 requests a second.
    assert speed.round_total(r.inputs, 64, CTX) == pytest.approx(0.0515234, rel=1e-5)
    d = disagg.decode_capacity(r, w)
    assert d is not None and d.batch == 64
    assert d.rate == pytest.approx(2.43083, rel=1e-4)
    # Prefill: a 2,048-token prompt alone, 256 tokens a rank, every expert read: the dense GEMMs
    # 2 × 16,189,955,072 × 256 / 1.1874e15 = 6.98101 ms (over their 4.45746 ms of weights), the
    # experts' 81,738,596,352 B / 1.92e12 = 42.5722 ms (over their 17.6226 ms of GEMMs),
    # attention 4 × 4,497,408 × 2,048 × 1,024 / 8 / 1.1874e15 = 3.97160 ms, the all-to-alls
    # 2.9 + 116 × 8 × 14,336 × 7/8 / 8 / 450e9 × 2,048 = 9.52234 ms, 4.21 ms of layers and
    # 0.5 ms a step: 67.7571 ms. Four packed to the budget (1,024 tokens a rank): 27.9241 +
    # 70.4904 (the experts' GEMMs now over their bytes) + 15.8864 + 29.3894 + 4.21 + 0.5 =
    # 148.4002 ms, 55,202.1 prompt tokens a second.
    service, per_s = load.prefill_service(r, w, 0.0)
    assert service == pytest.approx(0.0677571, rel=1e-5)
    assert per_s == pytest.approx(55202.1, rel=1e-5)
    # The request's latent goes to one attention rank: 2,048 × 70,272 = 143,917,056 B over
    # NVLink, 0.31982 ms + 2 ms. Within 500 ms: fixed 50 + 67.7571 + 2.31982 + 51.5234 / 2 =
    # 145.8386 ms; a = 354.1614 / 67.7571 = 5.22693, ρ = 0.912693; Rp = ρ × 55,202.1 / 2,048 =
    # 24.6009 requests a second.
    xfer = disagg.kv_transfer(deepseek_v3_shape(), 2048, 1, 1, NVLINK)
    assert xfer.bytes == 143_917_056
    p = disagg.prefill_capacity(r, w, xfer.seconds, d.tpot_s)
    assert p is not None
    assert p.busy == pytest.approx(0.912693, rel=1e-5)
    assert p.rate == pytest.approx(24.6009, rel=1e-4)
    # The ratio: a prefill worker feeds 24.6009 / 2.43083 = 10.1 decode workers, past the 8 a unit
    # is searched to: 1P8D, 8 × 2.43083 = 19.4466 requests a second on 72 cards.
    unit = disagg.match(p.rate, d.rate, 8, 8)
    assert unit is not None and unit.label == "1P8D" and unit.cards == 72
    assert unit.rate == pytest.approx(19.4466, rel=1e-4)


# --- What each engine launches --------------------------------------------------------------------


def test_pair_rules_follow_each_engine():
    vllm, sglang, llamacpp = engine("vllm"), engine("sglang"), engine("llama.cpp")
    gqa4 = Shape(layer_groups=(LayerGroup(AttentionKind.FULL, 48, kv_heads=4, head_dim=128),),
                 attention_heads=32, kv_heads=4, kv_dtype="bfloat16")  # fmt: skip
    tp8, tp4, tp2, tp3 = Layout(tp=8), Layout(tp=4), Layout(tp=2), Layout(tp=3)

    def why(e: object, p: Layout, d: Layout, shape: Shape = gqa4) -> str | None:
        return disagg.pair_refusal(e.name, e.layouts, p, d, shape)  # type: ignore[attr-defined]

    # Unequal TP, each a multiple of the other: both engines.
    assert why(vllm, tp2, tp4) is None and why(sglang, tp2, tp4) is None
    assert why(vllm, tp3, tp2) == (
        "vLLM cannot launch it: its prefill and decode tensor-parallel sizes (3 and 2) must each "
        "divide the other"
    )
    # A prefill of TP 8 replicates 4 KV heads: vLLM's NIXL refuses it into a decode of TP 4;
    # SGLang maps the ranks (with its warning that speed is not guaranteed).
    assert why(vllm, tp8, tp4) == (
        "vLLM cannot launch it: a prefill of TP 8 replicates the model's 4 KV heads and may not "
        "feed a narrower decode of TP 4"
    )
    assert why(sglang, tp8, tp4) is None
    # The same under MLA is fine: the latent is whole on every rank.
    assert why(vllm, tp8, tp4, deepseek_v3_shape()) is None
    # Decode pipeline stages: vLLM none; SGLang only as many as the prefill's.
    pp2 = Layout(tp=4, pp=2)
    assert why(vllm, tp4, pp2) == "vLLM cannot launch it: its decode side runs no pipeline stages"
    assert why(sglang, pp2, pp2) is None
    assert why(sglang, tp4, pp2) == (
        "SGLang cannot launch it: its decode pipeline stages must be 1 or the prefill's (2 and 1)"
    )
    # llama.cpp has none at all.
    assert why(llamacpp, tp2, tp2) == "llama.cpp launches no disaggregated prefill and decode"
    # A hybrid model (a state a sequence beside attention) runs no pipeline stages under vLLM.
    hybrid = Shape(layer_groups=(LayerGroup(AttentionKind.FULL, 8, kv_heads=4, head_dim=128),
                                 LayerGroup(AttentionKind.LINEAR, 40, state_bytes=1 << 20)),
                   attention_heads=32, kv_heads=4, kv_dtype="bfloat16")  # fmt: skip
    assert disagg.pair_kind(hybrid) == PairKind(kv_heads=4, mla=False, hybrid=True)
    assert why(vllm, tp8, tp4, hybrid) is None
    assert why(vllm, Layout(tp=4, pp=2), tp4, hybrid) == (
        "vLLM cannot launch it: a hybrid model's pools run no pipeline stages"
    )


def test_a_closed_loop_past_sglangs_decode_pool_waits_for_it_in_the_ttft():
    # 40 requests in flight on 1P1D of the Qwen3-8B worker, its decode pool 20 × 2,304 tokens.
    # The decode worker holds 16.3636 under SGLang's reserve (above), its step 10.51313 ms, so
    # the unit completes R = 16.3636 / (511 × 10.51313 ms) = 3.04598 requests a second (its
    # prefill, 4 prompts a 219.5 ms batch, would take 18); the rest wait on the decode side.
    # By Little's law over a request's life, 40 = R (TTFT + 511 τ): TTFT = 40 / R − 511 τ
    # = 13.13207 − 5.37221 = 7.75986 s. Without the reserve it holds 20 at τ = 11.0832 ms:
    # R = 3.53138, TTFT = 11.32703 − 5.66352 = 5.66352 s.
    w = Workload(input_len=2048, output_len=512)
    r = load.Replica(replica(False).inputs, kv_tokens=20 * CTX, mixed=False)
    unit = disagg.Unit(1, 1, 1, 1, 0.0)
    shape = qwen3_8b_shape()
    sglang = disagg.at_concurrency(r, r, w, shape, NVLINK, unit, 40, reserve=512)
    assert sglang is not None
    assert sglang.rate == pytest.approx(3.04598, rel=1e-4)
    assert sglang.tpot_s == pytest.approx(0.01051313, rel=1e-4)
    assert sglang.ttft_s == pytest.approx(7.75986, rel=1e-4)
    plain = disagg.at_concurrency(r, r, w, shape, NVLINK, unit, 40)
    assert plain is not None
    assert plain.rate == pytest.approx(3.53138, rel=1e-4)
    assert plain.ttft_s == pytest.approx(5.66352, rel=1e-4)
