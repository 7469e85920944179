"""Pools as counts (issue 17): a pool of N identical nodes is one PoolNode with a count, planned and
summarised exactly as the N nodes it stands for, and at N = 10^12 as fast as at N = 2."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmfit.plan.engines.vllm_options import VllmOptions
from llmfit.plan.fleet import GIB, Fleet, PoolKind, PoolNode
from llmfit.plan.fleet_summary import summarize
from llmfit.plan.planner import PlanSettings, plan
from llmfit.sources.repo import load_repo
from tests.conftest import HUB
from tests.plan.test_llamacpp import llama8b, plan_file

H100 = PoolKind("h100-80g", 85_045_477_376, 8, 8)
BUSY = PoolKind("h100-80g", 85_045_477_376, 8, 2)


def expanded(fleet: Fleet) -> Fleet:
    """The same fleet with every pool written out node by node, as it was before counts."""
    nodes = tuple(
        replace(n, id=n.node_id(i), count=1, first=0) for n in fleet.nodes for i in range(n.count)
    )
    return replace(fleet, nodes=nodes)


def test_node_ids_are_made_on_demand():
    pool = PoolNode("h100", (H100,), count=10**12, first=1)
    assert pool.node_id(0) == "h100-1"
    assert pool.node_id(10**12 - 1) == "h100-1000000000000"
    assert pool.node_ids(3) == ("h100-1", "h100-2", "h100-3")
    one = PoolNode("box", (H100,))
    assert (one.node_id(0), one.node_ids()) == ("box", ("box",))
    fleet = Fleet((PoolNode("a", (H100,), count=2, first=1), one, pool))
    assert fleet.node_ids(4) == ("a-1", "a-2", "box", "h100-1")
    assert (fleet.node_count, fleet.gpus) == (10**12 + 3, 8 * (10**12 + 3))


@pytest.fixture(scope="module")
def deepseek():
    return load_repo("deepseek-ai/DeepSeek-V3", HUB, offline=True)


# Busy nodes first on the fabric, so that a multi-node option must pick the free ones further on,
# and a pool beside single nodes, so that ids come from both.
FLEET = Fleet(
    (
        PoolNode("busy", (BUSY,), "ib0", 1024 * GIB, 1024 * GIB, count=3, first=1),
        PoolNode("odd", (H100,), "ib0", 1024 * GIB, 1024 * GIB),
        PoolNode("free", (H100,), "ib0", 1024 * GIB, 1024 * GIB, count=2, first=4),
        PoolNode("island", (H100,), "", 512 * GIB, 512 * GIB, count=3, first=1),
        PoolNode("cpu", (), "", 768 * GIB, 700 * GIB, count=2, first=1),
    )
)


@pytest.mark.parametrize("context", [8192, 163_840])
def test_a_counted_fleet_plans_as_the_nodes_it_stands_for(deepseek, context):
    settings = PlanSettings(context=context)
    counted = plan(deepseek.model, deepseek.artifacts, FLEET, settings)
    one_by_one = plan(deepseek.model, deepseek.artifacts, expanded(FLEET), settings)
    assert counted.options and counted.options == one_by_one.options
    assert counted.rejected == one_by_one.rejected
    # A layout that takes whole nodes lands on the free ones: odd, then free-4, free-5, never a
    # busy node (2 of 8 cards free), when enough are free.
    multi = [o for o in counted.options if o.nodes > 1 and o.gpus_per_node == 8]
    assert multi and multi[0].free_now
    assert multi[0].node_ids[:3] == ("odd", "free-4", "free-5")[: multi[0].nodes]


def test_a_counted_fleet_summarises_as_its_nodes():
    assert summarize(FLEET) == summarize(expanded(FLEET))


@pytest.mark.parametrize("card", [2 * GIB, 1 * GIB])
def test_rpc_over_a_counted_pool_is_the_rpc_over_its_nodes(tmp_path, card):
    """2 GiB cards: Llama 8B needs several one-card nodes over RPC; 1 GiB cards: no number of
    them holds it (the output layer alone is too big), which the search must find without
    trying every node of the pool."""
    path = llama8b(tmp_path)
    kind = PoolKind("x-card", card, 1, 1)
    pool = PoolNode("n", (kind,), "ib0", 64 * GIB, 64 * GIB, count=40, first=1)
    counted = plan_file(path, [pool], 8192)
    one_by_one = plan_file(path, list(expanded(Fleet((pool,))).nodes), 8192)
    assert counted.options == one_by_one.options
    assert counted.unplaced == one_by_one.unplaced
    assert any(o.nodes > 1 for o in counted.options) == (card == 2 * GIB)
    huge = plan_file(path, [replace(pool, count=10**12)], 8192)
    assert [(o.nodes, o.hosts) for o in huge.options] == [
        (o.nodes, 10**12) for o in counted.options
    ]


def test_10_to_the_12_nodes_plan_at_once(deepseek):
    pool = PoolNode("h100", (H100,), "ib0", 2048 * GIB, 2048 * GIB, count=10**12, first=1)
    p = plan(deepseek.model, deepseek.artifacts, Fleet((pool,)),
             PlanSettings(context=8192, rank="cards").with_options(
                 VllmOptions(version="0.33")))  # fmt: skip
    # The fewest cards (--rank cards): eleven, one pipeline stage a node (TP 2 over five stages,
    # ten cards, no longer holds: each stage keeps its MoE workspace, 8,192 tokens × 8 experts
    # × (7,168 + 7,168) × 2 B = 1.75 GiB, and a stage after the first its 0.22 GiB of received
    # activations, which the fullest stage lacks at 0.90 of the card); the whole-node layouts
    # follow. Every option counts the whole pool as hosts and takes its nodes from the start
    # of it.
    first = p.options[0]
    assert (first.hosts, first.nodes, first.gpus_per_node, first.free_now) == (10**12, 11, 1, True)
    assert (first.layout.tp, first.layout.pp) == (1, 11)
    assert first.node_ids == tuple(f"h100-{i}" for i in range(1, 12))
    assert all(o.hosts == 10**12 for o in p.options)
    assert {(o.nodes, o.gpus_per_node) for o in p.options} == {(11, 1), (6, 2), (3, 4), (2, 8)}
    s = summarize(Fleet((pool,)))
    assert (s.nodes, s.gpus, s.free, s.fabrics[0].free_nodes) == (10**12, 8 * 10**12, 8 * 10**12,
                                                                  10**12)  # fmt: skip
