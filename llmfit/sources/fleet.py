"""The fleet file (TOML, or JSON for machine-written fleets) → Fleet, with one clear sentence for
anything it gets wrong.

[[pool]]                 # identical nodes: h200-1 … h200-4, kept as one entry with a count
name = "h200"
count = 4
gpu = "h200-141g"        # card memory is read from the label unless gpu_memory_gb says
gpus = 8
free_gpus = 8            # per node; defaults to gpus
fabric = "ib0"
ram_gb = 2048

[[node]]                 # one node, here with MIG instances beside whole cards
name = "a100-mig"
ram_gb = 1024
[[node.devices]]
gpu = "a100-80g-mig-3g.40gb"
gpus = 2

The JSON form is the same document: {"pool": [{…}], "node": [{…, "devices": [{…}]}]}.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import os
import re
from collections.abc import Callable, Mapping
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from llmfit.errors import FleetFileError, UsageError
from llmfit.plan import cards
from llmfit.plan.fleet import GIB, Fleet, PoolKind, PoolNode, is_mig, memory_from_class, node_id
from llmfit.sources.fleet_bounds import (
    _LABEL_KEY,
    _LABEL_VALUE,
    _PRODUCT,
    MAX_CARD_FIGURES,
    MAX_CARD_GB,
    MAX_CARDS,
    MAX_NAME,
    MAX_NODES,
    MAX_RAM_GB,
    NAME_RULE,
    is_gpu_class,
    is_name,
)

# A card's own figures, where the fleet knows better than the card table (or the table does not
# know the card): its speed is timed from them (cards.override).
CARD_KEYS = (*cards.OVERRIDE_KEYS, "link")
DEVICE_KEYS = ("gpu", "gpu_memory_gb", "gpus", "free_gpus", "unhealthy_gpus", *CARD_KEYS)
NODE_KEYS = ("name", "fabric", "fabric_kind", "ram_gb", "free_ram_gb", "devices", *DEVICE_KEYS,
             "labels", "price_per_gpu_hour")  # fmt: skip
# What a fabric is, where the fleet says (`fabric_kind`): InfiniBand and RoCE carry RDMA, which a
# multi-node container launch then asks for (render/deploy.py); a fabric's name says nothing.
FABRIC_KINDS = ("infiniband", "roce", "ethernet")
POOL_KEYS = ("count", *NODE_KEYS)
TOP_KEYS = ("pool", "node")
_DEVICE_SET, _NODE_SET, _POOL_SET = (
    frozenset(DEVICE_KEYS),
    frozenset(NODE_KEYS),
    frozenset(POOL_KEYS),
)


def shown(value: object) -> str:
    """A value as an error quotes it: its repr (control characters escaped), cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_MIG_PROFILE = re.compile(r"-([0-9]{1,6})g\.([0-9]{1,9})gb$", re.ASCII)


class ClassError(ValueError):
    """A GPU class that is surely a typo (`typo` is the class meant), or whose label says
    nothing of its memory (`typo` is None; `near` are the known classes closest to it)."""

    def __init__(
        self, label: str, typo: str | None, near: tuple[str, ...], why: str | None = None
    ) -> None:
        super().__init__(label)
        self.label, self.typo, self.near = label, typo, near
        # What is wrong with it, where that is not a missing memory (a MIG profile of 0).
        self.why = why

    @property
    def near_text(self) -> str:
        return f" (known classes near it: {', '.join(self.near)})" if self.near else ""


def read_class(
    label: str, *, memory_given: bool = False, figures_given: bool = False
) -> tuple[str, str | None]:
    """The class a fleet's label means, and a note to show with the plan (None: nothing to say).

    Names people type resolve through the card table (`h100`, `h100-80gb`, `H100 80GB HBM3` are
    `h100-80g`). A name one letter off a known class of the same size (`h10-80g`) is a typo and
    an error, since planning it as an unknown card would quietly drop the speed and link figures
    the table has; a stated `gpu_memory_gb` says the user means a card the table lacks, and
    keeps the name. Any other unknown name is planned from its label's memory, with a warning
    (unless the fleet gives its figures too: then its speed is timed from them, and there is
    nothing to warn of). Raises ClassError for a typo or a name with no memory in it."""
    label = label.strip().lower()
    if is_mig(label):
        m = _MIG_PROFILE.search(label)
        if m and (int(m.group(1)) == 0 or int(m.group(2)) == 0):
            # 0g.0gb is no instance a card can hold: refused, rather than planned as a card of
            # nothing (which said "nothing fits").
            raise ClassError(
                label, None, (), why=f"names the MIG profile {m.group(0)[1:]}, of "
                f"{m.group(1)} compute slices and {m.group(2)} GB, which no card offers",
            )  # fmt: skip
        return label, None
    if label in cards.AMBIGUOUS and not memory_given:
        # Two cards of one name: the refusal names both (and a given gpu_memory_gb plans it).
        raise ClassError(label, None, cards.AMBIGUOUS[label])
    key = cards.resolve(label)
    if key is not None:
        card = cards.BY_KEY[key]
        if card.vendor == "amd":
            return key, (
                f"{key} is an AMD card: it is planned by its memory and speed as the engines "
                "size CUDA cards, with the same flags, which vLLM, SGLang and llama.cpp take on "
                "ROCm too; the container images of --format docker|k8s are CUDA's"
            )
        return key, None
    typo = cards.typo_of(label)
    if typo is not None and not memory_given:
        raise ClassError(label, typo, ())
    near = cards.suggest(label)
    if not memory_given and not memory_from_class(label):
        raise ClassError(label, None, near)
    if figures_given:
        return label, None
    near_text = f" (known classes near it: {', '.join(near)})" if near else ""
    return label, (
        f"{label} is not a GPU class llmfit knows: it is planned by its memory alone, without "
        f"speed figures{near_text}"
    )


