"""Loads people run (issue 31) and the serving point at a load (issue 33), worked by hand.

A replica built so that its steps are simple: one stage of one layer whose card holds 1 GB of
weights at 1 TB/s (1 ms a step, whatever the batch up to the GEMMs' time) and multiplies 1e9
parameters at 1.6384e15 FLOP/s (2 × 1e9 × 8,192 / 1.6384e15 = 10 ms for a step of 8,192 prompt
tokens); no KV read, no fixed costs but the 50 ms before a first token. A decode step of b
sequences is max(1 ms, 2e9 b / 1.6384e15) = 1 ms up to b = 819; a prefill step of c tokens is
max(1 ms, c × 1.2207 µs): 10 ms for 8,192.
"""

from __future__ import annotations

import math
from dataclasses import replace

from llmfit.plan.load import (
    Replica,
    _least_fixed_point,
    admits,
    at_rate,
    burst,
    capacity,
    serve,
)
from llmfit.plan.settings import Workload
from llmfit.plan.speed import Constants, SpeedInputs, Stage, step_total

SIMPLE = Constants(
    weight_efficiency=1.0, kv_efficiency=1.0, layer_s=0.0, step_s=0.0, sequence_s=0.0,
    hop_s=0.0, prefill_efficiency=1.0, quant_prefill_efficiency=1.0, ttft_s=0.05,
    prefill_chunk=8192, decode_pipelined=True,
)  # fmt: skip
INPUTS = SpeedInputs(
    constants=SIMPLE,
    stages=(Stage(layers=1, dense_bytes=1e9, params=1e9),),
    memory_bandwidth=1e12,
    flops=1.6384e15,
)


def test_the_simple_replicas_steps_are_as_worked():
    assert step_total(INPUTS, 256, 1074.5) == 1e-3
    assert step_total(INPUTS, 0, 0, 8192, 512) == 0.01
    assert step_total(INPUTS, 0, 0, 4096, 512) == 0.005


def test_a_burst_of_1000_prompts_on_a_pool_that_admits_256():
    # --max-num-seqs 256, a pool that holds more: 1,000 prompts of 1,024 tokens, each
    # generating 101, come in 4 waves of 256, 256, 256 and 232.
    r = Replica(INPUTS, max_batch=256, kv_tokens=0, budget=8192)
    w = Workload("custom", 1024, 101, requests=1000, ttft_s=None, tpot_s=None, named=True)
    assert admits(r, w) == 256
    b = burst(r, w, 1000)
    assert b is not None
    assert (b.wave, b.waves) == (256, 4)
    # A wave of 256: its 262,144 prompt tokens in 32 steps of 8,192 (10 ms each), 8 prompts a
    # step, prompt j's first token at the end of step ceil(j / 8): on average step 16.5, 165 ms
    # into the wave; then 100 decode steps of 1 ms: 420 ms a wave. The last wave of 232: 29
    # steps (290 ms), on average step 15 (150 ms), then 100 ms: 390 ms. Waves start at 0, 420,
    # 840 and 1,260 ms; the run ends at 1,650 ms.
    assert math.isclose(b.makespan_s, 1.650, rel_tol=1e-12)
    # Mean TTFT: 50 ms + (256 × (165 + 585 + 1,005) + 232 × 1,410) / 1,000 = 50 + 776.4 ms.
    assert math.isclose(b.ttft_s, 0.8264, rel_tol=1e-12)
    # A request's TPOT is (its wave's end − its first token) / 100: (420 − 165) / 100 = 2.55 ms
    # on average in a full wave, (390 − 150) / 100 = 2.4 ms in the last: the mean over the
    # requests is (768 × 2.55 + 232 × 2.4) / 1,000 = 2.5152 ms.
    assert math.isclose(b.tpot_s, 2.5152e-3, rel_tol=1e-12)
    sv = serve(r, w)
    assert sv.replicas == 1 and sv.meets
    # 1,000 × 101 tokens over 1.65 s: 61,212.12 output tokens a second; 606.06 requests a second.
    assert math.isclose(sv.output_tokens_per_s, 101_000 / 1.65, rel_tol=1e-12)
    assert math.isclose(sv.rate, 1000 / 1.65, rel_tol=1e-12)
    assert (sv.concurrency, sv.batch) == (1000, 256)
    assert math.isclose(sv.ttft_s, 0.8264, rel_tol=1e-12)
    assert math.isclose(sv.e2e_s, 0.8264 + 100 * 2.5152e-3, rel_tol=1e-12)
    assert math.isclose(sv.makespan_s, 1.65, rel_tol=1e-12)
    assert "1,000 prompts sent at once, served in 4 waves of up to 256" in sv.assumptions[-1]


