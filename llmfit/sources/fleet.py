"""The fleet file (TOML) → Fleet, with one clear sentence for anything it gets wrong.

[[pool]]                 # identical nodes: h200-1 … h200-4
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
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llmfit.errors import FleetFileError, UsageError
from llmfit.plan.fleet import GIB, Fleet, PoolKind, PoolNode, memory_from_class

DEVICE_KEYS = ("gpu", "gpu_memory_gb", "gpus", "free_gpus", "unhealthy_gpus")
NODE_KEYS = ("name", "fabric", "ram_gb", "free_ram_gb", "devices", *DEVICE_KEYS, "labels")
POOL_KEYS = ("count", *NODE_KEYS)
TOP_KEYS = ("pool", "node")


class _Reader:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def fail(self, where: str, key: str | None, message: str) -> FleetFileError:
        if key is None and re.fullmatch(r"\w+", where):
            line = self._top_line(where)  # a top-level key written as a value ("pool = 1")
        else:
            line = self._line_of(where, key)
        if line is None and key is None and "." in where:
            # An inline table in a list ("devices = [1]"): the line of the list.
            parent, _, last = where.rpartition(".")
            line = self._line_of(parent, re.sub(r"\[\d+\]$", "", last))
        at = f"{self.path}:{line}" if line else self.path
        what = ".".join(p for p in (where, key) if p)
        return FleetFileError(f"{at}: {what} {message}")

    def _line_of(self, where: str, key: str | None) -> int | None:
        """The line of `key` inside the table `where` ("node[1].devices[0]"), as TOML gives it.

        tomllib reports lines only for syntax errors, so the table is found by counting its
        [[headers]] in the text, and the key by its `key =` inside that table.
        """
        headers = [
            (i, m.group(1))
            for i, text in enumerate(self.lines)
            if (m := re.match(r"^\s*\[\[?\s*([\w.]+)\s*\]\]?", text))
        ]
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

    def check_keys(self, table: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                also = (
                    f"; did you mean {close[0]!r}?"
                    if close
                    else f"; allowed: {', '.join(allowed)}."
                )
                raise self.fail(where, key, f"is not a key llmfit knows{also}")

    def count(self, table: dict[str, Any], key: str, where: str, default: int) -> int:
        v = table.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(where, key, f"is {v!r}; it must be a whole number.")
        if v < 0:
            raise self.fail(where, key, f"is {v}; it cannot be negative.")
        return v

    def gib(self, table: dict[str, Any], key: str, where: str) -> int:
        v = table.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise self.fail(where, key, f"is {v!r}; it must be a number of GB.")
        if v < 0:
            raise self.fail(where, key, f"is {v}; it cannot be negative.")
        return int(v * GIB)

    def text(self, table: dict[str, Any], key: str, where: str, default: str = "") -> str:
        v = table.get(key, default)
        if not isinstance(v, str):
            raise self.fail(where, key, f"is {v!r}; it must be a string.")
        return v

    def kind(self, table: dict[str, Any], where: str) -> PoolKind | None:
        if "gpu" not in table:
            for key in ("gpus", "free_gpus", "gpu_memory_gb", "unhealthy_gpus"):
                if key in table:
                    raise self.fail(
                        where, key, "is given without a gpu class to say what they are."
                    )
            return None
        gpu_class = self.text(table, "gpu", where).strip().lower()
        if "gpu_memory_gb" in table:
            card = self.gib(table, "gpu_memory_gb", where)
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
        gpus = self.count(table, "gpus", where, 1)
        bad = self.count(table, "unhealthy_gpus", where, 0)
        free = self.count(table, "free_gpus", where, max(gpus - bad, 0))
        if free > gpus:
            raise self.fail(where, "free_gpus", f"is {free}, more than the {gpus} gpus it has.")
        if bad > gpus:
            raise self.fail(where, "unhealthy_gpus", f"is {bad}, more than the {gpus} gpus it has.")
        if free + bad > gpus:
            raise self.fail(
                where, "free_gpus", f"is {free}, but {bad} of the {gpus} gpus are unhealthy."
            )
        return PoolKind(gpu_class, card, gpus, free, bad)

    def node(self, table: dict[str, Any], where: str, name: str) -> PoolNode:
        kinds: list[PoolKind] = []
        own = self.kind(table, where)
        if own:
            kinds.append(own)
        devices = table.get("devices", [])
        if not isinstance(devices, list):
            raise self.fail(where, "devices", "must be a list of [[...devices]] tables.")
        for j, dev in enumerate(devices):
            dwhere = f"{where}.devices[{j}]"
            if not isinstance(dev, dict):
                raise self.fail(dwhere, None, "must be a table.")
            self.check_keys(dev, DEVICE_KEYS, dwhere)
            kind = self.kind(dev, dwhere)
            if kind is None:
                raise self.fail(
                    dwhere, None, 'has no gpu class; give one like gpu = "a100-80g-mig-3g.40gb".'
                )
            kinds.append(kind)
        ram = self.gib(table, "ram_gb", where)
        free_ram = self.gib(table, "free_ram_gb", where) if "free_ram_gb" in table else ram
        if free_ram > ram:
            raise self.fail(
                where,
                "free_ram_gb",
                f"is {table['free_ram_gb']}, more than the node's ram_gb of "
                f"{table.get('ram_gb', 0)}.",
            )
        return PoolNode(
            id=name,
            kinds=tuple(kinds),
            fabric=self.text(table, "fabric", where),
            ram_bytes=ram,
            free_ram_bytes=free_ram,
            labels=self.labels(table, where),
        )

    def labels(self, table: dict[str, Any], where: str) -> tuple[tuple[str, str], ...]:
        v = table.get("labels", {})
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
            raise self.fail(where, "labels", 'must be a table of strings, like { key = "value" }.')
        return tuple(sorted(v.items()))


def parse_fleet(text: str, path: str) -> Fleet:
    """Parse a fleet file's text; `path` names it in every error."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FleetFileError(f"{path} is not valid TOML: {e}.") from None
    r = _Reader(path, text)
    r.check_keys(data, TOP_KEYS, "")
    nodes: list[PoolNode] = []
    for i, pool in enumerate(_tables(r, data, "pool")):
        where = f"pool[{i}]"
        r.check_keys(pool, POOL_KEYS, where)
        name = r.text(pool, "name", where, f"pool{i + 1}")
        count = r.count(pool, "count", where, 1)
        for n in range(1, count + 1):
            nodes.append(r.node(pool, where, f"{name}-{n}"))
    for i, node in enumerate(_tables(r, data, "node")):
        where = f"node[{i}]"
        r.check_keys(node, NODE_KEYS, where)
        nodes.append(r.node(node, where, r.text(node, "name", where, f"node{i + 1}")))
    if not nodes:
        raise FleetFileError(f"{path} describes no nodes: add a [[pool]] or a [[node]].")
    seen: dict[str, int] = {}
    for i, placed in enumerate(nodes):
        if placed.id in seen:
            where = _where_named(data, i)
            raise r.fail(
                where,
                "name",
                f"is {placed.id!r}, a name another node already has; names must be unique.",
            )
        seen[placed.id] = i
    return Fleet(nodes=tuple(nodes), source=path)


