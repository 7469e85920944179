"""The cards llmfit knows: what each GPU class holds, how fast it reads and multiplies, and how it
talks to the cards beside it.

Data, not code paths: the table is llmfit/data/cards.toml, shipped in the package and read once at
import into one `CardSpec` a class, each naming its source. (This is the one file the plan package
reads: its own data, never the outside world; a bad row fails the import with the row and field
named.) The figures are the makers' own (datasheets and architecture whitepapers, named per row),
with these conventions:

- `memory_bytes` is what the driver reports (CUDA's totalGlobalMem, HIP's, Metal's
  recommendedMaxWorkingSetSize), because an engine's share of a card is a share of that, not of
  the number on the box. `memory_kind` says how it was had: "measured" (a tool printed it; the
  sources are in fixtures/fleet/gpu-memory-totals.md), "smi-reserve" (nvidia-smi's framebuffer
  total less the 454 MiB the H100 reserves, where CUDA's own total was not found), "metal" (the
  working set Metal allows one process, measured on Macs of that memory size), "hbm-gib" (AMD's
  Instinct cards are sold at their HBM size in GiB, not GB: the MI300X's "192 GB" is HIP's
  196,592 MiB, 192 GiB less 16 MiB, and an MI355X "288 GB" had 287.18 GiB free as SGLang
  loaded; such a class is its GiB less the same 16 MiB) or "marketed" (0.98 × the decimal GB the
  card is sold as: the lowest ratio of a measured CUDA total to the marketed size among the
  cards measured is the L4's, 23.57 of 24 GB).
- Tensor throughput is DENSE: where a maker states only the figure "with sparsity", half of it.
  `bf16_flops` is the 16-bit rate an engine's bf16 matmuls get (GeForce cards: with FP32
  accumulate, half their FP16-accumulate rate); on cards without bf16 it is their fp16 rate (T4,
  RTX 2080 Ti, RX 7900 XTX) or, without tensor cores, fp32 (P40); `fields_derived` names what a
  row worked out rather than read.
- Links are bytes a second in ONE direction for one GPU: makers quote NVLink and PCIe both ways
  (H100 SXM: "NVLink 900 GB/s", 450 each way; "PCIe Gen5 128 GB/s", 64 each way).
  `link` is the fastest path between two cards of one node as the class is usually sold (PCIe
  cards talk over PCIe; a bridge is a fleet-file override).

None of these figures could be checked against the makers' pages from here (no network): they
are the datasheets' as remembered and cross-checked between sibling rows; a fleet entry
overrides any of them (`override`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmfit.plan import package_data

GIB = 1 << 30
MIB = 1 << 20
G = 1e9  # GB/s
T = 1e12  # TFLOPS


@dataclass(frozen=True)
class CardSpec:
    """One GPU class: memory, bandwidth, dense tensor throughput and links, with its source."""

    key: str  # the class label llmfit prints ("h100-80g")
    name: str  # the product as its maker names it
    vendor: str  # "nvidia" | "amd" | "apple"
    aliases: tuple[str, ...]  # names people type, and nvidia-smi's product names
    memory_bytes: int  # see the module docstring for what each `memory_kind` means
    memory_kind: str  # "measured" | "smi-reserve" | "metal" | "hbm-gib" | "marketed"
    memory_bandwidth: float  # bytes/s
    bf16_flops: float | None  # dense 16-bit tensor FLOP/s (None: not published)
    fp8_flops: float | None  # dense FP8 FLOP/s (None: the card has none)
    int8_ops: float | None  # dense INT8 OP/s
    link: str  # "nvlink3".."nvlink5", "infinity-fabric", "pcie3".."pcie5", "none"
    link_bandwidth: float  # bytes/s one way, card to card within a node (0 when "none")
    pcie_bandwidth: float  # bytes/s one way between the card and its host
    source: str
    fields_derived: tuple[str, ...] = ()
    notes: str = ""
    # Apple silicon: all the machine's memory, of which `memory_bytes` is Metal's share.
    unified_bytes: int | None = None
    # The generation whose kernels and efficiencies the card shares (ARCHITECTURES): what a
    # serving model keys its efficiency priors on. A B300 is "blackwell-ultra", not a B200's
    # "blackwell"; an MI355X "cdna4", not an MI300X's "cdna3".
    architecture: str = "unknown"
    fp4_flops: float | None = None  # dense FP4 FLOP/s (None: the card has no FP4 units)

    @property
    def backend(self) -> str:
        """The engines' compute backend on this card: "cuda", "rocm" or "metal"."""
        return {"nvidia": "cuda", "amd": "rocm", "apple": "metal"}[self.vendor]

    @property
    def link_family(self) -> str:
        """The link's family ("nvlink", "infinity-fabric", "pcie", "none"): what sets a
        collective's latency."""
        return re.sub(r"\d+$", "", self.link)