def test_a_burst_through_a_serial_front_end_reaches_the_scheduler_a_request_at_a_time():
    # The same 1,000 prompts where the engine's front end takes one request after another, 20 ms
    # each (serial_frontend, ttft_s 20 ms): the first wave's 256 prompts reach the scheduler
    # 20 ms apart, so its prefill ends no sooner than 256 × 20 ms = 5.12 s (its own 320 ms of
    # steps are hidden), and prompt j's first token comes no sooner than 20 j ms: the wave runs
    # 5.12 + 0.1 = 5.22 s, its first tokens summing to 20 ms × 256 × 257 / 2 = 657.92 s (the
    # steps' 256 × 165 ms = 42.24 s is less). The later waves were sent long before their turn:
    # 420 ms each as without, and the last of 232 390 ms. They start at 5.22, 5.64 and 6.06 s.
    r = Replica(
        replace(INPUTS, constants=replace(SIMPLE, ttft_s=0.02, serial_frontend=True)),
        max_batch=256, kv_tokens=0, budget=8192,
    )  # fmt: skip
    w = Workload("custom", 1024, 101, requests=1000, ttft_s=None, tpot_s=None, named=True)
    b = burst(r, w, 1000)
    assert b is not None and (b.wave, b.waves) == (256, 4)
    assert math.isclose(b.makespan_s, 6.45, rel_tol=1e-12)
    # TTFT, each request 20 ms + its wave's start + its own first token in the wave:
    # 256 × 0.02 + 657.92 = 663.04 s; 256 × 5.24 + 42.24 = 1,383.68 s; 256 × 5.66 + 42.24 =
    # 1,491.2 s; 232 × 6.08 + 232 × 0.15 = 1,445.36 s: 4,983.28 s over 1,000 requests.
    assert math.isclose(b.ttft_s, 4.98328, rel_tol=1e-12)
    # TPOT, (each wave's end − each first token) over 100 tokens: 256 × 5.22 − 657.92 = 678.4 s,
    # twice 256 × 0.42 − 42.24 = 65.28 s, and 232 × 0.39 − 34.8 = 55.68 s: 864.64 s over
    # 100,000 tokens. (The first wave's early requests decode while the rest arrive, which the
    # wave leaves out, as it leaves out vLLM's decodes in a wave's prefill steps: load.py _wave.)
    assert math.isclose(b.tpot_s, 8.6464e-3, rel_tol=1e-12)
    # Without the serial front end the same constants give the waves of the test above.
    off = burst(replace(r, inputs=replace(INPUTS, constants=replace(SIMPLE, ttft_s=0.02))), w, 1000)
    assert off is not None and math.isclose(off.makespan_s, 1.65, rel_tol=1e-12)


def test_a_launchs_front_ends_share_its_copies_prompts():
    # vLLM 0.15 on starts an API server a data-parallel rank (load.Replica.frontends). Two
    # ranks of one replica (a MoE's): the same 1,000 prompts reach its scheduler 10 ms apart,
    # the first wave's prefill ends at 256 × 10 ms = 2.56 s, the wave at 2.66 s, its first
    # tokens summing to 10 ms × 256 × 257 / 2 = 328.96 s; the later waves as before (420, 420
    # and 390 ms), starting at 2.66, 3.08 and 3.50 s: the run ends at 3.89 s.
    served = replace(INPUTS, constants=replace(SIMPLE, ttft_s=0.02, serial_frontend=True))
    w = Workload("custom", 1024, 101, requests=1000, ttft_s=None, tpot_s=None, named=True)
    two = Replica(served, max_batch=256, kv_tokens=0, budget=8192, frontends=2)
    b = burst(two, w, 1000)
    assert b is not None and (b.wave, b.waves) == (256, 4)
    assert math.isclose(b.makespan_s, 3.89, rel_tol=1e-12)
    # TTFT: 1,000 × 20 ms + 256 × (2 × 2.66 + 0.42) + 328.96 + 2 × 42.24 (the later full waves'
    # first tokens) + 232 × (2.66 + 0.84) + 232 × 0.15 = 2,749.68 s over 1,000 requests.
    assert math.isclose(b.ttft_s, 2.74968, rel_tol=1e-12)
    # One API server for a dense model's two copies (vLLM 0.14): a copy's prompts come every
    # other turn, 40 ms apart: its first wave ends at 256 × 40 ms + 0.1 s = 10.34 s.
    shared = Replica(served, copies=2, max_batch=256, kv_tokens=0, budget=8192)
    b = burst(shared, w, 1000)
    assert b is not None and math.isclose(b.makespan_s, 10.34 + 0.42 + 0.42 + 0.39, rel_tol=1e-12)
    # A server each (0.15 on): each copy's prompts 20 ms apart, as one replica's alone.
    own = replace(shared, frontends=2)
    b = burst(own, w, 1000)
    assert b is not None and math.isclose(b.makespan_s, 6.45, rel_tol=1e-12)


