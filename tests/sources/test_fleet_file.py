"""The fleet file: the example fleet's numbers by hand, class labels, and one sentence per error."""

from __future__ import annotations

import pytest

from llmfit.errors import FleetFileError
from llmfit.plan.fleet import GIB, MIB, PoolKind, memory_from_class
from llmfit.sources.fleet import parse_fleet, read_fleet
from tests.conftest import EXAMPLE_FLEET, ROOT


def test_memory_from_class_labels():
    assert memory_from_class("h100-80g") == 85_045_477_376  # the card's CUDA-reported total
    # The instance, not the card, and what it really holds: `mig -lgip` gives 39.25 GiB.
    assert memory_from_class("a100-80g-mig-3g.40gb") == int(39.25 * GIB)
    # A profile not in the table is charged 0.83 of its name, the smallest share seen (GB200).
    assert memory_from_class("x-80g-mig-2g.10gb") == int(10 * GIB * 0.83)
    assert memory_from_class("x-48g") == 48 * GIB  # an unknown class: its label
    assert memory_from_class("mystery") is None


def test_example_fleet():
    fleet = read_fleet(EXAMPLE_FLEET)
    # 4 h200 + 4 h100 + the MIG node + the L40S box + the CPU node: 11 nodes in 5 entries, each
    # pool one entry with its count.
    assert fleet.node_count == 11
    assert [(n.id, n.count) for n in fleet.nodes] == [
        ("h200", 4), ("h100", 4), ("a100-mig", 1), ("l40s-box", 1), ("cpu-1", 1),
    ]  # fmt: skip
    assert fleet.node_ids()[3:6] == ("h200-4", "h100-1", "h100-2")
    # 32 + 32 + (4 MIG instances + 6 whole) + (4 L40S less 1 unhealthy).
    assert fleet.gpus == 77
    h100 = fleet.nodes[1]
    assert (h100.node_id(0), h100.fabric, h100.kinds[0].free_gpus) == ("h100-1", "ib1", 4)
    l40s = fleet.nodes[3].kinds[0]
    assert (l40s.gpus, l40s.unhealthy_gpus, l40s.free_gpus) == (4, 1, 3)
    assert fleet.nodes[4].is_cpu and fleet.nodes[4].free_ram_bytes == 600 * GIB


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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Unknown keys: a close name is suggested, else every allowed key is listed.
        ("[[node]]\ngpu = 'h100-80g'\nzzz = 1\n",
         "f.toml:3: node[0].zzz is not a key llmfit knows; allowed: name, fabric, fabric_kind, "
         "ram_gb, free_ram_gb, devices, gpu, gpu_memory_gb, gpus, free_gpus, unhealthy_gpus, "
         "memory_bandwidth_gbs, bf16_tflops, fp8_tflops, int8_tops, link_gbs, pcie_gbs, link, "
         "labels, price_per_gpu_hour."),
        ("[[node]]\nname = 'x'\n  [[node.devices]]\n  gpu = 'h100-80g'\n  fabric = 'ib0'\n",
         "f.toml:5: node[0].devices[0].fabric is not a key llmfit knows; allowed: gpu, "
         "gpu_memory_gb, gpus, free_gpus, unhealthy_gpus, memory_bandwidth_gbs, bf16_tflops, "
         "fp8_tflops, int8_tops, link_gbs, pcie_gbs, link."),
        ("[[pool]]\nname = 'h100'\ncout = 4\n",
         "f.toml:3: pool[0].cout is not a key llmfit knows; did you mean 'count'?"),
        # Wrong types.
        ("[[pool]]\ncount = 1.5\n", "f.toml:2: pool[0].count is 1.5; it must be a whole number."),
        ("[[node]]\nram_gb = 'lots'\n",
         "f.toml:2: node[0].ram_gb is 'lots'; it must be a number of GiB."),
        ("[[node]]\nfabric = 1\n", "f.toml:2: node[0].fabric is 1; it must be a string."),
        ("[[node]]\ngpu = 8\n", "f.toml:2: node[0].gpu is 8; it must be a string."),
        ("pool = 1\n", "f.toml:1: pool must be written as [[pool]] tables."),
        ("# fleet\nnode = 'x'\n", "f.toml:2: node must be written as [[node]] tables."),
        ("[[node]]\nname = 'x'\ndevices = 1\n",
         "f.toml:3: node[0].devices must be a list of [[...devices]] tables."),
        ("[[node]]\nname = 'x'\ndevices = [1]\n", "f.toml:3: node[0].devices[0] must be a table."),
        # Negative counts and sizes.
        ("[[pool]]\ncount = -2\ngpu = 'h100-80g'\n",
         "f.toml:2: pool[0].count is -2; it cannot be negative."),
        ("[[node]]\nram_gb = -1\n", "f.toml:2: node[0].ram_gb is -1; it cannot be negative."),
        ("[[node]]\ngpu = 'h100'\ngpu_memory_gb = 0\n",
         "f.toml:3: node[0].gpu_memory_gb is 0; it must be more than 0."),
        # Free (or unhealthy) above total.
        ("[[node]]\ngpu = 'h100-80g'\ngpus = 2\nunhealthy_gpus = 3\n",
         "f.toml:4: node[0].unhealthy_gpus is 3, more than the 2 gpus it has."),
        ("[[node]]\ngpu = 'h100-80g'\ngpus = 8\nunhealthy_gpus = 2\nfree_gpus = 7\n",
         "f.toml:5: node[0].free_gpus is 7, but 2 of the 8 gpus are unhealthy."),
        ("[[node]]\nram_gb = 768\nfree_ram_gb = 900\n",
         "f.toml:3: node[0].free_ram_gb is 900, more than the node's ram_gb of 768."),
        # Cards that say nothing of what they are.
        ("[[node]]\ngpus = 8\n",
         "f.toml:2: node[0].gpus is given without a gpu class to say what they are."),
        ("[[node]]\nname = 'x'\n  [[node.devices]]\n  gpu_memory_gb = 40\n",
         "f.toml:4: node[0].devices[0].gpu_memory_gb is given without a gpu class to say what "
         "they are."),
        ("[[node]]\nname = 'x'\n  [[node.devices]]\n",
         "f.toml:3: node[0].devices[0] has no gpu class; give one like "
         "gpu = \"a100-80g-mig-3g.40gb\"."),
        ("[[node]]\nname = 'x'\n  [[node.devices]]\n  gpu = 'a100-mig'\n",
         "f.toml:4: node[0].devices[0].gpu is 'a100-mig', whose label does not say its memory "
         "(write it like h100-80g or a100-80g-mig-3g.40gb, or give gpu_memory_gb; known classes "
         "near it: a10g-24g, a100-80g, a100-40g)."),
        # Two nodes of one name: a pool's generated name counts.
        ("[[node]]\nname = 'a'\n[[node]]\nname = 'a'\n",
         "f.toml:4: node[1].name is 'a', a name another node already has; names must be unique."),
        ("[[pool]]\nname = 'h100'\ncount = 2\ngpu = 'h100-80g'\n[[node]]\nname = 'h100-2'\n",
         "f.toml:6: node[0].name is 'h100-2', a name another node already has; names must be "
         "unique."),
    ],
)  # fmt: skip
def test_every_validation_sentence(text, message):
    with pytest.raises(FleetFileError) as e:
        parse_fleet(text, "f.toml")
    assert e.value.message == message