def _marketed(gb: float) -> int:
    return int(gb * 1e9 * 0.98)


def _hbm_gib(gib: int) -> int:
    return gib * GIB - 16 * MIB


PCIE3, PCIE4, PCIE5 = 16 * G, 32 * G, 64 * G  # x16, one way (makers: 32, 64, 128 GB/s both ways)

# The share of unified memory Metal lets one process use (recommendedMaxWorkingSetSize), by
# memory size in GB, as llama.cpp printed it on real Macs (macOS 14-26): 8 GB 5726.63 MB, 16 GB
# 11453.25 MB (2/3), 24 GiB 19,069,665,280 B, 32 GB 26800.60 MB, 36 GB 30150.67 MB, 64 GB
# 55,662.79 MB (51539.61 on older macOS: the smaller is kept), 128 GB 115,448,725,504 B, 256 GB
# 239,143,780,352 B. Sizes in between take the share of the next smaller size measured, which
# is never more than theirs.
METAL_SHARE: dict[int, float] = {
    8: 2 / 3,
    16: 2 / 3,
    24: 19_069_665_280 / (24 * GIB),
    32: 26_800.60e6 / (32 * GIB),
    36: 30_150.67e6 / (36 * GIB),
    64: 51_539.61e6 / (64 * GIB),
    128: 115_448_725_504 / (128 * GIB),
    256: 239_143_780_352 / (256 * GIB),
}


def metal_share(gb: int) -> float:
    """The share of `gb` GB of unified memory Metal lets one process use."""
    return METAL_SHARE[max(k for k in METAL_SHARE if k <= gb)]


APPLE_SPECS = "Apple tech specifications pages (memory options, bandwidth); GPU TFLOPS per notes"
VENDORS = ("nvidia", "amd", "apple")
# Generations, each with its own kernels: NVIDIA by SM family ("blackwell" is sm_100 of B200 and
# GB200, "blackwell-ultra" sm_103 of B300 and GB300, "blackwell-rtx" sm_120/121 of the RTX 50,
# RTX PRO and GB10), AMD by CDNA/RDNA generation, Apple by M generation.
ARCHITECTURES = (
    "pascal",
    "turing",
    "ampere",
    "ada",
    "hopper",
    "blackwell",
    "blackwell-ultra",
    "blackwell-rtx",
    "cdna3",
    "cdna4",
    "rdna3",
    "rdna3.5",
    "apple-m1",
    "apple-m2",
    "apple-m3",
    "apple-m4",
)
LINKS = ("nvlink3", "nvlink4", "nvlink5", "infinity-fabric", "pcie3", "pcie4", "pcie5", "none")
DATA_FILE = "data/cards.toml"


