"""Serving under load: how a replica of an option serves a workload, from the time of its steps.

Continuous batching, as vLLM, SGLang and llama-server run it, in steady state. A replica runs
steps; each gives every sequence it is decoding one more token, and carries prompt tokens being
prefilled: beside the decode tokens, in what is left of the step's token budget (vLLM's
--max-num-batched-tokens with chunked prefill, llama-server's batch), or in prefill batches of
their own that pause decoding (SGLang's default: --chunked-prefill-size tokens a batch, new
requests first). At a request rate r a second (a replica's share of the load), with prompts of
I tokens and O generated ones:

- a sequence decoding is at I + O/2 tokens of context on average, which its step reads;
- Little's law: the batch decoding is B = r (O − 1) τ, where τ is the time between a sequence's
  tokens (TPOT); a prompt is cut into ceil(I / room) chunks (room: what the B decodes leave of
  the budget), each riding in one step, so r ceil(I / room) τ of the steps carry a chunk and the
  rest decode alone (where that share passes one, every step carries r I τ prompt tokens, up to
  the room); with prefill batches apart, the share of time they take stretches τ;
- τ is the mean of those steps' own times (plan/speed.py round_time), so τ is a fixed point,
  found in a few secant steps;
- a prompt waits for the step in flight, then is prefilled over ceil(I / room) steps (room: the
  budget the decodes leave), queueing behind the others as an M/D/1 queue at the prefill's
  share of the budget; TTFT is that plus the engine's fixed cost before a first token.

A load of C requests in flight (a closed loop) is the rate whose requests in the replica,
r × (TTFT + (O − 1) τ), are C, or as many as the replica admits (its --max-num-seqs and its KV
pool's tokens at I + O/2 a request); the rest wait outside, which their TTFT counts. A replica's
capacity is the largest rate it serves within the workload's targets (TTFT, TPOT) with its
batch and pool; a named load needs ceil(load / capacity) replicas of the option (of requests in
flight, fewer where targets loose enough let the rest wait for a place). A burst of N requests
sent at once (`burst`) is served in waves of what a replica admits, each prefilled then decoded,
and reported as the run's means. What a replica admits is one count (`admits`) for all of them.

Prefill and decode are worked out apart (`decode_round`, `prefill_service`), so that a prefill
pool and a decode pool can be estimated apart: disaggregated serving is the next step. No engine
is named here: the engines fill `Replica` with their knobs (plan/engines/*).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from llmfit.plan.settings import Workload
from llmfit.plan.speed import (
    Cost,
    PairPrice,
    SpeedInputs,
    Time,
    TotalPrice,
    pair_pricer,
    round_time,
    step,
    step_total,
    total_pricer,
)

# A capacity is found to this share of itself: the model is no truer than
# a few per cent, and each step costs a walk over the replica's stages.
TOLERANCE = 0.02
# A load within this share of a whole number of replicas' capacity is that many replicas, and a
# target missed by less is met: the capacities are found to TOLERANCE, below the true ones.
ROUNDING = 0.005
# A TPOT's fixed point is found to this share of itself (see `_least_fixed_point`); a step is a few
# multiplications a stage, so the extra steps cost little.
FIXED_POINT = 1e-4
# No TPOT past this is a steady state anyone serves at (a token in 1,000 s): the search for one
# stops there.
MAX_TPOT = 1e3
# Every search stops after this many steps whatever its input (a bracket of subnormal floats
# stops shrinking): each step at least halves a bracket's excess, so a well-posed search ends far
# sooner.
MAX_STEPS = 200


@dataclass(frozen=True)
class Scales:
    """What a calibration on the user's own runs (plan/calibration.py) multiplies the step times
    by: `decode`, a step's time with its batch of decodes alone; `prefill`, what prompt tokens
    add to a step (a chunk beside the decodes, or a prefill batch of its own). 1, 1: the model's
    own figures. Applied here, to the totals plan/speed.py returns, so that they hold whatever
    the step model computes inside."""

    decode: float = 1.0
    prefill: float = 1.0

    @property
    def identity(self) -> bool:
        return self.decode == 1.0 and self.prefill == 1.0


@dataclass(frozen=True)
class Replica:
    """One replica of an option as the serving model sees it, and how many of them the option
    runs (a dense model's data-parallel ranks, llama.cpp's servers: `copies`)."""

    inputs: SpeedInputs  # one replica: its stages, ranks, card and the engine's constants
    copies: int = 1
    # The most sequences a replica runs at once (vLLM's --max-num-seqs, SGLang's
    # --max-running-requests, llama-server's -np slots).
    max_batch: int = 256
    # Tokens its KV pools hold together (every attention rank's); 0: not a limit.
    kv_tokens: int = 0
    # Tokens a step may carry (vLLM's --max-num-batched-tokens, SGLang's
    # --chunked-prefill-size, llama-server's --batch-size).
    budget: int = 8192
    # Prompt chunks ride in decode steps (vLLM, llama-server), or run in prefill batches of their
    # own that pause decoding (SGLang).
    mixed: bool = True
    # The most tokens one sequence may hold (llama-server's --ctx-size over its slots); 0: any.
    sequence_tokens: int = 0
    # The calibration of its pool (card class × engine) on the user's runs; 1, 1: none.
    scales: Scales = Scales()
    # The front ends one launch of the engine takes its prompts through, over all its copies
    # and ranks (vLLM's API servers: one a data-parallel rank from 0.15, one before;
    # plan/engines/vllm_versions.py "api_server_per_dp_rank"). Where the front end takes one
    # request after another (`Constants.serial_frontend`), a copy's prompts reach its scheduler
    # `ttft_s` × copies / frontends apart.
    frontends: int = 1

    @property
    def cards(self) -> int:
        """Cards of the whole option: every copy."""
        return self.inputs.cards * self.copies


@dataclass(frozen=True)
class Point:
    """One replica in steady state at one request rate."""

    rate: float  # requests a second it completes
    batch: float  # sequences decoding
    admitted: float  # requests in the replica (prefilling or decoding)
    tpot_s: float
    ttft_s: float  # from arrival in the engine to the first token
    stable: bool  # whether the replica keeps up (its budget, batch and pool suffice)
    why: str  # what it runs out of, when not stable
    chunk: float  # prompt tokens the decode step shown carries (0: a step of decodes alone)
    # Of `ttft_s`, the mean wait in the queue for the prefill (M/D/1), and the prefill's share of
    # the replica's time it queues at (ρ): what the spread of the TTFTs comes from
    # (`ttft_quantile`). 0, 0: no queue.
    queue_s: float = 0.0
    busy: float = 0.0


@dataclass(frozen=True)
class Serving:
    """How an option serves a workload: at its load (or, none named, at its capacity), how many
    replicas of it the load needs, and what one step costs."""

    workload: Workload
    # Within the targets at the load on one replica (the option as shown); with no load named,
    # whether any load is (one request alone meets them).
    meets: bool
    # The targets it misses at the load, in words ("TPOT 62 ms over 50"); empty when it meets.
    misses: tuple[str, ...]
    # The option's figures at the workload's load (spread over `replicas` of it), or at its
    # capacity: every copy together, and what a sequence sees.
    concurrency: float  # requests in flight
    rate: float  # requests a second
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    tpot_s: float
    ttft_s: float
    e2e_s: float
    batch: float  # sequences decoding a replica
    # The most the option serves within the targets: requests a second, requests in flight.
    capacity_rate: float
    capacity_concurrency: float
    # Replicas of the option the named load needs (1 with none named); None: none serve it.
    replicas: int | None
    # Cards a unit of load takes: the option's cards × load ÷ capacity (with no load named, per
    # request a second of capacity); the fewest is the cheapest. inf where nothing is served.
    cards_per_load: float
    # One decode step and one prompt's prefill at that point, part by part.
    decode: Cost
    prefill: Cost
    bound: str  # what bounds the decode step ("memory", "compute", "link")
    assumptions: tuple[str, ...]
    # The replica it was worked out for (a benchmark re-prices it with other constants).
    replica: Replica | None = None
    # How far one request alone is from the targets where none is met (its TPOT or TTFT over
    # the target, the worse of the two: 1.2 is 20 % over); 0 where the workload is served.
    shortfall: float = 0.0
    # A burst's (`--requests`) run from its start to its last token, over `replicas`; 0 for
    # the other loads, which are steady states.
    makespan_s: float = 0.0

    @property
    def headroom(self) -> float:
        """Capacity over the load served: 2 means it would serve twice the load (1 for a
        burst, which is served once, not sustained)."""
        load = self.workload.load
        if not load or self.replicas is None or self.workload.requests is not None:
            return 1.0
        cap = self.capacity_concurrency if self.workload.concurrency else self.capacity_rate
        return cap * self.replicas / load


def _mean_context(w: Workload) -> float:
    """A decoding sequence's mean tokens of context: its prompt and half its output."""
    return w.input_len + w.output_len / 2


