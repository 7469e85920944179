"""Disaggregated prefill and decode: one pool of workers prefills, another decodes, and each
request's KV cache moves between them.

A prefill worker (a replica of some layout) runs prompts only: its time goes to prefill batches
of up to its step budget, and a prompt waits for those ahead of it as an M/D/1 queue at the
prefill's share of the worker (plan/load.py `prefill_service`, the same figures the aggregated
model uses). Its capacity Rp is the largest request rate whose time to first token, with the KV
transfer and the decode worker's next step, meets the TTFT target.

A decode worker runs decode steps only: with B sequences decoding at I + O/2 tokens of context,
its step takes τ(B) (plan/load.py `decode_round`, with the pool's calibration) and, by Little's
law, it completes B / ((O − 1) τ(B)) requests a second. Its capacity Rd is that at the largest B
whose τ meets the TPOT target and that its batch and KV pool hold (`decode_admits`: the KV pool
is the concurrency limit, less what the engine's decode side reserves a request beside its
tokens; a prefill worker holds a request's KV only until it is read).

x prefill workers and y decode workers make one unit (xPyD); the unit serves min(x Rp, y Rd),
and x : y is chosen for the most served a card, so that neither pool starves the other.

The KV transfer of a request is its prompt's KV cache, layer kind by layer kind (a full or MLA
layer every prompt token, a sliding window at most its window, a linear or state-space layer its
state), as the decode worker's ranks hold it: the bytes one decode card receives (its KV heads'
share; an MLA latent is whole on every rank) and those one prefill card sends, over the link
between the pools (NVLink or the node's own link inside a node, the fabric's RDMA between nodes,
TCP where there is none), plus a base latency per request.

No engine is named here: an engine declares which pairs it launches (plan/layout.py
`PairRules`), and the planner asks it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llmfit.plan.layout import Layout, LayoutSpace, PairKind
from llmfit.plan.load import TOLERANCE, Replica, admits, prefill_service, round_seconds
from llmfit.plan.model import AttentionKind, Shape, dtype_bytes
from llmfit.plan.pools import ClassPool
from llmfit.plan.settings import Disagg, Workload

# Where no fabric joins the pools' nodes, the KV moves over the hosts' Ethernet by TCP (NIXL's
# UCX or Mooncake's TCP transport), taken as one 25 Gb/s port a node: an assumption, the common
# data-centre NIC of a node without RDMA; a fleet that says its fabric replaces it.
TCP_BANDWIDTH = 25e9 / 8
# What a transfer costs a request beside its bytes: the prefill's completion reaching the decode
# worker, the decode worker's read being posted and its completion noticed (vLLM's NixlConnector
# polls its transfers once a step, nixl/worker.py `get_finished`; SGLang's decode polls its
# queue each --disaggregation-decode-polling-interval steps, disaggregation/decode.py). An
# assumption of a few milliseconds over RDMA or NVLink, more over TCP's round trips.
BASE_LATENCY = {"node": 0.002, "rdma": 0.002, "tcp": 0.005}
# The most workers of each role a unit is searched over: past it, the ratio changes by less than
# the model's own error.
MOST_WORKERS = 8
# The layouts of each card class tried in each role: its best few at that role alone.
CANDIDATES = 4


def pair_kind(shape: Shape) -> PairKind:
    """What the engines' pair rules look at of a model."""
    kinds = {g.kind for g in shape.layer_groups}
    return PairKind(
        kv_heads=shape.kv_heads,
        mla=AttentionKind.MLA in kinds,
        hybrid=AttentionKind.LINEAR in kinds,
    )


def pair_refusal(
    name: str, space: LayoutSpace, prefill: Layout, decode: Layout, shape: Shape
) -> str | None:
    """Why engine `name` (its layout space) cannot launch this prefill layout with this decode
    one, as a sentence's end; None where it can."""
    if space.pairs is None:
        return f"{name} launches no disaggregated prefill and decode"
    why = space.pairs.refusal(prefill, decode, pair_kind(shape))
    return f"{name} cannot launch it: {why}" if why else None


@dataclass(frozen=True)
class Link:
    """The path a request's KV takes from a prefill card to a decode card."""

    kind: str  # "node" (the cards' own link inside a node), "rdma", "tcp"
    bandwidth: float  # bytes a second one way, one card's share
    latency_s: float
    name: str = ""  # in words: "NVLink", "the ib0 fabric's RDMA", "TCP"