class _Row:
    """One table of cards.toml as read, whose getters check each value's type and range and name
    the row and field in the error."""

    def __init__(self, where: str, table: object, allowed: frozenset[str]) -> None:
        if not isinstance(table, dict):
            raise ValueError(f"{DATA_FILE}: {where} is not a table")
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise ValueError(f"{DATA_FILE}: {where} has unknown fields {', '.join(unknown)}")
        self.where, self.table = where, table

    def has(self, field: str) -> bool:
        return field in self.table

    def text(self, field: str, default: str | None = None) -> str:
        value = self.table.get(field, default)
        if value is None:
            raise ValueError(f"{DATA_FILE}: {self.where} lacks {field}")
        if not isinstance(value, str) or (value == "" and default is None):
            raise ValueError(f"{DATA_FILE}: {self.where} {field} is {value!r}, not a text")
        return value

    def texts(self, field: str) -> tuple[str, ...]:
        value = self.table.get(field, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"{DATA_FILE}: {self.where} {field} is {value!r}, not a list of texts")
        return tuple(value)

    def number(self, field: str, *, zero: bool = False) -> float:
        """A positive finite number (or zero where `zero`); int stays int, so a figure read is
        the same float the old literals made (`1555 * G`)."""
        value = self.table.get(field)
        if value is None:
            raise ValueError(f"{DATA_FILE}: {self.where} lacks {field}")
        if (
            isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value < 0 or (value == 0 and not zero)
        ):  # fmt: skip
            raise ValueError(f"{DATA_FILE}: {self.where} {field} is {value!r}; must be above 0")
        return float(value)

    def rate(self, field: str, unit: float) -> float | None:
        return self.number(field) * unit if field in self.table else None


_CARD_FIELDS = frozenset(
    {
        "key", "name", "vendor", "architecture", "aliases", "memory_kind", "memory_bytes",
        "smi_mib", "hbm_gib", "marketed_gb", "bandwidth_gbs", "bf16_tflops", "fp8_tflops",
        "fp4_tflops", "int8_tops", "link", "link_gbs", "pcie_gbs", "source", "fields_derived",
        "notes",
    }
)  # fmt: skip


def _smi_reserve(mib: float) -> int:
    return (int(mib) - 454) * MIB


# memory_kind → the field that gives it, and how that field becomes the bytes the card holds.
_MEMORY: dict[str, tuple[str, Callable[[float], int]]] = {
    "measured": ("memory_bytes", int),
    "smi-reserve": ("smi_mib", _smi_reserve),
    "hbm-gib": ("hbm_gib", lambda gib: _hbm_gib(int(gib))),
    "marketed": ("marketed_gb", _marketed),
}
_DERIVABLE = frozenset({"bf16_flops", "fp8_flops", "fp4_flops", "int8_ops", "memory_bandwidth"})


def _card(i: int, table: object) -> CardSpec:
    named = table.get("key") if isinstance(table, dict) else None
    row = _Row(
        f"card {named!r}" if isinstance(named, str) else f"card {i + 1}", table, _CARD_FIELDS
    )
    key = row.text("key")
    vendor = row.text("vendor")
    if vendor not in VENDORS:
        raise ValueError(f"{DATA_FILE}: card {key!r} vendor is {vendor!r}; one of {VENDORS}")
    kind = row.text("memory_kind")
    if kind not in _MEMORY:
        raise ValueError(f"{DATA_FILE}: card {key!r} memory_kind is {kind!r}; one of {[*_MEMORY]}")
    field, to_bytes = _MEMORY[kind]
    given = [f for f, _ in _MEMORY.values() if row.has(f)]
    if given != [field]:
        raise ValueError(f"{DATA_FILE}: card {key!r} of memory_kind {kind!r} gives {field} alone")
    arch = row.text("architecture")
    if arch not in ARCHITECTURES:
        raise ValueError(
            f"{DATA_FILE}: card {key!r} architecture is {arch!r}; one of {ARCHITECTURES}"
        )
    link = row.text("link")
    if link not in LINKS:
        raise ValueError(f"{DATA_FILE}: card {key!r} link is {link!r}; one of {LINKS}")
    derived = row.texts("fields_derived")
    if not set(derived) <= _DERIVABLE:
        raise ValueError(f"{DATA_FILE}: card {key!r} fields_derived names {derived}")
    return CardSpec(
        key, row.text("name"), vendor, row.texts("aliases"),
        to_bytes(row.number(field)), kind, row.number("bandwidth_gbs") * G,
        row.rate("bf16_tflops", T), row.rate("fp8_tflops", T), row.rate("int8_tops", T),
        link, row.number("link_gbs", zero=True) * G, row.number("pcie_gbs") * G,
        row.text("source"), fields_derived=derived, notes=row.text("notes", ""),
        architecture=arch, fp4_flops=row.rate("fp4_tflops", T),
    )  # fmt: skip