def decode_round(r: Replica, batch: float, context: float, chunk: float = 0.0,
                 chunk_context: float = 0.0) -> tuple[float, Cost]:  # fmt: skip
    """Seconds between a decoding sequence's tokens with `batch` of them and `chunk` prompt
    tokens in each round, and one micro-batch's parts."""
    t, cost = round_time(r.inputs, batch, context, chunk, chunk_context)
    if r.scales.identity:
        return t, cost
    scaled = _round(r, batch, context, chunk, chunk_context)
    f = scaled / t if t > 0 else r.scales.decode
    return scaled, Cost(tuple(p.scaled(f) for p in cost.parts))


def round_seconds(r: Replica, batch: float, context: float) -> float:
    """`decode_round(r, batch, context)[0]` without its parts (`round_time` prices the round
    with `round_total`, and the calibration scales it as `_round` does): a search that asks for
    thousands of rounds builds no Cost for each."""
    return _round(r, batch, context)


def _round(r: Replica, batch: float, context: float, chunk: float = 0.0,
           chunk_context: float = 0.0) -> float:  # fmt: skip
    """`round_total` with the replica's calibration: the decodes' time × `decode`, what the
    chunk adds × `prefill`."""
    s = r.scales
    if s.identity:
        return total_pricer(r.inputs)(batch, context, chunk, chunk_context)
    if chunk <= 0:
        return s.decode * total_pricer(r.inputs)(batch, context, 0.0, 0.0)
    alone, both = pair_pricer(r.inputs)(batch, context, chunk, chunk_context)
    return s.decode * alone + s.prefill * (both - alone)


def _rounder(r: Replica) -> TotalPrice:
    """`_round` for the replica, bound once (`total_pricer`) where it has no calibration."""
    if r.scales.identity:
        return total_pricer(r.inputs)

    def calibrated(batch: float, context: float, chunk: float, chunk_context: float) -> float:
        return _round(r, batch, context, chunk, chunk_context)

    return calibrated


def _pair_pricer(r: Replica) -> PairPrice:
    """`round_pair` for the replica's inputs (`pair_pricer`), with its calibration (see
    `_round`)."""
    price = pair_pricer(r.inputs)
    s = r.scales
    if s.identity:
        return price

    def calibrated(
        batch: float, context: float, chunk: float, chunk_context: float
    ) -> tuple[float, float]:
        alone, both = price(batch, context, chunk, chunk_context)
        return s.decode * alone, s.decode * alone + s.prefill * (both - alone)

    return calibrated


def _apart(r: Replica, chunk: float, chunk_context: float) -> float:
    """A prefill batch of its own (`step_total` with no decodes), with the replica's
    calibration."""
    return r.scales.prefill * step_total(r.inputs, 0.0, 0.0, chunk, chunk_context)