def test_a_fleet_file_with_every_feature_reads_as_written():
    """The full example of docs/fleet.md: each key lands where it says."""
    fleet = read_fleet(ROOT / "examples" / "fleet-4-nodes.toml")
    assert fleet.node_ids() == ("h100-1", "h100-2", "mixed-1", "cpu-1")
    h100, mixed, cpu = fleet.nodes
    assert (h100.count, h100.fabric, h100.ram_bytes, h100.free_ram_bytes) == (
        2, "ib0", 2048 * GIB, 1800 * GIB,
    )  # fmt: skip
    assert h100.kinds == (PoolKind("h100-80g", 85_045_477_376, 8, 8, 0),)
    assert mixed.fabric == ""
    assert mixed.kinds == (
        PoolKind("a100-80g-mig-3g.40gb", int(39.25 * GIB), 4, 2, 0),
        PoolKind("a100-80g", 85_100_068_864, 6, 4, 1),
        PoolKind("rtxa5000-24g", 24_564 * MIB, 1, 1, 0),
    )
    assert cpu.is_cpu and (cpu.ram_bytes, cpu.free_ram_bytes) == (512 * GIB, 512 * GIB)


def test_a_file_that_cannot_be_read_is_one_sentence(tmp_path):
    binary = tmp_path / "fleet.toml"
    binary.write_bytes(b"\xff\xfe[[node]]\n")
    with pytest.raises(FleetFileError) as e:
        read_fleet(binary)
    assert e.value.message.startswith(f"{binary}: cannot be read (")
    assert "codec can't decode byte 0xff" in e.value.message
    with pytest.raises(FleetFileError) as e:
        read_fleet(tmp_path / "none.toml")
    assert e.value.message == f"{tmp_path / 'none.toml'}: no such fleet file."