_APPLE_FIELDS = frozenset(
    {"chip", "gpu_cores", "bandwidth_gbs", "gpu_tflops", "tflops_derived", "memory_gb", "key",
     "aliases"}
)  # fmt: skip


def _apple(i: int, table: object) -> tuple[CardSpec, ...]:
    """The classes of one Apple chip row: one a memory size it is sold with."""
    row = _Row(f"apple {i + 1}", table, _APPLE_FIELDS)
    chip, cores = row.text("chip"), int(row.number("gpu_cores"))
    bw, tflops = row.number("bandwidth_gbs"), row.number("gpu_tflops")
    derived = row.table.get("tflops_derived")
    sizes = row.table.get("memory_gb")
    if not isinstance(derived, bool):
        raise ValueError(f"{DATA_FILE}: apple {chip!r} tflops_derived must be true or false")
    if (
        not isinstance(sizes, list)
        or not sizes
        or not all(isinstance(s, int) and not isinstance(s, bool) and 8 <= s <= 1024 for s in sizes)
    ):
        raise ValueError(f"{DATA_FILE}: apple {chip!r} memory_gb is {sizes!r}, not GB sizes")
    words = chip.replace("-", " ").title()
    out = tuple(
        CardSpec(
            f"{chip}-{gb}g", f"Apple {words} ({cores}-core GPU) {gb}GB", "apple",
            (f"apple-{chip}-{gb}g", f"{chip}-{gb}gb", f"Apple {words} {gb}GB"),
            int(gb * GIB * metal_share(gb)), "metal", bw * G, tflops * T, None, tflops * T,
            "none", 0.0, bw * G, f"{APPLE_SPECS}: {words}, {cores}-core GPU, {gb} GB",
            fields_derived=("int8_ops",) + (("bf16_flops",) if derived else ()),
            notes=f"Metal lets a process use {metal_share(gb):.0%} of {gb} GB",
            unified_bytes=gb * GIB,
            architecture="apple-" + chip.split("-")[0],
        )
        for gb in sizes
    )  # fmt: skip
    if row.has("key"):
        # A variant sold beside a chip's usual GPU at the same memory (the M1 Max's 24-core GPU
        # at 32 GB): its own class under its own names.
        if len(out) != 1:
            raise ValueError(f"{DATA_FILE}: apple {chip!r} with a key has one memory_gb")
        out = (dataclasses.replace(out[0], key=row.text("key"), aliases=row.texts("aliases")),)
    return out


def parse_table(text: str) -> tuple[CardSpec, ...]:
    """The cards a cards.toml text holds, each row checked: a bad one is a ValueError naming the
    row and the field."""
    import tomllib  # not at start-up: the table itself is read by package_data, parsed or kept

    return _table(tomllib.loads(text))


def _table(doc: dict[str, Any]) -> tuple[CardSpec, ...]:
    """`parse_table` of the text's parse."""
    unknown = sorted(set(doc) - {"card", "apple"})
    if unknown:
        raise ValueError(f"{DATA_FILE}: unknown tables {', '.join(unknown)}")
    out = [_card(i, t) for i, t in enumerate(doc.get("card", []))]
    for i, t in enumerate(doc.get("apple", [])):
        out += _apple(i, t)
    keys = [c.key for c in out]
    if dupes := sorted({k for k in keys if keys.count(k) > 1}):
        raise ValueError(f"{DATA_FILE}: cards {', '.join(dupes)} appear more than once")
    return tuple(out)


CARDS: tuple[CardSpec, ...] = _table(package_data.read_toml(DATA_FILE))


def _norm(name: str) -> str:
    """A name as compared: lower case, "80GB" as "80g", and nothing but letters, digits and dots."""
    return _NOT_NAME.sub("", _GB.sub(r"\1g", name.strip().lower()))