def link_between(
    prefill: Replica, decode: Replica, same_node: bool, fabric: str | None, family: str = "nvlink"
) -> Link:
    """The link a unit's KV crosses: inside one node its cards' own link (`family`, the card's
    `CardSpec.link_family`: NVLink, Infinity Fabric, PCIe; the slower of the two pools'), between
    nodes the fabric's RDMA (one port a card, `SpeedInputs.fabric_bandwidth`), and TCP where the
    nodes share no fabric."""
    p, d = prefill.inputs, decode.inputs
    if same_node and p.link_bandwidth > 0 and d.link_bandwidth > 0:
        words = {"nvlink": "NVLink", "infinity-fabric": "Infinity Fabric"}
        return Link("node", min(p.link_bandwidth, d.link_bandwidth), BASE_LATENCY["node"],
                    words.get(family, "PCIe"))  # fmt: skip
    if fabric:
        bw = min(p.fabric_bandwidth, d.fabric_bandwidth)
        return Link("rdma", bw, BASE_LATENCY["rdma"], f"the {fabric} fabric's RDMA")
    return Link("tcp", TCP_BANDWIDTH, BASE_LATENCY["tcp"], "TCP")


@dataclass(frozen=True)
class Transfer:
    """One request's KV moved from the prefill pool to the decode pool."""

    bytes: int  # every decode card's together: what the link carries for the request
    per_decode_card: int  # what one decode card receives
    per_prefill_card: int  # what the busiest prefill card sends
    link: Link
    seconds: float  # base latency + the busier end's bytes over the link