def prefill_service(
    r: Replica, w: Workload, batch: float, rounds: TotalPrice | None = None
) -> tuple[float, float]:
    """(seconds one prompt takes once its turn comes, prompt tokens a second the replica can
    prefill beside `batch` decoding sequences when prompts are waiting).

    The two differ for a prompt shorter than the step's room: alone it rides in a step of its
    own tokens, but prompts that queue are packed together up to the room (vLLM's scheduler
    fills --max-num-batched-tokens from the waiting queue, vllm/v1/core/sched/scheduler.py
    `schedule`; SGLang's PrefillAdder adds waiting requests up to --chunked-prefill-size,
    sglang/srt/managers/schedule_policy.py), so the rate at which a queue drains is a full
    step's tokens over that step's time, not one short prompt's over its own."""
    prompt = w.input_len
    if r.mixed:
        # The oldest waiting prompt takes what the decodes leave of the step's budget.
        rnd = rounds or _rounder(r)  # `rounds`: `_rounder(r)`, where the caller holds it
        room = max(r.budget - batch, 1.0)
        steps = math.ceil(prompt / room)
        ctx, b = _mean_context(w), max(batch, 1.0)
        t = rnd(b, ctx, min(prompt, room), prompt / 2)
        full = t if prompt >= room else rnd(b, ctx, room, prompt / 2)
        return steps * t, room / max(full, 1e-12)
    # Prefill batches of their own: each carries up to the budget of prompt tokens.
    chunk = min(prompt, r.budget)
    steps = math.ceil(prompt / chunk)
    t = _apart(r, chunk, prompt / 2)
    full = t if chunk >= r.budget else _apart(r, r.budget, prompt / 2)
    return steps * t, r.budget / max(full, 1e-12)


def prefill_cost(r: Replica, w: Workload, batch: float) -> Cost:
    """One prompt's prefill at `batch` sequences decoding, part by part: the steps that carry
    it (beside the decodes, or in prefill batches of its own)."""
    prompt = w.input_len
    if r.mixed:
        room = max(r.budget - batch, 1.0)
        steps = math.ceil(prompt / room)
        _, one = decode_round(r, max(batch, 1.0), _mean_context(w), min(prompt, room), prompt / 2)
    else:
        chunk = min(prompt, r.budget)
        steps = math.ceil(prompt / chunk)
        one = step(r.inputs, 0.0, 0.0, chunk, prompt / 2)
        one = Cost(tuple(p.scaled(r.scales.prefill) for p in one.parts))
    return Cost(tuple(p.scaled(steps) for p in one.parts))


def at_rate(
    r: Replica, w: Workload, rate: float, guess: float = 0.0, above: float = 0.0,
    in_flight: float | None = None,
) -> Point:  # fmt: skip
    """One replica in steady state at `rate` requests a second (Poisson arrivals): at the least
    TPOT that is its own step time, the steady state a replica reaches as its batch fills from
    empty. `guess`, the TPOT of a lower rate, and `above`, that of a higher one (a capacity's),
    bracket it and save steps. `in_flight`: the requests a closed loop keeps in the replica
    (`at_concurrency`), whose arrivals find the others there, not a Poisson number."""
    inp = r.inputs
    k = inp.constants
    prompt, out = w.input_len, w.output_len
    ctx = _mean_context(w)
    decoding = max(out - 1, 0)
    half = prompt / 2

    if not r.mixed:
        # Prefill batches of their own carry the same prompts whatever the decodes: their share
        # of the time is the rate's alone.
        busy = _apart_share(r, w, rate)

    # What every τ tried shares, worked out once (the products as the sums below group them,
    # so each figure is the same to the last bit): a fixed point tries a dozen τ a rate.
    per_tau, arriving = rate * decoding, rate * prompt
    budget, most = r.budget, 1 + TOLERANCE
    pair, rounds = _pair_pricer(r), _rounder(r)

    def tau_of(tau: float) -> float:
        b = per_tau * tau
        # max(b, 1.0), as max picks it.
        held = 1.0 if 1.0 > b else b
        if r.mixed:
            # A prompt is cut into chunks of what the decodes leave of the budget, each riding in
            # one step; the other steps decode alone. A MoE's step with a chunk reads every
            # expert, one without reads those its batch routes to: the steps are counted apart,
            # not averaged into one (the share of experts read is far from linear in tokens).
            # Where prompts come faster than one chunk a step, every step carries prompt tokens
            # (several prompts' chunks), as many as arrive in a step, up to the room.
            room = budget - b
            if 1.0 > room:
                room = 1.0
            share = rate * math.ceil(prompt / room) * tau  # the steps that carry a chunk
            if 1.0 < share:
                share = 1.0
            if share <= 0:
                return rounds(held, ctx, 0.0, 0.0)
            carried = arriving * tau / share
            if carried > room * most:
                return math.inf
            t, with_chunk = pair(held, ctx, carried, half)
            return t + share * (with_chunk - t)
        t = rounds(held, ctx, 0.0, 0.0)
        return t / (1 - busy) if busy < 1 else math.inf  # busy: the prefill batches' share

    if r.mixed and math.isfinite(per_tau) and math.isfinite(arriving):
        # At τ = 0 no sequence decodes and no step carries a chunk (their share is 0 at any
        # finite rate): one sequence's decode alone, the same for every rate a search tries.
        lo = _idle_round(rounds, ctx)
    else:
        lo = tau_of(0.0)
    tau = _least_fixed_point(tau_of, lo, guess, above)
    if not math.isfinite(tau):
        # The prompts do not fit beside the decodes (or their batches take all the time), or
        # no TPOT is long enough: each step's batch lengthens it more than it drains.
        why = (
            "prefill"
            if not math.isfinite(tau_of(lo)) or _prefill_bound(r, w, rate)
            else ("its steps lengthen with its batch faster than the batch drains")
        )
        return Point(rate, math.inf, math.inf, math.inf, math.inf, False, why, 0.0)
    batch = rate * decoding * tau
    why = ""
    if batch > r.max_batch:
        why = "batch"
    elif r.kv_tokens and batch * ctx > r.kv_tokens:
        why = "KV cache"
    service, per_s = prefill_service(r, w, batch, rounds)
    if r.mixed:
        rho = rate * prompt / per_s if per_s > 0 else math.inf
    else:
        rho = busy
    if not why and rho >= 1:
        why = "prefill"
    if why:
        return Point(rate, batch, math.inf, tau, math.inf, False, why, 0.0)
    # An arrival waits for the step in flight, then for the prompts ahead (M/D/1 at the
    # prefill's share of the budget), then its own prefill; the engine's fixed cost besides.
    wait = rho / (2 * (1 - rho)) * service
    ttft = k.ttft_s + _step_wait(r, batch, tau, in_flight) * (1 if r.mixed else 1 - rho)
    ttft += wait + service
    admitted = rate * (ttft + decoding * tau)
    return Point(rate, batch, admitted, tau, ttft, True, "", 0.0, wait, rho)


