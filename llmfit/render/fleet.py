"""The fleet at a glance (`llmfit fleet`): capacity per GPU class with usage bars, free whole
nodes per fabric, CPU nodes and RAM; and the same as a JSON document (keys in docs/fleet.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmfit.plan.fleet_summary import FleetSummary
from llmfit.render.safe import safe_dumps

GIB = 1 << 30
BAR = 20
USED, FREE, UNHEALTHY = "█", "░", "×"
SCHEMA = 1


def _gb(n: int) -> str:
    return f"{n / GIB:,.1f}"


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _ram(n: int) -> str:
    return f"{n / GIB:,.0f}"


def bar(used: int, free: int, unhealthy: int, width: int = BAR) -> str:
    """A bar of `width` cells split used / free / unhealthy in proportion (largest remainder),
    where any part that is not zero gets at least one cell so a single broken card shows."""
    parts = [used, free, unhealthy]
    total = sum(parts)
    if total <= 0:
        return " " * width
    cells = [p * width // total for p in parts]
    rest = [p * width % total for p in parts]
    for i in sorted(range(3), key=lambda i: -rest[i]):
        if sum(cells) < width:
            cells[i] += 1
    for i in range(3):
        if parts[i] and not cells[i]:
            cells[i] = 1
            cells[max(range(3), key=lambda j: cells[j])] -= 1
    return USED * cells[0] + FREE * cells[1] + UNHEALTHY * cells[2]


# A name column is not cut narrower than this (nor than its header).
NARROWEST_NAME = 12


def _table(
    header: tuple[str, ...], rows: Sequence[tuple[str, ...]], left: int, width: int
) -> list[str]:
    """Columns two spaces apart: the first `left` aligned left, the rest right; within `width`
    where the names allow, a name past its column's share cut with "…" (a class label may be
    128 characters: one of 124 drew a 172-column table at 80)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    over = sum(widths) + 2 * (len(widths) - 1) - width
    while over > 0:
        # The widest name column gives up what it can, down to its floor.
        i = max(range(left), key=lambda j: widths[j])
        floor = max(NARROWEST_NAME, len(header[i]))
        cut = min(over, widths[i] - floor)
        if cut <= 0:
            break
        widths[i] -= cut
        over -= cut

    def fit(c: str, w: int) -> str:
        return c if len(c) <= w else c[: w - 1] + "…"

    def line(r: tuple[str, ...]) -> str:
        cells = [
            fit(c, w).ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [line(header), *(line(r) for r in rows)]


def _wrapped(line: str, width: int) -> list[str]:
    from llmfit.render.explain import wrap_cells

    return wrap_cells(line, width, 4) or [line]


# Fewer cells than this say nothing a reader can see at a glance: the bars are left out instead.
NARROWEST_BAR = 6


def render_summary(s: FleetSummary, width: int | None = None) -> str:
    """The summary drawn to `width` columns (the output's, render/console.py): lines wrapped,
    the bars as wide as what is left of the table allows, up to 20 cells."""
    if width is None:
        from llmfit.render.streams import output_width

        width = output_width()
    gpu_part = (
        f"{_n(s.gpus, 'GPU')}: {s.used:,} used, {s.free:,} free, {s.unhealthy:,} unhealthy"
        if s.classes
        else "no GPUs"
    )
    lines = _wrapped(
        f"fleet: {s.source} · {_n(s.nodes, 'node')} "
        f"({s.gpu_nodes:,} with GPUs, {s.cpu_nodes:,} CPU only) · {gpu_part}",
        width,
    )
    if s.classes:
        rows = [
            (
                c.gpu_class,
                _gb(c.card_bytes),
                f"{c.nodes:,}",
                f"{c.gpus:,}",
                f"{c.used:,}",
                f"{c.free:,}",
                f"{c.unhealthy:,}",
            )
            for c in s.classes
        ]
        header = ("class", "GiB a card", "nodes", "GPUs", "used", "free", "unhealthy")
        table = _table(header, rows, 1, width)
        start = max(len(line) for line in table) + 2
        cells = min(BAR, width - start)
        if cells >= NARROWEST_BAR:
            # The bars in the last column, each at the same start, and their legend under them
            # (moved left as far as it must to end within the width).
            table = [table[0]] + [
                line.ljust(start) + bar(c.used, c.free, c.unhealthy, cells)
                for line, c in zip(table[1:], s.classes, strict=True)
            ]
            legend = f"{USED} used  {FREE} free  {UNHEALTHY} unhealthy"
            table.append(" " * max(0, min(start, width - len(legend))) + legend)
        lines += ["", *table]
    if s.fabrics:
        fabric_rows = [
            (
                f.fabric or "(no fabric)",
                f.gpu_class,
                f"{f.nodes:,}",
                f"{f.gpus_per_node:,}",
                f"{f.free_nodes:,}",
            )
            for f in s.fabrics
        ]
        fabric_header = ("fabric", "class", "nodes", "GPUs a node", "free whole nodes")
        lines += ["", *_table(fabric_header, fabric_rows, 2, width)]
        if any(not f.fabric for f in s.fabrics):
            lines += _wrapped(
                "(nodes with no fabric are islands: a replica cannot span them)", width
            )
    lines += [
        "",
        *_wrapped(
            f"CPU only: {_n(s.cpu_nodes, 'node')}, {_ram(s.cpu_ram_bytes)} GiB RAM "
            f"({_ram(s.cpu_free_ram_bytes)} free)",
            width,
        ),
        *_wrapped(
            f"host RAM, all nodes: {_ram(s.ram_bytes)} GiB ({_ram(s.free_ram_bytes)} free)", width
        ),
    ]
    for n in s.notes:
        lines += _wrapped(f"note: {n}", width)
    return "\n".join(lines)


def document(s: FleetSummary) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "source": s.source,
        "nodes": s.nodes,
        "gpu_nodes": s.gpu_nodes,
        "cpu_nodes": s.cpu_nodes,
        "gpus": {"total": s.gpus, "used": s.used, "free": s.free, "unhealthy": s.unhealthy},
        "classes": [
            {
                "gpu_class": c.gpu_class,
                "card_bytes": c.card_bytes,
                "mig": c.mig,
                "nodes": c.nodes,
                "gpus": c.gpus,
                "used": c.used,
                "free": c.free,
                "unhealthy": c.unhealthy,
            }
            for c in s.classes
        ],
        "fabrics": [
            {
                "fabric": f.fabric or None,
                "gpu_class": f.gpu_class,
                "nodes": f.nodes,
                "gpus_per_node": f.gpus_per_node,
                "free_nodes": f.free_nodes,
            }
            for f in s.fabrics
        ],
        "ram": {"bytes": s.ram_bytes, "free_bytes": s.free_ram_bytes},
        "cpu_ram": {"bytes": s.cpu_ram_bytes, "free_bytes": s.cpu_free_ram_bytes},
        "notes": list(s.notes),
    }


def render_summary_json(s: FleetSummary) -> str:
    return safe_dumps(document(s))
