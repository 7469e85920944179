"""The fleet's GPU nodes grouped by card class and fabric, as the ways of running are tried."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from llmfit.plan.fleet import Fleet, is_mig, node_ids


@dataclass
class Host:
    node_id: str
    fabric: str
    gpus: int  # healthy cards of this class (one, for MIG instances)
    free: int
    ram: int = 0
    free_ram: int = 0
    # Counts (issue 17): a Host stands for `count` identical nodes (a pool), named as
    # PoolNode names them (plan.fleet.node_id); never one object per node.
    count: int = 1
    first: int = 0


def host_count(hosts: list[Host]) -> int:
    """How many nodes the hosts stand for (what len(hosts) was before hosts had counts)."""
    return sum(map(_COUNT, hosts))


_COUNT = attrgetter("count")


def first_ids(hosts: list[Host], k: int) -> tuple[str, ...]:
    """The ids of the first k nodes of the hosts, in order (what hosts[:k]'s ids were)."""
    out: list[str] = []
    for h in hosts:
        if len(out) >= k:
            break
        out += node_ids(h.node_id, h.first, h.count, k - len(out))
    return tuple(out)


@dataclass
class ClassPool:
    gpu_class: str
    card_bytes: int
    hosts: list[Host]

    @property
    def max_gpus(self) -> int:
        return max((h.gpus for h in self.hosts), default=0)

    def fabrics(self) -> dict[str, list[Host]]:
        out: dict[str, list[Host]] = {}
        for h in self.hosts:
            out.setdefault(h.fabric, []).append(h)
        return out


def class_pools(fleet: Fleet) -> list[ClassPool]:
    """GPU nodes grouped by card class: a node with devices of several classes is in each pool,
    as the node it is for that class (its devices of that class and no others)."""
    by: dict[tuple[str, int], ClassPool] = {}
    for node in fleet.nodes:
        for k in node.kinds:
            if k.healthy <= 0 or k.card_bytes <= 0:
                continue
            gpus, free = k.healthy, min(k.free_gpus, k.healthy)
            if is_mig(k.gpu_class):
                # One instance a replica, however many the node has.
                gpus, free = 1, min(free, 1)
            key = (k.gpu_class, k.card_bytes)
            pool = by.setdefault(key, ClassPool(k.gpu_class, k.card_bytes, []))
            pool.hosts.append(
                Host(
                    node.id,
                    node.fabric,
                    gpus,
                    free,
                    node.ram_bytes,
                    node.free_ram_bytes,
                    node.count,  # counts (issue 17)
                    node.first,
                )
            )
    return [by[k] for k in sorted(by)]