# Compiled once: every name of the table is compared so as it is read, 340 at each start.
_GB = re.compile(r"(\d)\s*gb\b")
_NOT_NAME = re.compile(r"[^a-z0-9.]")


BY_KEY: dict[str, CardSpec] = {c.key: c for c in CARDS}
_BY_NAME: dict[str, str] = {}
for _c in CARDS:
    for _n in (_c.key, *_c.aliases):
        _BY_NAME.setdefault(_norm(_n), _c.key)

_MIG = re.compile(r"^(.*)-mig-(\d+)g\.(\d+)gb$")


_SIZED = re.compile(r"^(.*?)[-_ ](\d+)\s*gb?$")  # "a6000-48g", "h100 80GB"


# Names of more than one card of different memory: "a100" is sold with 40 and 80 GB, and a plan
# for the 80 GB card runs an A100-40GB out of memory. Such a name needs its size.
AMBIGUOUS: dict[str, tuple[str, ...]] = {"a100": ("a100-40g", "a100-80g")}


def resolve(name: str) -> str | None:
    """The class key a name means: exact, case- and spacing-insensitive ("H100 80GB HBM3",
    "h100-80gb" and "h100" are all "h100-80g"), or a known name with the size its class has
    ("a6000-48g" is "rtxa6000-48g", "h100-96g" is nothing); None for a name the table does not
    know."""
    if key := _BY_NAME.get(_norm(name)):
        return key
    m = _SIZED.match(name.strip().lower())
    if m and (key := _BY_NAME.get(_norm(m.group(1)))) and key.endswith(f"-{m.group(2)}g"):
        return key
    return None


def typo_of(name: str) -> str | None:
    """The known class a name not in the table was surely meant to be: as close as one changed
    letter ("h10-80g" for "h100-80g") and of the same size. A name further off, or of another
    size, may be a card the table lacks, and is left to the caller to warn about."""
    import difflib  # only for a name the table lacks

    norm = _norm(name)
    size = _SIZED.match(name.strip().lower())
    for hit in difflib.get_close_matches(norm, list(_BY_NAME), n=1, cutoff=0.85):
        key = _BY_NAME[hit]
        if size and key.endswith(f"-{size.group(2)}g"):
            return key
    return None


def suggest(name: str, n: int = 3) -> tuple[str, ...]:
    """The known class keys closest to an unknown name, best first, for "did you mean"."""
    import difflib

    norm = _norm(name)
    out: list[str] = []
    for hit in difflib.get_close_matches(norm, list(_BY_NAME), n=4 * n, cutoff=0.6):
        key = _BY_NAME[hit]
        if key not in out:
            out.append(key)
    return tuple(out[:n])


def consumer(gpu_class: str) -> bool:
    """A desktop's card (GeForce, Radeon, Apple silicon), not a data centre's or a workstation's:
    one that serves one person, and plans at a desktop's context (issue 34 item 6)."""
    s = spec(gpu_class)
    if s is None:
        return False
    return s.vendor == "apple" or any(w in s.name for w in ("GeForce", "Radeon"))


def spec(gpu_class: str) -> CardSpec | None:
    """The card a class names (by key or alias), or None.

    A MIG instance (`h100-80g-mig-3g.40gb`) is its card cut to size: `g` of the 7 compute slices
    (an A100's or H100's sevenths) and the memory bandwidth in proportion to its memory, since
    each memory slice brings its own share of the card's memory controllers; it has no link to
    other instances. `memory_bytes` is left at the card's: the instance's own is fleet.py's.
    """
    m = _MIG.match(gpu_class.strip().lower())
    if m:
        card = spec(m.group(1))
        if card is None:
            return None
        compute = min(1.0, int(m.group(2)) / 7)
        memory = min(1.0, int(m.group(3)) * 1e9 / card.memory_bytes)

        def scale(x: float | None) -> float | None:
            return None if x is None else x * compute

        return dataclasses.replace(
            card,
            key=gpu_class.strip().lower(),
            memory_bandwidth=card.memory_bandwidth * memory,
            bf16_flops=scale(card.bf16_flops),
            fp8_flops=scale(card.fp8_flops),
            int8_ops=scale(card.int8_ops),
            fp4_flops=scale(card.fp4_flops),
            link="none",
            link_bandwidth=0.0,
        )
    key = resolve(gpu_class)
    return BY_KEY[key] if key else None


