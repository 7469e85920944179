"""The card table: the names people type, "did you mean", memory totals, overrides and fabrics.

Sources of the figures are in llmfit/data/cards.toml, per row; memory totals in
fixtures/fleet/gpu-memory-totals.md.
"""

from __future__ import annotations

import math
import re

import pytest

from llmfit.plan import cards
from llmfit.plan.cards import (
    BY_KEY,
    CARDS,
    fabric_bandwidth,
    metal_share,
    override,
    parse_table,
    resolve,
    spec,
    suggest,
)
from llmfit.plan.fleet import GIB, MIB, REPORTED_TOTALS, memory_from_class

# fleet.py's REPORTED_TOTALS before the card table took them over: every value must survive.
BEFORE = {
    "h100-80g": 85_045_477_376,
    "h100-94g": 99_861_594_112,
    "h200-141g": (143_771 - 454) * MIB,
    "a100-80g": 85_100_068_864,
    "a100-40g": 42_298_834_944,
    "l40s-48g": 47_803_596_800,
    "l4-24g": 23_570_219_008,
    "a10-24g": int(22.18 * GIB),
    "rtx4090-24g": 25_386_352_640,
    "rtx3090-24g": 25_327_697_920,
    "rtx5090-32g": 33_677_180_928,
    "b200-180g": int(178.35 * GIB),
}


def test_memory_totals_unchanged():
    for key, total in BEFORE.items():
        assert REPORTED_TOTALS[key] == total, key
        assert memory_from_class(key) == total, key


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("h100", "h100-80g"),
        ("h100-80gb", "h100-80g"),
        ("H100 80GB HBM3", "h100-80g"),  # nvidia-smi's product name
        ("NVIDIA H100 80GB HBM3", "h100-80g"),
        ("NVIDIA-H100-80GB-HBM3", "h100-80g"),  # GPU Feature Discovery's label
        ("  H100-80G ", "h100-80g"),  # case and spacing do not matter
        ("NVIDIA H100 PCIe", "h100-pcie-80g"),  # the PCIe card reads at 2.0 TB/s, not 3.35
        ("h100 nvl", "h100-94g"),
        ("A100-SXM4-40GB", "a100-40g"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80g"),
        ("h200", "h200-141g"),
        ("mi300x", "mi300x-192g"),
        ("AMD Instinct MI300X", "mi300x-192g"),
        ("amdinstinctmi300x-192g", "mi300x-192g"),  # what class_from_product makes of it
        ("rtxpro6000blackwellmaxq-96g", "rtxpro6000-96g"),
        ("m2-ultra-192g", "m2-ultra-192g"),
        ("Apple M2 Ultra 192GB", "m2-ultra-192g"),
        ("4090", "rtx4090-24g"),
    ],
)
def test_aliases_resolve(name, key):
    assert resolve(name) == key


def test_unknown_names_resolve_to_nothing():
    assert resolve("h10-80g") is None
    # An Apple chip comes in several sizes; the bare chip names none of them.
    assert resolve("m2-ultra") is None


def test_did_you_mean():
    # A one-letter typo: the card meant comes first.
    assert suggest("h10-80g")[0] == "h100-80g"
    assert suggest("mi300")[0] == "mi300x-192g"
    # The bare chip: its sizes.
    assert set(suggest("m2-ultra")) == {"m2-ultra-64g", "m2-ultra-128g", "m2-ultra-192g"}
    assert suggest("zzzzzz") == ()


def test_names_are_unambiguous():
    seen: dict[str, str] = {}
    for c in CARDS:
        for name in (c.key, *c.aliases):
            assert seen.setdefault(cards._norm(name), c.key) == c.key, name


