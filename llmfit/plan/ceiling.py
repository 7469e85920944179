"""What the fleet can serve of a model (issue 34 item 3): where no one layout's replicas fit the
free cards for the named load, the most the free cards serve together — on each class of card,
the replicas of the option that serves the most there, mixed — with the load each carries and
what is missing of the load asked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmfit.plan.load import ROUNDING
from llmfit.plan.options import Option


@dataclass(frozen=True)
class Share:
    """One class of card's part of the fleet's ceiling: replicas of one option."""

    option: Option[Any]
    replicas: int
    # What those replicas serve within the targets at most, and what of the asked load they are
    # given (in the load's unit: requests a second, or requests in flight).
    capacity: float
    carries: float


@dataclass(frozen=True)
class Ceiling:
    """The most the fleet's free cards serve of a named load that no one option's replicas fit."""

    shares: tuple[Share, ...]
    # The load asked, the most the shares serve together, and what is missing of the load.
    load: float
    served: float
    # "rate" (requests a second) or "concurrency" (requests in flight).
    unit: str

    @property
    def missing(self) -> float:
        return max(0.0, self.load - self.served)


def _unit_capacity(o: Option[Any]) -> float:
    """What one replica of the option serves within the targets, in the load's unit."""
    sv = o.serving
    if sv is None or sv.replicas is None:
        return 0.0
    return sv.capacity_concurrency if sv.workload.concurrency is not None else sv.capacity_rate


def _fits_free(o: Option[Any]) -> bool:
    """Whether the replicas the named load needs of the option fit the fleet's free cards."""
    sv = o.serving
    return sv is not None and sv.replicas is not None and sv.replicas <= o.free_replicas


def ceiling(options: Sequence[Option[Any]]) -> Ceiling | None:
    """The fleet's ceiling for the named load, where no one option's replicas fit the free cards
    (None where one does, where no load is named, or where nothing serves at any load)."""
    gpu = [o for o in options if not o.cpu and o.serving is not None]
    if not gpu:
        return None
    w = gpu[0].serving.workload if gpu[0].serving else None
    if w is None or not w.load or any(_fits_free(o) for o in gpu):
        return None
    # On each class of card, the option whose replicas on its free cards serve the most: one
    # option a class, so that no card is counted twice.
    best: dict[str | None, tuple[float, Option[Any]]] = {}
    for o in gpu:
        total = o.free_replicas * _unit_capacity(o)
        if total > 0 and total > best.get(o.gpu_class, (0.0, o))[0]:
            best[o.gpu_class] = (total, o)
    if not best:
        return None
    picked = sorted(best.values(), key=lambda t: -t[0])
    load = w.load
    # The class that serves the most first, as many of its replicas as what is left of the load
    # needs (all of its free ones where that is not enough); each carries what it is given.
    left = load
    shares: list[Share] = []
    for _, o in picked:
        if left <= 0:
            break
        unit = _unit_capacity(o)
        n = min(o.free_replicas, math.ceil(left / unit * (1 - ROUNDING)))
        carries = min(left, n * unit)
        shares.append(Share(o, n, n * unit, carries))
        left -= carries
    served = sum(s.carries for s in shares)
    unit_name = "concurrency" if w.concurrency is not None else "rate"
    return Ceiling(tuple(shares), load, served, unit_name)
