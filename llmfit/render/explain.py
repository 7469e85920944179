"""Why and why not: one option's card part by part with its formula's inputs; what was refused."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from llmfit.plan.advice import Advice
from llmfit.plan.engines import engine
from llmfit.plan.model import AttentionKind
from llmfit.plan.options import Option
from llmfit.render.sentences import describe, gb, rejection_reason, sequences, speed_line

BAR = 30


def _bar(part: int, whole: int) -> str:
    n = round(BAR * part / whole) if whole > 0 else 0
    return "█" * min(n, BAR) + "·" * max(BAR - n, 0)


def explain_lines(advice: Advice, o: Option, number: int) -> list[str]:
    m = advice.repo.model
    c = o.per_card
    unit = "of RAM" if o.cpu else "a card"
    lines = [f"Option {number}: {describe(o)}"]
    total = round(o.have / o.share) if o.share else o.have
    if not o.cpu:
        lines.append(
            f"  a card: {o.gpu_class}, {gb(total)} GB as CUDA reports it, of which "
            f"{o.share:.2f} = {gb(o.have)} GB is counted on"
        )
        if o.layout.cards > 1:
            lines.append(f"  the fullest card of {o.layout.cards} ({o.layout.short()}):")
    told = engine(o.engine).explain(o, m)
    parts = [(p.name, p.bytes, p.why) for p in told.parts]
    parts.append(("free", max(o.room, 0), "left of what is counted on"))
    for name, size, why in parts:
        lines.append(f"    {name:<9}{gb(size):>7} GB  {_bar(size, o.have)}  {why}")
    lines.append(f"    {'need':<9}{gb(c.need):>7} GB of {gb(o.have)} {unit}")
    if any(g.kind is AttentionKind.MLA for g in m.layer_groups):
        heads = f"an MLA latent of {m.head_dim} a layer, whole on every card"
    else:
        per = max(1, m.kv_heads // o.tp)
        plural = "s" if m.kv_heads > 1 else ""
        heads = f"{m.kv_heads} KV head{plural} × {m.head_dim}" + (
            f", {per} a card" if o.tp > 1 else ""
        )
    lines.append(
        f"  inputs: {m.layers} layers · {m.attention_heads} attention heads · {heads} · "
        f"KV {advice.plan.kv_bytes_per_token:,} B a token for the whole model"
    )
    lines.append(f"  holds: {o.max_context:,} tokens at most · {sequences(o)}")
    fast = speed_line(o)
    if fast and o.speed:
        lines.append(f"  speed: {fast}")
        lines.append(f"  speed assumes: {'; '.join(o.speed.assumptions)}")
    lines.append(f"  assumes: {told.assumes}")
    if o.what_if:
        lines.append(
            f"  what-if: the checkpoint is served with {' '.join(o.engine_flags)}, which changes "
            f"it ({o.what_if}); it is not the model as its authors shipped it"
        )
    return lines


def why_not_lines(advice: Advice) -> list[str]:
    rejected = advice.plan.rejected
    if not rejected:
        return ["No way was refused."]
    lines = ["Ways refused:"]
    seen: set[str] = set()
    for r in rejected:
        tag = f" [{r.what_if}]" if r.what_if else ""
        line = f"  {r.artifact}{tag} · {r.engine} · {r.where}: {rejection_reason(r)}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines


def render_explain(advice: Advice, console: Console, number: int) -> None:
    o = advice.plan.options[number - 1]
    for line in explain_lines(advice, o, number):
        console.print(Text(line), soft_wrap=True)


def render_why_not(advice: Advice, console: Console) -> None:
    for line in why_not_lines(advice):
        console.print(Text(line), soft_wrap=True)
