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
  tokens (TPOT), and each step carries r I τ prompt tokens on average;
- τ is the step's own time at that batch and chunk (plan/speed.py round_time), so τ is a fixed
  point, found in a few secant steps;
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
from llmfit.plan.speed import Cost, SpeedInputs, Time, round_time, round_total, step, step_total

# A fixed point or a capacity is found to this share of itself: the model is no truer than
# a few per cent, and each step costs a walk over the replica's stages.
TOLERANCE = 0.01


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
    chunk: float  # prompt tokens a decode step carries on average


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
    prefill beside `batch` decoding sequences)."""
    inp, prompt = r.inputs, w.input_len
    if r.mixed:
        # The oldest waiting prompt takes what the decodes leave of the step's budget.
        room = max(r.budget - batch, 1.0)
        steps = math.ceil(prompt / room)
        t = round_total(inp, max(batch, 1.0), _mean_context(w), min(prompt, room), prompt / 2)
        return steps * t, room / max(t, 1e-12)
    # Prefill batches of their own: each carries up to the budget of prompt tokens.
    chunk = min(prompt, r.budget)
    steps = math.ceil(prompt / chunk)
    t = step_total(inp, 0.0, 0.0, chunk, prompt / 2)
    return steps * t, chunk / max(t, 1e-12)


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

    def tau_of(tau: float) -> float:
        b = rate * decoding * tau
        if r.mixed:
            return round_total(inp, max(b, 1.0), ctx, rate * prompt * tau, half)
        t = round_total(inp, max(b, 1.0), ctx)
        _, per_s = prefill_service(r, w, b)
        busy = rate * prompt / per_s  # the share of time prefill batches take
        return t / (1 - busy) if busy < 1 else math.inf

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
        return Point(rate, math.inf, math.inf, math.inf, math.inf, False, "prefill", 0.0)
    batch = rate * decoding * tau
    why = ""
    if batch > r.max_batch:
        why = "batch"
    elif r.kv_tokens and batch * ctx > r.kv_tokens:
        why = "KV cache"
    service, per_s = prefill_service(r, w, batch)
    rho = rate * prompt / per_s if per_s > 0 else math.inf
    if not why and rho >= 1:
        why = "prefill"
    if why:
        return Point(rate, batch, math.inf, tau, math.inf, False, why, 0.0)
    # An arrival waits for the step in flight, then for the prompts ahead (M/D/1 at the
    # prefill's share of the budget), then its own prefill; the engine's fixed cost besides.
    wait = rho / (2 * (1 - rho)) * service
    ttft = k.ttft_s + (tau if r.mixed else tau * (1 - rho)) / 2 + wait + service
    admitted = rate * (ttft + decoding * tau)
    return Point(rate, batch, admitted, tau, ttft, True, "", rate * prompt * tau)


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


def _search(r: Replica, w: Workload, ok: Callable[[Point], bool], hi: float) -> Point | None:
    """The point of the largest rate below `hi` at which `ok` holds (it holds at no load and,
    past some rate, never again), to TOLERANCE: bisection, each step's fixed point started from
    the last one's TPOT."""
    lo, best = 0.0, None
    guess = 0.0
    top = at_rate(r, w, hi)
    if ok(top):
        return top
    while hi - lo > TOLERANCE * hi:
        mid = (lo + hi) / 2
        p = at_rate(r, w, mid, guess)
        if ok(p):
            lo, best, guess = mid, p, p.tpot_s
        else:
            hi = mid
    return best


def _within(p: Point, w: Workload, admitted: float) -> bool:
    return (
        p.stable
        and p.admitted <= admitted * (1 + TOLERANCE)
        and (w.tpot_s is None or p.tpot_s <= w.tpot_s)
        and (w.ttft_s is None or p.ttft_s <= w.ttft_s)
    )


def capacity(r: Replica, w: Workload) -> Point | None:
    """The most one replica serves within the workload's targets, at the point it does; None
    when even one request alone misses them (or the replica cannot hold one)."""
    limit = admits(r, w)
    idle = _idle(r, w)
    if limit < 1 or not _within(idle, w, limit):
        return None
    return _search(r, w, lambda p: _within(p, w, limit), _ceiling(r, w, idle)) or idle


def at_concurrency(r: Replica, w: Workload, concurrency: float) -> tuple[Point, float]:
    """One replica with `concurrency` requests in flight (a closed loop), and the TTFT its
    clients see: the engine's, and the wait of those it does not admit."""
    held = min(concurrency, admits(r, w))
    idle = _idle(r, w)
    if held <= 0:
        return replace(idle, stable=False, why="KV cache"), math.inf
    # The rate whose requests in the replica are `held` (past the largest it keeps up with,
    # queueing would fill any number).
    best = _search(r, w, lambda p: p.stable and p.admitted <= held, _ceiling(r, w, idle))
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
        if w.tpot_s is not None and p.tpot_s > w.tpot_s:
            out.append(f"TPOT {_ms(p.tpot_s)} over {_ms(w.tpot_s)}")
        if w.ttft_s is not None and ttft > w.ttft_s:
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
        replicas = max(1, math.ceil(load / unit * (1 - TOLERANCE))) if unit > 0 else None
        spread = replicas or 1
        # The figures at the load, over `spread` replicas of the option; and whether one of them
        # alone meets the targets.
        point, ttft = _load_point(r, w, 1 / (copies * spread))
        if spread == 1:
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
    read, KV read, compute (overlapping the reads: the larger of the two counts), communication
    and fixed overhead (the kernels' and the engine's own)."""
    return {
        "weights": t.memory,
        "kv": t.kv,
        "compute": t.compute,
        "communication": t.link,
        "overhead": t.overhead + t.scheduling,
    }
