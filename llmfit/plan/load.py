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
batch and pool; a named load needs ceil(load / capacity) replicas of the option.

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
    SpeedInputs,
    Time,
    round_pair,
    round_time,
    round_total,
    step,
    step_total,
)

# A fixed point or a capacity is found to this share of itself: the model is no truer than
# a few per cent, and each step costs a walk over the replica's stages.
TOLERANCE = 0.02
# A load within this share of a whole number of replicas' capacity is that many replicas, and a
# target missed by less is met: the capacities are found to TOLERANCE, below the true ones.
ROUNDING = 0.005


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

    @property
    def headroom(self) -> float:
        """Capacity over the load served: 2 means it would serve twice the load."""
        load = self.workload.load
        if not load or self.replicas is None:
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
    return round_time(r.inputs, batch, context, chunk, chunk_context)


def prefill_service(r: Replica, w: Workload, batch: float) -> tuple[float, float]:
    """(seconds one prompt takes once its turn comes, prompt tokens a second the replica can
    prefill beside `batch` decoding sequences when prompts are waiting).

    The two differ for a prompt shorter than the step's room: alone it rides in a step of its
    own tokens, but prompts that queue are packed together up to the room (vLLM's scheduler
    fills --max-num-batched-tokens from the waiting queue, vllm/v1/core/sched/scheduler.py
    `schedule`; SGLang's PrefillAdder adds waiting requests up to --chunked-prefill-size,
    sglang/srt/managers/schedule_policy.py), so the rate at which a queue drains is a full
    step's tokens over that step's time, not one short prompt's over its own."""
    inp, prompt = r.inputs, w.input_len
    if r.mixed:
        # The oldest waiting prompt takes what the decodes leave of the step's budget.
        room = max(r.budget - batch, 1.0)
        steps = math.ceil(prompt / room)
        ctx, b = _mean_context(w), max(batch, 1.0)
        t = round_total(inp, b, ctx, min(prompt, room), prompt / 2)
        full = t if prompt >= room else round_total(inp, b, ctx, room, prompt / 2)
        return steps * t, room / max(full, 1e-12)
    # Prefill batches of their own: each carries up to the budget of prompt tokens.
    chunk = min(prompt, r.budget)
    steps = math.ceil(prompt / chunk)
    t = step_total(inp, 0.0, 0.0, chunk, prompt / 2)
    full = t if chunk >= r.budget else step_total(inp, 0.0, 0.0, r.budget, prompt / 2)
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
    return Cost(tuple(p.scaled(steps) for p in one.parts))


def at_rate(r: Replica, w: Workload, rate: float, guess: float = 0.0) -> Point:
    """One replica in steady state at `rate` requests a second (Poisson arrivals); `guess`, a
    TPOT near the answer (a nearby rate's), saves steps."""
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

    def tau_of(tau: float) -> float:
        b = rate * decoding * tau
        if r.mixed:
            # A prompt is cut into chunks of what the decodes leave of the budget, each riding in
            # one step; the other steps decode alone. A MoE's step with a chunk reads every
            # expert, one without reads those its batch routes to: the steps are counted apart,
            # not averaged into one (the share of experts read is far from linear in tokens).
            # Where prompts come faster than one chunk a step, every step carries prompt tokens
            # (several prompts' chunks), as many as arrive in a step, up to the room.
            room = max(r.budget - b, 1.0)
            chunks = math.ceil(prompt / room)
            share = min(rate * chunks * tau, 1.0)  # the steps that carry a chunk
            if share <= 0:
                return round_total(inp, max(b, 1.0), ctx)
            carried = rate * prompt * tau / share
            if carried > room * (1 + TOLERANCE):
                return math.inf
            t, with_chunk = round_pair(inp, max(b, 1.0), ctx, carried, half)
            return t + share * (with_chunk - t)
        t = round_total(inp, max(b, 1.0), ctx)
        return t / (1 - busy) if busy < 1 else math.inf  # busy: the prefill batches' share

    lo = tau_of(0.0)
    tau = max(guess, lo)
    # Secant on g(τ) = step(τ) − τ: g is close to linear in τ, so a few steps do.
    prev_tau = prev_g = None
    for _ in range(30):
        new = tau_of(tau)
        if not math.isfinite(new) or new > 1e3:
            tau = math.inf
            break
        g = new - tau
        if abs(g) <= TOLERANCE * tau:
            tau = new
            break
        nxt = new
        if prev_g is not None and prev_tau is not None and g != prev_g:
            nxt = tau - g * (tau - prev_tau) / (g - prev_g)
            if not math.isfinite(nxt) or nxt < lo:
                nxt = new
        prev_tau, prev_g = tau, g
        tau = nxt
    else:
        tau = math.inf
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
    service, per_s = prefill_service(r, w, batch)
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
    ttft = k.ttft_s + (tau if r.mixed else tau * (1 - rho)) / 2 + wait + service
    admitted = rate * (ttft + decoding * tau)
    return Point(rate, batch, admitted, tau, ttft, True, "", 0.0)


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
    t = step_total(r.inputs, 0.0, 0.0, held * prompt, prompt / 2)
    return rate * t / held


