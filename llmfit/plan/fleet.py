"""The fleet as a plan sees it: nodes, and the kinds of device each one has.

Card memory is bytes as CUDA reports them, because that is what an engine's share of a card is a
share of. A card sold as 80 GB shows CUDA about 79.2 GiB (H100: 79.18 GiB in vLLM's own startup
lines); reading `h100-80g` as 80 GiB would start every plan 0.8 GiB optimistic on every card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llmfit.plan import cards

GIB = 1 << 30
MIB = 1 << 20

# What CUDA reports as a card's total memory (torch.cuda.mem_get_info, vLLM's total_gpu_memory),
# and every other figure about a card, is in the card table (plan/cards.py), with its source;
# REPORTED_TOTALS is kept here under its old name for the importers.
REPORTED_TOTALS = cards.REPORTED_TOTALS

_MIG = re.compile(r"-mig-((\d+)g\.(\d+)gb)$")

# What a MIG instance really holds, by profile: its name rounds up (a "3g.40gb" has 39.25 GiB), by
# 1 % to 17 %, so a plan that believed the name would be that much optimistic on every instance.
# From `nvidia-smi mig -lgip` and GPU Feature Discovery labels (fixtures/fleet/); where a profile
# has been seen with two sizes (B200's 1g.23gb: 22.00 GiB, then 20.50 on a later driver), the
# smaller is kept.
MIG_TOTALS: dict[str, int] = {
    "1g.5gb": 4864 * MIB,  # A100 40GB, GFD label
    "3g.20gb": 20096 * MIB,  # A100 40GB, GFD label
    "7g.40gb": 40192 * MIB,  # A100-SXM4-40GB, GFD label
    "1g.10gb": int(9.62 * GIB),  # H100 PCIe -lgip (GFD: 9856 MiB)
    "1g.20gb": int(19.50 * GIB),
    "2g.20gb": int(19.50 * GIB),
    "3g.40gb": int(39.25 * GIB),
    "4g.40gb": int(39.25 * GIB),
    "7g.80gb": int(79.00 * GIB),
    "1g.6gb": int(5.81 * GIB),  # A30
    "2g.12gb": int(11.69 * GIB),
    "4g.24gb": int(23.50 * GIB),
    "3g.47gb": 47488 * MIB,  # H100 NVL, CUDA's total global memory
    "1g.12gb": int(10.75 * GIB),  # H100 NVL -lgip
    "2g.24gb": int(21.62 * GIB),
    "1g.18gb": int(17.50 * GIB),  # H200
    "1g.36gb": int(35.25 * GIB),
    "1g.23gb": int(20.50 * GIB),  # B200
    "1g.45gb": int(44.25 * GIB),
    "2g.45gb": int(44.25 * GIB),
    "1g.24gb": int(20.00 * GIB),  # GB200
    "1g.47gb": int(45.50 * GIB),
    "2g.47gb": int(45.50 * GIB),
}
# An unknown profile is charged the smallest share of its name seen among the known ones (the
# GB200's 1g.24gb holds 0.83 of its name), so that no instance is planned larger than it is.
MIG_UNKNOWN_SHARE = 0.83
_CARD = re.compile(r"-(\d+)g$")


def is_mig(gpu_class: str) -> bool:
    """A class naming MIG instances ("a100-80g-mig-3g.40gb"): one runs a replica, never a group.

    A process opens one MIG instance, and instances have no NVLink between them, so a replica that
    does not fit one instance does not fit the class.
    """
    return "-mig-" in gpu_class


def memory_from_class(gpu_class: str) -> int | None:
    """Card (or MIG instance) memory in bytes, read from its class label; None if unreadable.

    `h100-80g` → the H100's reported total; a class in the card table → the memory the table
    gives it (what the driver reports, or for a class never measured 0.98 of the decimal GB it is
    sold as; an Apple class: the share Metal lets a process use); an unknown `x-48g` → 48 GiB; a
    MIG instance `a100-80g-mig-3g.40gb` → what the instance holds, not the card.
    """
    label = gpu_class.strip().lower()
    m = _MIG.search(label)
    if m:
        profile, named = m.group(1), int(m.group(3))
        return MIG_TOTALS.get(profile, int(named * GIB * MIG_UNKNOWN_SHARE))
    card = cards.BY_KEY.get(label)
    if card is not None:
        return card.memory_bytes
    m = _CARD.search(label)
    if m:
        return int(m.group(1)) * GIB
    return None


def memory_source(card: object) -> str:
    """Where a card's memory figure comes from, in words: "as CUDA reports it" for a class whose
    reported total is known and unchanged, else what the plan had to go on."""
    gpu_class = getattr(card, "gpu_class", "")
    total = getattr(card, "total_bytes", 0)
    if is_mig(gpu_class):
        return (
            "as nvidia-smi gives the instance"
            if memory_from_class(gpu_class) == total
            else ("as the fleet file gives it")
        )
    if REPORTED_TOTALS.get(gpu_class) == total:
        return "as CUDA reports it"
    if memory_from_class(gpu_class) == total:
        return "read from its label"
    return "as the fleet file gives it"


@dataclass(frozen=True)
class PoolKind:
    """One class of a node's devices: whole cards of one kind, or MIG instances of one profile."""

    gpu_class: str
    card_bytes: int
    gpus: int
    free_gpus: int
    unhealthy_gpus: int = 0
    # The card's figures where the fleet file gives its own (memory_bandwidth_gbs, bf16_tflops,
    # link, …: cards.OVERRIDE_KEYS): None, the card table's.
    override: cards.CardSpec | None = None

    @property
    def spec(self) -> cards.CardSpec | None:
        """What the speed model knows of the card: the fleet file's figures, else the table's;
        None for a class neither describes (it is sized, but not timed)."""
        return self.override or cards.spec(self.gpu_class)

    @property
    def healthy(self) -> int:
        """Cards that exist and work; unhealthy cards are neither used nor free."""
        return self.gpus - self.unhealthy_gpus