def _idle_round(rounds: TotalPrice, ctx: float) -> float:
    """`rounds(1.0, ctx, 0.0, 0.0)`, kept by the pricer: each rate of a capacity's search starts
    its fixed point there."""
    key = (id(rounds), ctx)
    found = _IDLE_ROUNDS.get(key)
    if found is None or found[0] is not rounds:
        if len(_IDLE_ROUNDS) > 4096:
            _IDLE_ROUNDS.clear()
        found = (rounds, rounds(1.0, ctx, 0.0, 0.0))
        _IDLE_ROUNDS[key] = found
    return found[1]


# By the id of their pricer (kept beside, so that an id is not reused while its entry lives)
# and the context.
_IDLE_ROUNDS: dict[tuple[int, float], tuple[TotalPrice, float]] = {}


def _step_wait(r: Replica, batch: float, tau: float, in_flight: float | None) -> float:
    """The mean wait of an arriving prompt for the decode steps ahead of its first prefill step.

    Only where a decode step runs: with `batch` sequences decoding on average, Poisson arrivals
    find none with chance e^(−batch) (the number decoding is Poisson, as in any M/G/∞ system);
    a closed loop's arrival finds the other `in_flight` − 1 requests, each decoding a share
    batch / in_flight of its time (one alone finds the replica idle). Where a step runs, the
    prompt waits for the rest of it: half a step on average for a Poisson arrival, nearly all of
    it for a closed loop's, sent as another request ended at a step's end (the client's turnaround
    of a few ms left out); and, where the engine overlaps
    its CPU work with the GPU's (SpeedInputs.overlap), for the next step as well: that one was
    scheduled while this one ran, before the prompt was read. SGLang's overlap loop reads new
    requests after it has launched batch N + 1 and processed batch N's result, so a request
    read then goes into batch N + 2 (sglang/srt/managers/scheduler.py
    `Scheduler.event_loop_overlap`); vLLM's async scheduling schedules step N + 1 while step N
    runs, its engine core keeping two batches in its queue (vllm/config/vllm.py
    `VllmConfig.max_concurrent_batches`, vllm/v1/engine/core.py
    `EngineCore.step_with_batch_queue`)."""
    if in_flight is None:
        running = -math.expm1(-batch) if batch > 0 else 0.0
        rest = tau / 2
    elif in_flight <= 1:
        return 0.0
    else:
        running = 1.0 - (1.0 - min(batch / in_flight, 1.0)) ** (in_flight - 1)
        # A closed loop's request is sent as one ends, at the end of the step that gave its last
        # token: it comes to the engine just after a step began, and waits for nearly all of it.
        rest = tau
    return running * (rest + (tau if r.inputs.overlap else 0.0))


def ttft_quantile(p: Point, q: float, ttft: float | None = None) -> float:
    """The `q` quantile of the TTFTs of a point's requests (0.5: their median), given their mean
    `ttft` (the point's own, or with a wait outside the replica its clients all share). Only
    the queue for the prefill spreads them: in an M/D/1 queue a share 1 − ρ of arrivals finds
    no prompt ahead and waits nothing; the others' wait has a tail close to exponential (the
    M/D/1 wait's distribution decays geometrically past its first few service times), taken as
    exponential of the mean that makes the whole mean the queue's (`queue_s` / ρ). The median
    is then the mean less the queue's wait where ρ ≤ 1/2: what a benchmark's median TTFT
    reports at a load its prefill is not half busy with (the SGLang cookbook's runs, whose
    means one request's one-off cost can double)."""
    mean = p.ttft_s if ttft is None else ttft
    base = mean - p.queue_s
    rho = p.busy
    if p.queue_s <= 0 or rho <= 0 or q <= 1 - rho:
        return base
    if q >= 1:
        return math.inf
    return base + p.queue_s / rho * math.log(rho / (1 - q))


def _least_fixed_point(
    f: Callable[[float], float], lo: float, guess: float = 0.0, above: float = 0.0
) -> float:
    """The least τ ≥ `lo` at which f(τ) = τ, for f increasing in τ (a longer step holds a bigger
    batch, whose step is longer) with f(lo) ≥ lo; inf where there is none short of MAX_TPOT.

    Below the least root a point's own step is never past it (τ ≤ τ* gives f(τ) ≤ f(τ*) = τ*),
    so stepping to f(τ) is safe, if slow where the slope of f nears 1 (near a capacity); a
    secant step through two points below is faster, and is kept only where g = f − τ still
    falls (a point past the other root, the unstable one where the batch outgrows its drain,
    has g rising again). Once a point has g ≤ 0 the least root is bracketed, and found by
    regula falsi (the Illinois kind) to FIXED_POINT of itself. Stopping where g is small, as
    this did before, stopped near a capacity far from the root: there g is small everywhere."""

    # g(τ) = f(τ) − τ, inf where f(τ) is not finite, written out at each point tried rather
    # than called: a plan tries about ten thousand.
    finite, inf = math.isfinite, math.inf
    if not finite(lo) or lo > MAX_TPOT:
        return inf
    v = f(lo)
    a, ga = lo, (v - lo if finite(v) else inf)
    if not finite(ga):
        return inf
    b, gb = inf, 0.0
    if guess > a:
        # A lower rate's TPOT: below this rate's root (the roots grow with the rate).
        v = f(guess)
        gg = v - guess if finite(v) else inf
        if gg <= 0:
            b, gb = guess, gg
        elif finite(gg):
            a, ga = guess, gg
    if above > a and above < b:
        # A higher rate's TPOT: past this rate's least root, short of its other one.
        v = f(above)
        ga_ = v - above if finite(v) else inf
        if ga_ <= 0:
            b, gb = above, ga_
    prev_t, prev_g = math.nan, math.nan
    steps = 0
    while not finite(b):
        steps += 1
        if ga <= FIXED_POINT * a:
            return a + ga
        if a > MAX_TPOT or steps > MAX_STEPS:
            return inf
        plain = a + ga  # f(a)
        x = plain
        if prev_g > ga:
            # The secant through the two points below, where it reaches further (max(plain, …),
            # as max picks it: the builtin's call cost more than the comparison).
            secant = a - ga * (a - prev_t) / (ga - prev_g)
            if secant > plain:
                x = secant
        v = f(x)
        gx = v - x if finite(v) else inf
        if x > plain and not gx < ga:
            # Past the least root's well: step from the point below instead.
            v = f(plain)
            x, gx = plain, (v - plain if finite(v) else inf)
        if gx <= 0:
            b, gb = x, gx
            break
        if not finite(gx):
            return inf
        prev_t, prev_g, a, ga = a, ga, x, gx
    kept = 0
    for _ in range(MAX_STEPS):
        if b - a <= FIXED_POINT * a:
            break
        x = b - gb * (b - a) / (gb - ga)
        # Held within the bracket, off its ends: min(max(x, low), high), as they pick it.
        low, high = a + 0.01 * (b - a), b - 0.01 * (b - a)
        if low > x:
            x = low
        if high < x:
            x = high
        v = f(x)
        gx = v - x if finite(v) else inf
        if gx > 0:
            a, ga = x, gx
            if kept == 1:
                gb /= 2
            kept = 1
        else:
            b, gb = x, gx
            if kept == -1:
                ga /= 2
            kept = -1
    return a + (b - a) * ga / (ga - gb) if ga > gb else b


