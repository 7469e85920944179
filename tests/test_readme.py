"""The README's examples are what llmfit prints (issue 16: "the README's first example runs as
printed"): each `$ llmfit …` block is run at 100 columns on the bundled cache, and every line it
shows (a line "…" stands for lines left out) is printed, in order."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def examples() -> list[tuple[str, list[str]]]:
    out = []
    for block in re.findall(r"```\n(.*?)```", README, flags=re.S):
        lines = block.splitlines()
        # A block of several commands (the SGLang one) shows only elided output: skip it.
        if (
            lines
            and lines[0].startswith("$ llmfit ")
            and sum(line.startswith("$ llmfit") for line in lines) == 1
        ):
            out.append((lines[0][2:], lines[1:]))
    return out


@pytest.mark.parametrize(("command", "shown"), examples(), ids=lambda v: str(v)[:60])
def test_each_readme_example_is_printed_as_shown(run, monkeypatch, command, shown):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(ROOT)
    # The bundled cache by its path in the checkout, as the README runs it: a header naming it
    # by its absolute path wraps at 100 columns where the checkout's path is long.
    monkeypatch.setenv("HF_HUB_CACHE", "fixtures/hub")
    code, out, err = run(*shlex.split(command)[1:])
    assert code == 0, err
    out = out.replace(f"{ROOT}/", "")  # the bundled cache, as the README runs it
    printed = iter(line.rstrip() for line in out.splitlines())
    for line in shown:
        if line.strip() == "…":
            continue
        want = line.rstrip()
        assert any(p == want for p in printed), f"not printed, or out of order: {want!r}"


def test_the_first_example_is_printed_whole(run, monkeypatch):
    command, shown = examples()[0]
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(ROOT)
    code, out, _ = run(*shlex.split(command)[1:])
    assert [line.rstrip() for line in out.splitlines()] == [line.rstrip() for line in shown]