@dataclass(frozen=True)
class PoolNode:
    """One node of the fleet, or `count` identical nodes (a [[pool]]): a pool of a million nodes
    is one object, and its nodes' ids are made only when a plan names them."""

    id: str
    kinds: tuple[PoolKind, ...] = ()
    # A replica spans nodes only within one fabric; "" is an island.
    fabric: str = ""
    ram_bytes: int = 0
    free_ram_bytes: int = 0
    # Identical nodes this one stands for (a pool is kept as a count, never one object a node).
    count: int = 1
    # 0: one node, named `id`. Else the nodes are named `id-first` … `id-(first + count - 1)`.
    first: int = 0
    # Node labels a scheduler selects the node by (GPU Feature Discovery's nvidia.com/gpu.product,
    # from `llmfit fleet import kubectl`), as (key, value) pairs; a Kubernetes nodeSelector reads
    # them.
    labels: tuple[tuple[str, str], ...] = ()
    # What one of its cards costs an hour (`price_per_gpu_hour`), any currency; None: not priced.
    price: float | None = None

    @property
    def is_cpu(self) -> bool:
        return not self.kinds

    def node_id(self, i: int) -> str:
        """The id of the i-th (0-based) of the nodes this entry stands for."""
        return node_id(self.id, self.first, i)

    def node_ids(self, k: int | None = None) -> tuple[str, ...]:
        """The ids of the first k of its nodes (all of them when k is None)."""
        return node_ids(self.id, self.first, self.count, k)


def node_id(stem: str, first: int, i: int) -> str:
    """The i-th (0-based) id of nodes named from `stem`; first == 0 is one node named `stem`."""
    return f"{stem}-{first + i}" if first else stem


def node_ids(stem: str, first: int, count: int, k: int | None = None) -> tuple[str, ...]:
    n = count if k is None else min(k, count)
    return tuple(node_id(stem, first, i) for i in range(n))


