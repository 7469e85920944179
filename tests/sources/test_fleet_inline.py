"""Inline fleets: the grammar, the nodes it makes and their names, one sentence when wrong."""

from __future__ import annotations

import pytest

from llmfit.errors import UsageError
from llmfit.plan.fleet import GIB, PoolKind, PoolNode
from llmfit.sources.fleet import INLINE_GRAMMAR, parse_inline

H100 = 85_045_477_376  # the H100's CUDA total, from its label


def test_one_node_of_eight_cards():
    fleet = parse_inline("8xh100-80g")
    assert fleet.nodes == (PoolNode("h100-80g-1", (PoolKind("h100-80g", H100, 8, 8),)),)
    assert fleet.source == "inline: 8xh100-80g"


def test_four_nodes_on_a_fabric():
    fleet = parse_inline("4x8xh100-80g@ib0")
    # One entry counting four nodes, not four objects.
    (node,) = fleet.nodes
    assert (node.count, node.fabric) == (4, "ib0")
    assert fleet.node_ids() == ("h100-80g-1", "h100-80g-2", "h100-80g-3", "h100-80g-4")
    assert fleet.gpus == 32


def test_a_cpu_node_and_sizes():
    (node,) = parse_inline("cpu:512g").nodes
    assert node == PoolNode("cpu-1", (), "", 512 * GIB, 512 * GIB)
    fleet = parse_inline("2xcpu:1t,cpu:1.5tb,cpu:64")
    assert [(n.ram_bytes, n.count) for n in fleet.nodes] == [
        (1024 * GIB, 2), (1536 * GIB, 1), (64 * GIB, 1),
    ]  # fmt: skip
    assert fleet.node_ids() == ("cpu-1", "cpu-2", "cpu-3", "cpu-4")


def test_several_joined_with_commas_one_card_and_mig():
    fleet = parse_inline("2x8xh200-141g@ib0, h100-80g ,7xa100-80g-mig-1g.10gb,cpu:256g")
    assert fleet.node_ids()[:2] == ("h200-141g-1", "h200-141g-2")
    assert [(n.id, n.fabric, n.kinds[0].gpus if n.kinds else 0) for n in fleet.nodes] == [
        ("h200-141g", "ib0", 8),
        ("h100-80g-1", "", 1),
        ("a100-80g-mig-1g.10gb-1", "", 7),
        ("cpu-1", "", 0),
    ]
    # What a 1g.10gb instance holds (mig -lgip: 9.62 GiB), not what its name says.
    assert fleet.nodes[2].kinds[0].card_bytes == int(9.62 * GIB)


def test_the_same_class_twice_keeps_names_unique():
    fleet = parse_inline("8xh100-80g@ib0,8xh100-80g@ib1")
    assert [n.id for n in fleet.nodes] == ["h100-80g-1", "h100-80g-2"]


def test_upper_case_is_read_as_lower():
    assert parse_inline("2X8XH100-80G@IB0").nodes[0].fabric == "ib0"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("8xfoo", "'8xfoo' names 'foo', whose label does not say its memory"),
        ("8x", "'8x' is not a fleet"),
        ("8xh100-80g,,cpu:1t", "'' is not a fleet"),
        ("0x8xh100-80g", "'0x8xh100-80g' has a count of 0"),
        ("4x0xh100-80g", "'4x0xh100-80g' has a count of 0"),
        ("cpu:0g", "'cpu:0g' has a count or a size of 0"),
        ("cpu:lots", "'cpu:lots' is not a fleet"),
        ("8xh100-80g@", "'8xh100-80g@' is not a fleet"),
        ("1x2x3xh100-80g", "'1x2x3xh100-80g' is not a fleet"),
    ],
)
def test_a_bad_inline_fleet_is_one_sentence_showing_the_grammar(text, why):
    with pytest.raises(UsageError) as e:
        parse_inline(text)
    assert e.value.message == f"--fleet {text!r}: {why}; write {INLINE_GRAMMAR}."
    assert e.value.exit_code == 2


def test_the_grammar_as_the_user_reads_it():
    assert INLINE_GRAMMAR == (
        "[NODESx]GPUSxCLASS[@FABRIC] (8xh100-80g, 4x8xh100-80g@ib0) or [NODESx]cpu:RAM "
        "(cpu:512g), joined with commas"
    )