def _apart_share(r: Replica, w: Workload, rate: float) -> float:
    """The share of a replica's time its prefill batches of their own take at `rate`. A batch
    takes every prompt waiting, up to the budget (SGLang's PrefillAdder): the prompts that
    arrived while the one before ran, about 1 + r × (one prompt's prefill) of them (Poisson),
    each costing that batch's time over their number."""
    service, _ = prefill_service(r, w, 0.0)
    prompt = w.input_len
    if prompt >= r.budget or rate <= 0:
        return rate * service
    held = min(1.0 + rate * service, r.budget / prompt)
    t = _apart(r, held * prompt, prompt / 2)
    return rate * t / held


def _prefill_bound(r: Replica, w: Workload, rate: float) -> bool:
    """Whether `rate`'s prompts alone would take all of a replica's prefill, at no decode."""
    _, per_s = prefill_service(r, w, 0.0)
    return rate * w.input_len >= per_s


def _idle(r: Replica, w: Workload) -> Point:
    """One request alone: the replica's best TTFT and TPOT."""
    return at_rate(r, w, 1e-9)


def admits(r: Replica, w: Workload) -> float:
    """Requests a replica holds at once: the one count the hold check, admission, a capacity and
    a burst's waves all use. Its batch (--max-num-seqs, --max-running-requests, -np), and its
    KV pool at I + O/2 tokens a request: what a request holds on average over its life, its
    prompt and half its output, for the engines allocate a request's blocks as its tokens are
    computed, not at once. vLLM admits a waiting request when its prompt's blocks are free and
    grows a running one a block at a time, preempting the newest where decode runs out
    (vllm/v1/core/sched/scheduler.py `Scheduler.schedule`, `kv_cache_manager.allocate_slots`);
    SGLang admits one when its prompt and an estimate of its new tokens fit beside what the
    running ones still need, that estimate a ratio of their output that decays as they finish
    (sglang/srt/managers/schedule_policy.py `PrefillAdder.add_one_req`, `rem_total_tokens`
    and `new_token_ratio`). Held I + O apiece, as the hold check once had it, a pool of
    requests at every stage of their lives would be counted half full.

    0 where one request, whole (I + O), does not fit the pool or a sequence: it could never
    finish (vLLM refuses a --max-model-len whose one request its pool cannot hold)."""
    if r.sequence_tokens and w.tokens > r.sequence_tokens:
        return 0.0
    if r.kv_tokens and w.tokens > r.kv_tokens:
        return 0.0
    limit = float(r.max_batch)
    if r.kv_tokens:
        limit = min(limit, r.kv_tokens / _mean_context(w))
    return limit


def _ceiling(r: Replica, w: Workload, idle: Point) -> float:
    """A rate the replica cannot reach: where its batch, at the idle TPOT, would fill it, or
    its prompts, at the prefill's idle pace, would take the whole budget (the TPOT only grows
    with the load, so the true limits are lower)."""
    decoding = max(w.output_len - 1, 1)
    by_batch = admits(r, w) / (decoding * idle.tpot_s)
    _, per_s = prefill_service(r, w, 0.0)
    return max(min(by_batch, per_s / max(w.input_len, 1)), 1e-9) * 1.01


def _search(
    r: Replica, w: Workload, excess: Callable[[Point], float], hi: float, idle: Point,
    in_flight: float | None = None,
) -> Point | None:  # fmt: skip
    """The point of the largest rate below `hi` (a rate the replica cannot reach) at which
    `excess` is at most 0 (it is at no load, `idle`, and grows with the rate; inf where the
    replica cannot keep up), to TOLERANCE: regula falsi (the Illinois kind) on the bracket,
    each step's fixed point started from the last good one's TPOT, stopping where the excess is
    within TOLERANCE of 0."""
    # `hi` is past what the replica can reach (_ceiling): not worked out, its excess unknown.
    g_hi = math.inf
    lo, g_lo = 0.0, min(excess(idle), -TOLERANCE)
    best, guess, kept = None, 0.0, 0
    for _ in range(MAX_STEPS):
        if hi - lo <= TOLERANCE * hi:
            break
        span = hi - lo
        x = lo + span / 2
        if math.isfinite(g_hi):
            # Where the line through the ends crosses 0, kept off the ends so that the bracket
            # shrinks every step.
            x = hi - g_hi * span / (g_hi - g_lo)
            x = min(max(x, lo + 0.05 * span), hi - 0.05 * span)
        p = at_rate(r, w, x, guess, in_flight=in_flight)
        g = excess(p)
        if g <= 0:
            lo, g_lo, best, guess = x, g, p, p.tpot_s
            if g >= -TOLERANCE:
                break
            if kept == -1:
                g_hi /= 2
            kept = -1
        else:
            hi, g_hi = x, g
            if kept == 1:
                g_lo /= 2
            kept = 1
    return best


