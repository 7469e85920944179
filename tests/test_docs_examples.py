"""Every example command of the README, docs/deploy.md and docs/fleet.md runs on the bundled
fixtures (issue 27: "every example in them runs"): each `$ llmfit …` line and each `llmfit …` in
backquotes that names a fleet is run, and ends with a plan (0) or with nothing that fits (1),
never a usage error, a bad file or a traceback. What each prints is held elsewhere
(tests/test_readme.py, tests/render/test_fleet_docs.py)."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.conftest import ROOT

DOCS = ("README.md", "docs/deploy.md", "docs/fleet.md")


def examples() -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for doc in DOCS:
        text = (ROOT / doc).read_text(encoding="utf-8")
        lines = re.findall(r"^\$ (llmfit .*)$", text, flags=re.M)
        spans = re.findall(r"`(llmfit [^`\n]*)`", text)
        for command in lines + spans:
            command = command.split(" | ")[0]  # `… --format k8s | kubectl apply -f -`
            # Placeholders and elisions are not commands (`./my-model` is the reader's own
            # directory); nor is one that plans this machine.
            if "…" in command or "[" in command or "./my-model" in command:
                continue
            if re.search(r"\b[A-Z]{2,}\b|\bF\b", command):
                continue
            if "--fleet" not in command and " fleet examples/" not in command:
                continue
            found.setdefault(command, doc)
    return sorted((doc, command) for command, doc in found.items())


def test_the_examples_are_found():
    # The README's first example, the deploy guide's launches and the fleet summary at least.
    commands = [c for _, c in examples()]
    assert "llmfit Qwen/Qwen3-235B-A22B --fleet examples/fleet.toml" in commands
    assert "llmfit Qwen/Qwen3-8B --fleet examples/fleet.toml --option 4 --format k8s" in commands
    assert "llmfit fleet examples/fleet.toml" in commands
    assert len(commands) >= 20


@pytest.mark.parametrize(("doc", "command"), examples(), ids=lambda v: str(v)[:70])
def test_each_example_runs_on_the_bundled_fixtures(run, monkeypatch, doc, command):
    monkeypatch.chdir(ROOT)
    code, _, err = run(*shlex.split(command)[1:])
    assert code in (0, 1), f"{doc}: {command}: exit {code}: {err}"
