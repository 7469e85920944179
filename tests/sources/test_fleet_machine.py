"""This machine through nvidia-smi's text: its CSV in every form the fixtures show, `-L` with and
without MIG, class names from product names, and host RAM."""

from __future__ import annotations

import ast

import pytest

from llmfit.errors import FleetFileError
from llmfit.plan.fleet import GIB, MIB, PoolKind, class_from_product
from llmfit.sources.machine import GpuRow, gpu_kinds, host_ram, parse_gpu_csv, parse_gpu_list
from tests.fleet_data import fixture_text

A100_80 = 85_100_068_864  # the A100-SXM4-80GB's CUDA total (REPORTED_TOTALS)


def test_csv_with_header_and_units():
    rows = parse_gpu_csv(fixture_text("nvidia-smi-csv-l40s-2gpu.txt"), "l40s.csv")
    assert rows == (
        GpuRow(0, "NVIDIA L40S", 46_068 * MIB, None),
        GpuRow(1, "NVIDIA L40S", 46_068 * MIB, None),
    )
    # A known class takes CUDA's total, not nvidia-smi's framebuffer size; no memory.used column
    # means no card is known to be busy.
    assert gpu_kinds(rows) == (PoolKind("l40s-48g", 47_803_596_800, 2, 2),)


@pytest.mark.parametrize(
    ("name", "rows", "gpu_class", "card"),
    [
        # Not in the card table: the total nvidia-smi gave.
        ("nvidia-smi-csv-quadro-rtx6000-noheader.txt", 2, "quadrortx6000-24g", 24_576 * MIB),
        # In it: its 24564 MiB less the 454 MiB reserve, and the RTX PRO 6000's CUDA total.
        ("nvidia-smi-csv-rtx-a5000-noheader.txt", 1, "rtxa5000-24g", (24_564 - 454) * MIB),
        ("nvidia-smi-csv-rtx-pro-6000-maxq-noheader.txt", 1, "rtxpro6000-96g", 102_165_905_408),
    ],
)
def test_csv_without_header_takes_its_columns_from_the_pasted_command(name, rows, gpu_class, card):
    parsed = parse_gpu_csv(fixture_text(name), name)
    assert len(parsed) == rows
    assert gpu_kinds(parsed) == (PoolKind(gpu_class, card, rows, rows),)


def test_csv_noheader_nounits_with_nineteen_fields():
    command, debug = fixture_text("nvidia-smi-csv-rtx2080-noheader-nounits-uuid.txt").splitlines()[
        :3:2
    ]
    line = ast.literal_eval(debug)[0]  # the raw stdout line, out of the tool's debug print
    rows = parse_gpu_csv(line + "\n", "2080.csv", query=command.split("=", 1)[1].split()[0])
    assert rows == (GpuRow(0, "GeForce RTX 2080", 7_979 * MIB, None),)
    assert gpu_kinds(rows) == (PoolKind("rtx2080-8g", 7_979 * MIB, 1, 1),)


def test_memory_na_is_one_sentence():
    text = fixture_text("nvidia-smi-csv-gb10-memory-na.txt")
    unsloth = text.split("--- unsloth PR #10283 ---\n")[1].split("\n\n")[0]
    with pytest.raises(FleetFileError) as e:
        parse_gpu_csv(unsloth, "gb10.csv")
    assert e.value.message == (
        "gb10.csv:2: memory.total is [N/A] (as on unified-memory parts like the GB10), so the "
        "card's memory is unknown; describe it in a fleet file with gpu_memory_gb."
    )
    swap = text.split("--- llama-swap issue #782 ---\n")[1]
    with pytest.raises(FleetFileError) as e:
        parse_gpu_csv(swap, "gb10.csv", query="memory.used,memory.total,utilization.memory")
    assert e.value.message.startswith("gb10.csv:1: memory.total is [N/A] ")


