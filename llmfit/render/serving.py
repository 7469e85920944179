"""Serving under load, in words: the workload a plan was ranked for, and how an option serves it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from llmfit.plan.ceiling import Ceiling
from llmfit.plan.load import Serving, part_times
from llmfit.plan.options import Option, hourly, per_million
from llmfit.plan.settings import Workload
from llmfit.plan.speed import Cost
from llmfit.render.sentences import label


def seconds(s: float) -> str:
    """ "48 ms", "1.25 s", "1 min 3 s": a latency as a person reads it."""
    if not math.isfinite(s):
        return "never"
    if s < 1:
        return f"{s * 1e3:.0f} ms" if s >= 0.0095 else f"{s * 1e3:.1f} ms"
    if s < 60:
        return f"{s:.2f} s" if s < 10 else f"{s:.0f} s"
    return f"{int(s // 60)} min {s % 60:.0f} s"


def _tokens(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def _count(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"


def _target(s: float) -> str:
    """A target as it was asked: "2 s", "50 ms", "0.5 s"."""
    return f"{s * 1e3:g} ms" if s < 1 else f"{s:g} s"


def targets(w: Workload) -> str:
    """ "TTFT ≤ 2 s, TPOT ≤ 50 ms", or "no targets"."""
    parts = []
    if w.ttft_s is not None:
        parts.append(f"TTFT ≤ {_target(w.ttft_s)}")
    if w.tpot_s is not None:
        parts.append(f"TPOT ≤ {_target(w.tpot_s)}")
    return ", ".join(parts) or "no targets"


def load(w: Workload) -> str:
    """ "32 requests in flight", "20 requests a second", or "" where none is named."""
    if w.concurrency is not None:
        return f"{w.concurrency:g} request{'s' if w.concurrency != 1 else ''} in flight"
    if w.requests is not None:
        return f"{w.requests:,} request{'s' if w.requests != 1 else ''} sent at once"
    if w.rate is not None:
        return f"{w.rate:g} request{'s' if w.rate != 1 else ''} a second"
    return ""


# What each ranking ranks by, in words, for the line that says so.
RANKED_BY = {
    "serve": "the fewest cards (or the lowest cost) that serve it",
    "cards": "the fewest cards that hold the context",
    "concurrency": "the most sequences held at once",
    "speed": "the fastest single sequence",
    "throughput": "the most output tokens a second a card at the workload",
    "latency": "the shortest request at the workload",
}


def workload_line(w: Workload, rank: str) -> str:
    """The workload a plan was ranked for, as printed on it: "workload: chat (the default):
    requests of 2k in / 512 out, TTFT ≤ 2 s, TPOT ≤ 50 ms, no load named (each layout at its
    capacity); ranked by the fewest cards that serve it"."""
    name = f"{w.name} (the default)" if not w.named else w.name
    named = load(w)
    at = named or "no load named (each layout at its capacity: --concurrency or --rate names one)"
    cut = (
        f" (cut from {_tokens(w.cut_from[0])} in / {_tokens(w.cut_from[1])} out to fit the context)"
        if w.cut_from
        else ""
    )
    return (
        f"workload: {name}: requests of {_tokens(w.input_len)} in / {_tokens(w.output_len)} out"
        f"{cut}, "
        f"{targets(w)}, {at}; ranked by {RANKED_BY.get(rank, rank)}"
    )


def meets(o: Option) -> str:
    """The table's cell: "yes" (one replica meets the targets at the load), "×3" (three
    replicas do), "no" (none does, at any load), "?" (speed not known)."""
    sv = o.serving
    if sv is None:
        return "-" if o.cpu else "?"
    if sv.replicas is None:
        return "no"
    if sv.meets:
        return "yes"
    return f"×{sv.replicas}"


def capacity_per_gpu(o: Option) -> str:
    """Output tokens a second a card at the option's capacity within the targets (`llmfit
    models`: what a card can give, not what the named load asks of it, issue 34)."""
    sv = o.serving
    if sv is None or sv.replicas is None:
        return "?" if sv is None and not o.cpu else "-"
    cards = o.gpus / max(o.replicas, 1) if o.gpus else 0
    if not cards:
        return "-"
    v = sv.capacity_rate * sv.workload.output_len / (o.gpus or 1)
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def per_gpu(o: Option) -> str:
    """Output tokens a second a card at the workload, as the table shows it."""
    sv = o.serving
    if sv is None or sv.replicas is None:
        return "?" if sv is None and not o.cpu else "-"
    v = sv.output_tokens_per_s_per_gpu
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def money(x: float) -> str:
    """ "$24.90", "$0.062", "$1,234": a cost to the cent, or to two figures below a dime."""
    if x >= 0.1 or x == 0:
        return f"${x:,.2f}"
    return f"${x:.2g}"


def per_hour(o: Option) -> str:
    """The table's `$/h` cell: what the option costs an hour at the load ("-" unpriced)."""
    cost = hourly(o)
    return "-" if cost is None else money(cost).removeprefix("$")