class _Reader:
    """Checks a fleet document's tables and builds its nodes; every error names the file, the line
    and the key. Identical device tables (a machine-written fleet of 100,000 nodes has a handful
    of shapes) are checked once."""

    def __init__(self, path: str, text: str, fmt: str) -> None:
        self.path = path
        self.body = text
        self.fmt = fmt  # "toml" or "json"
        self._lines: list[str] | None = None
        self._kinds: dict[tuple, PoolKind | None] = {}
        # The different sets of card figures met so far (MAX_CARD_FIGURES).
        self._figures: set[cards.CardSpec] = set()
        self._shapes: dict[tuple | None, tuple[tuple[PoolKind, ...], str, int, int]] = {}
        self.notes: dict[str, None] = {}  # in order, each once

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.body.splitlines()
        return self._lines

    @functools.cached_property
    def _headers(self) -> list[tuple[int, str]]:
        """The file's [[headers]], each with its line: found once, since a file that makes many
        mistakes asks for the line of each (10,000 nodes took minutes when each looked again)."""
        return [
            (i, m.group(1))
            for i, text in enumerate(self.lines)
            if (m := re.match(r"^\s*\[\[?\s*([\w.]+)\s*\]\]?", text))
        ]

    def fail(self, where: str, key: str | None, message: str) -> FleetFileError:
        line = (
            _json_line(self.body, where, key) if self.fmt == "json" else self._toml_line(where, key)
        )
        at = f"{self.path}:{line}" if line else self.path
        what = ".".join(p for p in (where, key) if p)
        return FleetFileError(f"{at}: {what} {message}")

    def _toml_line(self, where: str, key: str | None) -> int | None:
        if key is None and re.fullmatch(r"\w+", where):
            return self._top_line(where)  # a top-level key written as a value ("pool = 1")
        line = self._line_of(where, key)
        if line is None and key is None and "." in where:
            # An inline table in a list ("devices = [1]"): the line of the list.
            parent, _, last = where.rpartition(".")
            line = self._line_of(parent, re.sub(r"\[\d+\]$", "", last))
        return line

    def _line_of(self, where: str, key: str | None) -> int | None:
        """The line of `key` inside the table `where` ("node[1].devices[0]"), as TOML gives it.

        tomllib reports lines only for syntax errors, so the table is found by counting its
        [[headers]] in the text, and the key by its `key =` inside that table.
        """
        headers = self._headers
        start, name = 0, ""
        for part in filter(None, where.split(".")):
            m = re.match(r"(\w+)(?:\[(\d+)\])?$", part)
            if not m:
                return None
            name = f"{name}.{m.group(1)}" if name else m.group(1)
            nth = int(m.group(2) or 0)
            found = [i for i, h in headers if h == name and i >= start]
            if nth >= len(found):
                return None
            start = found[nth]
        if not key:
            return start + 1 if where else None
        after = [i for i, _ in headers if i > start]
        stop = after[0] if after and where else (after[0] if after else len(self.lines))
        if not where:
            start, stop = 0, headers[0][0] if headers else len(self.lines)
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for i in range(start, stop):
            if pattern.match(self.lines[i]):
                return i + 1
        return start + 1 if where else None

    def _top_line(self, key: str) -> int | None:
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for i, text in enumerate(self.lines):
            if pattern.match(text):
                return i + 1
        return None

    def check_keys(
        self,
        table: dict[str, Any],
        allowed: tuple[str, ...],
        where: str,
        known: frozenset = frozenset(),
    ) -> None:
        if known and table.keys() <= known:
            return
        for key in table:
            if key not in allowed:
                import difflib  # only for a mistake

                close = difflib.get_close_matches(key, allowed, n=1)
                also = (
                    f"; did you mean {close[0]!r}?"
                    if close
                    else f"; allowed: {', '.join(allowed)}."
                )
                raise self.fail(where, key, f"is not a key llmfit knows{also}")

    def count(self, table: dict[str, Any], key: str, where: str, default: int, most: int,
              past: str) -> int:  # fmt: skip
        v = table.get(key, default)
        if type(v) is not int:  # a bool is not a count
            raise self.fail(where, key, f"is {shown(v)}; it must be a whole number.")
        if v < 0:
            raise self.fail(where, key, f"is {shown(v)}; it cannot be negative.")
        if v > most:
            raise self.fail(where, key, f"is {v:,}; {past}")
        return v

    def gib(self, table: dict[str, Any], key: str, where: str, most: int) -> int:
        v = table.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise self.fail(where, key, f"is {shown(v)}; it must be a number of GiB.")
        if v != v or v in (float("inf"), float("-inf")):
            raise self.fail(where, key, f"is {v}; it must be a finite number of GiB.")
        if v < 0:
            raise self.fail(where, key, f"is {shown(v)}; it cannot be negative.")
        if v > most:
            raise self.fail(where, key, f"is {shown(v)}; it must be at most {most:,} GiB.")
        return int(v * GIB)

    def text(self, table: dict[str, Any], key: str, where: str, default: str = "") -> str:
        v = table.get(key, default)
        if not isinstance(v, str):
            raise self.fail(where, key, f"is {shown(v)}; it must be a string.")
        return v

    def name(self, table: dict[str, Any], where: str, default: str) -> str:
        v = self.text(table, "name", where, default)
        if not is_name(v):
            raise self.fail(where, "name", f"is {shown(v)}, not a host name ({NAME_RULE}).")
        return v

    def fabric(self, table: dict[str, Any], where: str) -> str:
        v = self.text(table, "fabric", where)
        if v and not is_name(v):
            raise self.fail(where, "fabric", f"is {shown(v)}, not a fabric name ({NAME_RULE}).")
        return v

    def kind(self, table: dict[str, Any], where: str) -> PoolKind | None:
        values = tuple(map(table.get, DEVICE_KEYS, _ABSENT))
        key = (values, tuple(map(type, values)))  # 1, 1.0 and True are equal, but not alike
        try:
            return self._kinds[key]
        except KeyError:
            kind = self._kinds[key] = self._kind(table, where)
            return kind
        except TypeError:  # a list or a table where a value belongs: _kind says so
            return self._kind(table, where)

    def _kind(self, table: dict[str, Any], where: str) -> PoolKind | None:
        if "gpu" not in table:
            for key in ("gpus", "free_gpus", "gpu_memory_gb", "unhealthy_gpus", *CARD_KEYS):
                if key in table:
                    raise self.fail(
                        where, key, "is given without a gpu class to say what they are."
                    )
            return None
        gpu_class = self.text(table, "gpu", where).strip().lower()
        # A product name as nvidia-smi prints it ("NVIDIA H100 80GB HBM3") is a class by the
        # card table's name for it; any other text with spaces is not a class.
        if not is_gpu_class(gpu_class) and _PRODUCT.fullmatch(gpu_class):
            gpu_class = cards.resolve(gpu_class) or gpu_class
        if not is_gpu_class(gpu_class):
            raise self.fail(
                where,
                "gpu",
                f"is {shown(table['gpu'])}, not a GPU class (letters, digits, '.', '-' and '_', "
                "like h100-80g).",
            )
        try:
            gpu_class, note = read_class(
                gpu_class,
                memory_given="gpu_memory_gb" in table,
                figures_given="memory_bandwidth_gbs" in table,
            )
        except ClassError as e:
            if e.why:
                raise self.fail(where, "gpu", f"is {e.label!r}: it {e.why}.") from None
            raise self.fail(
                where,
                "gpu",
                f"is {e.label!r}, not a GPU class llmfit knows; did you mean {e.typo}? (to plan "
                "a card llmfit does not know under this name, give its gpu_memory_gb)."
                if e.typo
                else f"is {e.label!r}, whose label does not say its memory (write it like "
                "h100-80g or a100-80g-mig-3g.40gb, or give gpu_memory_gb"
                + (f"; known classes near it: {', '.join(e.near)}" if e.near else "")
                + ").",
            ) from None
        if note:
            self.notes[note] = None
        if "gpu_memory_gb" in table:
            card = self.gib(table, "gpu_memory_gb", where, MAX_CARD_GB)
            if card <= 0:
                raise self.fail(
                    where, "gpu_memory_gb", f"is {table['gpu_memory_gb']}; it must be more than 0."
                )
        else:
            card = memory_from_class(gpu_class) or 0
            if not card:
                raise self.fail(
                    where,
                    "gpu",
                    f"is {gpu_class!r}, whose label does not say its memory "
                    "(write it like h100-80g or a100-80g-mig-3g.40gb, or give gpu_memory_gb).",
                )
            if card > MAX_CARD_GB * GIB:
                raise self.fail(
                    where,
                    "gpu",
                    f"is {gpu_class!r}, whose label says more than {MAX_CARD_GB:,} GiB a card.",
                )
        past = f"a node holds at most {MAX_CARDS:,} cards of a class."
        gpus = self.count(table, "gpus", where, 1, MAX_CARDS, past)
        bad = self.count(table, "unhealthy_gpus", where, 0, MAX_CARDS, past)
        free = self.count(table, "free_gpus", where, max(gpus - bad, 0), MAX_CARDS, past)
        if free > gpus:
            raise self.fail(where, "free_gpus", f"is {free}, more than the {gpus} gpus it has.")
        if bad > gpus:
            raise self.fail(where, "unhealthy_gpus", f"is {bad}, more than the {gpus} gpus it has.")
        if free + bad > gpus:
            raise self.fail(
                where, "free_gpus", f"is {free}, but {bad} of the {gpus} gpus are unhealthy."
            )
        return PoolKind(gpu_class, card, gpus, free, bad, self.card(table, where, gpu_class))

    def card(self, table: dict[str, Any], where: str, gpu_class: str) -> cards.CardSpec | None:
        """The card's figures as the fleet gives them (None: the card table's as they are)."""
        given = [k for k in CARD_KEYS if k in table]
        if not given:
            return None
        if cards.spec(gpu_class) is None and "memory_bandwidth_gbs" not in table:
            raise self.fail(
                where, given[0],
                f"is given for {gpu_class!r}, a card llmfit has no figures for, so its "
                "memory_bandwidth_gbs is needed too: its speed is timed from it.",
            )  # fmt: skip
        try:
            spec = cards.override(cards.spec(gpu_class), table, key=gpu_class)
        except ValueError as e:
            # The message starts with the key it is about ("bf16_tflops is 'fast'; …").
            key = next((k for k in given if str(e).startswith(k + " ")), None)
            said = str(e).removeprefix(f"{key} ") if key else str(e)
            raise self.fail(where, key, said if said.endswith("?") else said + ".") from None
        self._figures.add(spec)
        if len(self._figures) > MAX_CARD_FIGURES:
            raise self.fail(
                where, given[0],
                f"makes {len(self._figures)} different sets of card figures in the fleet; "
                f"llmfit plans each apart, at most {MAX_CARD_FIGURES}: give cards that are alike "
                "the same figures.",
            )  # fmt: skip
        return spec

    def node(
        self, table: dict[str, Any], where: str, name: str, count: int = 1, first: int = 0
    ) -> PoolNode:
        """The node a table describes. Tables alike but for their name (a machine-written fleet
        has a handful of shapes in 100,000 nodes) are checked once: the checks see only values."""
        key = _shape_key(table)
        try:
            shape = self._shapes.get(key)
        except TypeError:  # a list or a table where a value belongs: _shape says so
            key, shape = None, None
        if shape is None:
            shape = self._shape(table, where)
            if key is not None:
                self._shapes[key] = shape
        kinds, fabric, ram, free_ram = shape
        labels = self.labels(table, where) if "labels" in table else ()
        price = self.price(table, where) if "price_per_gpu_hour" in table else None
        kind = self.fabric_kind(table, where, fabric) if "fabric_kind" in table else ""
        return PoolNode(name, kinds, fabric, ram, free_ram, count, first, labels, price, kind)

    def fabric_kind(self, table: dict[str, Any], where: str, fabric: str) -> str:
        v = table["fabric_kind"]
        if not isinstance(v, str) or v not in FABRIC_KINDS:
            raise self.fail(
                where, "fabric_kind", f"is {shown(v)}; it must be one of {', '.join(FABRIC_KINDS)}."
            )
        if not fabric:
            raise self.fail(where, "fabric_kind", "is given without a fabric to say what it is.")
        return v

    def price(self, table: dict[str, Any], where: str) -> float:
        """What one of the node's cards costs an hour, in any currency (the plan ranks by it
        where every class is priced)."""
        v = table["price_per_gpu_hour"]
        if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v < 0 or v > 1e6:
            raise self.fail(
                where, "price_per_gpu_hour",
                f"is {shown(v)}; it must be what one card costs an hour, a number like 2.49.",
            )  # fmt: skip
        return float(v)

    def labels(self, table: dict[str, Any], where: str) -> tuple[tuple[str, str], ...]:
        """A node's Kubernetes labels (`llmfit fleet import kubectl` keeps the GPU product's):
        keys and values as Kubernetes allows them, since they are written into YAML a cluster
        reads."""
        v = table.get("labels")
        if not isinstance(v, dict) or len(v) > 64:
            raise self.fail(where, "labels", 'must be a table of strings, like { key = "value" }.')
        for key, value in v.items():
            if not (isinstance(value, str) and _LABEL_KEY.fullmatch(key)
                    and _LABEL_VALUE.fullmatch(value)):  # fmt: skip
                raise self.fail(
                    where,
                    "labels",
                    f"has {shown(key)} = {shown(value)}, not a Kubernetes label (letters, "
                    "digits, '-', '_', '.', an optional prefix/ on the key, at most 63 each).",
                )
        return tuple(sorted(v.items()))

    def _shape(
        self, table: dict[str, Any], where: str
    ) -> tuple[tuple[PoolKind, ...], str, int, int]:
        kinds: list[PoolKind] = []
        own = self.kind(table, where)
        if own:
            kinds.append(own)
        devices = table.get("devices", [])
        if not isinstance(devices, list):
            raise self.fail(where, "devices", f"must be a list of {self._tables('devices')}.")
        if len(devices) > MAX_CARDS:
            # Counted before any is read: each holds at least one card.
            raise self.fail(
                where, "devices", f"has {len(devices):,} {self._tables('devices')}; a node "
                f"holds at most {MAX_CARDS:,} cards.",
            )  # fmt: skip
        for j, dev in enumerate(devices):
            dwhere = f"{where}.devices[{j}]"
            if not isinstance(dev, dict):
                raise self.fail(dwhere, None, f"must be {self._table()}.")
            self.check_keys(dev, DEVICE_KEYS, dwhere, _DEVICE_SET)
            kind = self.kind(dev, dwhere)
            if kind is None:
                raise self.fail(
                    dwhere, None, 'has no gpu class; give one like gpu = "a100-80g-mig-3g.40gb".'
                )
            kinds.append(kind)
        cards = sum(k.gpus for k in kinds)
        if cards > MAX_CARDS:
            # Each class alone is within the bound; a node of many is not, together.
            raise self.fail(
                where, "devices", f"gives the node {cards:,} cards in all; a node holds at most "
                f"{MAX_CARDS:,}.",
            )  # fmt: skip
        ram = self.gib(table, "ram_gb", where, MAX_RAM_GB) if "ram_gb" in table else 0
        free_ram = (
            self.gib(table, "free_ram_gb", where, MAX_RAM_GB) if "free_ram_gb" in table else ram
        )
        if free_ram > ram:
            raise self.fail(
                where,
                "free_ram_gb",
                f"is {table['free_ram_gb']}, more than the node's ram_gb of "
                f"{table.get('ram_gb', 0)}.",
            )
        return tuple(kinds), self.fabric(table, where), ram, free_ram

    def _tables(self, key: str) -> str:
        return f"[[...{key}]] tables" if self.fmt == "toml" else "objects"

    def _table(self) -> str:
        return "a table" if self.fmt == "toml" else "an object"


