"""`llmfit models`: each model that fits the fleet in one line with its best option, then those
that do not fit, then those that could not be read; or the list of version-1 documents."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmfit.plan.catalog import ModelResult, Models
from llmfit.render.json import document
from llmfit.render.sentences import fits_instead, gib, label, quant, unplaced_reason
from llmfit.render.table import _count


def _name(r: ModelResult) -> str:
    return r.repo_id + (f"@{r.revision[:12]}" if r.revision else "")


def models_table(fits: list[ModelResult]) -> Table:
    t = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in (
        ("#", "right"),
        ("model", "left"),
        ("params", "right"),
        ("artifact", "left"),
        ("what-if", "left"),
        ("engine", "left"),
        ("where", "left"),
        ("bits", "right"),
        ("a card: need/have GiB", "right"),
        ("max ctx", "right"),
        ("seqs", "right"),
        ("now", "left"),
    ):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, r in enumerate(fits, 1):
        assert r.advice is not None
        o = r.advice.plan.options[0]
        t.add_row(
            str(i),
            _name(r),
            _count(r.advice.repo.model.params),
            quant(o),
            o.what_if or "",
            o.engine,
            label(o),
            f"{o.bits_per_weight:.1f}" if o.bits_per_weight else "?",
            f"{gib(o.per_card.need)}/{gib(o.have)}",
            f"{o.max_context:,}",
            f"{o.concurrency:.2f}",
            "free" if o.free_now else "busy",
        )
    return t


def _miss(r: ModelResult) -> str:
    assert r.advice is not None
    plan = r.advice.plan
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
    console.print(
        Text(
            f"{models.source} · fleet: {fleet.source} · {len(fleet.nodes)} nodes · "
            f"{fleet.gpus} GPUs",
            style="dim",
        ),
        soft_wrap=True,
    )
    for note in models.notes:
        console.print(Text(f"note: {note}", style="yellow"), soft_wrap=True)
    fits = [r for r in models.results if r.fits]
    misses = [r for r in models.results if r.advice is not None and not r.fits]
    failed = [r for r in models.results if r.advice is None]
    if fits:
        console.print()
        console.print(models_table(fits))
    else:
        console.print(Text("no model fits this fleet", style="red"))
    if misses:
        console.print()
        console.print(Text("does not fit:", style="bold"))
        for r in misses:
            console.print(Text(f"  {_name(r)}: {_miss(r)}"), soft_wrap=True)
    if failed:
        console.print()
        console.print(Text("could not be read:", style="bold"))
        for r in failed:
            hint = f" (hint: {r.hint})" if r.hint else ""
            console.print(Text(f"  {_name(r)}: {r.error}{hint}"), soft_wrap=True)
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
    return json.dumps(models_documents(models), indent=2, sort_keys=True, ensure_ascii=False)
