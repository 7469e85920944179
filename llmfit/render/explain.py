"""Why and why not: one option's card part by part with its formula's inputs; what was refused."""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

from llmfit.plan.advice import Advice
from llmfit.plan.engines import Explanation, Part, engine
from llmfit.plan.engines.bench import Bench, bench
from llmfit.plan.fleet import memory_source
from llmfit.plan.model import AttentionKind
from llmfit.plan.options import Option
from llmfit.render.safe import clean
from llmfit.render.sentences import (
    describe,
    fits_instead,
    gib,
    rejection_reason,
    sequences,
    speed_line,
)
from llmfit.render.serving import explain_lines as serving_explained

BAR = 30


def _bar(part: int, whole: int) -> str:
    n = round(BAR * part / whole) if whole > 0 else 0
    return "█" * min(n, BAR) + "·" * max(BAR - n, 0)


def longest(o: Option, trained: int | None, as_given: bool = False) -> str:
    """ "one sequence of up to 163,840 tokens (the trained context)"; for a command as given
    (`llmfit check`), the longest its own context lets a sequence be, and what the cards would
    hold where that is more."""
    if as_given and o.context and o.context < o.max_context:
        return (
            f"one sequence of up to {o.context:,} tokens, as the command sets it (the cards "
            f"would hold {o.max_context:,})"
        )
    capped = " (the trained context)" if trained and o.max_context >= trained else ""
    return f"one sequence of up to {o.max_context:,} tokens{capped}"


def free_part(o: Option) -> Part:
    """What is left free of the share counted on, after the engine's parts."""
    return Part("free", max(o.room, 0), "left of what is counted on")


def shown_parts(o: Option, told: Explanation) -> tuple[Part, ...]:
    """The parts `--explain` shows of the option's fullest card, in text and in JSON alike: the
    engine's, then what is left free of the share counted on."""
    return (*told.parts, free_part(o))


def explain_document(advice: Advice, number: int) -> dict[str, object]:
    """`--explain --json`: option `number`'s fullest card, the same parts the text shows, as
    data (docs/json.md "explain")."""
    o = advice.plan.options[number - 1]
    told = engine(o.engine).explain(o, advice.repo.model)
    return {
        "option": number,
        "engine": o.engine,
        "cpu": o.cpu,
        "share": o.share,
        "parts": [_part(p) for p in shown_parts(o, told)],
        "need": o.per_card.need,
        "have": o.have,
        "assumes": told.assumes,
        # Added (issue 35): the card's total, what the option holds beside its cards, and the
        # KV heads a card holds where the engine splits them (null: every head of its layers).
        "total": o.total,
        "beside": [_part(p) for p in told.beside],
        "kv_heads": told.kv_heads,
        "settings": [{"flag": a.flag, "value": a.value, "source": a.source} for a in told.settings],
    }


def assumed_words(told: Explanation, engine_name: str) -> str:
    """The settings the figures rest on, in words: "--max-num-seqs 256 (vLLM's default)"."""
    whose = {
        "given": "as given",
        "default": f"{engine_name}'s default",
        "checkpoint": "the checkpoint's",
        "what-if": "the what-if's",
        "plan": "the plan's",
    }
    return " · ".join(f"{a.flag} {a.value} ({whose[a.source]})" for a in told.settings)


def _part(p: Part) -> dict[str, object]:
    return {"name": p.name, "bytes": p.bytes, "why": p.why}