def test_a_csv_of_other_fields_says_which_is_missing():
    mig_mode = fixture_text("nvidia-smi-mig-h100-pcie-scaleway.txt").split("\n\n")[1]
    assert mig_mode.splitlines()[1:] == [
        "pci.bus_id, mig.mode.current",
        "00000000:01:00.0, Enabled",
    ]
    with pytest.raises(FleetFileError) as e:
        parse_gpu_csv(mig_mode, "mig.csv")
    assert e.value.message == (
        "mig.csv: has no memory.total column; query it with "
        "nvidia-smi --query-gpu=name,memory.total --format=csv."
    )


@pytest.mark.parametrize(
    ("text", "query", "message"),
    [
        ("NVIDIA RTX A5000, 24564 MiB, 570.211.01, 0x223110DE\n", None,
         "a5000.csv:1: has no header row, so its columns are unknown; pass --query-gpu with the "
         "fields it was made with (like name,memory.total)."),
        ("NVIDIA RTX A5000, 24564 MiB\n", "name,memory.total,driver_version",
         "a5000.csv:1: has 2 values for 3 columns (name,memory.total,driver_version)."),
        ("NVIDIA RTX A5000, lots\n", "name,memory.total",
         "a5000.csv:1: memory 'lots' is not a size in MiB (like 81559 MiB)."),
        ("NVIDIA RTX A5000, 570.211.01\n", "name,driver_version",
         "a5000.csv: has no memory.total column; query it with nvidia-smi "
         "--query-gpu=name,memory.total --format=csv."),
        ("24564 MiB\n", "memory.total",
         "a5000.csv: has no name column; query it with nvidia-smi "
         "--query-gpu=name,memory.total --format=csv."),
        ("\n", None, "a5000.csv holds no nvidia-smi CSV rows."),
    ],
)  # fmt: skip
def test_csv_mistakes_are_one_sentence(text, query, message):
    with pytest.raises(FleetFileError) as e:
        parse_gpu_csv(text, "a5000.csv", query)
    assert e.value.message == message


def test_busy_cards_by_memory_used():
    csv = (
        "index, name, memory.total [MiB], memory.used [MiB]\n"
        "0, NVIDIA H100 80GB HBM3, 81559 MiB, 1 MiB\n"  # idle: 1 MiB, as in the H100 table fixture
        "1, NVIDIA H100 80GB HBM3, 81559 MiB, 4077 MiB\n"  # just under 5 %: free
        "2, NVIDIA H100 80GB HBM3, 81559 MiB, 4078 MiB\n"  # just over 5 %: busy
        "3, NVIDIA H100 80GB HBM3, 81559 MiB, 75000 MiB\n"
    )
    assert gpu_kinds(parse_gpu_csv(csv, "x")) == (PoolKind("h100-80g", 85_045_477_376, 4, 2),)


def test_list_with_mig_instances_under_one_card():
    cards = parse_gpu_list(fixture_text("nvidia-smi-L-mig-a100-80gb-4gpu.txt"))
    assert cards == {
        0: ("NVIDIA A100-SXM4-80GB", ("1g.20gb",) * 4),
        1: ("NVIDIA A100-SXM4-80GB", ()),
        2: ("NVIDIA A100-SXM4-80GB", ()),
        3: ("NVIDIA A100-SXM4-80GB", ()),
    }
    # The CSV a machine like this gives: the -L fixture's names, the 81,920 MiB nvidia-smi reports
    # for an A100-SXM4-80GB (gpu-memory-totals.md); the memory.used values are made up: GPU 1 busy.
    rows = tuple(
        GpuRow(i, "NVIDIA A100-SXM4-80GB", 81_920 * MIB, used * MIB)
        for i, used in enumerate((0, 40_000, 4, 4))
    )
    assert gpu_kinds(rows, cards) == (
        PoolKind("a100-80g-mig-1g.20gb", int(19.50 * GIB), 4, 4),
        PoolKind("a100-80g", A100_80, 3, 2),
    )