def per_mtok(o: Option) -> str:
    """The table's `$/Mtok` cell: a million output tokens at the workload ("-" where it is not
    priced or serves nothing)."""
    cost = per_million(o)
    return "-" if cost is None else money(cost).removeprefix("$")


def cost_line(o: Option) -> str | None:
    """ "costs $17.95 an hour (5 replicas × 1 card × $3.59 a card-hour): $0.50 a million output
    tokens at this load"; None where the fleet prices no card of it."""
    cost, price = hourly(o), o.price
    if cost is None or price is None:
        return None
    sv = o.serving
    copies = sv.replicas if sv is not None and sv.replicas and sv.workload.load else 1
    parts = [f"{o.gpus} card{'s' if o.gpus != 1 else ''}", f"{money(price)} a card-hour"]
    if copies > 1:
        parts.insert(0, f"{copies} replicas")
    line = f"costs {money(cost)} an hour ({' × '.join(parts)})"
    mtok = per_million(o)
    if mtok is not None and sv is not None:
        at = "this load" if sv.workload.load else "its capacity"
        line += f": {money(mtok)} a million output tokens at {at}"
    return line


def serving_lines(o: Option) -> list[str]:
    """The Best block's lines: how the option serves the workload."""
    sv = o.serving
    cost = cost_line(o)
    if sv is None:
        return [cost] if cost else []
    w = sv.workload
    if sv.replicas is None:
        return [f"does not serve the workload at any load: {'; '.join(sv.misses)}"] + (
            [cost] if cost else []
        )
    rate = f"{sv.rate:.3g} requests a second"
    figures = (
        f"{sv.output_tokens_per_s:,.0f} output tok/s ({sv.output_tokens_per_s_per_gpu:,.0f} a "
        f"card), TPOT {seconds(sv.tpot_s)}, TTFT {seconds(sv.ttft_s)}"
    )
    if not w.load:
        return [
            f"serves up to {_count(sv.capacity_concurrency)} requests in flight ({rate}) "
            f"within {targets(w)}: {figures}"
        ] + ([cost] if cost else [])
    cards = sv.replicas * o.gpus
    need = (
        f"{load(w)} need {sv.replicas} replica{'s' if sv.replicas != 1 else ''} of it "
        f"({cards} card{'s' if cards != 1 else ''})"
    )
    if w.requests is not None:
        figures = (
            f"{sv.output_tokens_per_s:,.0f} output tok/s over the run's "
            f"{seconds(sv.makespan_s)} ({sv.output_tokens_per_s_per_gpu:,.0f} a card), mean "
            f"TPOT {seconds(sv.tpot_s)}, mean TTFT {seconds(sv.ttft_s)}"
        )
    lines = [f"{need}: {figures}"]
    if cost:
        lines.append(cost)
    if sv.replicas > 1:
        lines.append(f"one replica alone: {'; '.join(sv.misses)}")
    if sv.replicas > o.fleet_replicas:
        lines.append(f"but the fleet's cards run {o.fleet_replicas} of them: not enough")
    lines.append(fleet_line(o))
    return lines


def _in_unit(x: float, unit: str) -> str:
    if unit == "concurrency":
        return f"{_count(x)} requests in flight"
    return f"{x:.3g} requests a second"


def ceiling_lines(c: Ceiling, options: Sequence[Option]) -> list[str]:
    """What the fleet's free cards serve of the model where no one option's replicas fit them
    for the load: each class's replicas and the load they carry, and what is missing."""
    asked = _in_unit(c.load, c.unit)
    if c.missing > 0:
        head = (
            f"what the fleet can serve: its free cards serve at most {_in_unit(c.served, c.unit)} "
            f"of the {asked} asked, {_in_unit(c.missing, c.unit)} missing:"
        )
    else:
        head = (
            f"no one layout serves {asked} on the free cards; replicas of these, mixed, serve it:"
        )
    lines = [head]
    for s in c.shares:
        number = next((i for i, o in enumerate(options, 1) if o is s.option), 0)
        which = f"option {number}, " if number else ""
        lines.append(
            f"  {s.replicas} replica{'s' if s.replicas != 1 else ''} of {which}{label(s.option)}: "
            f"{_in_unit(s.carries, c.unit)}"
        )
    return lines


def ceiling_document(c: Ceiling | None, options: Sequence[Option]) -> dict[str, object] | None:
    """The JSON object of the fleet's ceiling (docs/json.md)."""
    if c is None:
        return None
    return {
        "unit": c.unit,
        "load": c.load,
        "served": round(c.served, 4),
        "missing": round(c.missing, 4),
        "shares": [
            {
                "option": next((i for i, o in enumerate(options, 1) if o is s.option), None),
                "label": label(s.option),
                "gpu_class": s.option.gpu_class,
                "replicas": s.replicas,
                "gpus": s.replicas * s.option.gpus,
                "capacity": round(s.capacity, 4),
                "carries": round(s.carries, 4),
            }
            for s in c.shares
        ],
    }