def explain_lines(
    advice: Advice, o: Option, number: int, width: int = 0, as_given: bool = False
) -> list[str]:
    m = advice.repo.model
    c = o.per_card
    unit = "of RAM" if o.cpu else "a card"
    lines = [f"Option {number}: {describe(o)}"]
    if not o.cpu and o.card is not None:
        lines.append(
            f"  a card: {o.gpu_class}, {gib(o.total)} GiB {memory_source(o.card)}, of which "
            f"{o.share:.2f} = {gib(o.have)} GiB is counted on"
        )
        if o.layout.cards > 1:
            lines.append(f"  the fullest card of {o.layout.cards} ({o.layout.short()}):")
    told = engine(o.engine).explain(o, m)
    # The card's parts, what it holds beside them (said, not counted), then what is left.
    for p in (*told.parts, *told.beside, free_part(o)):
        # A bar where there is room for it beside the words; on a narrow terminal, the words.
        bar = f"{_bar(p.bytes, o.have)}  " if not width or width >= 120 else ""
        lines.append(f"    {p.name:<11}{gib(p.bytes):>7} GiB  {bar}{p.why}")
    lines.append(f"    {'need':<11}{gib(c.need):>7} GiB of {gib(o.have)} {unit}")
    if any(g.kind is AttentionKind.MLA for g in m.layer_groups):
        heads = f"an MLA latent of {m.head_dim} a layer, whole on every card"
    else:
        plural = "s" if m.kv_heads > 1 else ""
        heads = f"{m.kv_heads} KV head{plural} × {m.head_dim}" + (
            f", {told.kv_heads} a card" if told.kv_heads is not None else ""
        )
    lines.append(
        f"  inputs: {m.layers} layers · {m.attention_heads} attention heads · {heads} · "
        f"KV {advice.plan.kv_bytes_per_token:,} B a token for the whole model"
    )
    lines.append(f"  holds: {longest(o, m.max_context, as_given)} · room for {sequences(o)}")
    fast = speed_line(o)
    if fast and o.speed:
        lines.append(f"  speed: {fast}")
        lines.append(f"  speed assumes: {'; '.join(o.speed.assumptions)}")
    lines += serving_explained(o)
    checked = bench(o, advice.repo.id)
    if checked is not None:
        # Cleaned, not refused: --explain is read; --commands prints the line to paste, exact.
        lines.append(clean(f"  measure it ({_measures(checked)}): {checked.line}", 10_000))
    if told.settings:
        lines.append(f"  settings: {assumed_words(told, engine(o.engine).name)}")
    lines.append(f"  assumes: {told.assumes}")
    if o.what_if and o.engine_flags:
        lines.append(
            f"  what-if: the checkpoint is served with {' '.join(o.engine_flags)}, which changes "
            f"it ({o.what_if}); it is not the model as its authors shipped it"
        )
    elif o.what_if:
        lines.append(
            f"  what-if: the checkpoint as shipped, at {o.context:,} tokens, the longest it holds "
            f"here, not the {m.max_context or 0:,} it was trained for"
        )
    return lines


def _measures(b: Bench) -> str:
    """What the benchmark measures, in words."""
    if b.load_kind == "single":
        return f"one sequence's {b.input_len:,}-token prefill and {b.output_len:,}-token generation"
    at = {
        "concurrency": f"{b.load:g} requests in flight",
        "rate": f"{b.load:g} requests a second",
        "requests": f"{b.load:g} requests sent at once",
    }[b.load_kind]
    return f"{b.prompts:,} prompts of {b.input_len:,} in / {b.output_len:,} out at {at}"


def _tags(what_ifs: list[str | None]) -> str:
    """ " [as stored, fp8 KV cache]": the what-ifs a line was said for; none for as stored alone."""
    if what_ifs == [None]:
        return ""
    return " [" + ", ".join("as stored" if t is None else t for t in what_ifs) + "]"


# A miss needing more than this many times what a card offers is hopeless: it is counted, not
# listed, unless every refusal is asked for (--why-not --all).
HOPELESS = 2.0


def why_not_lines(advice: Advice, every: bool = False) -> list[str]:
    """The ways refused, grouped by class of card, nearest misses first; a reason given for
    several what-ifs is said once, with each of them named."""
    rejected = advice.plan.rejected
    # Where pins left nothing, the nearest layout that fits without them, after the refusals.
    nearest = [f"{u.artifact}: {n}" for u in advice.plan.unplaced if (n := fits_instead(u))]
    if not rejected:
        return ["No way was refused.", *nearest]
    # (class, line) → the what-ifs it was said for, in order, and how near a miss it is.
    groups: dict[str, dict[str, list[str | None]]] = {}
    nearness: dict[tuple[str, str], float] = {}
    hopeless: dict[str, list[str]] = {}
    beaten: dict[str, dict[str, list[str | None]]] = {}
    several = len({r.artifact for r in rejected}) > 1
    engines = len({r.engine for r in rejected}) > 1
    for r in rejected:
        group = r.gpu_class or ("CPU" if r.where.startswith("CPU") else "elsewhere")
        if engines:
            group = f"{r.engine} on {group}"
        if several:
            group = f"{r.artifact}, {group}"
        if r.kind == "dominated" and not every:
            tags = beaten.setdefault(group, {}).setdefault(r.where, [])
            if r.what_if not in tags:
                tags.append(r.what_if)
            continue
        text = f"{r.where}: {rejection_reason(r)}"
        ratio = r.need / r.have if r.need and r.have else 0.0
        if ratio > HOPELESS and not every:
            hopeless.setdefault(group, [])
            if r.where not in hopeless[group]:
                hopeless[group].append(r.where)
            continue
        tags = groups.setdefault(group, {}).setdefault(text, [])
        if r.what_if not in tags:
            tags.append(r.what_if)
        nearness[(group, text)] = min(nearness.get((group, text), 9e9), ratio or 9e9)
    lines = ["Ways refused, by class of card (nearest misses first):"]
    order = [*groups, *(g for g in [*hopeless, *beaten] if g not in groups)]
    for group in dict.fromkeys(order):
        lines.append(f"  {group}:")
        texts = groups.get(group, {})
        for text in sorted(texts, key=lambda t: (nearness[(group, t)], list(texts).index(t))):
            lines.append(f"    {text}{_tags(texts[text])}")
        if group in beaten:
            shown = ", ".join(f"{w}{_tags(t)}" for w, t in beaten[group].items())
            lines.append(
                "    not shown, a shown layout no worse in cards, nodes, sequences held and "
                f"speed: {shown} (--why-not --all says which)"
            )
        far = hopeless.get(group)
        if far:
            lines.append(
                f"    and {len(far)} more needing over {HOPELESS:g}× a card "
                f"({', '.join(far)}; --why-not --all lists them)"
            )
    return lines + nearest