# What a node's table says but its name and count, in a fixed order; a key absent and a key given
# as JSON's null are told apart, and so are 1, 1.0 and true (equal in Python, not alike here).
_SHAPE_KEYS = ("fabric", "ram_gb", "free_ram_gb", *DEVICE_KEYS)
_MISSING = object()
_ABSENT = (_MISSING,) * len(_SHAPE_KEYS)


def _shape_key(table: dict[str, Any]) -> tuple | None:
    values = tuple(map(table.get, _SHAPE_KEYS, _ABSENT))
    devices = table.get("devices", _MISSING)
    if devices is not _MISSING:
        if type(devices) is not list:
            return None
        alike = []
        for d in devices:
            if type(d) is not dict or not d.keys() <= _DEVICE_SET:
                return None
            v = tuple(map(d.get, DEVICE_KEYS, _ABSENT))
            alike.append((v, tuple(map(type, v))))
        values += (tuple(alike),)
    return values, tuple(map(type, values))


class _Names:
    """Node names seen so far, pools as ranges (stem, first…last), so that a pool of 10^12 nodes
    is checked against the others without naming each of its nodes."""

    def __init__(self) -> None:
        self.exact: set[str] = set()
        self.numbered: dict[str, list[int]] = {}  # stem → numbers of single nodes named stem-N
        self.ranges: dict[str, list[tuple[int, int]]] = {}

    def clash(self, node: PoolNode, *, more_pools: bool = True) -> str | None:
        """The first of the node's ids that another node already has (then nothing is kept);
        else None, and the node's ids are kept. `more_pools=False` once no pool can follow."""
        if not node.first:
            if node.id in self.exact:
                return node.id
            self.exact.add(node.id)
            if self.ranges or more_pools:
                stem, number = _numbered(node.id)
                if stem is not None:
                    if any(a <= number <= b for a, b in self.ranges.get(stem, ())):
                        return node.id
                    self.numbered.setdefault(stem, []).append(number)
            return None
        lo, hi = node.first, node.first + node.count - 1
        taken = [max(a, lo) for a, b in self.ranges.get(node.id, ()) if a <= hi and lo <= b]
        taken += [n for n in self.numbered.get(node.id, ()) if lo <= n <= hi]
        if taken:
            return node_id(node.id, min(taken), 0)
        self.ranges.setdefault(node.id, []).append((lo, hi))
        return None