def test_every_row_is_sourced_and_sane():
    for c in CARDS:
        assert c.source, c.key
        assert c.memory_bytes > 0 and c.memory_bandwidth > 0, c.key
        assert c.memory_kind in ("measured", "smi-reserve", "metal", "hbm-gib", "marketed"), c.key
        assert set(c.fields_derived) <= {"bf16_flops", "fp8_flops", "int8_ops"}, c.key
        # FP8 and INT8 run at least at the 16-bit rate wherever a card has them; but Blackwell
        # Ultra cut INT8 to a sliver (HGX B300: 2 POPS with sparsity for 8 GPUs).
        int8 = None if c.architecture == "blackwell-ultra" else c.int8_ops
        for fast in (c.fp8_flops, int8):
            if fast and c.bf16_flops:
                assert fast >= c.bf16_flops, c.key
        assert (c.link == "none") == (c.link_bandwidth == 0), c.key


def test_amd_instinct_cards_are_their_hbm_in_gib():
    # MI300X measured: HIP's 196,592 MiB. The MI355X row must hold the 287.18 GiB free that
    # SGLang logged on one at load (calibration/sglang-logs.jsonl, PR #18263).
    assert BY_KEY["mi300x-192g"].memory_bytes == 192 * 1024**3 - 16 * 1024**2
    assert BY_KEY["mi355x-288g"].memory_bytes == 309_220_868_096
    assert BY_KEY["mi355x-288g"].memory_bytes > 287.18 * 1024**3
    assert BY_KEY["mi325x-256g"].memory_bytes == 274_861_129_728


def test_datasheet_figures():
    h100 = BY_KEY["h100-80g"]
    # H100 SXM datasheet: 3.35 TB/s; BF16 1,979 TFLOPS with sparsity, so 989.5 dense; NVLink
    # 900 GB/s both ways, 450 one way.
    assert (h100.memory_bandwidth, h100.bf16_flops, h100.link_bandwidth) == (
        3.35e12,
        989.5e12,
        450e9,
    )
    assert h100.link_family == "nvlink" and h100.backend == "cuda"
    assert BY_KEY["mi300x-192g"].backend == "rocm"
    assert BY_KEY["l40s-48g"].link_family == "pcie"


def test_apple_memory_is_metals_share():
    # 64 GB: llama.cpp printed recommendedMaxWorkingSetSize = 51539.61 MB, 48 GiB, 3/4.
    assert memory_from_class("m3-max-64g") == int(64 * GIB * 51_539.61e6 / (64 * GIB))
    assert round(memory_from_class("m3-max-64g") / GIB, 2) == 48.0
    # 16 GB: 11453.25 MB, two thirds.
    assert round(metal_share(16), 4) == round(2 / 3, 4)
    # 192 GB was not measured: it takes 128 GB's share (0.84), never more than its own.
    assert metal_share(192) == metal_share(128)
    m2 = BY_KEY["m2-ultra-192g"]
    assert m2.unified_bytes == 192 * GIB and m2.backend == "metal"


def test_memory_of_classes_never_measured():
    # Sold as 8 GB, never measured: 0.98 of 8e9 bytes, under the 8 GiB the label would say.
    assert memory_from_class("rtx4060-8g") == int(8e9 * 0.98)
    # The H20: nvidia-smi's 97,871 MiB less the H100's 454 MiB reserve, as for the H200.
    assert memory_from_class("h20-96g") == (97_871 - 454) * MIB
    # Labels outside the table keep their number.
    assert memory_from_class("x-48g") == 48 * GIB


def test_mig_instance_is_its_card_cut_to_size():
    card = BY_KEY["a100-80g"]
    mig = spec("a100-80g-mig-3g.40gb")
    assert mig is not None
    # 3 of 7 compute slices; 40 GB of the card's 85.1 GB of memory, and its bandwidth share.
    assert mig.bf16_flops == pytest.approx(312e12 * 3 / 7)
    assert mig.memory_bandwidth == pytest.approx(2039e9 * 40e9 / card.memory_bytes)
    assert mig.link == "none"
    assert spec("nothing-mig-1g.10gb") is None


