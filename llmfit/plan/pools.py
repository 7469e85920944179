"""The fleet's GPU nodes grouped by card class and fabric, as the layouts are tried."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from llmfit.plan import cards
from llmfit.plan.cards import CardSpec
from llmfit.plan.fleet import Fleet, PoolNode, is_mig


@dataclass(frozen=True)
class Host:
    """Identical nodes of one class: one node, or a pool of `count` kept as a count."""

    node: PoolNode
    gpus: int  # healthy cards of this class on each (one, for MIG instances)
    free: int

    @property
    def count(self) -> int:
        return self.node.count

    @property
    def fabric(self) -> str:
        return self.node.fabric

    @property
    def ram(self) -> int:
        return self.node.ram_bytes

    @property
    def free_ram(self) -> int:
        return self.node.free_ram_bytes


@dataclass(frozen=True)
class ClassPool:
    """The hosts of one class of cards, which one layout search places replicas on."""

    gpu_class: str
    card_bytes: int
    hosts: tuple[Host, ...]
    # The fleet file's figures for the class (PoolKind.override): nodes that give other figures
    # for the same class are cards of another pool, since they are timed apart.
    override: CardSpec | None = None

    @property
    def spec(self) -> CardSpec | None:
        """The card's speed figures: the fleet file's, else the card table's."""
        return self.override or cards.spec(self.gpu_class)

    # A pool may hold 100,000 hosts, and a plan asks the same of it for every layout it tries:
    # what a question costs a walk over the hosts is worked out once a pool (the pool is frozen;
    # cached_property keeps the answer beside its fields, out of its equality).
    @cached_property
    def max_gpus(self) -> int:
        return max((h.gpus for h in self.hosts), default=0)

    @property
    def mig(self) -> bool:
        return is_mig(self.gpu_class)

    @cached_property
    def _fabrics(self) -> dict[str, tuple[Host, ...]]:
        out: dict[str, list[Host]] = {}
        for h in self.hosts:
            out.setdefault(h.fabric, []).append(h)
        return {f: tuple(hs) for f, hs in out.items()}

    def fabrics(self) -> dict[str, tuple[Host, ...]]:
        """The pool's hosts by fabric ("" for nodes on none), in fleet order."""
        return dict(self._fabrics)

    @cached_property
    def _widest(self) -> dict[str, int]:
        return {f: max(h.gpus for h in hs) for f, hs in self._fabrics.items()}

    def widest(self, fabric: str) -> int:
        """The most cards of the class one node on `fabric` has."""
        return self._widest.get(fabric, 0)

    @cached_property
    def _censuses(self) -> dict[str | None, _Census]:
        return {}

    @cached_property
    def _seats(self) -> dict[tuple[int, int, str | None], Seats]:
        return {}

    def seats(self, per_node: int, nodes: int, fabric: str | None = None) -> Seats:
        """Count, without expanding pools, the nodes with `per_node` cards (and free ones) among
        the pool's hosts or one fabric's, and name the first `nodes` of them a launch would use.
        Their cards are counted once; each question after that names only its first nodes."""
        key = (per_node, nodes, fabric)
        if key not in self._seats:
            if fabric not in self._censuses:
                hosts = self.hosts if fabric is None else self._fabrics.get(fabric, ())
                self._censuses[fabric] = _Census(hosts)
            self._seats[key] = self._censuses[fabric].seats(per_node, nodes)
        return self._seats[key]


def class_pools(fleet: Fleet) -> list[ClassPool]:
    """GPU nodes grouped by card class: a node with devices of several classes is in each pool,
    as the node it is for that class (its devices of that class and no others)."""
    by: dict[tuple[str, int, CardSpec | None], list[Host]] = {}
    for node in fleet.nodes:
        for k in node.kinds:
            if k.healthy <= 0 or k.card_bytes <= 0:
                continue
            gpus, free = k.healthy, min(k.free_gpus, k.healthy)
            if is_mig(k.gpu_class):
                # One instance a replica, however many the node has.
                gpus, free = 1, min(free, 1)
            key = (k.gpu_class, k.card_bytes, k.override)
            by.setdefault(key, []).append(Host(node, gpus, free))
    order = sorted(by, key=lambda k: (k[0], k[1], k[2] is not None, repr(k[2])))
    return [ClassPool(cls, card, tuple(by[cls, card, o]), o) for cls, card, o in order]


@dataclass(frozen=True)
class Seats:
    """Where a layout of `nodes` nodes with `per_node` cards each could land among some hosts."""

    # Nodes that have the cards at all, and how many of them have them free now.
    hosts: int
    ready: int
    # The nodes a launch would use, head first: free ones where enough are free.
    node_ids: tuple[str, ...]

    def free_now(self, nodes: int) -> bool:
        return self.ready >= nodes


class _Census:
    """Some hosts, with how many nodes have each number of cards, and each number free."""

    def __init__(self, hosts: Sequence[Host]) -> None:
        self.hosts = hosts
        self.by_cards: dict[int, int] = {}
        self.by_free: dict[int, int] = {}
        for h in hosts:
            n = h.node.count
            self.by_cards[h.gpus] = self.by_cards.get(h.gpus, 0) + n
            self.by_free[h.free] = self.by_free.get(h.free, 0) + n

    def seats(self, per_node: int, nodes: int) -> Seats:
        able = sum(n for cards, n in self.by_cards.items() if cards >= per_node)
        # A host's free cards are never more than its healthy ones: ready hosts are able.
        ready = sum(n for free, n in self.by_free.items() if free >= per_node)
        use_free = ready >= nodes
        ids: list[str] = []
        for h in self.hosts:
            if len(ids) >= nodes:
                break
            if (h.free if use_free else h.gpus) >= per_node:
                ids.extend(h.node.node_ids(nodes - len(ids)))
        return Seats(able, ready, tuple(ids))