def test_list_of_one_card_in_seven_instances():
    cards = parse_gpu_list(fixture_text("nvidia-smi-L-mig-a100-80gb-7x1g10gb.txt"))
    assert cards == {0: ("NVIDIA A100-SXM4-80GB", ("1g.10gb",) * 7)}
    rows = (GpuRow(0, "NVIDIA A100-SXM4-80GB", 81_920 * MIB, 0),)
    assert gpu_kinds(rows, cards) == (PoolKind("a100-80g-mig-1g.10gb", int(9.62 * GIB), 7, 7),)


def test_list_from_a_gpu_operator_pod_has_mig_lines_unindented():
    runs = fixture_text("nvidia-smi-L-mig-h100-pcie-k8s-scaleway.txt").split("\n\n")
    before, three, one = (parse_gpu_list(r) for r in runs[:3])
    assert before == {0: ("NVIDIA H100 PCIe", ())}
    assert three == {0: ("NVIDIA H100 PCIe", ("3g.40gb", "3g.40gb"))}
    assert one == {0: ("NVIDIA H100 PCIe", ("1g.10gb",) * 7)}
    # The H100 PCIe's 81,559 MiB (its nvidia-smi table in the fixtures) names the card h100-80g.
    rows = (GpuRow(0, "NVIDIA H100 PCIe", 81_559 * MIB, 0),)
    assert gpu_kinds(rows, three) == (PoolKind("h100-80g-mig-3g.40gb", int(39.25 * GIB), 2, 2),)


def test_list_without_mig():
    cards = parse_gpu_list(fixture_text("nvidia-smi-L-rtx3090-4gpu.txt"))
    assert cards == {i: ("NVIDIA GeForce RTX 3090", ()) for i in range(4)}


@pytest.mark.parametrize(
    ("product", "mib", "gpu_class"),
    [
        ("NVIDIA H100 80GB HBM3", None, "h100-80g"),
        ("NVIDIA-H100-80GB-HBM3", None, "h100-80g"),  # GFD's spelling
        ("A100-SXM4-40GB", None, "a100-40g"),
        ("A100-PCIE-40GB", 40_536, "a100-40g"),
        ("NVIDIA H100 PCIe", 81_559, "h100-80g"),
        ("NVIDIA H100 NVL", 95_830, "h100-94g"),
        ("NVIDIA H200", 143_771, "h200-141g"),
        ("NVIDIA B200", 183_359, "b200-180g"),
        ("NVIDIA L40S", 46_068, "l40s-48g"),
        ("NVIDIA GeForce RTX 4090", 24_564, "rtx4090-24g"),
        ("NVIDIA GeForce RTX 3090", 24_576, "rtx3090-24g"),
        ("NVIDIA L4", 23_034, "l4-24g"),
        ("NVIDIA A10", 23_028, "a10-24g"),
        ("Tesla T4", 15_360, "t4-16g"),
        ("NVIDIA A30", 24_576, "a30-24g"),
        ("NVIDIA GB10", None, "gb10"),  # no size anywhere: the label has none
        # A size in the name that is not the GPU's (the GH200's 480 GB counts its CPU memory):
        # the reported total wins (97,280, gpu-memory-totals.md).
        ("NVIDIA GH200 480GB", 97_280, "gh200-96g"),
    ],
)
def test_class_from_product(product, mib, gpu_class):
    assert class_from_product(product, mib * MIB if mib else None) == gpu_class


def test_host_ram_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal:       2113537552 kB\nMemFree:  9 kB\nMemAvailable:   2000000000 kB\n"
    )
    assert host_ram(meminfo) == (2_113_537_552 * 1024, 2_000_000_000 * 1024)


def test_host_ram_without_meminfo_falls_back_to_sysconf(tmp_path):
    total, free = host_ram(tmp_path / "missing")
    assert total > 0 and 0 <= free <= total