def test_override_replaces_figures_in_datasheet_units():
    card = override(BY_KEY["rtx3090-24g"], {"link": "nvlink3", "link_gbs": 56.25, "gpus": 2})
    # An NVLink bridge between two 3090s: 112.5 GB/s both ways, 56.25 one way.
    assert (card.link, card.link_bandwidth, card.link_family) == ("nvlink3", 56.25e9, "nvlink")
    assert card.memory_bandwidth == BY_KEY["rtx3090-24g"].memory_bandwidth
    assert override(card, {"memory_bandwidth_gbs": 1000}).memory_bandwidth == 1e12


def test_override_makes_an_unknown_card_from_its_bandwidth():
    card = override(None, {"memory_bandwidth_gbs": 400, "bf16_tflops": 50}, key="x-48g")
    assert (card.key, card.memory_bandwidth, card.bf16_flops) == ("x-48g", 400e9, 50e12)
    with pytest.raises(ValueError, match="needs memory_bandwidth_gbs"):
        override(None, {"bf16_tflops": 50}, key="x-48g")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"link": "nvlnk4"}, "link is 'nvlnk4'; allowed: .*; did you mean 'nvlink4'?"),
        ({"bf16_tflops": "fast"}, "bf16_tflops is 'fast'; it must be a number above 0"),
        ({"memory_bandwidth_gbs": 0}, "memory_bandwidth_gbs is 0; it must be a number above 0"),
        ({"pcie_gbs": True}, "pcie_gbs is True; it must be a number above 0"),
    ],
)
def test_override_refuses_bad_values(fields, message):
    with pytest.raises(ValueError, match=message):
        override(BY_KEY["h100-80g"], fields)


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [
        ("400 Gb/s", 50e9),  # NDR InfiniBand: 400 gigabits, 50 gigabytes
        ("400Gbps", 50e9),
        ("200 gb/s", 25e9),  # lower-case b: bits
        ("50 GB/s", 50e9),  # upper-case B: bytes
        ("1.6 Tb/s", 200e9),
        (100, 12.5e9),  # a bare number is Gb/s, as ports are sold
    ],
)
def test_fabric_bandwidth(text, bytes_per_s):
    assert fabric_bandwidth(text) == pytest.approx(bytes_per_s)


@pytest.mark.parametrize("text", ["fast", "400 furlongs", "-5 Gb/s", "0 Gb/s"])
def test_fabric_bandwidth_refuses_what_is_not_a_rate(text):
    with pytest.raises(ValueError):
        fabric_bandwidth(text)


# --- The table as data (llmfit/data/cards.toml) --------------------------------------------


def test_table_rows_become_the_figures_they_state():
    # cards.toml's rows, worked by hand: the H100 SXM's row states bandwidth_gbs = 3350 and
    # bf16_tflops = 989.5; the MI355X's hbm_gib = 288 (288 GiB less 16 MiB); the H200's
    # smi_mib = 143771 (less the 454 MiB reserve); the GB200's smi_mib = 189471 likewise.
    h100, mi355x, h200, gb200 = (
        BY_KEY[k] for k in ("h100-80g", "mi355x-288g", "h200-141g", "gb200-186g")
    )
    assert h100.memory_bandwidth == 3350e9 and h100.bf16_flops == 989.5e12
    assert mi355x.memory_bytes == 288 * 2**30 - 16 * 2**20 == 309_220_868_096
    assert h200.memory_bytes == (143_771 - 454) * 2**20 == 150_278_766_592
    assert gb200.memory_bytes == (189_471 - 454) * 2**20 == 198_198_689_792


ROW = """[[card]]
key = "x1-8g"
name = "X1"
vendor = "nvidia"
architecture = "ampere"
aliases = []
memory_kind = "marketed"
marketed_gb = 8
bandwidth_gbs = 100
link = "pcie4"
link_gbs = 32
pcie_gbs = 32
source = "a test"
"""


