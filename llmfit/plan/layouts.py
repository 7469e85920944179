"""The layout space, shared by the engines: which layouts to try on a class of cards, and which
of those that fit to show.

An engine says which sizes it accepts (the tensor-parallel widths, whether it splits stages
within a node, whether it runs data-parallel ranks or independent servers, how a node is used
when a replica spans several) and how to size one layout; the search here walks the space on each
GPU class and fabric and keeps, of the layouts that fit, the ones no other beats: fewer cards, or
fewer nodes, or more sequences held at the asked context. It always keeps the narrowest fit, the
whole-node layout and, where the model fits fewer cards than a node has, the replicated layout
that fills the node: the three a user weighs against each other first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from llmfit.plan.layout import Layout, LayoutSpace
from llmfit.plan.load import Replica, Serving
from llmfit.plan.options import PerCard
from llmfit.plan.pools import ClassPool, Seats
from llmfit.plan.settings import Pins
from llmfit.plan.speed import Speed


def powers_of_two(limit: int) -> list[int]:
    out, n = [], 1
    while n <= limit:
        out.append(n)
        n *= 2
    return out


@dataclass(frozen=True)
class Sized:
    """What one layout costs its fullest card, and what it holds."""

    per_card: PerCard
    have: int
    # Sequences of the asked context held at once, over every rank and replica.
    held: float
    # The longest single sequence it holds.
    max_context: int
    # KV bytes one more token costs the fullest card, and the tokens one rank's pool holds.
    kv_per_token: int = 0
    kv_tokens: int = 0
    # What the engine needs to keep of the sizing (its estimate, its placement).
    extra: object = None
    # How fast it runs (plan/speed.py's Speed); None where the card's speed is not known.
    speed: Speed | None = None
    # The engine's own verdict where it checks more than need against have (vLLM's start-up
    # check of one request at max_model_len); None: need ≤ have.
    fits: bool | None = None
    # Why the engine would refuse the layout whatever the memory, in its words (vLLM's batched
    # tokens below its sequences a step); None where it takes it.
    refusal: str | None = None
    # One replica as the serving model sees it (plan/load.py), and how it serves the plan's
    # workload: worked out for the layouts that fit (`served`), not for every one tried.
    replica: Replica | None = None
    serving: Serving | None = None

    @property
    def fits_memory(self) -> bool:
        if self.refusal is not None:
            return False
        return self.per_card.need <= self.have if self.fits is None else self.fits


@dataclass(frozen=True)
class Spot:
    """A layout on a class of cards: on one node (fabric "") or across nodes of one fabric."""

    layout: Layout
    fabric: str
    seats: Seats


@dataclass(frozen=True)
class Tried:
    """A layout placed on cards and sized by the engine's memory model."""

    spot: Spot
    sized: Sized


@dataclass(frozen=True)
class Space:
    """The sizes an engine accepts on a class of cards."""

    # Tensor-parallel widths it accepts (already checked against the model: heads, blocks).
    widths: tuple[int, ...]
    # Pipeline stages within one node (1 always; vLLM also 2, 4, …; llama.cpp's layer split k).
    stages: tuple[int, ...]
    # Data-parallel ranks (or independent servers) within one node, beside 1.
    ranks: tuple[int, ...]
    # Whether the model is a mixture of experts (its ranks share one set of experts).
    moe: bool
    # The most pipeline stages a replica can have: one layer each.
    layers: int
    # Whether a MoE's cards use expert parallelism (None: on wherever it spans several cards).
    ep: bool | None = None
    # Across nodes: how many stages each node runs at width tp (vLLM 1: a node's cards are one
    # stage; llama.cpp: each card a stage), or None where the engine spans no nodes.
    stages_per_node: Callable[[int, int], int] | None = None
    # Across nodes, a MoE's data-parallel ranks with expert parallelism (DeepSeek's way).
    ranks_across_nodes: bool = False
    # What the engine can launch at all (its declaration): no layout outside it is tried.
    launches: LayoutSpace = LayoutSpace(
        tensor=True, pipeline=True, data=True, experts=True, replicas=True,
        across_nodes=frozenset({"pipeline", "data"}),
    )  # fmt: skip

    @classmethod
    def of(cls, launches: LayoutSpace, **sizes: object) -> Space:
        """The search space of an engine that can launch `launches`: the sizes it is given,
        less the dimensions it cannot launch."""
        space = cls(launches=launches, **sizes)  # type: ignore[arg-type]
        if not launches.tensor:
            space = replace(space, widths=tuple(w for w in space.widths if w == 1))
        if not launches.pipeline:
            space = replace(space, stages=(1,))
        if not launches.data:
            space = replace(space, ranks=())
        if not launches.experts:
            space = replace(space, ep=False)
        if "pipeline" not in launches.across_nodes:
            space = replace(space, stages_per_node=None)
        if "data" not in launches.across_nodes:
            space = replace(space, ranks_across_nodes=False)
        return space


