"""`llmfit models` (issue 19): the models of the local cache, or of a Hub search, that fit a fleet.

Offline on the bundled cache: every cached model that fits is listed with the numbers of its best
option, exactly those `llmfit REPO` gives it; online against the loopback Hub: the search's
repositories planned from their metadata, one that fails to read a line of its own.
"""

from __future__ import annotations

import json
import re

from llmfit.advise import advise
from llmfit.plan.planner import PlanSettings
from llmfit.sources.fleet import resolve_fleet
from tests.conftest import EXAMPLE_FLEET, HUB


def cached_ids() -> list[str]:
    return sorted(
        p.name.removeprefix("models--").replace("--", "/")
        for p in HUB.iterdir()
        if p.name.startswith("models--")
    )


def test_every_cached_model_that_fits_is_listed_with_its_best_options_numbers(run):
    code, out, err = run("models", "--fleet", str(EXAMPLE_FLEET), "--json")
    assert code == 0, err
    docs = json.loads(out)
    # One document a cached repository: none left out, none twice.
    assert sorted(d["repo"]["id"] for d in docs) == cached_ids()
    fleet = resolve_fleet(str(EXAMPLE_FLEET))
    fitting = []
    for repo_id in cached_ids():
        advice = advise(repo_id, fleet, PlanSettings(), offline=True)
        if advice.plan.options:
            fitting.append((repo_id, advice.plan.options[0]))
    # The eight sized safetensors repositories, the GGUF one, 405B and gpt-oss-20b.
    assert len(fitting) == 11
    listed = {d["repo"]["id"]: d for d in docs}
    for repo_id, best in fitting:
        first = listed[repo_id]["options"][0]
        assert first["per_card"]["need"] == best.per_card.need
        assert first["max_context"] == best.max_context
        assert first["concurrency"] == best.concurrency
        assert first["gpus"] == best.gpus
    # Those that fit come first (issue 27): their best options by cards, nodes, the checkpoint
    # as shipped before a what-if, then the most sequences held at once.
    order = sorted(
        fitting, key=lambda f: (f[1].cpu, f[1].gpus, f[1].nodes, f[1].changes, -f[1].concurrency)
    )
    assert [d["repo"]["id"] for d in docs[: len(fitting)]] == [r for r, _ in order]
    assert docs[0]["repo"]["id"] == "openai/gpt-oss-20b"
    assert all(not d["options"] for d in docs[len(fitting) :])


def test_the_text_listing_is_one_line_a_model(run):
    code, out, _ = run("models", "--fleet", str(EXAMPLE_FLEET))
    assert code == 0
    row = next(line for line in out.splitlines() if " Qwen/Qwen3-235B-A22B " in line)
    # Its best option's numbers, as the plan prints them: fp8 on 2 × h200, 117.6 of 126.0 GiB
    # (tests/test_cli.py), 3.26 sequences of 40,960 tokens at once.
    assert re.search(
        r"fp8\s+fp8 weights\s+vllm\s+2 × h200-141g \(tp2\+ep\)\s+8\.0\s+117\.6/126\.0\s+40,960\s+"
        r"3\.26\s+free",
        row,
    ), row
    # Config-only snapshots are named once, together, with why they are not planned.
    assert "only the config is cached, so the weights cannot be sized (16): " in out
    assert "openai/gpt-oss-120b" in out.split("weights cannot be sized", 1)[1]


def test_a_narrow_terminal_gets_two_lines_a_model(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run("models", "--fleet", str(EXAMPLE_FLEET))
    assert code == 0
    lines = out.splitlines()
    at = lines.index(" 9 Qwen/Qwen3-235B-A22B")
    # Its line wraps under its first word at 80 columns.
    assert [lines[at + 1], lines[at + 2]] == [
        "    fp8 weights, vllm, 2 × h200-141g (tp2+ep), 117.6/126.0 GiB, ctx 40,960, 3.26",
        "        seqs",
    ]
    assert max(len(line) for line in lines) <= 80


def test_filters_narrow_the_listing(run):
    code, out, _ = run(
        "models", "--fleet", "1xrtx4090-24g", "--context", "8k", "--engine", "llama.cpp", "--json"
    )
    docs = json.loads(out)
    assert code == 0
    fits = [d for d in docs if d["options"]]
    assert [d["repo"]["id"] for d in fits] == ["llmfit-fixtures/Tiny-Llama-GGUF"]
    assert {o["engine"] for d in fits for o in d["options"]} == {"llama.cpp"}
    assert all(d["context"] == 8192 for d in docs if "context" in d)
    _, out, _ = run("models", "--fleet", str(EXAMPLE_FLEET), "--max-params", "1m", "--json")
    # Only the GGUF fixture, of 853,248 parameters, has fewer than 2,000,000 ("1m" to the digit
    # given); every other is counted, from its index or its config (issue 27), to billions.
    ids = [d["repo"]["id"] for d in json.loads(out)]
    assert ids == ["llmfit-fixtures/Tiny-Llama-GGUF"]
    code, _, err = run("models", "--max-params", "lots")
    assert code == 2 and "--max-params 'lots' is not a parameter count" in err


def test_search_offline_is_refused_with_the_cache_listing_as_the_hint(run):
    code, _, err = run("models", "--fleet", "1xh100-80g", "--search", "qwen3")
    assert code == 2
    assert "--search asks the Hub, but this run is offline" in err
    assert "hint: llmfit models" in err