def unserved(o: Option) -> str:
    """Why an option that fits does not serve the workload, in words."""
    sv = o.serving
    if sv is None:
        return "its speed is not known"
    if sv.replicas is None:
        return "; ".join(sv.misses) or "it meets the targets at no load"
    need = sv.replicas * o.gpus
    return (
        f"{load(sv.workload)} need {sv.replicas} replicas of {label(o)} ({need} cards); the "
        f"fleet's cards run {o.fleet_replicas}"
    )


def fleet_line(o: Option) -> str:
    """What the fleet's free cards could serve of the load with this option."""
    sv = o.serving
    assert sv is not None
    w = sv.workload
    n = o.free_replicas
    if w.concurrency is not None:
        cap = f"{_count(n * sv.capacity_concurrency)} requests in flight"
    else:
        cap = f"{n * sv.capacity_rate:.3g} requests a second"
    return (
        f"the fleet's free cards run {n} replica{'s' if n != 1 else ''} of it now: {cap} within "
        "the targets"
    )


def step_line(what: str, cost: Cost) -> str:
    """ "a decode step: 24.1 ms: weights 10.2 ms, KV 6.1 ms, compute 4.0 ms (overlapping the
    reads), communication 1.2 ms, overhead 3.4 ms: memory-bound"."""
    t = cost.summed
    parts = part_times(t)
    words = ", ".join(
        f"{name} {seconds(v)}" for name, v in parts.items() if v > 0 or name == "weights"
    )
    return (
        f"{what}: {seconds(cost.total)}: {words} (reads overlap compute: the larger counts): "
        f"{cost.bound}-bound"
    )


def explain_lines(o: Option) -> list[str]:
    """`--explain`'s lines on serving: the workload, what it gives, and one decode step and one
    prompt's prefill split into weights read, KV read, compute, communication and overhead."""
    sv: Serving | None = o.serving
    if sv is None:
        return []
    w = sv.workload
    lines = [f"  serving: {line}" for line in serving_lines(o)]
    ctx = w.input_len + w.output_len // 2
    lines.append(
        f"  a decode step at {sv.batch:,.1f} sequences a replica, {ctx:,} tokens of context "
        "each, and the prefill of one prompt:"
    )
    lines.append(f"    {step_line('decode', sv.decode)}")
    lines.append(f"    {step_line(f'a {w.input_len:,}-token prompt', sv.prefill)}")
    lines.append(f"  serving assumes: {'; '.join(sv.assumptions)}")
    return lines


def document(sv: Serving | None, o: Option) -> dict[str, object] | None:
    """The JSON object of how an option serves the workload (docs/json.md)."""
    if sv is None:
        return None

    def num(x: float, digits: int = 4) -> float | None:
        return round(x, digits) if math.isfinite(x) else None

    def parts(c: Cost) -> dict[str, float | None]:
        out: dict[str, float | None] = {"seconds": num(c.total, 6)}
        out |= {k: num(v, 6) for k, v in part_times(c.summed).items()}
        return out

    served = sv.replicas is not None
    mtok = per_million(o)
    return {
        "meets": sv.meets,
        "misses": list(sv.misses),
        "replicas": sv.replicas,
        "cards": sv.replicas * o.gpus if sv.replicas is not None else None,
        "concurrency": num(sv.concurrency, 2) if served else None,
        "rate": num(sv.rate) if served else None,
        "output_tokens_per_s": num(sv.output_tokens_per_s, 1) if served else None,
        "output_tokens_per_s_per_gpu": num(sv.output_tokens_per_s_per_gpu, 1) if served else None,
        "tpot_s": num(sv.tpot_s, 5),
        "ttft_s": num(sv.ttft_s, 4),
        "e2e_s": num(sv.e2e_s, 3),
        "makespan_s": num(sv.makespan_s, 3) if sv.workload.requests is not None else None,
        "batch": num(sv.batch, 2),
        "capacity_rate": num(sv.capacity_rate),
        "capacity_concurrency": num(sv.capacity_concurrency, 2),
        "cards_per_load": num(sv.cards_per_load, 6),
        "price_per_gpu_hour": o.price,
        "cost_per_hour": (
            round(sv.replicas * o.gpus * o.price, 4)
            if sv.replicas is not None and o.price is not None
            else None
        ),
        # Added to version 1 (issue 34): a million output tokens at the workload, in the
        # prices' currency.
        "cost_per_million_output_tokens": num(mtok, 4) if mtok is not None else None,
        "free_replicas": o.free_replicas,
        "fleet_replicas": o.fleet_replicas,
        "decode_step": parts(sv.decode),
        "prefill": parts(sv.prefill),
        "bound": sv.bound,
        "assumptions": list(sv.assumptions),
    }


def workload_document(w: Workload) -> dict[str, object]:
    return {
        "name": w.name,
        "named": w.named,
        "input_len": w.input_len,
        "output_len": w.output_len,
        "load": w.load_kind,
        "concurrency": w.concurrency,
        "rate": w.rate,
        "requests": w.requests,
        "cut_from": (
            {"input_len": w.cut_from[0], "output_len": w.cut_from[1]} if w.cut_from else None
        ),
        "ttft_s": w.ttft_s,
        "tpot_s": w.tpot_s,
    }