def _excess(p: Point, w: Workload, admitted: float) -> float:
    """How far the point is past the workload's targets and what the replica admits, as the
    largest ratio less one (≤ 0: within them; inf: it does not keep up)."""
    if not p.stable:
        return math.inf
    over = p.admitted / (admitted * (1 + TOLERANCE)) - 1
    if w.tpot_s is not None:
        over = max(over, p.tpot_s / w.tpot_s - 1)
    if w.ttft_s is not None:
        over = max(over, p.ttft_s / w.ttft_s - 1)
    return over


def _within(p: Point, w: Workload, admitted: float) -> bool:
    return _excess(p, w, admitted) <= 0


def capacity(r: Replica, w: Workload) -> Point | None:
    """The most one replica serves within the workload's targets, at the point it does; None
    when even one request alone misses them (or the replica cannot hold one)."""
    limit = admits(r, w)
    idle = _idle(r, w)
    if limit < 1 or not _within(idle, w, limit):
        return None
    found = _search(r, w, lambda p: _excess(p, w, limit), _ceiling(r, w, idle), idle)
    return found or idle


def at_concurrency(r: Replica, w: Workload, concurrency: float) -> tuple[Point, float]:
    """One replica with `concurrency` requests in flight (a closed loop), and the TTFT its
    clients see: the engine's, and the wait of those it does not admit."""
    held = min(concurrency, admits(r, w))
    idle = _idle(r, w)
    if held <= 0:
        return replace(idle, stable=False, why="KV cache"), math.inf
    # The rate whose requests in the replica are `held` (past the largest it keeps up with,
    # queueing would fill any number).
    best = _search(
        r,
        w,
        lambda p: p.admitted / held - 1 if p.stable else math.inf,
        _ceiling(r, w, idle),
        idle,
        in_flight=held,
    )
    if best is None:
        # Fewer requests in flight than one arrival an idle TPOT: the replica is idle, and
        # its rate is the requests held over one request's time there (Little's law).
        one = idle.ttft_s + max(w.output_len - 1, 0) * idle.tpot_s
        best = (
            replace(
                idle,
                rate=held / one,
                admitted=held,
                batch=idle.batch * held / max(idle.admitted, 1e-300),
            )
            if idle.admitted > held and one > 0
            else idle
        )
    waiting = max(concurrency - held, 0.0)
    client_ttft = best.ttft_s + (waiting / best.rate if best.rate > 0 else math.inf)
    return best, client_ttft


def _ms(s: float) -> str:
    return f"{s * 1e3:,.0f} ms" if s < 10 else f"{s:,.0f} s"


def _misses(p: Point, ttft: float, w: Workload, held: bool = True) -> list[str]:
    """The targets a point misses, in words."""
    out = []
    if not held:
        out.append("it cannot hold one request of the workload")
    elif not p.stable:
        out.append(f"it cannot keep up ({p.why})")
    else:
        # To ROUNDING, as replicas are counted.
        if w.tpot_s is not None and p.tpot_s > w.tpot_s * (1 + ROUNDING):
            out.append(f"TPOT {_ms(p.tpot_s)} over {_ms(w.tpot_s)}")
        if w.ttft_s is not None and ttft > w.ttft_s * (1 + ROUNDING):
            out.append(f"TTFT {_ms(ttft)} over {_ms(w.ttft_s)}")
    return out


def _load_point(
    r: Replica, w: Workload, share: float, cap: Point | None = None
) -> tuple[Point, float]:
    """A replica at `share` of the workload's named load: the point, and its clients' TTFT.
    A rate's point is solved between the idle one and the capacity's (`cap`), the stable
    steady state the capacity search walked up through, not the unstable one past it."""
    if w.concurrency is not None:
        return at_concurrency(r, w, share * w.concurrency)
    p = at_rate(r, w, share * (w.rate or 0.0), above=cap.tpot_s if cap else 0.0)
    return p, p.ttft_s


def _fewest_in_flight(r: Replica, w: Workload, most: int) -> int:
    """The fewest replicas, up to `most` (those whose capacities add up to the load), over
    which the requests in flight meet the targets: more in flight than a replica holds wait
    for a place (their wait in the TTFT clients see), which targets loose enough allow."""

    def meets(k: int) -> bool:
        p, ttft = at_concurrency(r, w, (w.concurrency or 0.0) / (r.copies * k))
        return _steady(p) and not _misses(p, ttft, w)

    lo, hi = 0, most  # lo: does not meet (or none), hi: taken as meeting
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _serves(p: Point, ttft: float, w: Workload, held: bool) -> bool:
    """Whether a point at a load is a steady state that meets the workload's targets."""
    return _steady(p) and not _misses(p, ttft, w, held)


def _steady(p: Point) -> bool:
    """Whether a point is a steady state that serves: stable, with a rate and finite figures."""
    return (
        p.stable
        and p.rate > 0
        and math.isfinite(p.rate)
        and math.isfinite(p.tpot_s)
        and math.isfinite(p.ttft_s)
    )