def kv_transfer(
    shape: Shape, prompt: int, prefill_tp: int, decode_tp: int, link: Link, elem: float = 0.0
) -> Transfer:
    """The KV cache of a `prompt`-token request moved from a prefill worker of `prefill_tp`
    cards a stage to a decode worker of `decode_tp`.

    A decode card receives its own share, as it holds it (`LayerGroup.token_bytes` at the decode
    TP: KV heads split until one a rank, an MLA latent whole on every rank; a sliding window at
    most its window's tokens; a linear state split over the ranks). vLLM's NixlConnector reads a
    decode rank's heads from the prefill ranks that hold them, and an MLA latent from one prefill
    rank only (nixl/tp_mapping.py `compute_tp_mapping`); SGLang maps the ranks the same way
    (disaggregation/common/conn.py `_resolve_rank_mapping`). So a prefill card sends the decode
    worker's total over the prefill ranks, or, where the latent is whole on each rank, one
    decode card's bytes to each decode rank that reads from it."""
    elem = elem or dtype_bytes(shape.kv_dtype)
    per_card = 0.0
    whole = False
    for g in shape.layer_groups:
        if g.kind in (AttentionKind.FULL, AttentionKind.MLA):
            per_card += g.layers * g.token_bytes(elem, decode_tp) * prompt
            per_card += g.indexer_layers * g.indexer_bytes * prompt
            whole = whole or g.kind is AttentionKind.MLA
        elif g.kind is AttentionKind.SLIDING:
            per_card += g.layers * g.token_bytes(elem, decode_tp) * min(prompt, g.window)
        elif g.kind is AttentionKind.LINEAR:
            per_card += g.layers * -(-g.state_bytes // decode_tp)
    total = per_card * decode_tp
    sent = total / prefill_tp
    if whole:
        sent = max(sent, per_card)
    busiest = max(per_card, sent)
    seconds = link.latency_s + busiest / link.bandwidth
    return Transfer(int(total), int(per_card), int(sent), link, seconds)


@dataclass(frozen=True)
class PrefillWorker:
    """A prefill worker at a request rate."""

    rate: float  # requests a second
    service_s: float  # one prompt's prefill once its turn comes
    tokens_per_s: float  # prompt tokens a second it prefills with prompts waiting
    busy: float  # its share of time prefilling (ρ)
    wait_s: float  # a prompt's queueing before its turn (M/D/1)
    ttft_s: float  # to the first token at the client: fixed cost, wait, prefill, transfer, decode


def decode_admits(r: Replica, w: Workload, reserve: int = 0) -> float:
    """Requests a decode worker holds at once: `load.admits` (its batch, its KV pool at I + O/2
    tokens a request), where the engine's decode side keeps `reserve` more tokens of its pool
    free for each request it holds (`PairRules.decode_reserve`) as its pool at I + O/2 +
    `reserve` a request. SGLang's decode admits a transferred request only where its pool, less
    --num-reserved-decode-tokens (512) for each request running, queued or in transfer, holds the
    prompt and that many more (SGLang 0.5.23's disaggregation/decode.py
    `DecodePreallocQueue.pop_preallocated`, `_allocatable_token_budgets`,
    `_prealloc_required_tokens`): N requests at I + O/2 tokens each are held while N (I + O/2 +
    reserve) fit the pool; the rest wait on the decode side, their wait in the TTFT."""
    most = admits(r, w)
    if most < 1 or reserve <= 0 or not r.kv_tokens:
        return most
    return min(most, r.kv_tokens / (w.input_len + w.output_len / 2 + reserve))


@dataclass(frozen=True)
class DecodeWorker:
    """A decode worker at a request rate."""

    rate: float  # requests a second it completes
    batch: float  # sequences decoding
    tpot_s: float


def prefill_at(
    r: Replica, w: Workload, rate: float, transfer_s: float, decode_step_s: float,
    service: tuple[float, float] | None = None,
) -> PrefillWorker:  # fmt: skip
    """A prefill worker of replica `r` at `rate` requests a second: the prompt's wait (M/D/1 at
    the worker's share of time prefilling), its prefill, the KV transfer, and half a decode step
    (the decode worker takes the request in at its next step) besides the engine's fixed cost.
    `service`: `load.prefill_service(r, w, 0)`, where the caller has it already."""
    service_s, per_s = service or prefill_service(r, w, 0.0)
    rho = rate * w.input_len / per_s if per_s > 0 else math.inf
    wait = rho / (2 * (1 - rho)) * service_s if rho < 1 else math.inf
    k = r.inputs.constants
    ttft = k.ttft_s + wait + service_s + transfer_s + decode_step_s / 2
    return PrefillWorker(rate, service_s, per_s, rho, wait, ttft)


def prefill_capacity(
    r: Replica, w: Workload, transfer_s: float, decode_step_s: float,
    service: tuple[float, float] | None = None,
) -> PrefillWorker | None:  # fmt: skip
    """Rp: the most requests a second one prefill worker serves with the TTFT target met (the
    M/D/1 wait solved for it: ρ / (2 (1 − ρ)) × s = what the target leaves, a = that over s,
    ρ = 2a / (1 + 2a)); with no target, up to a busy share of 1 − TOLERANCE. None where one
    prompt alone misses the target."""
    service = service or prefill_service(r, w, 0.0)
    idle = prefill_at(r, w, 0.0, transfer_s, decode_step_s, service)
    if w.ttft_s is not None and idle.ttft_s > w.ttft_s:
        return None
    rho = 1 - TOLERANCE
    if w.ttft_s is not None and idle.service_s > 0:
        a = (w.ttft_s - idle.ttft_s) / idle.service_s
        rho = min(rho, 2 * a / (1 + 2 * a))
    rate = rho * idle.tokens_per_s / max(w.input_len, 1)
    return prefill_at(r, w, rate, transfer_s, decode_step_s, service)


def _tau(r: Replica, w: Workload, batch: float) -> float:
    """`decode_round`'s seconds alone: the search asks for thousands, never for their parts."""
    return round_seconds(r, max(batch, 1.0), w.input_len + w.output_len / 2)


def decode_at(r: Replica, w: Workload, rate: float, reserve: int = 0) -> DecodeWorker | None:
    """A decode worker at `rate` requests a second: the least batch B with B = rate (O − 1)
    τ(B), the steady state its batch reaches filling from empty; None where none is within what
    it admits. τ only grows with B but may jump (a batch past the largest captured CUDA graph
    runs eager), so B = rate (O − 1) τ(B) may have several roots, the least in a window too
    narrow near a capacity for a bracket to find: the batch is stepped as it fills, B ← rate
    (O − 1) τ(B) from 0, which never passes the least root (below it, τ(B) ≤ τ(B*)) and
    reaches it. `reserve`: `decode_admits`'."""
    decoding = max(w.output_len - 1, 1)
    most = decode_admits(r, w, reserve)
    if most < 1:
        return None
    b = 0.0
    for _ in range(100_000):
        nxt = rate * decoding * _tau(r, w, b)
        if nxt > most:
            return None
        if nxt - b <= 1e-9 * max(nxt, 1.0):
            b = nxt
            break
        b = nxt
    else:
        return None
    return DecodeWorker(rate, b, _tau(r, w, b))


def decode_capacity(r: Replica, w: Workload, reserve: int = 0) -> DecodeWorker | None:
    """Rd: the most requests a second one decode worker completes with the TPOT target met and
    its batch within what its batch size and KV pool admit: the largest such B (τ grows with
    B; bisection), and B / ((O − 1) τ(B)). None where one sequence alone misses the target or
    the worker cannot hold one request. `reserve`: `decode_admits`'."""
    most = decode_admits(r, w, reserve)
    if most < 1:
        return None
    target = w.tpot_s
    if target is not None and _tau(r, w, 1.0) > target:
        return None
    b = most
    if target is not None and _tau(r, w, most) > target:
        lo, hi = 1.0, most  # lo meets the target, hi misses it
        for _ in range(100):
            if hi - lo <= 1e-6 * hi:
                break
            mid = (lo + hi) / 2
            if _tau(r, w, mid) <= target:
                lo = mid
            else:
                hi = mid
        b = lo
    tau = _tau(r, w, b)
    return DecodeWorker(b / (max(w.output_len - 1, 1) * tau), b, tau)


@dataclass(frozen=True)
class Unit:
    """x prefill workers and y decode workers, and what they serve together at capacity."""

    prefill_workers: int
    decode_workers: int
    prefill_cards: int  # a worker's
    decode_cards: int
    rate: float  # requests a second the unit serves: min(x Rp, y Rd)

    @property
    def cards(self) -> int:
        return self.prefill_workers * self.prefill_cards + self.decode_workers * self.decode_cards

    @property
    def label(self) -> str:
        return f"{self.prefill_workers}P{self.decode_workers}D"


def match(rp: float, rd: float, prefill_cards: int, decode_cards: int,
          pinned: tuple[int, int] | None = None,
          room: Callable[[int, int], bool] | None = None) -> Unit | None:  # fmt: skip
    """The xPyD unit that serves the most requests a second a card, x and y each up to
    MOST_WORKERS and within `room` (the fleet's cards), or the pinned pair: neither pool left
    idle waiting for the other beyond what whole workers force. A tie goes to the fewer cards.
    None where either capacity is nil, or no unit fits."""
    if rp <= 0 or rd <= 0:
        return None
    pairs = [pinned] if pinned else []
    if not pinned:
        # For x prefill workers the served share a card rises with y while decode is the
        # lesser pool and falls after: the best y is one of the two whole numbers about
        # x Rp / Rd (within 1 and the most that fit).
        for x in range(1, MOST_WORKERS + 1):
            top = MOST_WORKERS
            while top >= 1 and room is not None and not room(x, top):
                top -= 1
            if top < 1:
                break
            y = x * rp / rd
            for cand in sorted({math.floor(y), math.ceil(y)}):
                pairs.append((x, min(max(cand, 1), top)))
        if not pairs:
            return None
    best, best_rate, best_cards, best_key = (0, 0), 0.0, 0, 0.0
    for x, y in pairs:
        rate = min(x * rp, y * rd)
        cards = x * prefill_cards + y * decode_cards
        key = rate / cards
        if key > best_key * (1 + 1e-9) or (key >= best_key * (1 - 1e-9) and cards < best_cards):
            best, best_rate, best_cards, best_key = (x, y), rate, cards, key
    return Unit(best[0], best[1], prefill_cards, decode_cards, best_rate)


@dataclass(frozen=True)
class Disaggregated:
    """A prefill layout × a decode layout, matched into a unit, at the workload."""

    unit: Unit
    transfer: Transfer
    prefill: PrefillWorker  # one prefill worker at the unit's rate over its x workers
    decode: DecodeWorker  # one decode worker at the unit's rate over its y workers
    prefill_capacity: float  # Rp
    decode_capacity: float  # Rd
    # Units the named load needs (1 where none is named); None where none serves it.
    units: int | None = 1
    # Requests a decode worker holds at once (`decode_admits`); 0 where not worked out.
    decode_holds: float = 0.0

    @property
    def ttft_s(self) -> float:
        return self.prefill.ttft_s

    @property
    def tpot_s(self) -> float:
        return self.decode.tpot_s

    @property
    def cards_per_rate(self) -> float:
        """Cards a request a second takes at the unit's capacity: the aggregated options'
        `Serving.cards_per_load` with no load named, so the two compare."""
        return self.unit.cards / self.unit.rate if self.unit.rate > 0 else math.inf

    def output_tokens_per_s_per_gpu(self, w: Workload) -> float:
        return self.unit.rate * w.output_len / self.unit.cards


def disaggregate(
    prefill: Replica,
    decode: Replica,
    w: Workload,
    shape: Shape,
    link: Link,
    pinned: tuple[int, int] | None = None,
    elem: float = 0.0,
    reserve: int = 0,
) -> Disaggregated | None:
    """A prefill replica's layout and a decode replica's, on `link`, at workload `w` (targets
    on the means): their capacities, the unit that matches them, and each pool's worker at the
    unit's rate. None where either alone misses its target with one request. `reserve`: what
    the engine's decode side keeps free a request (`decode_admits`)."""
    d = decode_capacity(decode, w, reserve)
    if d is None:
        return None
    transfer = kv_transfer(shape, w.input_len, prefill.inputs.tp, decode.inputs.tp, link, elem)
    idle_step = _tau(decode, w, 1.0)
    p = prefill_capacity(prefill, w, transfer.seconds, d.tpot_s)
    if p is None:
        return None
    unit = match(p.rate, d.rate, prefill.cards, decode.cards, pinned)
    if unit is None:
        return None
    at_d = decode_at(decode, w, unit.rate / unit.decode_workers, reserve)
    if at_d is None:
        return None
    at_p = prefill_at(prefill, w, unit.rate / unit.prefill_workers, transfer.seconds,
                      at_d.tpot_s if at_d.batch >= 1 else idle_step)  # fmt: skip
    units: int | None = 1
    if w.rate is not None:
        units = max(1, math.ceil(w.rate / unit.rate * (1 - 0.005)))
    elif w.concurrency is not None:
        # Requests in flight a unit holds at its capacity (Little's law over a request's life).
        held = unit.rate * (at_p.ttft_s + max(w.output_len - 1, 0) * at_d.tpot_s)
        units = max(1, math.ceil(w.concurrency / held * (1 - 0.005))) if held > 0 else None
    return Disaggregated(unit, transfer, at_p, at_d, p.rate, d.rate, units,
                         decode_admits(decode, w, reserve))  # fmt: skip


@dataclass(frozen=True)
class InFlight:
    """A unit with a number of requests in flight (a closed loop, `bench serve
    --max-concurrency`): its rate, and what a request sees."""

    rate: float  # requests a second the unit completes
    ttft_s: float  # at the client: the unit's, and the wait of those it does not hold
    tpot_s: float
    batch: float  # sequences a decode worker decodes


def at_concurrency(
    prefill: Replica, decode: Replica, w: Workload, shape: Shape, link: Link, unit: Unit,
    concurrency: float, reserve: int = 0,
) -> InFlight | None:  # fmt: skip
    """The unit with `concurrency` requests in flight: the rate R whose requests in the unit,
    R × (TTFT + (O − 1) τ) by Little's law, are the concurrency (found by bisection: both
    grow with R), each prefill worker at R / x and each decode worker at R / y. Where the unit
    cannot hold that many (its decode batch and KV pool, or its prefill keeping up), it runs at
    the most it holds and the rest wait outside (SGLang's on its decode side, for a place in its
    pool: `decode_admits` with `reserve`), their wait in the TTFT. None where it cannot hold one
    request."""
    transfer = kv_transfer(shape, w.input_len, prefill.inputs.tp, decode.inputs.tp, link)
    decoding = max(w.output_len - 1, 0)
    most = decode_admits(decode, w, reserve)
    if most < 1:
        return None
    _, per_s = prefill_service(prefill, w, 0.0)
    top_p = unit.prefill_workers * per_s / max(w.input_len, 1) * (1 - 1e-6)
    top_d = unit.decode_workers * most / (max(decoding, 1) * _tau(decode, w, most))
    top = min(top_p, top_d)

    def point(rate: float) -> tuple[float, float, float, float] | None:
        d = decode_at(decode, w, rate / unit.decode_workers, reserve)
        if d is None:
            return None
        p = prefill_at(prefill, w, rate / unit.prefill_workers, transfer.seconds, d.tpot_s)
        if not math.isfinite(p.ttft_s):
            return None
        return rate * (p.ttft_s + decoding * d.tpot_s), p.ttft_s, d.tpot_s, d.batch

    lo, hi = 0.0, top
    best = point(1e-9)
    if best is None:
        return None
    best_rate = 1e-9
    for _ in range(200):
        if hi - lo <= 1e-6 * hi:
            break
        mid = (lo + hi) / 2
        got = point(mid)
        if got is None or got[0] > concurrency:
            hi = mid
        else:
            lo, best, best_rate = mid, got, mid
    held, ttft, tpot, batch = best
    if held < concurrency * (1 - 1e-3) and best_rate > 0:
        # The rest wait outside for a place: Little's law again, at the rate it keeps.
        ttft += (concurrency - held) / best_rate
    return InFlight(best_rate, ttft, tpot, batch)


# Where a disaggregated option and the plan's best take the same cards, the disaggregated one
# wins only by serving more than this share more a card: the serving model is no truer than a
# few tens of per cent (docs/accuracy.md), and a gain within that is no reason to run two pools
# and move every request's KV.
WIN = 0.10


def beats(offer: Offer, best: Any, rank: str, w: Workload) -> bool:
    """Whether a disaggregated option beats the plan's best option by the plan's ranking, within
    the same targets (`--disagg auto` lists it only then).

    `serve` (the default): the fewer cards that serve the workload (the named load's units or
    replicas; with no load named, one of each: a unit of two pools is never fewer cards than the
    layouts it pairs), then, on as many cards, more than WIN more output a card. `throughput`:
    more than WIN more output tokens a second a card. Every other order (cards, concurrency,
    speed, latency of one request) is about one replica, which disaggregation does not improve.
    Where the plan's best serves nothing within the targets and this does, it wins. A what-if
    (fp8 weights or cache) is compared only with a best of the same what-if: the plan ranks the
    checkpoint as its authors shipped it first, and a pair of what-if layouts is no reason to
    change the model."""
    if offer.prefill.what_if != best.what_if:
        return False
    r = offer.result
    s = best.serving
    if s is None or s.replicas is None:
        return r.units is not None
    mine, theirs = r.output_tokens_per_s_per_gpu(w), _their_output(best, w)
    if rank == "throughput":
        return mine > theirs * (1 + WIN)
    if rank != "serve" or r.units is None:
        return False
    cards, their_cards = r.unit.cards * r.units, best.gpus * s.replicas
    return cards < their_cards or (cards == their_cards and mine > theirs * (1 + WIN))


@dataclass(frozen=True)
class Engines:
    """What the search needs of the engines, by key: their names and their layout spaces
    (the planner passes the registry's; plan/disagg.py imports no engine)."""

    names: dict[str, str]
    spaces: dict[str, LayoutSpace]


@dataclass(frozen=True)
class Offer:
    """One disaggregated option: a prefill option's layout for its workers, a decode option's
    for its, matched into a unit, against the best aggregated option on the same cards."""

    prefill: Any  # the Option whose layout, cards and launch the prefill workers take
    decode: Any  # the Option the decode workers take
    result: Disaggregated
    transport: str  # the engine's KV transfer ("NixlConnector")
    # The best aggregated option on the same card class(es), within the same targets, and how
    # many more requests a second a card the disaggregated one serves (0.25: 25 % more); None
    # where no aggregated option there meets the targets at all.
    aggregated: Any | None
    gain: float | None
    # Whether it beats the plan's best option by the plan's own ranking (`beats`).
    wins: bool = False


def _cards_per_rate(o: Any) -> float:
    s = o.serving
    return o.gpus / s.capacity_rate if s is not None and s.capacity_rate > 0 else math.inf


def _their_output(best: Any, w: Workload) -> float:
    """The plan's best option's output tokens a second a card at its capacity."""
    s = best.serving
    if w.load is None:
        return float(s.output_tokens_per_s_per_gpu)
    return float(s.capacity_rate * w.output_len / best.gpus) if best.gpus else 0.0


def _could_win(p: Any, unit: Unit, best: Any, rank: str, w: Workload) -> bool:
    """Whether a unit matched from capacities alone might beat the plan's best (`beats`), before
    its workers are worked out at its rate: the cards it needs at least, and its output a card,
    which the unit's rate gives."""
    if p.what_if != best.what_if:
        return False
    s = best.serving
    if s is None or s.replicas is None:
        return True
    if rank == "throughput":
        return unit.rate * w.output_len / unit.cards > _their_output(best, w) * (1 + WIN)
    if rank != "serve":
        return False
    least = math.ceil(w.rate / unit.rate * (1 - 0.005)) if w.rate is not None else 1
    return bool(unit.cards * max(least, 1) <= best.gpus * s.replicas)


def offers(
    options: Sequence[Any],
    w: Workload,
    shape: Shape,
    engines: Engines,
    nodes: dict[str, tuple[int, str | None, int]],
    pins: Disagg | None = None,
    every: bool = False,
    rank: str = "serve",
) -> list[Offer]:
    """The disaggregated options of a plan's (aggregated) options: for each engine that
    launches pairs, artifact and what-if, and each prefill card class × decode card class, the
    pair of their layouts the engine launches that serves the most a card (its xPyD matched),
    best first; under `every` (`--disagg on`) whether or not it wins, else only where it beats the
    plan's best option (`options[0]`, ranked by `rank`).

    `nodes`: each card class's most cards a node (a unit that fits one node moves its KV over the
    node's own link), the fabric its nodes share, if any, and its cards in all (`class_nodes`)."""
    pins = pins or Disagg()
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for o in options:
        s = o.serving
        # A worker is one copy on one node: an option of several copies (a dense model's data
        # parallel ranks) is its one-copy option times its copies, which the plan has too.
        if o.card is None or s is None or s.replica is None or o.nodes > 1 or s.replica.copies > 1:
            continue
        space = engines.spaces.get(o.engine)
        if space is None or space.pairs is None:
            continue
        key = (o.engine, o.artifact.name, o.what_if, o.engine_flags)
        groups.setdefault(key, []).append(o)
    best = options[0] if options else None
    served = best is not None and best.serving is not None and best.serving.replicas is not None
    if best is not None and not every and served and rank == "serve" and w.load is None:
        # With no load named the plan's best is one replica, and a unit is two workers at
        # least: where the fewest cards any two workers take are more, none can win.
        least = min((o.serving.replica.cards for m in groups.values() for o in m), default=0)
        if not least or 2 * least > best.gpus:
            return []
    if best is not None and not every and served and rank not in ("serve", "throughput"):
        # `beats` ranks by the plan's own order, and no other order is one disaggregation
        # improves: under --disagg auto nothing would be listed, so nothing is priced.
        return []
    # Under --disagg auto only a unit that might beat the plan's best is listed (`_could_win`):
    # a group or a pair of card classes none of whose units could is not priced at all (the
    # search is most of a cached plan's time). The most cards a unit may take and win, by serve:
    most_cards = None
    if best is not None and not every and served and rank == "serve":
        most_cards = int(best.gpus * best.serving.replicas)
    kind = pair_kind(shape)
    found: dict[tuple[Any, ...], tuple[float, Any, Any, Unit, Link]] = {}
    smallest: dict[tuple[str, str], int] = {}  # a pair of classes' fewest cards of two workers
    for key, members in groups.items():
        if best is not None and not every and key[2] != best.what_if:
            # Its what-if is not the plan's best's: `beats` never lists it.
            continue
        space = engines.spaces[key[0]]
        assert space.pairs is not None
        # Each class's few best layouts for each role: the most requests a second a card within
        # the targets for decode, the most prompt tokens a second a card for prefill (the plan
        # under --all holds hundreds of layouts, and every pair of them would take seconds).
        decodes: dict[str, list[tuple[float, Any, DecodeWorker]]] = {}
        prefills: dict[str, list[tuple[float, Any, tuple[float, float]]]] = {}
        # The card classes that may hold a winning unit in each role: a class whose fewest
        # cards a worker, beside every class's fewest in the other role, are past `most_cards` is
        # not priced (its candidates are its own best few, so the other classes' are the same).
        fewest: dict[str, int] = {}
        for o in members:
            fewest[o.gpu_class] = min(fewest.get(o.gpu_class, o.serving.replica.cards),
                                      o.serving.replica.cards)  # fmt: skip
        lowest = min(fewest.values())
        may = {c for c, n in fewest.items() if most_cards is None or n + lowest <= most_cards}
        for o in members:
            if o.gpu_class not in may:
                continue
            r = o.serving.replica
            if pins.decode_tp is None or o.tp == pins.decode_tp:
                cap = decode_capacity(r, w, space.pairs.decode_reserve)
                if cap is not None:
                    decodes.setdefault(o.gpu_class, []).append((-cap.rate / r.cards, o, cap))
            if pins.prefill_tp is None or o.tp == pins.prefill_tp:
                service = prefill_service(r, w, 0.0)
                prefills.setdefault(o.gpu_class, []).append((-service[1] / r.cards, o, service))
        chosen_d = [
            x for rows in decodes.values() for x in sorted(rows, key=lambda t: t[0])[:CANDIDATES]
        ]
        chosen_p = [
            x for rows in prefills.values() for x in sorted(rows, key=lambda t: t[0])[:CANDIDATES]
        ]
        if most_cards is not None:
            # A unit is one worker of each role at least, and the pair of classes keeps one
            # unit (the best a card): where even the smallest pair of a prefill class and a
            # decode class is past `most_cards`, whichever unit it keeps cannot win.
            smallest.clear()
            for _, p, _ in chosen_p:
                for _, d, _ in chosen_d:
                    both = p.serving.replica.cards + d.serving.replica.cards
                    classes = (p.gpu_class, d.gpu_class)
                    smallest[classes] = min(smallest.get(classes, both), both)
        for _, p, service in chosen_p:
            rp = p.serving.replica
            for _, d, dcap in chosen_d:
                if most_cards is not None and smallest[(p.gpu_class, d.gpu_class)] > most_cards:
                    continue
                if space.pairs.refusal(p.layout, d.layout, kind) is not None:
                    continue
                got = _pair(p, d, rp, d.serving.replica, dcap, w, shape, nodes, pins.xpyd,
                            service)  # fmt: skip
                if got is None:
                    continue
                unit, link = got
                where = (*key, p.gpu_class, d.gpu_class)
                score = unit.cards / unit.rate
                if where not in found or score < found[where][0]:
                    found[where] = (score, p, d, unit, link)
    out: list[Offer] = []
    for _, p, d, unit, link in found.values():
        if not every and not (options and _could_win(p, unit, options[0], rank, w)):
            continue
        pairs = engines.spaces[p.engine].pairs
        assert pairs is not None
        result = disaggregate(p.serving.replica, d.serving.replica, w, shape, link,
                              (unit.prefill_workers, unit.decode_workers),
                              kv_element(shape, d), pairs.decode_reserve)  # fmt: skip
        if result is None:
            continue
        # Against the aggregated options of the same engine, checkpoint and what-if on either
        # pool's card class.
        same = [
            o for o in options
            if o.gpu_class in (p.gpu_class, d.gpu_class) and o.engine == p.engine
            and o.artifact.name == p.artifact.name and o.what_if == p.what_if
            and o.engine_flags == p.engine_flags
            and o.serving is not None and o.serving.replicas is not None
        ]  # fmt: skip
        agg = min(same, key=_cards_per_rate, default=None)
        gain = None if agg is None else _cards_per_rate(agg) / result.cards_per_rate - 1
        offer = Offer(p, d, result, pairs.transport, agg, gain)
        offer = replace(offer, wins=bool(options) and beats(offer, options[0], rank, w))
        if every or offer.wins:
            out.append(offer)
    out.sort(key=lambda o: (o.result.cards_per_rate, o.result.unit.cards))
    return out


def kv_element(shape: Shape, o: Any) -> float:
    """The bytes of one KV element as option `o` keeps its cache: the shape's dtype scaled by
    what the option's own card pays a token (`Option.kv_per_token`, at its KV dtype: a what-if's
    fp8 cache is half a bf16 one) over what the shape's dtype would; the shape's own where
    either is unknown."""
    elem = dtype_bytes(shape.kv_dtype)
    plain = shape.kv_bytes_per_token(o.tp, o.pp)
    if plain <= 0 or o.kv_per_token <= 0:
        return elem
    return float(elem * o.kv_per_token / plain)


def class_nodes(pools: Sequence[ClassPool]) -> dict[str, tuple[int, str | None, int]]:
    """Each card class's most cards a node, the one fabric all its nodes are on (None where
    some are islands or they are on several), and its cards in all (a unit is never more)."""
    out: dict[str, tuple[int, str | None, int]] = {}
    for pool in pools:
        fabrics = {h.fabric for h in pool.hosts}
        one = fabrics.pop() if len(fabrics) == 1 else ""
        total = sum(h.gpus * h.count for h in pool.hosts)
        out[pool.gpu_class] = (pool.max_gpus, one or None, total)
    return out


def _pair(
    p: Any, d: Any, rp: Replica, rd: Replica, dcap: DecodeWorker, w: Workload, shape: Shape,
    nodes: dict[str, tuple[int, str | None, int]], pinned: tuple[int, int] | None,
    service: tuple[float, float] | None = None,
) -> tuple[Unit, Link] | None:  # fmt: skip
    """A prefill option and a decode option matched: first on the node's own link, and where
    the unit is more cards than a node holds (or the classes differ), on the fabric's RDMA (the
    two options' common fabric) or TCP."""
    family = p.card.spec.link_family if p.card.spec else "pcie"
    link = link_between(rp, rd, True, None, family)
    # A unit on no more cards than the fleet has of its classes.
    have_p, have_d = (
        nodes.get(p.gpu_class, (0, None, 0))[2],
        nodes.get(d.gpu_class, (0, None, 0))[2],
    )

    # `match` asks `room` dozens of times a pair: the cards a worker takes, counted once.
    pc, dc, same = rp.cards, rd.cards, p.gpu_class == d.gpu_class

    def room(x: int, y: int) -> bool:
        if same:
            return not have_p or x * pc + y * dc <= have_p
        return (not have_p or x * pc <= have_p) and (not have_d or y * dc <= have_d)

    while True:
        xfer = kv_transfer(
            shape, w.input_len, rp.inputs.tp, rd.inputs.tp, link, kv_element(shape, d)
        )
        pcap = prefill_capacity(rp, w, xfer.seconds, dcap.tpot_s, service)
        if pcap is None:
            return None
        unit = match(pcap.rate, dcap.rate, rp.cards, rd.cards, pinned, room)
        if unit is None:
            return None
        most, fabric, _ = nodes.get(p.gpu_class, (0, None, 0))
        if link.kind != "node" or (p.gpu_class == d.gpu_class and unit.cards <= most):
            return unit, link
        other = nodes.get(d.gpu_class, (0, None, 0))[1]
        link = link_between(rp, rd, False, fabric if fabric == other else None)