def _numbered(name: str) -> tuple[str | None, int]:
    """("h100", 2) for "h100-2", a name a pool could also give; (None, 0) for any other."""
    stem, dash, digits = name.rpartition("-")
    if dash and stem and digits.isascii() and digits.isdigit() and digits[0] != "0":
        return stem, int(digits)
    return None, 0


def parse_fleet(text: str, path: str) -> Fleet:
    """Parse a fleet file's text, TOML or JSON (by the name's .json, or a text that opens with
    `{`); `path` names it in every error."""
    # A fleet of 100,000 nodes is a million objects made at once, none in a cycle: the cyclic
    # collector, which runs as objects are made, would walk them again and again (a tenth of the
    # time). It is paused while they are made, and left as it was.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse_fleet(text, path)
    finally:
        if collecting:
            gc.enable()


# The mistakes of a fleet file said at once; past these, how many more there are.
MISTAKES_SAID = 10


def _parse_fleet(text: str, path: str) -> Fleet:
    fmt = "json" if path.endswith(".json") or _JSON_START.match(text) else "toml"
    data = _load_json(text, path) if fmt == "json" else _load_toml(text, path)
    r = _Reader(path, text, fmt)
    r.check_keys(data, TOP_KEYS, "")
    names = _Names()
    nodes: list[PoolNode] = []

    def keep(node: PoolNode, where: str, more_pools: bool = True) -> None:
        if not node.count:  # a pool of no nodes names none
            return
        clash = names.clash(node, more_pools=more_pools)
        if clash is not None:
            raise r.fail(
                where,
                "name",
                f"is {clash!r}, a name another node already has; names must be unique.",
            )
        nodes.append(node)

    past = f"a pool holds at most {MAX_NODES:,} nodes."
    # Every table's first mistake, not only the file's first (issue 34): a file written by hand
    # is fixed in one pass.
    mistakes: list[str] = []
    for i, pool in enumerate(_tables(r, data, "pool")):
        where = f"pool[{i}]"
        try:
            r.check_keys(pool, POOL_KEYS, where, _POOL_SET)
            name = r.name(pool, where, f"pool{i + 1}")
            count = r.count(pool, "count", where, 1, MAX_NODES, past)
            # One node is named as a single node is (pool h100 → h100-1); more are a count.
            node = r.node(pool, where, *((name, count, 1) if count > 1 else (f"{name}-1", count)))
            keep(node, where)
        except FleetFileError as e:
            mistakes.append(e.message)
            if len(r._figures) > MAX_CARD_FIGURES:
                break
    for i, table in enumerate(_tables(r, data, "node")):
        where = f"node[{i}]"
        try:
            r.check_keys(table, NODE_KEYS, where, _NODE_SET)
            keep(r.node(table, where, r.name(table, where, f"node{i + 1}")), where, False)
        except FleetFileError as e:
            mistakes.append(e.message)
            if len(r._figures) > MAX_CARD_FIGURES:
                # Past the limit every later node would be refused alike: said once, not
                # looked for in each of 10,000 tables.
                break
    if mistakes:
        # In the file's order: by the line each names.
        prefix = len(path) + 1
        mistakes.sort(key=lambda m: int(m[prefix:].partition(":")[0] or 0)
                      if m[prefix:].partition(":")[0].isdigit() else 0)  # fmt: skip
        more = [m.rstrip(".") for m in mistakes[1:MISTAKES_SAID]]
        left = len(mistakes) - 1 - len(more)
        also = (
            f" (and {len(mistakes) - 1} more: " + "; ".join(more)
            + (f"; and {left:,} others" if left else "") + ")"
            if more
            else ""
        )  # fmt: skip
        raise FleetFileError(mistakes[0] + also)
    if not nodes:
        raise FleetFileError(f"{path} describes no nodes: add a [[pool]] or a [[node]].")
    return Fleet(nodes=tuple(nodes), source=path, notes=tuple(r.notes))