@dataclass(frozen=True)
class Burst:
    """Requests sent at once with no cap (`bench serve` without --max-concurrency) on one
    replica: the run's means and its length."""

    requests: int
    wave: int  # requests a wave: what the replica admits (`admits`)
    waves: int
    ttft_s: float  # the mean over the requests, each from the burst's start
    tpot_s: float  # the mean over the requests, each its (last token − first) / (O − 1)
    makespan_s: float  # from the burst's start to its last token


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ floor((a i + b) / m) for i = 1 … n, in a few steps whatever n (the floor-sum of
    Euclid-like reduction, as competitive programmers' libraries write it for i = 0 … n − 1)."""
    b += a  # from i = 1: shift the sum by one
    total = 0
    while n > 0:
        if a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        top = a * n + b
        if top < m:
            break
        n, b, m, a = top // m, top % m, a, m
    return total


def _wave(r: Replica, w: Workload, n: int, arrive: float = 0.0) -> tuple[float, float]:
    """A wave of `n` requests admitted together: (its length, the sum over its requests of the
    time from its start to each one's first token).

    `arrive`: the requests reach the scheduler that far apart (a burst's first wave through a
    front end that takes one request after another, `Constants.serial_frontend`): the prefill
    ends no sooner than the last arrives, and request j's first token comes no sooner than
    j × `arrive`.

    Its prompts are prefilled first, the budget's tokens a step in the order they came, each
    request's first token at the end of the step that finishes its prompt; then the wave
    decodes O − 1 steps together at its mean context (I + O/2). SGLang runs a new prefill
    batch before the decode batch while prompts wait (scheduler.py `get_next_batch_to_run`);
    vLLM decodes a wave's first requests in its later prefill steps, which this leaves out (a
    TPOT at most the wave's prefill over O − 1 long)."""
    prompt, budget = w.input_len, max(r.budget, 1)
    total = n * prompt
    steps = -(-total // budget)
    full = _apart(r, float(budget), prompt / 2)
    last_tokens = total - (steps - 1) * budget
    last = full if last_tokens == budget else _apart(r, float(last_tokens), prompt / 2)
    prefill = (steps - 1) * full + last
    # Request j's prompt ends in step ceil(j I / B): Σ of those steps over the wave, each a
    # full step's time but the last's.
    ends = _floor_sum(n, budget, prompt, budget - 1)
    in_last = n - (steps - 1) * budget // prompt
    first = ends * full - in_last * (full - last)
    if arrive > 0:
        prefill = max(prefill, n * arrive)
        first = max(first, arrive * n * (n + 1) / 2)
    tau = round_seconds(r, float(n), _mean_context(w))
    return prefill + max(w.output_len - 1, 0) * tau, first


def burst(r: Replica, w: Workload, requests: int) -> Burst | None:
    """`requests` prompts sent at once to one replica: served in waves of what it admits
    (`admits`), each wave's prefill then its decode, the next wave as the last ends (prompts
    of one length end together); the queue's wait is in each request's TTFT. None where the
    replica cannot hold one request."""
    n = int(admits(r, w))
    if n < 1 or requests < 1:
        return None
    k = r.inputs.constants
    q, rest = divmod(requests, n)
    decoding = max(w.output_len - 1, 0)
    # Where the engine's front end takes the burst's requests one after another, `ttft_s` each
    # (`Constants.serial_frontend`: vLLM's API server), the first wave's reach the scheduler
    # that far apart; the later waves' arrived while the ones before ran. The launch's front
    # ends share its copies: one for two copies sends each every other prompt, one for each of
    # two ranks of one replica halves the turn.
    arrive = k.ttft_s * r.copies / max(r.frontends, 1) if k.serial_frontend else 0.0
    length, first = _wave(r, w, n)
    length0, first0 = _wave(r, w, n, arrive) if arrive and q else (length, first)
    # Wave 0 runs length0; wave i ≥ 1 starts at length0 + (i − 1) × length: the later full
    # waves' starts add up to n × (length0 (q − 1) + length (q − 1)(q − 2)/2) over their
    # requests, the last partial one's to rest × makespan.
    later = max(q - 1, 0)
    ttft = requests * k.ttft_s
    if q:
        ttft += n * (length0 * later + length * later * (later - 1) / 2) + first0 + later * first
    tpot = (n * length0 - first0) + later * (n * length - first) if q else 0.0
    makespan = length0 + later * length if q else 0.0
    if rest:
        rest_length, rest_first = _wave(r, w, rest, 0.0 if q else arrive)
        ttft += rest * makespan + rest_first
        tpot += rest * rest_length - rest_first
        makespan += rest_length
    return Burst(
        requests=requests,
        wave=n,
        waves=q + (1 if rest else 0),
        ttft_s=ttft / requests,
        tpot_s=tpot / (requests * decoding) if decoding else 0.0,
        makespan_s=makespan,
    )


def _spread_burst(r: Replica, w: Workload, replicas: int) -> Burst | None:
    """The workload's burst spread over `replicas` of the option (each of its `copies`): the
    means over every request, the longest replica's makespan."""
    n = w.requests or 0
    units = r.copies * replicas
    per, extra = divmod(n, units)
    parts: list[tuple[Burst, int]] = []
    for m, c in ((per + 1, extra), (per, units - extra)):
        if c and m:
            b = burst(r, w, m)
            if b is None:
                return None
            parts.append((b, c))
    if not parts:
        return None
    total = sum(b.requests * c for b, c in parts)
    return Burst(
        requests=n,
        wave=max(b.wave for b, _ in parts),
        waves=max(b.waves for b, _ in parts),
        ttft_s=sum(b.ttft_s * b.requests * c for b, c in parts) / total,
        tpot_s=sum(b.tpot_s * b.requests * c for b, c in parts) / total,
        makespan_s=max(b.makespan_s for b, _ in parts),
    )


def _burst_misses(b: Burst, w: Workload) -> list[str]:
    out = []
    if w.tpot_s is not None and b.tpot_s > w.tpot_s * (1 + ROUNDING):
        out.append(f"mean TPOT {_ms(b.tpot_s)} over {_ms(w.tpot_s)}")
    if w.ttft_s is not None and b.ttft_s > w.ttft_s * (1 + ROUNDING):
        out.append(f"mean TTFT {_ms(b.ttft_s)} over {_ms(w.ttft_s)}")
    return out


def _burst_replicas(r: Replica, w: Workload) -> int | None:
    """The fewest replicas of the option over which the burst's means meet the targets (more
    replicas: fewer waves each, a smaller batch); None where one request each does not."""
    n = w.requests or 0
    most = max(-(-n // r.copies), 1)
    top = _spread_burst(r, w, most)
    if top is None or _burst_misses(top, w):
        return None
    lo, hi = 0, most  # lo misses (or is none), hi meets
    while hi - lo > 1:
        mid = (lo + hi) // 2
        b = _spread_burst(r, w, mid)
        if b is not None and not _burst_misses(b, w):
            hi = mid
        else:
            lo = mid
    return hi


def serve(r: Replica, w: Workload) -> Serving:
    """How the option of replica `r` serves the workload `w`."""
    cap = capacity(r, w)
    copies, cards = r.copies, r.cards
    cap_rate = cap.rate * copies if cap else 0.0
    cap_conc = cap.admitted * copies if cap else 0.0
    load = w.load
    held = admits(r, w) >= 1
    ran: Burst | None = None
    if w.requests is not None:
        replicas = _burst_replicas(r, w) if cap else None
        spread = replicas or 1
        ran = _spread_burst(r, w, spread)
        one = ran if spread == 1 else _spread_burst(r, w, 1)
        if replicas is None or one is None:
            idle = _idle(r, w)
            misses = (_burst_misses(one, w) if one else []) or _misses(
                idle, idle.ttft_s, w, held
            ) or ["its capacity within the targets is nil"]  # fmt: skip
        else:
            misses = _burst_misses(one, w)
        point = _idle(r, w)
        if ran is not None:
            point = replace(point, batch=float(ran.wave), tpot_s=ran.tpot_s)
        ttft = ran.ttft_s if ran else math.inf
        rate = w.requests / ran.makespan_s if ran and ran.makespan_s > 0 else 0.0
        concurrency = float(w.requests)
        cards_per_load = cards * spread / w.requests if replicas else math.inf
        used = cards * spread
    elif load:
        unit = cap_conc if w.concurrency is not None else cap_rate
        replicas = max(1, math.ceil(load / unit * (1 - ROUNDING))) if unit > 0 else None
        if replicas is not None and replicas > 1 and w.concurrency is not None:
            replicas = _fewest_in_flight(r, w, replicas)
        spread = replicas or 1
        # The figures at the load, over `spread` replicas of the option; and whether one of them
        # alone meets the targets.
        point, ttft = _load_point(r, w, 1 / (copies * spread), cap)
        if replicas is not None and not _serves(point, ttft, w, held):
            # Counted only where its point at the load is a steady state that meets the targets:
            # a replica more, the most a capacity found to TOLERANCE below its true one can be
            # short, and what a load within ROUNDING above a whole number of capacities needs
            # where TPOT climbs faster than the load near capacity (1.002 × a capacity missed a
            # 50 ms TPOT by 1.6 %). At the next count each replica carries at most 1.005 × N/(N + 1)
            # of a capacity met within the targets: under it while N < 200.
            spread += 1
            point, ttft = _load_point(r, w, 1 / (copies * spread), cap)
            replicas = spread if _serves(point, ttft, w, held) else None
        if replicas is None:
            # No load at all is served within the targets: what one request alone misses.
            idle = _idle(r, w)
            misses = _misses(idle, idle.ttft_s, w, held) or (
                [f"it cannot keep up ({point.why})"] if unit > 0 else []
            ) or ["its capacity within the targets is nil"]  # fmt: skip
        elif spread == 1:
            misses = _misses(point, ttft, w, held)
        else:
            alone, alone_ttft = _load_point(r, w, 1 / copies, cap)
            misses = _misses(alone, alone_ttft, w, held)
        if not point.stable:
            ttft = math.inf
        rate = point.rate * copies * spread if point.stable else 0.0
        concurrency = (
            w.concurrency if w.concurrency is not None else point.admitted * (copies * spread)
        )
        cards_per_load = cards * load / unit if unit > 0 and replicas else math.inf
        used = cards * spread
    else:
        replicas = 1 if cap else None
        point = cap or _idle(r, w)
        ttft = point.ttft_s
        misses = (
            []
            if cap
            else _misses(point, ttft, w, held) or ["its capacity within the targets is nil"]
        )
        rate, concurrency = cap_rate, cap_conc
        cards_per_load = cards / cap_rate if cap_rate > 0 else math.inf
        used = cards
    out = w.output_len
    tpot = point.tpot_s
    e2e = ttft + max(out - 1, 0) * tpot
    batch = point.batch if math.isfinite(point.batch) else 0.0
    ctx = _mean_context(w)
    _, decode = decode_round(r, max(batch, 1.0), ctx, point.chunk, w.input_len / 2)
    out_tps = rate * out
    assumptions = (
        f"requests of {w.input_len:,} prompt and {w.output_len:,} generated tokens, decoding "
        f"at {ctx:,.0f} tokens of context on average",
        "prompt chunks ride in decode steps, up to the step's token budget"
        if r.mixed
        else "prefill batches of their own pause decoding",
        f"at most {r.max_batch:,} sequences a replica at once"
        + (f", and its KV pool of {r.kv_tokens:,} tokens" if r.kv_tokens else ""),
        "arrivals queue for their prefill as Poisson arrivals do (M/D/1); steady state, means"
        if ran is None
        else f"{ran.requests:,} prompts sent at once, served in {ran.waves:,} wave"
        f"{'s' if ran.waves != 1 else ''} of up to {ran.wave:,} (what a replica admits), each "
        "prefilled, then decoded; the means over the run's requests",
    )
    return Serving(
        workload=w,
        meets=not misses,
        misses=tuple(misses),
        concurrency=concurrency,
        rate=rate,
        output_tokens_per_s=out_tps,
        output_tokens_per_s_per_gpu=out_tps / used if used else 0.0,
        tpot_s=tpot,
        ttft_s=ttft,
        e2e_s=e2e,
        batch=batch,
        capacity_rate=cap_rate,
        capacity_concurrency=cap_conc,
        replicas=replicas,
        cards_per_load=cards_per_load,
        decode=decode,
        prefill=prefill_cost(r, w, batch),
        bound=decode.bound,
        assumptions=assumptions,
        replica=r,
        shortfall=0.0 if replicas is not None else _shortfall(r, w),
        makespan_s=ran.makespan_s if ran else 0.0,
    )


def _shortfall(r: Replica, w: Workload) -> float:
    """The worse of one request's TPOT and TTFT over its target (inf where it cannot be held)."""
    if admits(r, w) < 1:
        return math.inf
    idle = _idle(r, w)
    over = [1.0]
    if w.tpot_s:
        over.append(idle.tpot_s / w.tpot_s)
    if w.ttft_s:
        over.append(idle.ttft_s / w.ttft_s)
    return max(over)


def part_times(t: Time) -> dict[str, float]:
    """A step's time by what spent it, as `--explain` and the JSON name the parts: weights
    read, KV read, compute (the GEMMs overlapping the weights, attention the KV), communication
    and fixed overhead (the kernels' and the engine's own)."""
    return {
        "weights": t.memory + t.experts,
        "kv": t.kv,
        "compute": t.compute + t.expert_compute + t.attention,
        "communication": t.link,
        "overhead": t.overhead + t.scheduling,
    }
