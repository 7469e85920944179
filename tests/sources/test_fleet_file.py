"""The fleet file: the example fleet's numbers by hand, class labels, and one sentence per error."""

from __future__ import annotations

import pytest

from llmfit.errors import FleetFileError
from llmfit.plan.fleet import GIB, memory_from_class
from llmfit.sources.fleet import parse_fleet, read_fleet
from tests.conftest import EXAMPLE_FLEET


def test_memory_from_class_labels():
    assert memory_from_class("h100-80g") == 85_045_477_376  # the card's CUDA-reported total
    assert memory_from_class("a100-80g-mig-3g.40gb") == 40 * GIB  # the instance, not the card
    assert memory_from_class("x-48g") == 48 * GIB  # an unknown class: its label
    assert memory_from_class("mystery") is None


def test_example_fleet():
    fleet = read_fleet(EXAMPLE_FLEET)
    # 4 h200 + 4 h100 + the MIG node + the L40S box + the CPU node.
    assert len(fleet.nodes) == 11
    # 32 + 32 + (4 MIG instances + 6 whole) + (4 L40S less 1 unhealthy).
    assert fleet.gpus == 77
    h100 = fleet.nodes[4]
    assert (h100.id, h100.fabric, h100.kinds[0].free_gpus) == ("h100-1", "ib1", 4)
    l40s = fleet.nodes[9].kinds[0]
    assert (l40s.gpus, l40s.unhealthy_gpus, l40s.free_gpus) == (4, 1, 3)
    assert fleet.nodes[10].is_cpu and fleet.nodes[10].free_ram_bytes == 600 * GIB


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[pool]]\ngpu = 'h100-80g'\ngpus = 8\nfabrik = 'ib0'\n",
         "f.toml:4: pool[0].fabrik is not a key llmfit knows; did you mean 'fabric'?"),
        ("[[node]]\ngpu = 'h100-80g'\ngpus = -1\n",
         "f.toml:3: node[0].gpus is -1; it cannot be negative."),
        ("[[node]]\ngpu = 'h100-80g'\ngpus = 'eight'\n",
         "f.toml:3: node[0].gpus is 'eight'; it must be a whole number."),
        ("[[node]]\ngpu = 'h100-80g'\ngpus = 4\nfree_gpus = 6\n",
         "f.toml:4: node[0].free_gpus is 6, more than the 4 gpus it has."),
        ("[[node]]\ngpu = 'mystery'\n",
         "f.toml:2: node[0].gpu is 'mystery', whose label does not say its memory (write it like "
         "h100-80g or a100-80g-mig-3g.40gb, or give gpu_memory_gb)."),
        ("[[node]]\nname = 'a'\n[[node]]\nname = 'b'\n  [[node.devices]]\n"
         "  gpu = 'h100-80g'\n  gpus = 2\n  free_gpus = 3\n",
         "f.toml:8: node[1].devices[0].free_gpus is 3, more than the 2 gpus it has."),
        ("pools = 1\n", "f.toml:1: pools is not a key llmfit knows; did you mean 'pool'?"),
        ("[[pool\n", None),
        ("", "f.toml describes no nodes: add a [[pool]] or a [[node]]."),
    ],
)  # fmt: skip
def test_each_mistake_is_one_sentence_naming_file_line_and_key(text, message):
    with pytest.raises(FleetFileError) as e:
        parse_fleet(text, "f.toml")
    if message is None:
        assert e.value.message.startswith("f.toml is not valid TOML: ")
        assert "(at line 1, column 7)" in e.value.message
    else:
        assert e.value.message == message