def render_explain(advice: Advice, console: Console, number: int) -> None:
    o = advice.plan.options[number - 1]
    for line in explain_lines(advice, o, number, console.width):
        print_wrapped(console, line)
    if advice.plan.disaggregated:
        # The disaggregated option split pool by pool, after the option's card: a plan with
        # none (or --disagg off) explains as before.
        from llmfit.render.disagg import detail
        from llmfit.render.disagg import explain as disagg_explain

        offer = advice.plan.disaggregated[0]
        console.print()
        for line in detail(advice, 1, offer) + disagg_explain(advice, 1, offer):
            print_wrapped(console, line)


def render_why_not(advice: Advice, console: Console, every: bool = False) -> None:
    for line in why_not_lines(advice, every):
        print_wrapped(console, line)


def print_wrapped(console: Console, line: str, style: str | None = None) -> None:
    """A line wrapped at word boundaries to the console's width, its continuation lines indented
    under its first word (past a part's name and size, for the lines of a card's parts)."""
    # Every sentence may carry text from outside (a config's names, a fleet's, a note quoting
    # them): printed as data, one line, before it is wrapped.
    line = clean(line, limit=100_000)
    lead = len(line) - len(line.lstrip(" "))
    part = re.match(r"^ +\S+(?: \S+)? +[\d.]+ GiB  (?:[█·]+  )?", line)
    indent = len(part.group(0)) if part and len(part.group(0)) <= console.width // 2 else lead + 4
    for piece in wrap_cells(line, max(console.width, 40), indent) or [line]:
        console.print(Text(piece, style=style or ""), soft_wrap=True)


def wrap_cells(line: str, width: int, indent: int) -> list[str]:
    """`line` wrapped at spaces to `width` terminal cells (a wide character takes two: textwrap
    counts characters, and six repetitions of a directory named in them drew a 98-column line
    at 80), its continuation lines indented by `indent`; the spaces within a line kept (a card's
    parts are aligned by them), those at a break dropped; a word wider than a line is cut by
    cells. For text of one cell a character, it breaks where textwrap does."""
    from rich.cells import cell_len

    lead = len(line) - len(line.lstrip(" "))
    out: list[str] = []
    current, used, fresh, gap = " " * lead, lead, True, ""
    for chunk in re.findall(r" +|[^ ]+", line[lead:]):
        if chunk.startswith(" "):
            gap = "" if fresh else chunk
            continue
        size = cell_len(chunk)
        if not fresh and used + len(gap) + size > width:
            out.append(current)
            current, used, fresh, gap = " " * indent, indent, True, ""
        room = width - used - len(gap)
        while size > room and room > 0:
            # A word wider than what is left of the line: as much of it as fits, then the rest.
            head, cells = "", 0
            for ch in chunk:
                if cells + cell_len(ch) > room:
                    break
                head, cells = head + ch, cells + cell_len(ch)
            if not head:
                break
            out.append(current + gap + head)
            chunk, size = chunk[len(head) :], size - cells
            current, used, fresh, gap = " " * indent, indent, True, ""
            room = width - used
        current += gap + chunk
        used += len(gap) + size
        fresh, gap = False, ""
    if not fresh or not out:
        out.append(current)
    return out