# What CUDA (or HIP) reports as a card's total memory, for the classes whose total was measured
# or worked out from nvidia-smi's (see CardSpec.memory_kind). fleet.memory_from_class and the
# machine importer read this; classes sold at a size and never measured are not in it.
REPORTED_TOTALS: dict[str, int] = {
    c.key: c.memory_bytes for c in CARDS if c.memory_kind in ("measured", "smi-reserve")
}


# --- What a fleet entry may say about its cards, and about its fabrics ------------------------

# Fleet-file key → (CardSpec field, multiplier into the field's unit). Numbers are in the units
# people read on datasheets: GB/s (decimal, one way for links), TFLOPS, TOPS.
OVERRIDE_KEYS: dict[str, tuple[str, float]] = {
    "memory_bandwidth_gbs": ("memory_bandwidth", G),
    "bf16_tflops": ("bf16_flops", T),
    "fp8_tflops": ("fp8_flops", T),
    "int8_tops": ("int8_ops", T),
    "link_gbs": ("link_bandwidth", G),
    "pcie_gbs": ("pcie_bandwidth", G),
}
# The most a fleet file may say of a card's bandwidth (GB/s) or tensor rate (TFLOPS, TOPS), and
# the least: 1 MB/s or 1 GFLOPS is below any card, and a figure of 5e-324 made every time
# Infinity in the JSON (issue 33); at 0.001 the slowest plan's times stay finite.
MAX_FIGURE = 1_000_000
MIN_FIGURE = 0.001
# A named link's own bandwidth, one way, card to card, as its generation is sold: what a fleet's
# `link` brings where it does not give `link_gbs` and names a link other than the table's for the
# card (an H800's NVLink 4 stays its 200 GB/s). NVLink 3, 4, 5: an A100's, an H100 SXM's, a
# B200's (their datasheets, llmfit/data/cards.toml); Infinity Fabric: an MI300X's seven links;
# PCIe: x16; "none": no link of its own, so cards exchange over PCIe (speed.py charges PCIe's
# bandwidth and latency).
LINK_BANDWIDTH: dict[str, float] = {
    "nvlink3": 300 * G, "nvlink4": 450 * G, "nvlink5": 900 * G, "infinity-fabric": 448 * G,
    "pcie3": PCIE3, "pcie4": PCIE4, "pcie5": PCIE5, "none": 0.0,
}  # fmt: skip


def override(card: CardSpec | None, fields: Mapping[str, object], key: str = "") -> CardSpec:
    """A card with a fleet entry's figures in place of the table's.

    `fields` holds fleet-file keys (OVERRIDE_KEYS, and `link` naming one of LINKS); keys it does
    not name are ignored, so the whole pool table can be passed. With no card (a class the table
    does not know), `memory_bandwidth_gbs` is required and makes one, named `key`. A bad value is
    a ValueError whose message names the key and what is allowed.
    """
    changes: dict[str, object] = {}
    for name, (attr, unit) in OVERRIDE_KEYS.items():
        if name not in fields:
            continue
        value = fields[name]
        # Bounded: a NaN or an infinity would time every step at zero or forever, past a
        # million GB/s or TFLOPS no card exists, and below a thousandth none does either.
        if (
            isinstance(value, bool) or not isinstance(value, (int, float))
            or not MIN_FIGURE <= value <= MAX_FIGURE
        ):  # fmt: skip
            raise ValueError(
                f"{name} is {value!r}; it must be a number from {MIN_FIGURE:g} to {MAX_FIGURE:,}"
            )
        changes[attr] = float(value) * unit
    if "link" in fields:
        given = fields["link"]
        if not isinstance(given, str):
            # JSON's null is no link's name (str() would read it as "none").
            raise ValueError(f"link is {given!r}; it must be one of {', '.join(LINKS)}")
        link = given.strip().lower()
        if link not in LINKS:
            import difflib

            close = difflib.get_close_matches(link, LINKS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"link is {link!r}; allowed: {', '.join(LINKS)}{hint}")
        changes["link"] = link
        if "link_gbs" not in fields and (card is None or card.link != link):
            # A link other than the card's brings its own bandwidth (pcie3 on an H100 is
            # 16 GB/s, not NVLink's 450).
            changes["link_bandwidth"] = LINK_BANDWIDTH[link]
    if card is None:
        if "memory_bandwidth" not in changes:
            raise ValueError(
                f"{key!r} is not a card llmfit knows, so its speed needs memory_bandwidth_gbs"
            )
        card = CardSpec(
            key, key, "nvidia", (), 0, "marketed", 0.0, None, None, None, "pcie4", PCIE4, PCIE4,
            "the fleet file",
        )  # fmt: skip
    changes["source"] = card.source + " (with fleet overrides)"
    return dataclasses.replace(card, **changes)  # type: ignore[arg-type]