def _tables(r: _Reader, data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    v = data.get(key, [])
    if not isinstance(v, list) or not all(isinstance(t, dict) for t in v):
        how = f"written as [[{key}]] tables" if r.fmt == "toml" else "a list of objects"
        raise r.fail(key, None, f"must be {how}.")
    return v


def _load_toml(text: str, path: str) -> dict[str, Any]:
    data = _fast_toml(text)
    if data is not None:
        return data
    import tomllib  # only for what the fast reader leaves to it: 7 ms to import

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FleetFileError(f"{path} is not valid TOML: {e}.") from None
    except ValueError:  # an integer past Python's 4,300 digits
        raise FleetFileError(
            f"{path} is not valid TOML: it holds a number too long to read."
        ) from None
    except RecursionError:
        raise FleetFileError(f"{path} is not valid TOML: it nests arrays too deep.") from None


_JSON_START = re.compile(r"\s*\{")


def _load_json(text: str, path: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise FleetFileError(
            f"{path} is not valid JSON: {e.msg} (at line {e.lineno}, column {e.colno})."
        ) from None
    except ValueError:  # an integer past Python's 4,300 digits
        raise FleetFileError(
            f"{path} is not valid JSON: it holds a number too long to read."
        ) from None
    except RecursionError:
        raise FleetFileError(f"{path} is not valid JSON: it nests too deep.") from None
    if not isinstance(data, dict):
        raise FleetFileError(
            f'{path} holds a JSON {type(data).__name__}, not an object like {{"node": [...]}}.'
        )
    return data


# The fleet files people and tools write use a small part of TOML: [[pool]], [[node]] and
# [[node.devices]] headers, `key = value` lines of plain strings, numbers and booleans, comments.
# That part is read here, every line by one regular expression, four times as fast as tomllib
# (100,000 nodes in about half a second); a file with anything else (escapes, arrays, inline
# tables, dates, a control character or CR, a duplicate key, a key outside a table) goes to
# tomllib, whose answer and errors are the reference: tests/sources/test_fleet_fast.py holds the
# two equal on generated files.
_FAST_LINE = re.compile(
    r"^[ \t]*(?:\[\[([^\]\n]*)\]\]"
    r"|([A-Za-z0-9_-]+)[ \t]*=[ \t]*(\"[^\"\\\n]*\"|'[^'\n]*'|[^\s#\"']+))?"
    r"[ \t]*(?:#.*)?$",
    re.M,
)
# What TOML forbids raw anywhere outside multi-line strings (a tab is allowed); a CR too, so
# that CRLF files go to tomllib.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_HEADER = re.compile(r"[ \t]*(node|pool)(?:[ \t]*\.[ \t]*(devices))?[ \t]*")
_SCALAR = re.compile(
    r"(?:(true|false)"
    r"|[+-]?(?:0|[1-9](?:_?[0-9])*)((?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?))"
)


def _fast_toml(text: str) -> dict[str, Any] | None:
    """What tomllib.loads(text) gives, for a fleet file in the common part of TOML; None for any
    other file (tomllib then reads it, or says what is wrong with it)."""
    if _CONTROL.search(text):
        return None
    rows = _FAST_LINE.findall(text)
    if len(rows) != text.count("\n") + 1:  # a line outside the common part
        return None
    data: dict[str, list[dict[str, Any]]] = {}
    last: dict[str, dict[str, Any]] = {}
    table: dict[str, Any] | None = None
    scalars: dict[str, Any] = {}  # a fleet repeats a few numbers and headers: each read once
    headers: dict[str, re.Match[str] | None] = {}
    try:
        for header, key, value in rows:
            if key:
                if table is None or key in table:
                    return None
                c = value[0]
                if c == '"' or c == "'":
                    table[key] = value[1:-1]
                    continue
                v = scalars.get(value)
                if v is None:
                    m = _SCALAR.fullmatch(value)
                    if m is None:
                        return None
                    if m.group(1):
                        v = value == "true"
                    else:
                        v = float(value) if m.group(2) else int(value)
                    scalars[value] = v
                table[key] = v
            elif header:
                m = headers.get(header) or headers.setdefault(header, _HEADER.fullmatch(header))
                if m is None:
                    return None
                name = m.group(1)
                if m.group(2) is None:
                    table = last[name] = {}
                    data.setdefault(name, []).append(table)
                    continue
                parent = last.get(name)
                if parent is None:
                    return None
                devices = parent.setdefault("devices", [])
                if type(devices) is not list:  # `devices = 1` above: tomllib's error
                    return None
                table = {}
                devices.append(table)
    except ValueError:  # an integer past Python's 4,300 digits: tomllib's error
        return None
    return data


def _json_line(text: str, where: str, key: str | None) -> int | None:
    """The line of `key` in the object at `where` ("node[3].devices[0]") of a JSON text, else of
    the nearest object on the way. Found only for an error, by walking the text to it (json
    gives no positions), stepping over every other value with the C decoder."""
    steps: list[str | int] = []
    for part in filter(None, where.split(".")):
        m = re.fullmatch(r"(\w+)(?:\[(\d+)\])?", part)
        if not m:
            return None
        steps.append(m.group(1))
        if m.group(2) is not None:
            steps.append(int(m.group(2)))
    if key:
        steps.append(key)
    decoder = json.JSONDecoder()
    ws = re.compile(r"[ \t\n\r]*")

    def skip(at: int) -> int:
        """Past the white space at `at` (the pattern matches everywhere, if only nothing)."""
        m = ws.match(text, at)
        return m.end() if m else at

    pos = skip(0)
    found = None
    try:
        for step in steps:
            if isinstance(step, str):
                if text[pos] != "{":
                    break
                found = pos
                pos = skip(pos + 1)
                while text[pos] == '"':
                    at = pos
                    name, pos = scanstring(text, pos + 1)
                    pos = skip(skip(pos) + 1)  # past the ':'
                    if name == step:
                        found = at
                        break
                    pos = skip(decoder.raw_decode(text, pos)[1])
                    if text[pos] == ",":
                        pos = skip(pos + 1)
                else:
                    break
            else:
                if text[pos] != "[":
                    break
                found = pos
                pos = skip(pos + 1)
                for _ in range(step):
                    pos = skip(decoder.raw_decode(text, pos)[1])
                    if text[pos] != ",":
                        break
                    pos = skip(pos + 1)
                else:
                    found = pos
                    continue
                break
    except (IndexError, ValueError):
        pass
    return None if found is None else text.count("\n", 0, found) + 1


# The most of a fleet file llmfit reads: 100,000 [[node]] tables are about 15 MB.
MAX_FLEET_BYTES = 64 << 20


def read_fleet(path: Path) -> Fleet:
    from llmfit.sources.files import FileProblem, read_capped

    try:
        text = read_capped(path, MAX_FLEET_BYTES, "fleet file").decode("utf-8")
    except FileNotFoundError:
        raise FleetFileError(f"{path}: no such fleet file.") from None
    except FileProblem as e:
        raise FleetFileError(f"{path} {e.problem}.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise FleetFileError(f"{path}: cannot be read ({e}).") from None
    return parse_fleet(text, str(path))


# Inline fleets, for a quick question without a file:
#   8xh100-80g            one node with 8 cards (any name the card table knows: 8xh100, 8xH100-80GB)
#   4x8xh100-80g@ib0      four such nodes on fabric ib0
#   8xh100-80g+512g       one node with 8 cards and 512 GB of RAM (llama.cpp may put layers or
#                         experts there; a GPU node said inline without it has none to offer)
#   h100-80g              one node with one card
#   cpu:512g              a CPU node with 512 GB of RAM (2x cpu:1t: two nodes of 1 TB)
# several joined with commas. RAM is in GiB, as a fleet file's ram_gb is.
INLINE_GRAMMAR = (
    "[NODESx]GPUSxCLASS[+RAM][@FABRIC] (8xh100-80g, 4x8xh100-80g+2t@ib0) or [NODESx]cpu:RAM "
    "(cpu:512g), joined with commas"
)
_INLINE_GPU = re.compile(
    r"^(?:(\d+)x)?(?:(\d+)x)?([a-z][a-z0-9.\-]*)(?:\+(\d+(?:\.\d+)?)(g|gb|t|tb)?)?"
    r"(?:@([a-z0-9_.\-]+))?$"
)
_INLINE_CPU = re.compile(r"^(?:(\d+)x)?cpu:(\d+(?:\.\d+)?)(g|gb|t|tb)?$")


def parse_inline(text: str, what: str = "--fleet") -> Fleet:
    """An inline fleet ("4x8xh100-80g@ib0,cpu:512g") → Fleet; a bad one is one UsageError.

    NODESx is a count: `99999999999x8xh100-80g` is one PoolNode standing for them all."""
    nodes: list[PoolNode] = []
    used: dict[str, int] = {}
    notes: dict[str, None] = {}

    def bad(part: str, why: str) -> UsageError:
        return UsageError(f"{what} {text!r}: {part!r} {why}; write {INLINE_GRAMMAR}.")

    def named(stem: str, count: int) -> dict[str, Any]:
        # Numbered on across the items of one class: 4x…h100-80g, then h100-80g-5.
        first = used.get(stem, 0) + 1
        used[stem] = first + count - 1
        if count == 1:
            return {"id": f"{stem}-{first}"}
        return {"id": stem, "count": count, "first": first}

    def ram(part: str, number: str, unit: str | None) -> int:
        size = float(number) * (1024 if (unit or "g").startswith("t") else 1)
        if size <= 0:
            raise bad(part, "has a RAM size of 0")
        if size > MAX_RAM_GB:
            raise bad(part, f"has more than {MAX_RAM_GB:,} GiB of RAM a node")
        return int(size * GIB)

    def whole(part: str, digits: str | None) -> int:
        # Counted before int(): Python refuses a number of more than 4,300 digits with an error
        # of its own, and one of 13 is already past every bound below.
        if digits and len(digits) > 15:
            raise bad(part, f"has more than {MAX_NODES:,} nodes")
        return int(digits or 1)

    parts = [p.strip() for p in text.strip().lower().split(",")]
    for part in parts:
        if m := _INLINE_CPU.match(part):
            count = whole(part, m.group(1))
            if count < 1:
                raise bad(part, "has a count of 0")
            if count > MAX_NODES:
                raise bad(part, f"has more than {MAX_NODES:,} nodes")
            size = ram(part, m.group(2), m.group(3))
            nodes.append(PoolNode(**named("cpu", count), ram_bytes=size, free_ram_bytes=size))
            continue
        m = _INLINE_GPU.match(part)
        if not m:
            raise bad(part, "is not a fleet")
        first, second, label, ram_number, ram_unit, fabric = m.groups()
        if second and len(second) > 15:
            raise bad(part, f"has more than {MAX_CARDS:,} cards a node")
        if not second and first and len(first) > 15:
            raise bad(part, f"has more than {MAX_CARDS:,} cards a node")
        count, gpus = (whole(part, first), int(second)) if second else (1, whole(part, first))
        if count < 1 or gpus < 1:
            raise bad(part, "has a count of 0")
        if count > MAX_NODES:
            raise bad(part, f"has more than {MAX_NODES:,} nodes")
        if gpus > MAX_CARDS:
            raise bad(part, f"has more than {MAX_CARDS:,} cards a node")
        if len(label) > MAX_NAME or len(fabric or "") > MAX_NAME:
            raise bad(part, f"has a name longer than {MAX_NAME} characters")
        try:
            gpu, note = read_class(label)
        except ClassError as e:
            if e.typo:
                meant = part[: m.start(3)] + e.typo + part[m.end(3) :]
                raise UsageError(
                    f"{what} {text!r}: {label!r} is not a GPU class llmfit knows; did you mean "
                    f"{meant}?"
                ) from None
            why = e.why or f"names {label!r}, whose label does not say its memory{e.near_text}"
            raise bad(part, why) from None
        if note:
            notes[note] = None
        card = memory_from_class(gpu) or 0
        if card > MAX_CARD_GB * GIB:
            raise bad(part, f"names a card of more than {MAX_CARD_GB:,} GiB")
        size = ram(part, ram_number, ram_unit) if ram_number else 0
        kind = PoolKind(gpu, card, gpus, gpus)
        nodes.append(
            PoolNode(
                **named(gpu, count),
                kinds=(kind,),
                fabric=fabric or "",
                ram_bytes=size,
                free_ram_bytes=size,
            )
        )
    return Fleet(nodes=tuple(nodes), source=f"inline: {text.strip()}", notes=tuple(notes))


def _looks_like_path(text: str) -> bool:
    return (
        "/" in text
        or os.sep in text
        or text.endswith((".toml", ".json"))
        or text.startswith(("~", "."))
    )


def load_fleet(arg: str, what: str = "--fleet") -> Fleet:
    """A fleet argument: an existing file is a fleet file; anything path-like that is not there
    is a missing file; everything else is an inline fleet."""
    if not arg.strip():
        # Not "no fleet": planning this machine instead would answer a question not asked.
        raise UsageError(
            f"{what} {arg!r} is empty; give a fleet file or an inline fleet like 8xh100-80g."
        )
    try:
        path = Path(arg).expanduser()
        # Anything there but a folder is read as a fleet file: read_fleet refuses a device
        # unread and reads a pipe (--fleet <(…)) as the stream it is.
        is_dir = path.is_dir()
        is_file = not is_dir and os.path.lexists(path)
    except (OSError, ValueError, RuntimeError):
        # A name no file can have (past 255 characters, a NUL byte, ~nobody): not a file, so an
        # inline fleet, which may well be that long.
        path, is_file, is_dir = Path(arg), False, False
    if is_file:
        return read_fleet(path)
    if is_dir:
        raise FleetFileError(f"{path} is a directory, not a fleet file.")
    if _looks_like_path(arg):
        raise FleetFileError(f"{path}: no such fleet file.")
    return parse_inline(arg, what)


LOCAL_FLEET = "fleet.toml"
ENV_FLEET = "LLMFIT_FLEET"


def resolve_fleet(
    arg: str | None,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    machine: Callable[[], Fleet] | None = None,
) -> Fleet:
    """The fleet to plan on: `arg` when given, else ./fleet.toml, else $LLMFIT_FLEET, else this
    machine. Fleet.source says which."""
    if arg is not None:
        return load_fleet(arg)
    local = (cwd / LOCAL_FLEET) if cwd else Path(LOCAL_FLEET)
    if local.is_file():
        return dataclasses.replace(read_fleet(local), source=LOCAL_FLEET)
    value = (os.environ if env is None else env).get(ENV_FLEET, "").strip()
    if value:
        fleet = load_fleet(value, f"${ENV_FLEET}")
        return dataclasses.replace(fleet, source=f"${ENV_FLEET}: {value}")
    if machine is None:
        from llmfit.sources.machine import read_machine

        machine = read_machine
    return machine()