@dataclass(frozen=True)
class Fleet:
    """The nodes a plan may use, where they were described, and what reading them noticed."""

    nodes: tuple[PoolNode, ...]
    # Where it came from, for the user and the JSON: a path, "inline", or "this machine".
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def node_count(self) -> int:
        """Nodes, each of a pool's counted (len(nodes) counts a pool once)."""
        return sum(n.count for n in self.nodes)

    @property
    def gpus(self) -> int:
        return sum(k.healthy * n.count for n in self.nodes for k in n.kinds)

    @property
    def unhealthy(self) -> int:
        """Cards that exist but do not work: `gpus` leaves them out, `llmfit fleet` counts them."""
        return sum(k.unhealthy_gpus * n.count for n in self.nodes for k in n.kinds)

    def node_ids(self, k: int | None = None) -> tuple[str, ...]:
        """The ids of the fleet's first k nodes (all when k is None), pools expanded in order."""
        out: list[str] = []
        for n in self.nodes:
            if k is not None and len(out) >= k:
                break
            out += n.node_ids(None if k is None else k - len(out))
        return tuple(out)


# Sizes cards are sold as, in GB. A product name that states no size ("NVIDIA L40S") is named by
# the smallest of these its reported total reaches within 8 %: nvidia-smi's framebuffer total sits
# below the marketed figure (L40S 46,068 MiB = 45.0 GiB for 48 GB; H200 143,771 MiB = 140.4 GiB
# for 141 GB; B200 183,359 MiB = 179.1 GiB for 180 GB; fixtures/fleet/gpu-memory-totals.md).
MARKETED_GB = (4, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 120, 141, 180, 192)

# Words of a product name that say nothing about which card it is to the plan: the vendor, the
# brand, the memory type and the form factor (an SXM and a PCIe H100 hold the same 80 GB).
_NOISE = {
    "nvidia", "geforce", "tesla", "hbm", "hbm2", "hbm2e", "hbm3", "hbm3e", "sxm", "sxm2", "sxm4",
    "sxm5", "pcie", "nvl", "workstation", "edition", "server", "gddr6", "gddr6x", "gddr7",
}  # fmt: skip
_SIZE_WORD = re.compile(r"^(\d+)gb?$")
_NOT_IN_CLASS = re.compile(r"[^a-z0-9.]")


def marketed_gb(total_bytes: int) -> int:
    """The size a card is sold as, from the total a tool reports (bytes)."""
    gib = total_bytes / GIB
    for size in MARKETED_GB:
        if size * 0.92 <= gib <= size:
            return size
    return round(gib)


def class_from_product(product: str, total_bytes: int | None = None) -> str:
    """A GPU class label from a product name as nvidia-smi or GPU Feature Discovery gives it.

    "NVIDIA H100 80GB HBM3" → "h100-80g"; "A100-SXM4-40GB" → "a100-40g"; "NVIDIA L40S" with
    46,068 MiB → "l40s-48g"; "NVIDIA GeForce RTX 4090" → "rtx4090-24g". The size comes from the
    name when it states one, else from `total_bytes`; with neither the label has no size.
    """
    words = [w for w in re.split(r"[\s\-_]+", product.strip().lower()) if w]
    size = None
    kept: list[str] = []
    for w in words:
        m = _SIZE_WORD.match(w)
        if m:
            size = int(m.group(1))
        elif w not in _NOISE:
            # Only what a class label may hold: a product name is anyone's text (a hostile
            # kubectl label, an odd driver), and the class reaches the terminal and the commands.
            kept.append(_NOT_IN_CLASS.sub("", w))
    if total_bytes and (size is None or not size * 0.9 <= total_bytes / GIB <= size * 1.02):
        # No size in the name, or one that is not the card's: "NVIDIA GH200 480GB" counts the
        # CPU's memory too, while the GPU reports 96 GB (gpu-memory-totals.md).
        size = marketed_gb(total_bytes)
    slug = "".join(kept).strip(".")[:48] or "gpu"
    if not size:
        return slug
    # The card table's own key where it knows the card at this size, so that an imported fleet
    # names classes as a person would and reads back without a note. (Without a size, "h100"
    # could be the PCIe card or the SXM one: the label stays as the product said it.)
    label = f"{slug}-{size}g"
    return cards.resolve(label) or label


def mig_class(card_class: str, profile: str) -> str:
    """The class of a MIG instance: the card's class and the profile ("a100-80g-mig-1g.20gb")."""
    return f"{card_class}-mig-{profile.strip().lower()}"