def test_a_burst_waits_for_the_pool_not_only_the_sequence_cap():
    # A pool of 81,300 tokens holds 81,300 / (1,024 + 101 / 2) = 75.67 requests on average
    # (the one count: admits), so waves of 75: 1,000 = 13 × 75 + 25, 14 waves.
    r = Replica(INPUTS, max_batch=256, kv_tokens=81_300, budget=8192)
    w = Workload("custom", 1024, 101, requests=1000, ttft_s=None, tpot_s=None, named=True)
    b = burst(r, w, 1000)
    assert b is not None and (b.wave, b.waves) == (75, 14)
    # A wave of 75: 76,800 prompt tokens, 9 full steps and one of 3,072 (3.75 ms): 93.75 ms,
    # then 100 ms of decode: 193.75 ms; the last of 25: 25,600 tokens, 3 full steps and one
    # of 1,024 (1.25 ms): 31.25 ms + 100 ms = 131.25 ms. 13 × 193.75 + 131.25 = 2,650 ms.
    assert math.isclose(b.makespan_s, 2.650, rel_tol=1e-12)


def test_a_burst_needs_the_replicas_whose_means_meet_the_targets():
    # A mean TTFT of at most 0.5 s: one replica's 826.4 ms misses it; over 2, each takes 500
    # prompts, waves of 256 and 244. The wave of 244 is 249,856 prompt tokens: 30 steps of
    # 8,192 (8 prompts ending in each, at 10, 20, …, 300 ms) and one of 4,096 (5 ms: 4 prompts
    # ending at 305 ms): 38,420 ms of first tokens in all, then 100 ms of decode. Its requests'
    # TTFTs add up to 244 × 420 + 38,420 = 140,900 ms, the first wave's to 256 × 165 = 42,240:
    # a mean of 183,140 / 500 = 366.28 ms, + 50 ms.
    r = Replica(INPUTS, max_batch=256, kv_tokens=0, budget=8192)
    w = Workload("custom", 1024, 101, requests=1000, ttft_s=0.5, tpot_s=None, named=True)
    sv = serve(r, w)
    assert sv.replicas == 2 and not sv.meets
    assert sv.misses == ("mean TTFT 826 ms over 500 ms",)
    assert math.isclose(sv.ttft_s, 0.41628, rel_tol=1e-12)


def test_a_concurrency_past_what_the_pool_holds_queues():
    # The hold check, admission and a capacity count the same: a pool of 81,300 tokens holds
    # 75.67 requests; 1,000 in flight leave 924.3 waiting, whose wait is in the TTFT clients
    # see, and the layout is not refused for it.
    r = Replica(INPUTS, max_batch=256, kv_tokens=81_300, budget=8192)
    w = Workload("custom", 1024, 101, concurrency=1000, ttft_s=None, tpot_s=None, named=True)
    sv = serve(r, w)
    assert sv.replicas == 1 and sv.meets
    assert math.isfinite(sv.ttft_s) and sv.rate > 0
    # A pool shorter than one request whole (1,125 tokens) holds none.
    assert admits(Replica(INPUTS, kv_tokens=1_124), w) == 0


def test_the_point_at_a_load_below_capacity_is_the_stable_one():
    # Below a capacity, the least TPOT that is its own step time. At 20 requests a second a
    # prompt of 1,024 tokens rides in one step (share 20 τ of the steps), with the b = 20 ×
    # 100 × τ = 2.01 decodes: its GEMMs take (1,024 + 2.01) × 2e9 / 1.6384e15 = 1.25245 ms,
    # past the 1 ms of weights; a step of decodes alone is 1 ms. τ = 1 ms + 20 τ × 0.25245 ms:
    # τ = 1 / (1 − 0.0050490) ms = 1.0050746 ms.
    r = Replica(INPUTS, max_batch=256, kv_tokens=0, budget=8192)
    w = Workload("custom", 1024, 101, rate=20.0, ttft_s=None, tpot_s=None, named=True)
    p = at_rate(r, w, 20.0)
    assert p.stable and math.isclose(p.tpot_s, 1.0050746e-3, rel_tol=2e-4)
    cap = capacity(r, w)
    assert cap is not None and cap.stable
    assert at_rate(r, w, cap.rate, above=cap.tpot_s).stable


def test_the_least_fixed_point_not_the_unstable_one():
    # f(τ) = 1 + 0.21 τ²: a step that lengthens faster than linearly with its batch. Its fixed
    # points solve 0.21 τ² − τ + 1 = 0: τ = (1 ± 0.4) / 0.42, 1.428571 (stable: the batch
    # fills to it from empty) and 3.333333 (unstable). From f(0) = 1, and bracketed by a
    # capacity's τ of 2 (f(2) = 1.84 < 2), the least is found, to 1e-4 of itself.
    def f(t: float) -> float:
        return 1 + 0.21 * t * t

    assert abs(_least_fixed_point(f, 1.0) - 1 / 0.7) < 2e-4
    assert abs(_least_fixed_point(f, 1.0, above=2.0) - 1 / 0.7) < 2e-4
    # f(τ) = 1 + 0.3 τ² has none (0.3 τ² − τ + 1 > 0 everywhere): no steady state, inf.
    assert _least_fixed_point(lambda t: 1 + 0.3 * t * t, 1.0) == float("inf")
