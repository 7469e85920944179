"""The shared layout search (plan/layouts.py), tested directly: a pool of cards, a space of sizes,
and a sizing rule a test can redo by hand, with no engine's memory model in the way.

The sizing here: a model of 64 layers whose weights are 100 units, split evenly over a layout's
cards; a card holds 40 units; what a card has left holds sequences, 1 unit each. A layout fits
where its card's share of the weights is at most 40.
"""

from __future__ import annotations

from llmfit.plan.fleet import Fleet, PoolKind, PoolNode
from llmfit.plan.layout import ACROSS, Layout, LayoutSpace
from llmfit.plan.layouts import Sized, Space, search, select
from llmfit.plan.options import PerCard
from llmfit.plan.pools import class_pools
from llmfit.plan.settings import Pins

CARD = 40
WEIGHTS = 100


def size(layout: Layout) -> Sized:
    share = -(-WEIGHTS // (layout.tp * layout.pp))
    left = max(CARD - share, 0)
    return Sized(PerCard(share, 0, 0), CARD, held=float(left * layout.dp), max_context=left)


def pool(nodes: int, gpus: int, fabric: str = ""):
    node = PoolNode("n", (PoolKind("x", CARD, gpus, gpus),), fabric, count=nodes)
    (p,) = class_pools(Fleet((node,)))
    return p


EVERYTHING = LayoutSpace(
    tensor=True, pipeline=True, data=True, experts=True, replicas=True,
    across_nodes=frozenset(ACROSS),
)  # fmt: skip


def space(launches: LayoutSpace = EVERYTHING, moe: bool = False) -> Space:
    return Space.of(
        launches, widths=(1, 2, 4, 8), stages=(1, 2, 4, 8), ranks=(2, 4, 8), moe=moe, layers=64,
        stages_per_node=lambda tp, width: 1, ranks_across_nodes=True,
    )  # fmt: skip


def test_within_a_node_every_layout_is_tried_and_those_that_fit_are_kept():
    fits, misses = search(pool(1, 8), space(), size, pins=Pins(), target=None)
    # 100 units fit no card alone (40) and two (50 each) neither: from 4 cards on.
    assert {t.spot.layout for t in misses} >= {Layout(1), Layout(2)}
    got = {(t.spot.layout.tp, t.spot.layout.pp, t.spot.layout.dp) for t in fits}
    # tp 4 and 8; tp 4 with 2 copies (a dense model's data-parallel ranks); pipeline stages only
    # where tensor parallelism cannot take the cards (never here: every width is allowed).
    assert got == {(4, 1, 1), (8, 1, 1), (4, 1, 2)}


def test_a_space_without_pipeline_or_ranks_offers_neither():
    only_tp = LayoutSpace(tensor=True)
    fits, _ = search(pool(2, 8, "ib0"), space(only_tp), size, pins=Pins(), target=None)
    assert {t.spot.layout for t in fits} == {Layout(4), Layout(8)}


def test_across_nodes_only_where_no_node_holds_it():
    # Nodes of 2 cards: none holds 100 units (50 a card). For each width, the fewest nodes that
    # fit, one stage a node: tp 2 over 2 nodes (25 a card), tp 1 over 3 (34 a card).
    fits, _ = search(pool(4, 2, "ib0"), space(), size, pins=Pins(), target=None)
    assert {t.spot.layout for t in fits} == {
        Layout(2, 2, 1, False, 2, 1),
        Layout(1, 3, 1, False, 3, 1),
    }
    # Without a fabric the nodes are islands: nothing spans them.
    fits, _ = search(pool(4, 2), space(), size, pins=Pins(), target=None)
    assert fits == []


def test_a_pin_keeps_only_its_layouts_and_a_target_its_sequences():
    fits, _ = search(pool(1, 8), space(), size, pins=Pins(tp=8), target=None)
    assert {t.spot.layout for t in fits} == {Layout(8)}
    # tp 4 holds 40 − 25 = 15 sequences, tp 8 holds 40 − 13 = 27; at least 20 asked: tp 8, and
    # tp 4 × 2 copies (30).
    fits, misses = search(pool(1, 8), space(), size, pins=Pins(), target=20)
    assert {t.spot.layout for t in fits} == {Layout(8), Layout(4, 1, 2, False, 1, 2)}
    assert Layout(4) in {t.spot.layout for t in misses}


def test_select_keeps_what_no_other_beats_and_the_three_a_user_weighs_first():
    fits, _ = search(pool(1, 8), space(), size, pins=Pins(), target=None)
    kept, dropped = select(fits, width=8)
    # tp 4 (the narrowest fit), tp 8 (the whole node), tp 4 × 2 (the copies that fill it): none
    # beats another on cards, sequences and speed at once.
    assert {t.spot.layout for t in kept} == {Layout(4), Layout(8), Layout(4, 1, 2, False, 1, 2)}
    assert dropped == []
    everything, none = select(fits, width=8, every=True)
    assert len(everything) == len(fits) and none == []
