"""The fleet at a glance (`llmfit fleet`): what each class has, used, free and broken, and what
each fabric could give a replica that spans nodes. Apart from plan.fleet so that a plan, which
needs none of it, does not pay for defining these classes."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.fleet import Fleet, is_mig


@dataclass(frozen=True)
class ClassUsage:
    """One GPU class across the fleet. used + free + unhealthy == gpus."""

    gpu_class: str
    card_bytes: int
    nodes: int
    gpus: int
    used: int
    free: int
    unhealthy: int

    @property
    def mig(self) -> bool:
        return is_mig(self.gpu_class)


@dataclass(frozen=True)
class FabricClass:
    """Whole cards of one class on one fabric: how many nodes, how many have every card free
    (what a replica spanning nodes needs), and the most cards a node of them has."""

    fabric: str
    gpu_class: str
    nodes: int
    free_nodes: int
    gpus_per_node: int


@dataclass(frozen=True)
class FleetSummary:
    """The fleet counted: nodes, cards by class and by fabric, RAM, and the notes of reading it."""

    source: str
    nodes: int
    gpu_nodes: int
    cpu_nodes: int
    classes: tuple[ClassUsage, ...]
    fabrics: tuple[FabricClass, ...]
    ram_bytes: int
    free_ram_bytes: int
    cpu_ram_bytes: int
    cpu_free_ram_bytes: int
    notes: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return sum(c.gpus for c in self.classes)

    @property
    def used(self) -> int:
        return sum(c.used for c in self.classes)

    @property
    def free(self) -> int:
        return sum(c.free for c in self.classes)

    @property
    def unhealthy(self) -> int:
        return sum(c.unhealthy for c in self.classes)


def summarize(fleet: Fleet) -> FleetSummary:
    """Count the fleet by class and by fabric, in one pass over its nodes.

    A card is unhealthy, free, or used (the healthy cards that are not free); unhealthy cards are
    neither used nor free. A node is a free whole node of a class when every card of that class
    on it is free: none in use and none broken, so a replica as wide as the node can land. MIG
    classes are left out of the fabric counts: an instance never joins others, on its node or
    across a fabric.
    """
    classes: dict[tuple[str, int], list[int]] = {}
    fabrics: dict[tuple[str, str], list[int]] = {}
    gpu_nodes = cpu_nodes = ram = free_ram = cpu_ram = cpu_free = 0
    for node in fleet.nodes:
        n = node.count
        ram += node.ram_bytes * n
        free_ram += node.free_ram_bytes * n
        if node.is_cpu:
            cpu_nodes += n
            cpu_ram += node.ram_bytes * n
            cpu_free += node.free_ram_bytes * n
            continue
        gpu_nodes += n
        for k in node.kinds:
            free = min(k.free_gpus, k.healthy)
            c = classes.setdefault((k.gpu_class, k.card_bytes), [0, 0, 0, 0])
            c[0] += n
            c[1] += k.gpus * n
            c[2] += free * n
            c[3] += k.unhealthy_gpus * n
            if is_mig(k.gpu_class):
                continue
            f = fabrics.setdefault((node.fabric, k.gpu_class), [0, 0, 0])
            f[0] += n
            f[1] += n if k.gpus > 0 and k.unhealthy_gpus == 0 and free == k.gpus else 0
            f[2] = max(f[2], k.gpus)
    return FleetSummary(
        source=fleet.source,
        nodes=gpu_nodes + cpu_nodes,
        gpu_nodes=gpu_nodes,
        cpu_nodes=cpu_nodes,
        classes=tuple(
            ClassUsage(cls, card, n, gpus, gpus - free - bad, free, bad)
            for (cls, card), (n, gpus, free, bad) in sorted(classes.items())
        ),
        fabrics=tuple(
            FabricClass(fab, cls, n, free, width)
            for (fab, cls), (n, free, width) in sorted(
                fabrics.items(), key=lambda kv: (kv[0][0] == "", kv[0])
            )
        ),
        ram_bytes=ram,
        free_ram_bytes=free_ram,
        cpu_ram_bytes=cpu_ram,
        cpu_free_ram_bytes=cpu_free,
        notes=fleet.notes,
    )
