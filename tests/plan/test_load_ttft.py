"""How a request's first token is priced at a load (issue 31), worked by hand.

The replica is test_load_bursts.py's: one stage of one layer whose card reads 1 GB of weights at
1 TB/s (1 ms a step) and multiplies 1e9 parameters at 1.6384e15 FLOP/s (1.2207 µs a token: a
step of n tokens is max(1 ms, n × 1.2207 µs)), no fixed costs but the 50 ms before a first token.
"""

from __future__ import annotations

import math
from dataclasses import replace

from llmfit.plan.load import Point, Replica, _step_wait, at_rate, ttft_quantile
from llmfit.plan.settings import Workload
from llmfit.plan.speed import Constants, SpeedInputs, Stage

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


def _point(ttft: float, queue: float, busy: float) -> Point:
    return Point(rate=1.0, batch=1.0, admitted=1.0, tpot_s=0.01, ttft_s=ttft, stable=True,
                 why="", chunk=0.0, queue_s=queue, busy=busy)  # fmt: skip


def test_the_median_ttft_leaves_out_the_queue_while_the_prefill_is_under_half_busy():
    # ρ = 0.4: 60 % of arrivals find no prompt ahead, so the median waits nothing: 200 ms of
    # mean TTFT less its 60 ms of mean queueing is 140 ms.
    p = _point(0.2, 0.06, 0.4)
    assert math.isclose(ttft_quantile(p, 0.5), 0.14, rel_tol=1e-12)
    # Its clients' mean with a wait outside the replica (1 s) shifts every quantile by it.
    assert math.isclose(ttft_quantile(p, 0.5, 1.2), 1.14, rel_tol=1e-12)


def test_the_median_ttft_past_half_busy_is_in_the_exponential_tail():
    # ρ = 0.6: the 40 % who wait have an exponential wait of mean 60 ms / 0.6 = 100 ms; the
    # median is the point where 0.6 e^(−t / 100 ms) = 0.5: t = 100 ms × ln 1.2 = 18.232 ms,
    # so 140 + 18.232 = 158.232 ms.
    p = _point(0.2, 0.06, 0.6)
    assert math.isclose(ttft_quantile(p, 0.5), 0.14 + 0.1 * math.log(1.2), rel_tol=1e-12)
    assert math.isclose(ttft_quantile(p, 0.5), 0.158232, rel_tol=1e-5)
    # The quantiles average to the mean: the distribution's mean is the queue's.
    n = 200_000
    mean = sum(ttft_quantile(p, (i + 0.5) / n) for i in range(n)) / n
    assert math.isclose(mean, 0.2, rel_tol=1e-3)


def test_a_point_at_a_rate_says_its_queue_and_how_busy_its_prefill_is():
    # vLLM's way (chunks in decode steps), 100 requests a second of 1,024 prompt tokens and 101
    # generated. The TPOT τ solves τ = 1 ms + (100 τ) × (step with a chunk − 1 ms): a step
    # carries b = 100 × 100 τ decodes and, in a share 100 τ of steps, one prompt of 1,024;
    # that step is (b + 1,024) × 1.2207 µs = 1.2625 ms at b = 10.27, so τ = 1 ms / (1 −
    # 100 × 0.26254 ms) = 1.02696 ms. Queued prompts drain at the room the decodes leave,
    # 8,192 − 10.27 tokens, a full step (10 ms) each: 818,173 prompt tokens a second; ρ =
    # 102,400 / 818,173 = 0.12516. One prompt takes its one step, 1.26254 ms; the M/D/1 wait
    # is ρ / (2 (1 − ρ)) × 1.26254 ms = 0.090312 ms.
    r = Replica(INPUTS, max_batch=256, kv_tokens=0, budget=8192)
    w = Workload("custom", 1024, 101, rate=100.0, ttft_s=None, tpot_s=None, named=True)
    p = at_rate(r, w, 100.0)
    assert math.isclose(p.tpot_s, 1.02696e-3, rel_tol=1e-4)
    assert math.isclose(p.busy, 0.12516, rel_tol=1e-4)
    assert math.isclose(p.queue_s, 0.090312e-3, rel_tol=1e-4)
    # Under half busy: the median is the mean less the queue's wait.
    assert ttft_quantile(p, 0.5) == p.ttft_s - p.queue_s


def test_a_prompt_waits_for_the_step_in_flight_and_with_overlap_the_one_scheduled_beside_it():
    r = Replica(INPUTS)
    on = Replica(replace(INPUTS, overlap=True))
    # Poisson arrivals with 2 sequences decoding on average find a step running with chance
    # 1 − e^(−2) = 0.864665, and wait half of it (5 ms of 10) ...
    assert math.isclose(_step_wait(r, 2.0, 0.01, None), 0.864665 * 0.005, rel_tol=1e-6)
    # ... and, where the engine overlaps its CPU work (vLLM's async scheduling, SGLang's overlap
    # scheduler), the next step too, scheduled before the prompt was read: 15 ms.
    assert math.isclose(_step_wait(on, 2.0, 0.01, None), 0.864665 * 0.015, rel_tol=1e-6)
    # A closed loop of one: its request comes when the one before has ended, to an idle replica.
    assert _step_wait(on, 0.9, 0.01, 1.0) == 0.0
    # Of 16 in flight, 12 decoding: each other request decodes 3/4 of its time, so a step runs
    # unless all 15 others are elsewhere, (1/4)^15 = 9.3e-10. A closed loop's request is sent as
    # one ends, at a step's end, so it waits for nearly the whole next step (10 ms), and with
    # overlap the one after (20 ms).
    assert math.isclose(_step_wait(r, 12.0, 0.01, 16.0), 0.010 * (1 - 0.25**15), rel_tol=1e-12)
    assert math.isclose(_step_wait(on, 12.0, 0.01, 16.0), 0.020 * (1 - 0.25**15), rel_tol=1e-12)


def test_overlap_adds_a_step_to_the_ttft_at_a_rate():
    # The replica has no CPU work (its step_s and sequence_s are 0), so overlap changes no step:
    # at 100 requests a second (τ = 1.02696 ms, b = 10.2696 decoding, above) the TTFT grows by
    # the step scheduled beside the one in flight, τ (1 − e^(−10.27)).
    w = Workload("custom", 1024, 101, rate=100.0, ttft_s=None, tpot_s=None, named=True)
    off = at_rate(Replica(INPUTS), w, 100.0)
    on = at_rate(Replica(replace(INPUTS, overlap=True)), w, 100.0)
    assert on.tpot_s == off.tpot_s
    assert math.isclose(on.ttft_s - off.ttft_s, off.tpot_s * (1 - math.exp(-off.batch)),
                        rel_tol=1e-9)  # fmt: skip
    assert math.isclose(on.ttft_s - off.ttft_s, 1.02692e-3, rel_tol=1e-4)