def _ep(space: Space, spread: int) -> bool:
    """Whether a MoE's layout runs expert parallelism: where its experts are spread over more
    than one card (`spread`: its tensor × data-parallel ranks; each pipeline stage keeps its own
    layers' experts, so a pipeline of one card a stage spreads none, and the engine's flag would
    do nothing), unless the user said (--ep / --no-ep)."""
    if not space.moe:
        return False
    return spread > 1 if space.ep is None else space.ep


def node_layouts(space: Space, width: int, stages_asked: bool = False) -> list[Layout]:
    """Every layout of the space within one node of `width` cards (`stages_asked`: a number of
    pipeline stages was pinned, so stages are tried where tensor parallelism could take them)."""
    out = []
    for tp in space.widths:
        for pp in space.stages:
            if tp * pp > width or pp > space.layers:
                continue
            if (
                pp > 1
                and not stages_asked
                and any(w > tp and tp * pp % w == 0 for w in space.widths)
            ):
                # Stages within a node only where tensor parallelism cannot take those cards
                # (a width the heads or the quantisation blocks refuse), and then at the widest
                # width it can: where it can, it splits every layer instead of queueing them,
                # and no memory figure tells the two apart.
                continue
            for dp in (1, *space.ranks):
                cards = tp * pp * dp
                if cards > width or (dp > 1 and pp > 1):
                    continue
                ep = _ep(space, tp * dp)
                if dp > 1 and space.moe and not ep and not space.launches.experts:
                    # An engine without expert parallelism has no ranks that share a MoE's
                    # experts (llama.cpp's copies are whole servers): not tried. vLLM's and
                    # SGLang's ranks without it share them, each expert cut over all tp × dp
                    # cards (vLLM: fused_moe/config.py FusedMoEParallelConfig.make flattens
                    # dp × tp into the MoE's tp; SGLang: moe_tp_size = tp_size // ep_size).
                    continue
                replicas = 1 if space.moe else dp
                layout = Layout(tp, pp, dp, ep, 1, replicas)
                if space.launches.refusal(layout) is None:
                    out.append(layout)
    return out


def search(
    pool: ClassPool,
    space: Space,
    size: Callable[[Layout], Sized],
    *,
    pins: Pins,
    target: float | None,
) -> tuple[list[Tried], list[Tried]]:
    """Size the space's layouts on a class of cards: (those that fit, those that do not).

    Within one node first. Across the nodes of one fabric only where no node of the class holds
    a replica that fits (one node beats saving cards across a fabric, and a replica over two
    fabrics would hang on its first all-reduce rather than fail to start), or where the pins ask
    for more than a node has. Across nodes, the fewest nodes that fit (and hold `target`
    sequences) are found for each width, scanning up to one stage a layer, never a node at a
    time over a whole fleet.
    """
    fits: list[Tried] = []
    misses: list[Tried] = []

    def ok(s: Sized) -> bool:
        return s.fits_memory and (target is None or s.held >= target)

    widest = pool.max_gpus
    for layout in node_layouts(space, widest, stages_asked=pins.pp is not None):
        if not pins.allows(layout):
            continue
        tried = Tried(Spot(layout, "", pool.seats(layout.cards, 1)), size(layout))
        (fits if ok(tried.sized) else misses).append(tried)
    if fits or pool.mig or space.stages_per_node is None:
        return fits, misses
    for fabric in pool.fabrics():
        if not fabric:
            continue
        fits += _across(pool, space, size, fabric, pins, ok, misses)
    return fits, misses


