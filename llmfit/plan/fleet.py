"""The fleet as a plan sees it: nodes, and the kinds of device each one has.

Card memory is bytes as CUDA reports them, because that is what an engine's share of a card is a
share of. A card sold as 80 GB shows CUDA about 79.2 GiB (H100: 79.18 GiB in vLLM's own startup
lines); reading `h100-80g` as 80 GiB would start every plan 0.8 GiB optimistic on every card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

GIB = 1 << 30
MIB = 1 << 20

# What CUDA reports as a card's total memory (torch.cuda.mem_get_info, vLLM's total_gpu_memory),
# for the classes people name most. Sources are in fixtures/fleet/gpu-memory-totals.md: deviceQuery
# totalGlobalMem where published, else the nvidia-smi framebuffer size less its reserve.
REPORTED_TOTALS: dict[str, int] = {
    "h100-80g": 85_045_477_376,  # deviceQuery, H100 80GB HBM3; vLLM prints 79.18-79.22 GiB
    "h100-94g": 99_861_594_112,  # deviceQuery, H100 NVL
    "h200-141g": (143_771 - 454) * MIB,  # nvidia-smi 143771 MiB less the 454 MiB H100 reserve
    "a100-80g": 85_100_068_864,  # deviceQuery, A100-SXM4-80GB
    "a100-40g": 42_298_834_944,  # deviceQuery, A100-SXM4-40GB
    "l40s-48g": 47_803_596_800,  # deviceQuery, L40S
    "l4-24g": 23_570_219_008,  # deviceQuery, L4
    "a10-24g": int(22.18 * GIB),  # PyTorch "total capacity" 22.18 GiB
    "rtx4090-24g": 25_386_352_640,  # deviceQuery, RTX 4090
    "rtx3090-24g": 25_327_697_920,  # deviceQuery, RTX 3090
    "rtx5090-32g": 33_677_180_928,  # deviceQuery, RTX 5090
    "b200-180g": int(178.35 * GIB),  # CUDA device properties, 178.35 GiB
}

_MIG = re.compile(r"-mig-(\d+)g\.(\d+)gb$")
_CARD = re.compile(r"-(\d+)g$")


def is_mig(gpu_class: str) -> bool:
    """A class naming MIG instances ("a100-80g-mig-3g.40gb"): one runs a replica, never a group.

    A process opens one MIG instance, and instances have no NVLink between them, so a replica that
    does not fit one instance does not fit the class.
    """
    return "-mig-" in gpu_class


def memory_from_class(gpu_class: str) -> int | None:
    """Card (or MIG instance) memory in bytes, read from its class label; None if unreadable.

    `h100-80g` → the H100's reported total; an unknown `x-48g` → 48 GiB; a MIG instance
    `a100-80g-mig-3g.40gb` → 40 GiB, the instance's share and not the card's.
    """
    label = gpu_class.strip().lower()
    m = _MIG.search(label)
    if m:
        return int(m.group(2)) * GIB
    if label in REPORTED_TOTALS:
        return REPORTED_TOTALS[label]
    m = _CARD.search(label)
    if m:
        return int(m.group(1)) * GIB
    return None


@dataclass(frozen=True)
class PoolKind:
    """One class of a node's devices: whole cards of one kind, or MIG instances of one profile."""

    gpu_class: str
    card_bytes: int
    gpus: int
    free_gpus: int
    unhealthy_gpus: int = 0

    @property
    def healthy(self) -> int:
        """Cards that exist and work; unhealthy cards are neither used nor free."""
        return self.gpus - self.unhealthy_gpus


@dataclass(frozen=True)
class PoolNode:
    """One node of the fleet."""

    id: str
    kinds: tuple[PoolKind, ...] = ()
    # A replica spans nodes only within one fabric; "" is an island.
    fabric: str = ""
    ram_bytes: int = 0
    free_ram_bytes: int = 0

    @property
    def is_cpu(self) -> bool:
        return not self.kinds


@dataclass(frozen=True)
class Fleet:
    nodes: tuple[PoolNode, ...]
    # Where it came from, for the user and the JSON: a path, "inline", or "this machine".
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def gpus(self) -> int:
        return sum(k.healthy for n in self.nodes for k in n.kinds)
