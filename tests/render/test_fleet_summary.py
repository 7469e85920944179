"""The fleet summary: its numbers for the example fleets worked out by hand, the bars, the text
and the JSON document."""

from __future__ import annotations

import json

from llmfit.plan.fleet import GIB
from llmfit.plan.fleet_summary import ClassUsage, FabricClass, summarize
from llmfit.render.fleet import bar, document, render_summary, render_summary_json
from llmfit.sources.fleet import parse_inline, read_fleet
from tests.conftest import EXAMPLE_FLEET, ROOT

FOUR = ROOT / "examples" / "fleet-4-nodes.toml"


# What a 3g.40gb instance holds: 39.25 GiB in `nvidia-smi mig -lgip`.
MIG_3G40 = int(39.25 * GIB)


def test_example_fleet_numbers_by_hand():
    s = summarize(read_fleet(EXAMPLE_FLEET))
    # h200: 4 nodes × 8, all free. h100: 4 × 8 with 4 free each → 16 used, 16 free.
    # a100-mig: 4 MIG instances, 3 free → 1 used; 6 whole A100s free.
    # l40s-box: 4 cards, 1 unhealthy, free defaults to the other 3: used 0, and the broken
    # card is neither used nor free.
    assert s.classes == (
        ClassUsage("a100-80g", 85_100_068_864, 1, 6, 0, 6, 0),
        ClassUsage("a100-80g-mig-3g.40gb", int(39.25 * GIB), 1, 4, 1, 3, 0),
        ClassUsage("h100-80g", 85_045_477_376, 4, 32, 16, 16, 0),
        ClassUsage("h200-141g", (143_771 - 454) * 2**20, 4, 32, 0, 32, 0),
        ClassUsage("l40s-48g", 47_803_596_800, 1, 4, 0, 3, 1),
    )
    # 32 + 32 + 4 + 6 + 4 = 78 cards: 16 + 1 = 17 used, 32 + 16 + 3 + 6 + 3 = 60 free, 1 broken.
    assert (s.gpus, s.used, s.free, s.unhealthy) == (78, 17, 60, 1)
    # Free whole nodes: every h200 node; no h100 node (each has 4 busy); the A100 box's six
    # whole cards; not the L40S box (a broken card). MIG instances never span: not counted.
    assert s.fabrics == (
        FabricClass("ib0", "h200-141g", 4, 4, 8),
        FabricClass("ib1", "h100-80g", 4, 0, 8),
        FabricClass("", "a100-80g", 1, 1, 6),
        FabricClass("", "l40s-48g", 1, 0, 4),
    )
    # 11 nodes: 10 with GPUs, cpu-1 without. RAM 4×2048 + 4×2048 + 1024 + 512 + 768 = 18,688 GB;
    # free is the same less cpu-1's 168 GB in use.
    assert (s.nodes, s.gpu_nodes, s.cpu_nodes) == (11, 10, 1)
    assert (s.ram_bytes, s.free_ram_bytes) == (18_688 * GIB, 18_520 * GIB)
    assert (s.cpu_ram_bytes, s.cpu_free_ram_bytes) == (768 * GIB, 600 * GIB)


def test_four_node_fleet_as_text():
    text = render_summary(summarize(read_fleet(FOUR)), width=1000)
    # a100-80g: 6 cards, 4 free, 1 broken → 1 used; bar 20 × (1, 4, 1) / 6 = 3⅓, 13⅓, 3⅓ cells,
    # the one left over to the first. MIG: 4 instances, 2 free → 2 used, 10 + 10 cells.
    # RAM: 2 × 2048 + 1024 + 512 = 5,632 GiB; free 2 × 1800 + 1024 + 512 = 5,136.
    assert text.splitlines() == [
        "fleet: " + str(FOUR) + " · 4 nodes (3 with GPUs, 1 CPU only) · 27 GPUs: 3 used, "
        "23 free, 1 unhealthy",
        "",
        "class                 GiB a card  nodes  GPUs  used  free  unhealthy",
        "a100-80g                    79.3      1     6     1     4          1  "
        "████░░░░░░░░░░░░░×××",
        "a100-80g-mig-3g.40gb        39.2      1     4     2     2          0  "
        "██████████░░░░░░░░░░",
        "h100-80g                    79.2      2    16     0    16          0  "
        "░░░░░░░░░░░░░░░░░░░░",
        "rtxa5000-24g                24.0      1     1     0     1          0  "
        "░░░░░░░░░░░░░░░░░░░░",
        "                                                                      "
        "█ used  ░ free  × unhealthy",
        "",
        "fabric       class         nodes  GPUs a node  free whole nodes",
        "ib0          h100-80g          2            8                 2",
        "(no fabric)  a100-80g          1            6                 0",
        "(no fabric)  rtxa5000-24g      1            1                 1",
        "(nodes with no fabric are islands: a replica cannot span them)",
        "",
        "CPU only: 1 node, 512 GiB RAM (512 free)",
        "host RAM, all nodes: 5,632 GiB (5,136 free)",
    ]


