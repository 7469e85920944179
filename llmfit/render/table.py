"""The human view: the model in a line, every option in a table, and the best one in full."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmfit.advise import Advice
from llmfit.plan.model import AttentionKind
from llmfit.plan.options import Option
from llmfit.render.commands import commands
from llmfit.render.sentences import (
    describe,
    fits_instead,
    gb,
    label,
    quant,
    sequences,
    unplaced_reason,
)

TOP = 10


def _count(n: int | None) -> str:
    if not n:
        return "?"
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def model_line(advice: Advice) -> str:
    m, plan = advice.repo.model, advice.plan
    parts = [m.model_type or m.architecture or "unknown architecture"]
    if m.params:
        active = f" ({_count(m.active_params)} active)" if m.active_params else ""
        parts.append(f"{_count(m.params)} params{active}")
    parts.append(f"{m.layers} layers")
    if m.experts:
        parts.append(f"{m.experts} experts, {m.experts_active or '?'} active")
    if any(g.kind is AttentionKind.MLA for g in m.layer_groups):
        parts.append(f"MLA latent of {m.head_dim}")
    else:
        parts.append(f"{m.kv_heads} KV head{'s' if m.kv_heads != 1 else ''} × {m.head_dim}")
    parts.append(f"KV {plan.kv_bytes_per_token:,} B/token")
    parts.append(f"context {plan.context:,}")
    return " · ".join(parts)


def attention_line(advice: Advice) -> str | None:
    """ "attention: 52 sliding (window 1,024), 10 full" — said only when not all layers are full."""
    charges = advice.plan.attention
    if all(a.kind == "full" for a in charges):
        return None
    parts = []
    for a in charges:
        window = f" (window {a.window:,})" if a.window else ""
        parts.append(f"{a.layers} {a.kind}{window}")
    return "attention: " + ", ".join(parts)


def options_table(options: list[Option]) -> Table:
    t = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in (
        ("#", "right"),
        ("artifact", "left"),
        ("what-if", "left"),
        ("engine", "left"),
        ("where", "left"),
        ("bits", "right"),
        ("a card: need/have GB", "right"),
        ("max ctx", "right"),
        ("hosts", "right"),
        ("now", "left"),
    ):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, o in enumerate(options, 1):
        bits = f"{o.bits_per_weight:.1f}" if o.bits_per_weight else "?"
        t.add_row(
            str(i),
            quant(o),
            o.what_if or "",
            o.engine,
            label(o),
            bits,
            f"{gb(o.per_card.need)}/{gb(o.have)}",
            f"{o.max_context:,}",
            str(o.hosts),
            "free" if o.free_now else "busy",
        )
    return t


def breakdown(o: Option) -> str:
    c = o.per_card
    unit = "of RAM" if o.cpu else "a card"
    host = f"; {gb(o.host_bytes)} GB in the host's RAM" if o.host_bytes else ""
    return (
        f"weights {gb(c.weights)} + KV cache {gb(c.kv_cache)} + overhead {gb(c.overhead)} "
        f"= {gb(c.need)} GB of {gb(o.have)} {unit}{host}"
    )


def render_text(
    advice: Advice, console: Console, show_all: bool = False, ray: bool = False
) -> None:
    repo, plan = advice.repo, advice.plan
    at = f"@{repo.revision}" if repo.revision else ""
    console.print(Text(f"{repo.id}{at}", style="bold"), Text(model_line(advice)), soft_wrap=True)
    line = attention_line(advice)
    if line:
        console.print(Text(line), soft_wrap=True)
    fleet = advice.fleet
    console.print(
        Text(f"fleet: {fleet.source} · {fleet.node_count} nodes · {fleet.gpus} GPUs", style="dim"),
        soft_wrap=True,
    )
    for note in plan.notes + repo.warnings:
        console.print(Text(f"note: {note}", style="yellow"), soft_wrap=True)
    options = list(plan.options)
    if options:
        console.print()
        shown = options if show_all else options[:TOP]
        console.print(options_table(shown))
        if len(shown) < len(options):
            console.print(Text(f"… and {len(options) - len(shown)} more (--all)", style="dim"))
        best = options[0]
        console.print()
        console.print(Text("Best: ", style="bold green") + Text(describe(best)))
        console.print(Text("  " + breakdown(best)))
        console.print(Text(f"  max context {best.max_context:,} · {sequences(best)}"))
        render_commands(advice, console, best, ray)
    for u in plan.unplaced:
        console.print(Text(f"{u.artifact}: {unplaced_reason(u)}", style="red"), soft_wrap=True)
        instead = fits_instead(u)
        if instead and not options:
            console.print(Text(f"  {instead}"), soft_wrap=True)


def render_commands(advice: Advice, console: Console, o: Option, ray: bool = False) -> None:
    """The option's command lines, each node's under a comment naming its role and node."""
    repo = advice.repo
    for cmd in commands(o, repo.id, repo.revision, ray):
        if cmd.node:
            console.print(f"# {cmd.role} on {cmd.node}", soft_wrap=True, markup=False)
        console.print(cmd.shell, soft_wrap=True, markup=False, highlight=False)