def _prefill_bound(r: Replica, w: Workload, rate: float) -> bool:
    """Whether `rate`'s prompts alone would take all of a replica's prefill, at no decode."""
    _, per_s = prefill_service(r, w, 0.0)
    return rate * w.input_len >= per_s


def _idle(r: Replica, w: Workload) -> Point:
    """One request alone: the replica's best TTFT and TPOT."""
    return at_rate(r, w, 1e-9)


def admits(r: Replica, w: Workload) -> float:
    """Requests a replica runs at once: its batch, and its KV pool at I + O/2 tokens a request
    (vLLM and SGLang admit a request while its blocks are free, and preempt one when the pool
    runs out; its mean need is what fills the pool); 0 where one request is longer than a
    sequence may be."""
    if r.sequence_tokens and w.tokens > r.sequence_tokens:
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
    r: Replica, w: Workload, excess: Callable[[Point], float], hi: float, idle: Point
) -> Point | None:
    """The point of the largest rate below `hi` (a rate the replica cannot reach) at which
    `excess` is at most 0 (it is at no load, `idle`, and grows with the rate; inf where the
    replica cannot keep up), to TOLERANCE: regula falsi (the Illinois kind) on the bracket,
    each step's fixed point started from the last good one's TPOT, stopping where the excess is
    within TOLERANCE of 0."""
    # `hi` is past what the replica can reach (_ceiling): not worked out, its excess unknown.
    g_hi = math.inf
    lo, g_lo = 0.0, min(excess(idle), -TOLERANCE)
    best, guess, kept = None, 0.0, 0
    while hi - lo > TOLERANCE * hi:
        span = hi - lo
        x = lo + span / 2
        if math.isfinite(g_hi):
            # Where the line through the ends crosses 0, kept off the ends so that the bracket
            # shrinks every step.
            x = hi - g_hi * span / (g_hi - g_lo)
            x = min(max(x, lo + 0.05 * span), hi - 0.05 * span)
        p = at_rate(r, w, x, guess)
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
    )
    best = best or idle
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


def _load_point(r: Replica, w: Workload, share: float) -> tuple[Point, float]:
    """A replica at `share` of the workload's named load: the point, and its clients' TTFT."""
    if w.concurrency is not None:
        return at_concurrency(r, w, share * w.concurrency)
    p = at_rate(r, w, share * (w.rate or 0.0))
    return p, p.ttft_s


def serve(r: Replica, w: Workload) -> Serving:
    """How the option of replica `r` serves the workload `w`."""
    cap = capacity(r, w)
    copies, cards = r.copies, r.cards
    cap_rate = cap.rate * copies if cap else 0.0
    cap_conc = cap.admitted * copies if cap else 0.0
    load = w.load
    if load:
        unit = cap_conc if w.concurrency is not None else cap_rate
        replicas = max(1, math.ceil(load / unit * (1 - ROUNDING))) if unit > 0 else None
        spread = replicas or 1
        # The figures at the load, over `spread` replicas of the option; and whether one of them
        # alone meets the targets.
        point, ttft = _load_point(r, w, 1 / (copies * spread))
        if replicas is None:
            # No load at all is served within the targets: what one request alone misses.
            idle = _idle(r, w)
            misses = _misses(idle, idle.ttft_s, w, admits(r, w) >= 1) or [
                "its capacity within the targets is nil"
            ]
        elif spread == 1:
            misses = _misses(point, ttft, w, admits(r, w) >= 1)
        else:
            one, one_ttft = _load_point(r, w, 1 / copies)
            misses = _misses(one, one_ttft, w, admits(r, w) >= 1)
        if not point.stable:
            ttft = math.inf
        rate = point.rate * copies * spread if point.stable else 0.0
        concurrency = (
            w.concurrency if w.concurrency is not None else point.admitted * (copies * spread)
        )
        cards_per_load = cards * load / unit if unit > 0 else math.inf
        used = cards * spread
    else:
        replicas = 1 if cap else None
        point = cap or _idle(r, w)
        ttft = point.ttft_s
        misses = (
            []
            if cap
            else _misses(point, ttft, w, admits(r, w) >= 1)
            or ["its capacity within the targets is nil"]
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
        "arrivals queue for their prefill as Poisson arrivals do (M/D/1); steady state, means",
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
        "weights": t.memory,
        "kv": t.kv,
        "compute": t.compute + t.attention,
        "communication": t.link,
        "overhead": t.overhead + t.scheduling,
    }