def test_the_bars_fit_80_columns_with_their_legend_under_them():
    # Issue 27: at 80 columns the table is 68 wide, so its bars start at 70 and have 10 cells.
    # a100-80g (1, 4, 1) × 10 / 6 = 1⅔, 6⅔, 1⅔: 1, 6, 1 and the two cells left over to the first
    # two (equal remainders, in order); the MIG slices (2, 2) five and five. The legend (27
    # characters) ends at the 80th column; the first line (the file's path is this checkout's)
    # wraps.
    lines = render_summary(summarize(read_fleet(FOUR)), width=80).splitlines()
    assert lines[0].startswith("fleet: ") and lines[1].startswith("    ")
    assert lines[lines.index("") + 1 :][:6] == [
        "class                 GiB a card  nodes  GPUs  used  free  unhealthy",
        "a100-80g                    79.3      1     6     1     4          1  ██░░░░░░░×",
        "a100-80g-mig-3g.40gb        39.2      1     4     2     2          0  █████░░░░░",
        "h100-80g                    79.2      2    16     0    16          0  ░░░░░░░░░░",
        "rtxa5000-24g                24.0      1     1     0     1          0  ░░░░░░░░░░",
        " " * 53 + "█ used  ░ free  × unhealthy",
    ]
    assert max(len(line) for line in lines) <= 80


def test_cpu_only_fleet_has_no_gpu_tables():
    text = render_summary(summarize(parse_inline("2xcpu:1t")), width=1000)
    assert text.splitlines() == [
        "fleet: inline: 2xcpu:1t · 2 nodes (0 with GPUs, 2 CPU only) · no GPUs",
        "",
        "CPU only: 2 nodes, 2,048 GiB RAM (2,048 free)",
        "host RAM, all nodes: 2,048 GiB (2,048 free)",
    ]


def test_bars():
    assert bar(16, 16, 0) == "█" * 10 + "░" * 10
    assert bar(0, 0, 0) == " " * 20
    # 1 broken card of 32 is 0.625 of a cell: it gets the cell left over.
    assert bar(0, 31, 1) == "░" * 19 + "×"
    # 1 used of 100 is 0.2 of a cell, rounded away by the largest remainder, but a part that is
    # not zero always shows.
    assert bar(1, 99, 0) == "█" + "░" * 19
    assert bar(1, 2, 3, width=6) == "█░░×××"


def test_json_document():
    doc = json.loads(render_summary_json(summarize(read_fleet(FOUR))))
    assert doc == document(summarize(read_fleet(FOUR)))
    assert doc == {
        "schema": 1,
        "source": str(FOUR),
        "nodes": 4,
        "gpu_nodes": 3,
        "cpu_nodes": 1,
        "gpus": {"total": 27, "used": 3, "free": 23, "unhealthy": 1},
        "classes": [
            {"gpu_class": "a100-80g", "card_bytes": 85_100_068_864, "mig": False, "nodes": 1,
             "gpus": 6, "used": 1, "free": 4, "unhealthy": 1},
            {"gpu_class": "a100-80g-mig-3g.40gb", "card_bytes": MIG_3G40, "mig": True, "nodes": 1,
             "gpus": 4, "used": 2, "free": 2, "unhealthy": 0},
            {"gpu_class": "h100-80g", "card_bytes": 85_045_477_376, "mig": False, "nodes": 2,
             "gpus": 16, "used": 0, "free": 16, "unhealthy": 0},
            {"gpu_class": "rtxa5000-24g", "card_bytes": 24_564 * 2**20, "mig": False, "nodes": 1,
             "gpus": 1, "used": 0, "free": 1, "unhealthy": 0},
        ],
        "fabrics": [
            {"fabric": "ib0", "gpu_class": "h100-80g", "nodes": 2, "gpus_per_node": 8,
             "free_nodes": 2},
            {"fabric": None, "gpu_class": "a100-80g", "nodes": 1, "gpus_per_node": 6,
             "free_nodes": 0},
            {"fabric": None, "gpu_class": "rtxa5000-24g", "nodes": 1, "gpus_per_node": 1,
             "free_nodes": 1},
        ],
        "ram": {"bytes": 5_632 * GIB, "free_bytes": 5_136 * GIB},
        "cpu_ram": {"bytes": 512 * GIB, "free_bytes": 512 * GIB},
        "notes": [],
    }  # fmt: skip
