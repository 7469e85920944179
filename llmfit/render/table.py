"""The human view: the model in a line, every option in a table, and the best one in full."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmfit.plan.advice import Advice
from llmfit.plan.model import AttentionKind
from llmfit.plan.options import Option
from llmfit.render.commands import bench_line
from llmfit.render.explain import print_wrapped
from llmfit.render.launch import launch_lines
from llmfit.render.safe import clean
from llmfit.render.sentences import (
    describe,
    fits_instead,
    gib,
    label,
    quant,
    sequences,
    speed_line,
    tokens_per_s,
    unplaced_reason,
)
from llmfit.render.serving import (
    ceiling_lines,
    meets,
    per_gpu,
    per_hour,
    per_mtok,
    serving_lines,
    workload_line,
)

TOP = 10


def _count(n: int | None) -> str:
    if not n:
        return "?"
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


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


# On a narrow terminal the table leaves out the columns a reader loses least without, rather than
# cut a number (every column but the what-if and where never wraps), and says under it which it
# left out and what they held. The width at which every column is shown.
FULL = 120


def dropped(options: list[Option], width: int) -> list[str]:
    """The columns left out at `width`: hosts below 120; below 100 the bits, one sequence's
    decode speed (the workload's tok/s/GPU stays), and the engine, `meets` and `now` where every
    row says the same (a column that tells busy from free, or one that meets from one that does
    not, is kept); below 90 the longest context too, so that where it runs keeps its words."""
    drop: list[str] = []
    if priced(options):
        return _dropped_priced(options, width)
    if width < FULL:
        drop.append("hosts")
    if width < 100:
        drop += ["bits", "tok/s"]
        if len({o.engine for o in options}) == 1:
            drop.append("engine")
        if len({meets(o) for o in options}) == 1:
            drop.append("meets")
        if all(o.free_now for o in options):
            drop.append("now")
    if width < 90:
        drop.append("max ctx")
    return drop


# Where the fleet prices its cards the table has two more columns ($/h, $/Mtok), so every column
# is shown from this width; below it the cost is kept before a card's output a second, since it is
# the cost the options are ranked by.
FULL_PRICED = 150


def _dropped_priced(options: list[Option], width: int) -> list[str]:
    drop: list[str] = []
    if width < FULL_PRICED:
        drop += ["hosts", "bits"]
    if width < 130:
        drop += ["tok/s", "max ctx"]
    if width < FULL:
        if len({o.engine for o in options}) == 1:
            drop.append("engine")
    if width < 100:
        drop.append("tok/s/GPU")
        if len({meets(o) for o in options}) == 1:
            drop.append("meets")
        if all(o.free_now for o in options):
            drop.append("now")
    return drop


def left_out(options: list[Option], width: int) -> str | None:
    """The line under a narrow table that says which columns it left out: those whose every row
    says the same with what they say, the others by name."""
    drop = dropped(options, width)
    if not drop:
        return None
    said = {
        "engine": f"engine ({options[0].engine} for all)" if options else "engine",
        "meets": f"meets ({meets(options[0])} for all)" if options else "meets",
        "now": "now (all free)",
    }
    shown = ", ".join(said.get(name, name) for name in drop)
    full = FULL_PRICED if priced(options) else FULL
    return f"not shown at {width} columns (every column is at {full}): {shown}"


def priced(options: list[Option]) -> bool:
    """Whether the fleet prices the options' cards: the table then says what each costs."""
    return any(o.price is not None for o in options)


def options_table(options: list[Option], width: int = 120) -> Table:
    drop = set(dropped(options, width))
    if not priced(options):
        drop |= {"$/h", "$/Mtok"}
    wide = FULL_PRICED if priced(options) else FULL
    need = "need/have GiB" if width < 120 else "a card: need/have GiB"
    t = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
    columns = (
        ("#", "right", True),
        ("artifact", "left", True),
        ("what-if", "left", False),
        ("engine", "left", True),
        ("where", "left", False),
        ("bits", "right", True),
        (need, "right", True),
        ("max ctx", "right", True),
        ("tok/s", "right", True),
        # At the workload: output tokens a second a card, and whether it meets the targets.
        ("tok/s/GPU", "right", True),
        ("meets", "left", True),
        # Where the fleet prices its cards: the option's cost an hour at the load, and a
        # million output tokens at the workload.
        ("$/h", "right", True),
        ("$/Mtok", "right", True),
        ("hosts", "right", True),
        ("now", "left", True),
    )
    keep = [(n, j, nw) for n, j, nw in columns if n not in drop]
    for name, justify, no_wrap in keep:
        t.add_column(name, justify=justify, no_wrap=no_wrap)  # type: ignore[arg-type]
    for i, o in enumerate(options, 1):
        cells = {
            "#": str(i),
            "artifact": quant(o),
            # Narrower than every column needs, the longest what-if in short ("fp8 weights+KV"),
            # so that it and the layout fit a line.
            "what-if": (o.what_if or "").replace(" and KV cache", "+KV")
            if width < wide
            else o.what_if or "",
            "engine": o.engine,
            "where": label(o),
            "bits": f"{o.bits_per_weight:.1f}" if o.bits_per_weight else "?",
            need: f"{gib(o.per_card.need)}/{gib(o.have)}",
            "max ctx": f"{o.max_context:,}",
            "tok/s": tokens_per_s(o),
            "tok/s/GPU": per_gpu(o),
            "meets": meets(o),
            "$/h": per_hour(o),
            "$/Mtok": per_mtok(o),
            "hosts": str(o.hosts),
            "now": "free" if o.free_now else "busy",
        }
        # Cells as Text, never markup: an artifact's or a class's name is outside text.
        t.add_row(*(Text(clean(cells[name])) for name, _, _ in keep))
    return t


def legend(options: list[Option], context: int, width: int = FULL) -> list[str]:
    """What the table's marks mean where a row shows one: `tok/s` at which context, a CPU row's
    `-` and an unknown card's `?` (issue 34 item 6)."""
    shown = "tok/s" not in dropped(options, width)
    lines = [f"tok/s: one sequence's decode at {context:,} tokens of context"] if shown else []
    if any(o.cpu for o in options):
        lines.append("-: a CPU row has no GPU, and its serving under load is not modelled")
    if any(o.serving is None and not o.cpu for o in options):
        lines.append(
            "?: the card's speed is not known to llmfit (memory_bandwidth_gbs and bf16_tflops in "
            "the fleet file give it)"
        )
    return lines


def breakdown(o: Option) -> str:
    c = o.per_card
    unit = "of RAM" if o.cpu else "a card"
    host = f"; {gib(o.host_bytes)} GiB in the host's RAM" if o.host_bytes else ""
    return (
        f"weights {gib(c.weights)} + KV cache {gib(c.cache)} + overhead {gib(c.overhead)} "
        f"= {gib(c.need)} GiB of {gib(o.have)} {unit}{host}"
    )


def render_text(
    advice: Advice,
    console: Console,
    show_all: bool = False,
    ray: bool = False,
    fmt: str = "shell",
    number: int = 1,
) -> None:
    """The model, the table of options, and one option in full with its launch: the best, or
    option `number` (--option), whose launch is then the one printed."""
    repo, plan = advice.repo, advice.plan
    at = f"@{repo.revision}" if repo.revision else ""
    print_wrapped(console, f"{repo.id}{at} {model_line(advice)}")
    line = attention_line(advice)
    if line:
        print_wrapped(console, line)
    fleet = advice.fleet
    # Every card, as `llmfit fleet` counts them, and the unhealthy ones the plan leaves out
    # (issue 34: 77 here, 78 there, for one file).
    bad = fleet.unhealthy
    print_wrapped(
        console,
        f"fleet: {fleet.source} · {_plural(fleet.node_count, 'node')} · "
        f"{_plural(fleet.gpus + bad, 'GPU')}" + (f", {bad:,} unhealthy" if bad else ""),
        "dim",
    )
    print_wrapped(console, workload_line(plan.workload, plan.rank), "dim")
    for note in plan.notes + repo.warnings:
        print_wrapped(console, f"note: {note}", "yellow")
    options = list(plan.options)
    if options:
        console.print()
        shown = options if show_all else options[:TOP]
        console.print(options_table(shown, console.width))
        if len(shown) < len(options):
            console.print(Text(f"… and {len(options) - len(shown)} more (--all)", style="dim"))
        narrow = left_out(shown, console.width)
        if narrow:
            print_wrapped(console, narrow, "dim")
        for line in legend(shown, plan.context, console.width):
            print_wrapped(console, line, "dim")
        best = options[number - 1]
        console.print()
        title = "Best: " if number == 1 else f"Option {number}: "
        head = f"{title}{describe(best)}"
        if len(head) <= console.width:
            console.print(Text(title, style="bold green") + Text(clean(describe(best))))
        else:
            print_wrapped(console, head, "bold green")
        print_wrapped(console, "  " + breakdown(best))
        print_wrapped(console, f"  max context {best.max_context:,} · {sequences(best)}")
        line = speed_line(best)
        if line:
            print_wrapped(console, f"  {line}")
        for line in serving_lines(best):
            print_wrapped(console, f"  {line}")
        if plan.ceiling is not None:
            for line in ceiling_lines(plan.ceiling, options):
                print_wrapped(console, f"  {line}")
        render_commands(advice, console, best, ray, fmt)
        if plan.disaggregated:
            render_disaggregated(advice, console)
    for u in plan.unplaced:
        print_wrapped(console, f"{u.artifact}: {unplaced_reason(u)}", "red")
        instead = fits_instead(u)
        if instead and not options:
            print_wrapped(console, f"  {instead}")
    ways_out = first_run(advice)
    if ways_out and not options:
        print_wrapped(console, ways_out, "yellow")


# What Fleet.source says of a fleet read from the machine llmfit runs on (sources/machine.py).
THIS_MACHINE = "this machine"


def render_disaggregated(advice: Advice, console: Console) -> None:
    """The disaggregated block (render/disagg.py): the options, the first's pools, its launch.
    Printed after everything else, so that a plan with none, or --disagg off, prints exactly
    what it did before."""
    from llmfit.render.disagg import command_lines
    from llmfit.render.disagg import lines as disagg_lines

    console.print()
    for line in disagg_lines(advice):
        print_wrapped(console, line)
    for line in command_lines(advice, advice.plan.disaggregated[0]):
        console.print(line, soft_wrap=True, markup=False, highlight=False, emoji=False)


def first_run(advice: Advice) -> str | None:
    """The two ways out when nothing fits because no fleet was given and this machine has no
    card: a fleet file, or an inline fleet."""
    fleet = advice.fleet
    if fleet.source != THIS_MACHINE or fleet.gpus:
        return None
    return (
        "no --fleet was given, no ./fleet.toml or $LLMFIT_FLEET is there, and this machine "
        "has no GPU llmfit can see: plan for your fleet with --fleet FILE (docs/fleet.md) or "
        "an inline fleet like --fleet 8xh100-80g"
    )


def nothing_to_run(advice: Advice) -> list[str]:
    """Why --commands printed nothing: each artifact's nearest miss, and the ways out."""
    lines = [f"nothing to run: {u.artifact}: {unplaced_reason(u)}" for u in advice.plan.unplaced]
    for u in advice.plan.unplaced:
        instead = fits_instead(u)
        if instead:
            lines.append(instead)
    ways_out = first_run(advice)
    if ways_out:
        lines.append(ways_out)
    return lines or ["nothing to run: no option fits"]


def render_commands(
    advice: Advice,
    console: Console,
    o: Option,
    ray: bool = False,
    fmt: str = "shell",
    measure: bool = False,
) -> None:
    """The option's command lines, each node's under a comment naming its role and node; or its
    launch in containers (`fmt` "docker" or "k8s", render/deploy.py). Each word exact, never
    cleaned: a launch that cannot be printed so is refused before a line of it is printed."""
    lines = launch_lines(advice, o, ray, fmt, console.encoding)
    checked = bench_line(advice, o, console.encoding) if measure and fmt == "shell" else None
    if checked is not None:
        # `--commands`: after the launch, commented, the benchmark that checks its serving
        # figure (it runs once the server answers, on its head node).
        lines.append(checked)
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False, emoji=False)