def _where_named(data: dict[str, Any], index: int) -> str:
    """The table that gave the `index`-th node: its pool or its [[node]]."""
    pools = data.get("pool", [])
    i = 0
    for p, pool in enumerate(pools):
        i += pool.get("count", 1)
        if index < i:
            return f"pool[{p}]"
    return f"node[{index - i}]"


def _tables(r: _Reader, data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    v = data.get(key, [])
    if not isinstance(v, list) or not all(isinstance(t, dict) for t in v):
        raise r.fail(key, None, f"must be written as [[{key}]] tables.")
    return v


def read_fleet(path: Path) -> Fleet:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FleetFileError(f"{path}: no such fleet file.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise FleetFileError(f"{path}: cannot be read ({e}).") from None
    return parse_fleet(text, str(path))


# Inline fleets, for a quick question without a file:
#   8xh100-80g            one node with 8 cards
#   4x8xh100-80g@ib0      four such nodes on fabric ib0
#   h100-80g              one node with one card
#   cpu:512g              a CPU node with 512 GB of RAM (2x cpu:1t: two nodes of 1 TB)
# several joined with commas.
INLINE_GRAMMAR = (
    "[NODESx]GPUSxCLASS[@FABRIC] (8xh100-80g, 4x8xh100-80g@ib0) or [NODESx]cpu:RAM (cpu:512g), "
    "joined with commas"
)
_INLINE_GPU = re.compile(r"^(?:(\d+)x)?(?:(\d+)x)?([a-z][a-z0-9.\-]*)(?:@([a-z0-9_.\-]+))?$")
_INLINE_CPU = re.compile(r"^(?:(\d+)x)?cpu:(\d+(?:\.\d+)?)(g|gb|t|tb)?$")


def parse_inline(text: str, what: str = "--fleet") -> Fleet:
    """An inline fleet ("4x8xh100-80g@ib0,cpu:512g") → Fleet; a bad one is one UsageError."""
    nodes: list[PoolNode] = []
    used: dict[str, int] = {}

    def bad(part: str, why: str) -> UsageError:
        return UsageError(f"{what} {text!r}: {part!r} {why}; write {INLINE_GRAMMAR}.")

    def name(stem: str) -> str:
        used[stem] = used.get(stem, 0) + 1
        return f"{stem}-{used[stem]}"

    parts = [p.strip() for p in text.strip().lower().split(",")]
    for part in parts:
        if m := _INLINE_CPU.match(part):
            count = int(m.group(1) or 1)
            size = float(m.group(2)) * (1024 if (m.group(3) or "g").startswith("t") else 1)
            if count < 1 or size <= 0:
                raise bad(part, "has a count or a size of 0")
            ram = int(size * GIB)
            nodes.extend(PoolNode(id=name("cpu"), ram_bytes=ram, free_ram_bytes=ram)
                         for _ in range(count))  # fmt: skip
            continue
        m = _INLINE_GPU.match(part)
        if not m:
            raise bad(part, "is not a fleet")
        first, second, gpu_class, fabric = m.groups()
        count, gpus = (int(first), int(second)) if second else (1, int(first or 1))
        if count < 1 or gpus < 1:
            raise bad(part, "has a count of 0")
        card = memory_from_class(gpu_class)
        if not card:
            raise bad(part, f"names {gpu_class!r}, whose label does not say its memory")
        kind = PoolKind(gpu_class, card, gpus, gpus)
        nodes.extend(PoolNode(id=name(gpu_class), kinds=(kind,), fabric=fabric or "")
                     for _ in range(count))  # fmt: skip
    return Fleet(nodes=tuple(nodes), source=f"inline: {text.strip()}")


def _looks_like_path(text: str) -> bool:
    return "/" in text or os.sep in text or text.endswith(".toml") or text.startswith(("~", "."))


def load_fleet(arg: str, what: str = "--fleet") -> Fleet:
    """A fleet argument: an existing file is a fleet file; anything path-like that is not there
    is a missing file; everything else is an inline fleet."""
    path = Path(arg).expanduser()
    if path.is_file():
        return read_fleet(path)
    if path.is_dir():
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
    if arg:
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
