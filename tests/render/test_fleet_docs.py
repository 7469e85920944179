"""docs/fleet.md shows real things: its full example is examples/fleet-4-nodes.toml, its summary
is what `llmfit fleet examples/fleet.toml` prints, and its error sentences are the parser's."""

from __future__ import annotations

import re
from pathlib import Path

from llmfit.plan.fleet_summary import summarize
from llmfit.render.fleet import render_summary
from llmfit.sources.fleet import read_fleet
from tests.conftest import ROOT

DOC = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")


def _blocks(lang: str = "") -> list[str]:
    """The fenced blocks opened with ```LANG, in order."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", DOC, re.S | re.M)
    return [text for tag, text in blocks if tag == lang]


def test_the_full_example_is_the_example_file():
    example = (ROOT / "examples" / "fleet-4-nodes.toml").read_text(encoding="utf-8")
    body = example.split("\n\n", 1)[1]  # after the file's own header comment
    assert _blocks("toml")[0] == body


def test_the_summary_shown_is_the_summary_printed(monkeypatch):
    shown = next(b for b in _blocks() if b.startswith("$ llmfit fleet examples/fleet.toml"))
    # At 80 columns, the width of a terminal, and of output piped with no COLUMNS (issue 27), run
    # where the document runs it, so that the file's name wraps as it does there.
    monkeypatch.chdir(ROOT)
    printed = render_summary(summarize(read_fleet(Path("examples/fleet.toml"))), width=80)
    assert shown.split("\n", 1)[1] == printed + "\n"