def test_a_good_row_parses():
    (card,) = parse_table(ROW)
    assert (card.key, card.memory_bytes, card.memory_bandwidth) == ("x1-8g", 7_840_000_000, 1e11)
    assert card.bf16_flops is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("bandwidth_gbs = 100", "bandwidth_gbs = -1"), "card 'x1-8g' bandwidth_gbs is -1"),
        (("bandwidth_gbs = 100", "bandwidth_gbs = nan"), "card 'x1-8g' bandwidth_gbs is nan"),
        (('link = "pcie4"', 'link = "pcie9"'), "card 'x1-8g' link is 'pcie9'"),
        (('source = "a test"', 'sauce = "a test"'), "card 'x1-8g' has unknown fields sauce"),
        (("marketed_gb = 8", "hbm_gib = 8"), "memory_kind 'marketed' gives marketed_gb alone"),
        (('source = "a test"\n', ""), "card 'x1-8g' lacks source"),
    ],
)
def test_a_bad_row_is_named(change, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_table(ROW.replace(*change))


def test_two_rows_of_one_key_are_refused():
    with pytest.raises(ValueError, match="cards x1-8g appear more than once"):
        parse_table(ROW + "\n" + ROW)


# --- Cards by their own generation ---------------------------------------------------------


@pytest.mark.parametrize("card", CARDS, ids=lambda c: c.key)
def test_every_figure_is_positive_and_finite(card):
    figures = [card.memory_bytes, card.memory_bandwidth, card.pcie_bandwidth]
    figures += [
        x for x in (card.bf16_flops, card.fp8_flops, card.fp4_flops, card.int8_ops) if x is not None
    ]
    assert all(math.isfinite(x) and x > 0 for x in figures)
    assert math.isfinite(card.link_bandwidth) and card.link_bandwidth >= 0
    assert (card.link_bandwidth == 0) == (card.link == "none")
    assert card.architecture in cards.ARCHITECTURES


def test_cards_of_one_family_each_name_their_own_source():
    # A card that borrowed a sibling's figures (a B300 read as a B200) would carry the sibling's
    # source string: within a family, no two cards may.
    seen: dict[tuple[str, str], str] = {}
    for c in CARDS:
        k = (cards.family(c.key), c.source)
        assert k not in seen, f"{c.key} and {seen[k]} share the source {c.source!r}"
        seen[k] = c.key


def test_a_new_generation_is_not_its_predecessor():
    # HGX B300 datasheet ÷ 8: FP4 108 PFLOPS dense → 13.5 per GPU (the HGX B200's 72 → 9);
    # AMD MI355X data sheet: 8 TB/s and 5,033.2 TFLOPS FP8 dense (MI300X: 5.3 TB/s, 2,614.9).
    b200, b300 = BY_KEY["b200-180g"], BY_KEY["b300-288g"]
    assert (b200.architecture, b300.architecture) == ("blackwell", "blackwell-ultra")
    assert (b200.fp4_flops, b300.fp4_flops) == (9000e12, 13500e12)
    assert b300.memory_bytes == (275_040 - 454) * 2**20  # nvidia-smi's total less the reserve
    mi300x, mi355x = BY_KEY["mi300x-192g"], BY_KEY["mi355x-288g"]
    assert (mi300x.architecture, mi355x.architecture) == ("cdna3", "cdna4")
    assert (mi300x.memory_bandwidth, mi355x.memory_bandwidth) == (5300e9, 8000e9)
    assert (mi300x.fp8_flops, mi355x.fp8_flops, mi300x.fp4_flops) == (2614.9e12, 5033.2e12, None)
    assert resolve("NVIDIA B300 SXM6 AC") == "b300-288g" and resolve("gb300") == "gb300-288g"


def test_fp4_is_only_where_the_card_has_it_and_outruns_fp8():
    for c in CARDS:
        if c.fp4_flops is not None:
            assert c.architecture in ("blackwell", "blackwell-ultra", "blackwell-rtx", "cdna4")
            assert c.fp8_flops is not None and c.fp4_flops >= c.fp8_flops