_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-z/]*)\s*$", re.I)
# A fabric whose bandwidth is not stated is taken as one 400 Gb/s NDR InfiniBand port a GPU, as
# DGX H100/H200 and HGX B200 nodes are built.
DEFAULT_FABRIC_BANDWIDTH = 400e9 / 8


def fabric_bandwidth(value: str | float) -> float:
    """Bytes a second, one way, from a fabric's stated rate: "400 Gb/s", "400Gbps", "50 GB/s",
    or a bare number, read as Gb/s as network ports are sold. A ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"fabric bandwidth {value!r} is not a rate like '400 Gb/s'")
    if isinstance(value, (int, float)):
        number, unit = float(value), "gb/s"
    else:
        m = _RATE.match(value)
        if not m:
            raise ValueError(f"fabric bandwidth {value!r} is not a rate like '400 Gb/s'")
        number, unit = float(m.group(1)), m.group(2) or "Gb/s"
    bits = {"gb/s": 1e9 / 8, "gbps": 1e9 / 8, "gbit/s": 1e9 / 8, "tb/s": 1e12 / 8}
    byte = {"GB/s": 1e9, "GBps": 1e9, "TB/s": 1e12}
    if unit in byte:
        factor = byte[unit]
    elif unit.lower() in bits and not unit.startswith("GB"):
        factor = bits[unit.lower()]
    else:
        raise ValueError(f"fabric bandwidth {value!r}: the unit must be Gb/s, Gbps or GB/s")
    if number <= 0:
        raise ValueError(f"fabric bandwidth {value!r} must be above 0")
    return number * factor


# Families of cards that an engine's fitted efficiencies are looked up by (plan/engines/
# *_speed.py): cards of one family share the kernels an engine runs on them, so the share of
# their bandwidth and tensor rate it reaches is fitted once for the family, from whichever of its
# cards the measured runs used. A key not named here is its vendor's "other" family.
FAMILIES: tuple[tuple[str, str], ...] = (
    (r"^(h100|h200|h800|h20|gh200)", "nvidia-hopper"),
    (r"^(b200|b300|gb200|gb300|gb10)", "nvidia-blackwell"),
    (r"^(a100|a800|a30)", "nvidia-ampere"),
    (r"^(l4|l40|a10|rtxa|rtx\d+ada|rtxpro|t4|p40)", "nvidia-workstation"),
    (r"^rtx\d", "nvidia-geforce"),
    (r"^mi\d", "amd-instinct"),
    (r"^(rx|radeon)", "amd-radeon"),
)


def family(key: str) -> str:
    """The family a card class belongs to (a MIG instance: its card's), for fitted efficiencies:
    "nvidia-hopper", "amd-instinct", "apple", … ; "other" for a class the table does not know."""
    base = _MIG.sub(r"\1", key.strip().lower())
    card = BY_KEY.get(base)
    for pattern, name in FAMILIES:
        if re.match(pattern, base):
            return name
    if card is not None:
        return {"apple": "apple", "amd": "amd-other", "nvidia": "nvidia-other"}[card.vendor]
    return "other"