def _across(
    pool: ClassPool,
    space: Space,
    size: Callable[[Layout], Sized],
    fabric: str,
    pins: Pins,
    ok: Callable[[Sized], bool],
    misses: list[Tried],
) -> list[Tried]:
    assert space.stages_per_node is not None
    out: list[Tried] = []
    widest = pool.widest(fabric)
    for tp in reversed(space.widths):
        if tp > widest:
            continue
        per_node = space.stages_per_node(tp, widest)
        nodes = pool.seats(tp * per_node, 1, fabric).hosts
        most = min(nodes, max(space.layers // per_node, 1))
        candidates: list[tuple[int, Layout]] = []
        for m in range(2, most + 1):
            layout = Layout(tp, per_node * m, 1, _ep(space, tp), m, 1)
            if not pins.allows(layout) and pins.pp is None and pins.gpus is None:
                break
            if pins.allows(layout) and space.launches.refusal(layout) is None:
                candidates.append((m, layout))
        cards = tp * per_node

        def on(m: int, lay: Layout, cards: int = cards) -> Tried:
            return Tried(Spot(lay, fabric, pool.seats(cards, m, fabric)), size(lay))

        found, last = _fewest(candidates, on, ok)
        if found is not None:
            out.append(found)
        if last is not None and tp == max(w for w in space.widths if w <= widest):
            # The nearest miss across nodes is the widest one's: narrower widths on as many
            # nodes only need more of each card.
            misses.append(last)
        if space.ranks_across_nodes and space.moe:
            out += _ranks_across(pool, space, size, fabric, pins, ok, tp)
    return out


def _ranks_across(
    pool: ClassPool,
    space: Space,
    size: Callable[[Layout], Sized],
    fabric: str,
    pins: Pins,
    ok: Callable[[Sized], bool],
    tp: int,
) -> list[Tried]:
    """A MoE's data-parallel ranks with expert parallelism over m nodes: the fewest m that fit."""
    widest = pool.widest(fabric)
    per_node = widest // tp
    nodes = pool.seats(widest, 1, fabric).hosts
    candidates = [
        (m, layout)
        for m in range(2, min(nodes, space.layers) + 1)
        if pins.allows(layout := Layout(tp, 1, per_node * m, True, m, 1))
        and space.launches.refusal(layout) is None
    ]
    found, _ = _fewest(
        candidates,
        lambda m, lay: Tried(Spot(lay, fabric, pool.seats(widest, m, fabric)), size(lay)),
        ok,
    )
    return [found] if found is not None else []


def _fewest(
    candidates: list[tuple[int, Layout]],
    tried: Callable[[int, Layout], Tried],
    ok: Callable[[Sized], bool],
) -> tuple[Tried | None, Tried | None]:
    """The first of `candidates` (node counts, fewest first) that fits, and the nearest miss
    when none does (the most nodes).

    More nodes of a layout hold no more per card (its stages or ranks only split further), so
    what fits is a run at the end. The first and the last are sized; then counts one, two, four,
    … past the first, and the boundary between the last miss and the first fit is halved.
    Sizing every count in turn cost a plan whose context fits nowhere (--context 1e9 on 1,000
    nodes) one sizing a node count, 40 to 160 s; this is two, and a few more (the logarithm of
    the count) where something fits."""
    if not candidates:
        return None, None
    first = tried(*candidates[0])
    if ok(first.sized):
        return first, None
    last = tried(*candidates[-1]) if len(candidates) > 1 else first
    if not ok(last.sized):
        return None, last
    lo, hi, best = 0, len(candidates) - 1, last  # candidates[lo] misses, candidates[hi] fits
    step = 1
    while lo + step < hi:  # galloping: the fewest nodes are most often near the first
        t = tried(*candidates[lo + step])
        if ok(t.sized):
            hi, best = lo + step, t
            break
        lo, step = lo + step, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = tried(*candidates[mid])
        if ok(t.sized):
            hi, best = mid, t
        else:
            lo = mid
    return best, None


def select(
    fits: Iterable[Tried], width: int, every: bool = False
) -> tuple[list[Tried], list[tuple[Tried, Tried]]]:
    """The layouts to show of those that fit on one class (and fabric): (kept, [(dropped, by)]).

    Kept: every layout no other beats on cards, nodes, sequences held, the load served within the
    workload's targets and the time of a token (fewer, fewer, more, more, less; one beats another
    when it is no worse on all and better on one; see `_beats`), and always the
    narrowest fit, the whole-node layout (a node's cards, the fewest nodes) and the replicated
    layout that fills one node. `every` keeps them all (`--all`).
    """
    fits = list(fits)
    if every or len(fits) <= 1:
        return fits, []

    def key(t: Tried) -> tuple[int, int, float]:
        return (t.spot.layout.cards, t.spot.layout.nodes, -t.sized.held)

    by_key = sorted(fits, key=key)
    always = {id(by_key[0])}
    whole = [t for t in by_key if t.spot.layout.cards_per_node == width and t.spot.layout.dp == 1]
    if whole:
        always.add(id(whole[0]))
    fill = [
        t
        for t in by_key
        if t.spot.layout.nodes == 1 and t.spot.layout.cards == width and t.spot.layout.dp > 1
    ]
    if fill and by_key[0].spot.layout.cards < width:
        always.add(id(max(fill, key=lambda t: t.spot.layout.dp)))
    kept: list[Tried] = []
    dropped: list[tuple[Tried, Tried]] = []
    for t in by_key:
        beaten = next((k for k in kept if _beats(k, t)), None)
        if beaten is None:
            beaten = next((o for o in by_key if o is not t and _beats(o, t)), None)
        if beaten is None or id(t) in always:
            kept.append(t)
        else:
            dropped.append((t, beaten))
    return kept, dropped


def _sig(x: float) -> float:
    """To 3 significant figures: a difference past what the model can tell is none."""
    return float(f"{x:.3g}")


def _beats(a: Tried, b: Tried) -> bool:
    """Whether `a` dominates `b`: no more cards or nodes, at least as many sequences held, a
    unit of the workload's load within its targets costing no more cards, no slower for one
    sequence, and better on one of them; a layout slower and no cheaper than another on the same
    cards is not shown. Speeds count only where both are known. (A token's time at the
    workload is not a measure of its own: within the targets every layout's is near them.)"""
    la, lb = a.spot.layout, b.spot.layout
    ca, cb = a.sized.held, b.sized.held
    sa, sb = a.sized.speed, b.sized.speed
    va = _sig(sa.decode_tokens_per_s) if sa and sb else 0.0
    vb = _sig(sb.decode_tokens_per_s) if sa and sb else 0.0
    wa, wb = a.sized.serving, b.sized.serving
    both = wa is not None and wb is not None
    # What a unit of load served within the targets costs in cards (less is better: more served a
    # card), and a token's time at the workload.
    qa = -_sig(wa.cards_per_load) if both and wa and math.isfinite(wa.cards_per_load) else 0.0
    qb = -_sig(wb.cards_per_load) if both and wb and math.isfinite(wb.cards_per_load) else 0.0
    if both and wa and wb and math.isfinite(wa.cards_per_load) != math.isfinite(wb.cards_per_load):
        qa, qb = (0.0, -math.inf) if math.isfinite(wa.cards_per_load) else (-math.inf, 0.0)
    no_worse = (la.cards <= lb.cards and la.nodes <= lb.nodes and ca >= cb and va >= vb
                and qa >= qb)  # fmt: skip
    better = la.cards < lb.cards or la.nodes < lb.nodes or ca > cb or va > vb or qa > qb
    # Equal on all: the simpler layout (fewer pipeline stages, fewer ranks) stands for both.
    same = (la.cards == lb.cards and la.nodes == lb.nodes and ca == cb and va == vb
            and qa == qb)  # fmt: skip
    simpler = (la.pp, la.dp, not la.ep) < (lb.pp, lb.dp, not lb.ep)
    if no_worse and (better or (same and simpler)):
        return True
    # Copies of a replica (a dense model's data-parallel ranks) are that many replicas of a
    # narrower layout: where a unit of load costs no more cards on it, the narrower one stands
    # for them (its Best block says how many replicas a load needs).
    copies = lb.replicas > la.replicas >= 1 and lb.replicas == lb.dp and la.replicas == la.dp
    return copies and (la.tp, la.pp, la.nodes) == (lb.tp, lb.pp, lb.nodes) and both and qa >= qb
