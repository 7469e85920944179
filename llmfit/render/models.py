"""`llmfit models`: each model that fits the fleet in one line with its best option, then those
that do not fit, then those that could not be read; or the list of version-1 documents."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmfit.plan.catalog import ModelResult, Models
from llmfit.render.explain import print_wrapped
from llmfit.render.json import document
from llmfit.render.safe import clean, safe_dumps
from llmfit.render.sentences import fits_instead, gib, label, quant, unplaced_reason
from llmfit.render.serving import capacity_per_gpu, meets, per_gpu, per_hour, per_mtok, unserved
from llmfit.render.table import _count

# The mark of a model planned past the context it was trained for, and what it means.
PAST = "*"


def past_line(fits: list[ModelResult], context: int) -> str | None:
    """What the mark says, under the models it marks: which were trained for less."""
    marked = [r for r in fits if r.past_trained]
    if not marked:
        return None
    trained = ", ".join(f"{_name(r)} {r.past_trained:,}" for r in marked)
    return (
        f"{PAST} a context of {context:,} is past the one these were trained for ({trained}): "
        "llmfit REPO --context says how each is served that long, and answers past it may "
        "degrade"
    )


def _name(r: ModelResult) -> str:
    return r.repo_id + (f"@{r.revision[:12]}" if r.revision else "")


def _models_table(fits: list[ModelResult], width: int) -> tuple[Table | None, list[str]]:
    rows = []
    for r in fits:
        assert r.advice is not None
        o = r.advice.plan.options[0]
        rows.append(
            {
                "#": "",
                "model": _name(r),
                "params": _count(r.params),
                "artifact": quant(o),
                "what-if": o.what_if or "",
                "engine": o.engine,
                "where": label(o),
                "bits": f"{o.bits_per_weight:.1f}" if o.bits_per_weight else "?",
                "need/have GiB": f"{gib(o.per_card.need)}/{gib(o.have)}",
                "max ctx": f"{o.max_context:,}{PAST if r.past_trained else ''}",
                "seqs": f"{o.held:.2f}",
                # What the listing ranks by (the workload's output a card), and whether the
                # option meets its targets: as the plan's table shows them.
                # With a load named, a card's output at the option's capacity: the load's own
                # figure is the demand (10 requests a second × 512 tokens over its cards), the
                # same for every model (issue 34).
                "tok/s/GPU": capacity_per_gpu(o)
                if o.serving and o.serving.workload.load
                else per_gpu(o),
                "meets": meets(o),
                # Where the fleet prices the cards: the cost an hour at the load, and a million
                # output tokens at the workload (issue 34).
                "$/h": per_hour(o),
                "$/Mtok": per_mtok(o),
                "now": "free" if o.free_now else "busy",
            }
        )
    for i, row in enumerate(rows, 1):
        row["#"] = str(i)
    names = list(rows[0]) if rows else []
    # Unknown everywhere says nothing; then, as the table grows past the width, the least needed.
    if all(row["params"] == "?" for row in rows):
        names.remove("params")
    # Unpriced everywhere, no cost columns.
    for name in ("$/h", "$/Mtok"):
        if name in names and all(row[name] == "-" for row in rows):
            names.remove(name)

    def wide() -> int:
        return sum(max(len(n), *(len(row[n]) for row in rows)) + 1 for n in names)

    # Too wide, the longest what-if in short first, as the plan's table does ("fp8 weights+KV").
    if wide() > width:
        for row in rows:
            row["what-if"] = row["what-if"].replace(" and KV cache", "+KV")
    dropped: list[str] = []
    # What the listing ranks by (a card's output, or the cost) is the last to go.
    # The engine, even where rows differ, goes before it: the artifact says it (a GGUF quant
    # is llama.cpp's), where a card's output says what no other column does (issue 34: it was
    # hidden at 120 columns).
    order = ("bits", "now", "meets", "engine", "params", "seqs", "max ctx", "$/Mtok", "$/h",
             "engine!", "tok/s/GPU")  # fmt: skip
    for step in order:
        if wide() <= width:
            break
        name = step.rstrip("!")
        if name not in names:
            continue
        same = len({row[name] for row in rows}) == 1
        if step.endswith("!"):
            # Only where that alone makes the table fit with a card's output in it.
            names.remove(name)
            if wide() <= width:
                dropped.append(name)
            else:
                names.insert(names.index("where"), name)
            continue
        # The engine, whether it meets the targets and can run now, only where every row says
        # the same: a column that tells one row from another is kept.
        # A context past a model's trained one is marked in its column: that column stays.
        marked = name == "max ctx" and any(row[name].endswith(PAST) for row in rows)
        if name in names and not marked and (name not in ("engine", "now", "meets") or same):
            names.remove(name)
            said = {
                "engine": f"engine ({rows[0]['engine']} for all)",
                "now": f"now (all {rows[0]['now']})",
                "meets": f"meets ({rows[0]['meets']} for all)",
            }
            dropped.append(said.get(name, name) if same else name)
    if rows and wide() > width:
        return None, dropped
    t = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
    right = {
        "#",
        "params",
        "bits",
        "need/have GiB",
        "max ctx",
        "seqs",
        "tok/s/GPU",
        "$/h",
        "$/Mtok",
    }
    for name in names:
        t.add_column(
            name,
            justify="right" if name in right else "left",
            no_wrap=name not in ("what-if",),
        )
    for row in rows:
        t.add_row(*(Text(clean(row[name])) for name in names))
    return t, dropped


def _miss(r: ModelResult) -> str:
    assert r.advice is not None
    plan = r.advice.plan
    if r.unserved:
        return (
            f"fits, but does not serve the workload within its targets: {unserved(plan.options[0])}"
        )
    for u in plan.unplaced:
        instead = fits_instead(u)
        if instead:
            return instead
    if plan.unplaced:
        return unplaced_reason(plan.unplaced[0])
    # No artifact to place (weights that cannot be sized): the plan's own note says why.
    notes = plan.notes + r.advice.repo.warnings
    return notes[0] if notes else "no way fits this fleet"


def render_models(models: Models, console: Console) -> None:
    fleet = models.fleet
    print_wrapped(
        console,
        f"{models.source} · fleet: {fleet.source} · {fleet.node_count:,} "
        f"node{'s' if fleet.node_count != 1 else ''} · {fleet.gpus + fleet.unhealthy:,} "
        f"GPU{'s' if fleet.gpus + fleet.unhealthy != 1 else ''}"
        + (f", {fleet.unhealthy:,} unhealthy" if fleet.unhealthy else ""),
        "dim",
    )
    for note in models.notes:
        print_wrapped(console, f"note: {note}", "yellow")
    fits = [r for r in models.results if r.fits]
    misses = [r for r in models.results if r.advice is not None and not r.fits]
    # A cached config without its weights' sizes is not a model that does not fit: said once,
    # by name, rather than a sentence a model that repeats the same reason.
    sizeless = [r for r in misses if r.advice is not None and not r.advice.repo.artifacts]
    misses = [r for r in misses if r not in sizeless]
    failed = [r for r in models.results if r.advice is None]
    table, dropped = _models_table(fits, console.width) if fits else (None, [])
    if fits and table is None:
        # Too narrow for a table that keeps every name whole: two lines a model.
        console.print()
        for i, r in enumerate(fits, 1):
            assert r.advice is not None
            o = r.advice.plan.options[0]
            what = o.what_if or quant(o)
            # The name, and what the listing ranks by: the output a card at the workload (and
            # whether it meets the targets, where it does not on one replica).
            said = meets(o)
            head = Text(clean(f"{i:>2} {_name(r)}"), style="bold")
            head.append(f" · {per_gpu(o)} tok/s/GPU" + ("" if said == "yes" else f", meets {said}"))
            console.print(head, soft_wrap=True)
            print_wrapped(
                console,
                f"    {what}, {o.engine}, {label(o)}, {gib(o.per_card.need)}/{gib(o.have)} GiB, "
                f"ctx {o.max_context:,}{PAST if r.past_trained else ''}, "
                f"{o.held:.2f} seqs" + ("" if o.free_now else ", busy"),
            )
    elif table is not None:
        console.print()
        console.print(table)
        if dropped:
            print_wrapped(
                console,
                f"not shown at {console.width} columns: {', '.join(dropped)}",
                "dim",
            )
        first = fits[0].advice.plan.options[0] if fits[0].advice else None
        if first is not None and first.serving is not None and first.serving.workload.load:
            print_wrapped(
                console,
                "tok/s/GPU: a card's output tokens a second at the option's capacity within the "
                "targets (the load asked is met where meets says yes)",
                "dim",
            )
    else:
        console.print(Text("no model fits this fleet", style="red"))
    past = past_line(fits, fits[0].advice.plan.context) if fits and fits[0].advice else None
    if past:
        print_wrapped(console, past, "yellow")
    if misses:
        console.print()
        console.print(Text("does not fit:", style="bold"))
        for r in misses:
            print_wrapped(console, f"  {_name(r)}: {_miss(r)}")
    if sizeless:
        console.print()
        print_wrapped(
            console,
            f"only the config is cached, so the weights cannot be sized ({len(sizeless)}): "
            + ", ".join(_name(r) for r in sizeless),
        )
    if failed:
        console.print()
        console.print(Text("could not be read:", style="bold"))
        for r in failed:
            hint = f" (hint: {r.hint})" if r.hint else ""
            print_wrapped(console, f"  {_name(r)}: {r.error}{hint}")
    if models.over_params:
        n = len(models.over_params)
        console.print(
            Text(f"{n} model{'s' if n != 1 else ''} over --max-params not shown", style="dim")
        )


def models_documents(models: Models) -> list[dict[str, Any]]:
    """One version-1 document a model, in the listing's order; a model that could not be read is
    its repository and the error ({"message", "hint"}) in place of a plan."""
    out: list[dict[str, Any]] = []
    for r in models.results:
        if r.advice is not None:
            out.append(document(r.advice, limit=None))
        else:
            out.append(
                {
                    "schema": 1,
                    "repo": {"id": r.repo_id, "revision": r.revision},
                    "error": {"message": r.error, "hint": r.hint},
                }
            )
    return out


def render_models_json(models: Models) -> str:
    return safe_dumps(models_documents(models))
