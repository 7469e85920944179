"""`llmfit check`: the verdict on a command, its card part by part, its KV pool and what it
holds, and the flags that were read but change nothing in the plan."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from llmfit.plan.advice import Advice
from llmfit.plan.engines import Request
from llmfit.plan.launch import Command
from llmfit.plan.options import Option
from llmfit.render.commands import command_text
from llmfit.render.explain import explain_lines, print_wrapped
from llmfit.render.safe import shell_line
from llmfit.render.sentences import fits_instead, gib, rejection_reason
from llmfit.render.serving import load, targets


def check_lines(
    argv: tuple[str, ...], request: Request, advice: Advice, encoding: str | None = None
) -> list[str]:
    plan = advice.plan
    if request.argv:
        # The command as it is launched: its variables in front, a credential as the variable
        # that holds it; every word exact, or refused (render/safe.py).
        env = [w.partition("=") for w in argv[: len(argv) - len(request.argv)]]
        words = argv[len(env) :]
        shell = Command("all", words, env=tuple((k, v) for k, _, v in env), secrets=request.secrets)
        lines = [f"$ {command_text(shell, encoding)}"]
    else:
        lines = [f"$ {shell_line(argv, encoding)}"]
    if plan.options:
        o = plan.options[0]
        lines.append(verdict(o))
        lines += explain_lines(advice, o, 1, as_given=True)
        if o.kv_tokens:
            rank = " a rank" if o.layout.dp > 1 else ""
            lines.append(
                # The server takes no sequence past the context its command sets.
                f"  KV pool: {o.kv_tokens:,} tokens{rank} · longest sequence "
                f"{min(o.max_context, o.context):,} "
                f"· {o.held:g} sequences of {o.context:,} at once"
            )
        others = len(plan.options) - 1
        if others:
            lines.append(f"  (and on {others} other class{'es' if others > 1 else ''} of card)")
    else:
        misses = [r for r in plan.rejected if r.need or r.reason]
        lines.append("does not fit:")
        for r in misses:
            lines.append(f"  {r.where}: {rejection_reason(r)}")
        for u in plan.unplaced:
            instead = fits_instead(u)
            if instead:
                lines.append(f"  {instead}")
        if not misses and not plan.unplaced:
            lines.append("  the fleet has no card this layout can run on")
    for note in plan.notes + advice.repo.warnings:
        lines.append(f"note: {note}")
    if request.ignored:
        lines.append("not modelled (read, and changing nothing in the plan): "
                     + ", ".join(request.ignored))  # fmt: skip
    return lines


def verdict(o: Option) -> str:
    """The answer to the command as written, first: whether it fits, and where a load is named,
    whether one server of it serves that load within the targets (issue 34 item 4)."""
    where = (
        f"{o.gpus} card{'s' if o.gpus != 1 else ''} of {o.gpu_class}"
        if not o.cpu
        else "the CPU alone, no card"
    )
    fits = (
        f"fits: {where}, on {o.hosts} node{'s' if o.hosts != 1 else ''} that could run it"
        f"{', free now' if o.free_now else ''}"
    )
    sv = o.serving
    if sv is None or not sv.workload.load:
        return fits
    w = sv.workload
    asked = f"{load(w)} within {targets(w)}"
    if sv.meets and sv.replicas == 1:
        return f"{fits}; serves {asked}"
    if sv.replicas is None:
        return f"{fits}; does not serve {asked} at any load: {'; '.join(sv.misses)}"
    more = (
        f"{sv.replicas} servers of it would ({sv.replicas * max(o.gpus, 1)} "
        f"{'cards' if o.gpus else 'nodes'})"
    )
    room = (
        f", and the fleet's cards run {o.fleet_replicas}"
        if not o.cpu and o.fleet_replicas < sv.replicas
        else ""
    )
    alone = "; ".join(sv.misses) or "it falls short"
    return f"{fits}; does not serve {asked} alone ({alone}): {more}{room}"


def render_check(argv: tuple[str, ...], request: Request, advice: Advice, console: Console) -> None:
    command, *rest = check_lines(argv, request, advice, console.encoding)
    # The command whole, to copy (its words checked, never cleaned); the verdict and the card
    # wrapped as --explain wraps them.
    console.print(Text(command), soft_wrap=True)
    for line in rest:
        print_wrapped(console, line)


__all__ = ["check_lines", "gib", "render_check", "verdict"]
