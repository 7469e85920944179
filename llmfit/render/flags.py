"""The docs' table of every engine's knobs, from their declarations (plan/engines/knobs.py): what
llmfit's command line takes, what the engine's command spells it, what it changes and its default.

docs/engines.md holds its output; tests/render/test_flags_doc.py checks that the two agree, so the
docs change when a knob does. Regenerate with `python -m llmfit.render.flags > docs/engines.md`.
"""

from __future__ import annotations

from llmfit.plan.engines import keys, knobs, options_class, registered

HEADER = """# Engine flags

Each engine llmfit plans for declares the settings it takes, once
(`llmfit/plan/engines/*_options.py`). From that declaration come llmfit's own flags, the reader
that `llmfit check` reads an engine's command with, and the flags a printed launch passes on; this
page is generated from it too (`python -m llmfit.render.flags > docs/engines.md`).

*llmfit* is the flag `llmfit REPO …` takes ("—": read from a checked command only); *engine* is how
the engine's own command spells it, every spelling `llmfit check` reads; *changes* is what the plan
lets it change: what a card holds (memory), how fast a layout runs (speed), or neither (it is
passed on as given). Placement flags (where an engine's layers go) are printed from the plan's own
placement rather than passed on.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def flag_table() -> str:
    out = [HEADER]
    for key in keys():
        title = registered(key).title
        out.append(f"\n## {title} (`--engine {key}`)\n")
        out.append("| llmfit | engine | takes | changes | default | what it is |")
        out.append("|---|---|---|---|---|---|")
        for d in knobs.declared(options_class(key)):
            k = d.knob
            ours = f"`{k.llmfit_flag}`" if k.llmfit_flag else "—"
            spellings = [*k.flags, *k.negations]
            theirs = ", ".join(f"`{f}`" for f in spellings) if spellings else "(llmfit's own)"
            if k.kind in ("switch", "bool"):
                takes = "on/off" if k.negations else "a switch"
            elif k.choices:
                takes = " ".join(f"`{c}`" for c in k.choices)
            else:
                takes = {"int": "a count", "float": "a number", "json": "JSON"}.get(k.kind, "text")
                if k.example:
                    takes += f" (`{k.example}`)"
            changes = ", ".join(sorted(k.changes)) or "neither"
            default = "the engine's" if d.default in (None, False) else f"`{d.default}`"
            out.append(
                f"| {ours} | {theirs} | {_cell(takes)} | {changes} | {default} | {_cell(k.help)} |"
            )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(flag_table(), end="")
