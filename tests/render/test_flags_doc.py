"""docs/engines.md is the table of every engine's knobs as they are declared: regenerate it
(`python -m llmfit.render.flags > docs/engines.md`) when a knob changes."""

from __future__ import annotations

from pathlib import Path

from llmfit.render.flags import flag_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "engines.md"


def test_the_docs_flag_table_is_the_declarations():
    assert DOC.read_text() == flag_table()


def test_the_table_has_a_row_a_knob():
    table = flag_table()
    # vLLM's --max-num-seqs: llmfit's own flag, the engine's spelling, what it changes.
    assert (
        "| `--max-num-seqs` | `--max-num-seqs` | a count (`64`) | memory, speed | the engine's | "
        "sequences a step (passed on). |" in table
    )
    # llama.cpp's -ctk is read from a checked command only.
    assert "| — | `--cache-type-k`, `-ctk` | `f16` `q8_0` | memory |" in table
