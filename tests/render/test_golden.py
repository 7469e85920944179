"""Golden outputs: the full text llmfit prints for a dense model, a MoE, an MLA model and a GGUF
repository on the example fleet, pinned whole so that any change to what a user sees is a change
someone chose. The JSON document is held to its contract instead (tests/test_json_contract.py):
its keys and types, with the numbers worked out by hand where they are computed.

The numbers inside are worked out by hand in the tests beside them (tests/plan, tests/test_cli.py);
these pin the rest: wording, order, columns, commands. After a deliberate change, regenerate with
LLMFIT_UPDATE_GOLDEN=1 pytest tests/render/test_golden.py and read the diff before committing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_FLEET, HUB

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CASES = {
    "dense": ["meta-llama/Llama-3.1-8B-Instruct", "--context", "32k"],
    "moe": ["Qwen/Qwen3-235B-A22B"],
    "mla": ["deepseek-ai/DeepSeek-V3"],
    "gguf": ["llmfit-fixtures/Tiny-Llama-GGUF", "--context", "4096"],
}


def normalise(text: str) -> str:
    # The cache's absolute path differs between checkouts; everything else must not.
    return text.replace(str(HUB), "<hub>").replace(str(EXAMPLE_FLEET), "<fleet>")


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    text = normalise(text)
    if os.environ.get("LLMFIT_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} is missing: run with LLMFIT_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", sorted(CASES))
def test_text_output(run, case):
    code, out, err = run(*CASES[case], "--fleet", str(EXAMPLE_FLEET))
    assert code == 0, err
    check(f"{case}.txt", out)


def test_explain_and_why_not_of_the_mla_model(run):
    code, out, err = run(
        "deepseek-ai/DeepSeek-V3", "--fleet", str(EXAMPLE_FLEET), "--explain", "--why-not"
    )
    assert code == 0, err
    check("mla-explain.txt", out)


# At the widths people's terminals have (issue 16): the table, --explain and --why-not of a
# dense model, a MoE, a plan across nodes and a GGUF repository, at 80 and 120 columns.
NARROW = {
    "dense": ["meta-llama/Llama-3.1-8B-Instruct", "--context", "32k", "--fleet",
              str(EXAMPLE_FLEET)],
    "moe": ["Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET)],
    "multinode": ["meta-llama/Meta-Llama-3.1-405B", "--fleet", "4x8xh100-80g@ib0", "--context",
                  "8k"],
    "gguf": ["llmfit-fixtures/Tiny-Llama-GGUF", "--context", "4096", "--fleet", str(EXAMPLE_FLEET)],
}  # fmt: skip
VIEWS = {"table": [], "explain": ["--explain"], "why-not": ["--why-not"]}


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("case", sorted(NARROW))
def test_output_at_terminal_widths(run, monkeypatch, case, view, width):
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = run(*NARROW[case], *VIEWS[view])
    assert code == 0, err
    check(f"{case}-{view}-{width}.txt", out)
    if view == "table":
        # The table never cuts a number to fit: every row's figures are whole.
        assert "…" not in "".join(line for line in out.splitlines() if line[:3].strip().isdigit())


def test_no_figure_is_labelled_gb():
    """Every size llmfit prints is in GiB (2^30 bytes): none may say GB (issue 16)."""
    import re

    for path in sorted(GOLDEN.iterdir()):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\d GB\b|\bGB\b", text), path.name
