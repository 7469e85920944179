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
        # `models` lists a config-only repository apart, not planned at an estimate.
        advice = advise(repo_id, fleet, PlanSettings(), offline=True, estimate=False)
        if advice.plan.options:
            fitting.append((repo_id, advice.plan.options[0]))
    # The eight sized safetensors repositories, the GGUF one, 405B and gpt-oss-20b.
    assert len(fitting) == 11
    listed = {d["repo"]["id"]: d for d in docs}
    for repo_id, best in fitting:
        first = listed[repo_id]["options"][0]
        assert first["per_card"]["need"] == best.per_card.need
        assert first["max_context"] == best.max_context
        assert first["concurrency"] == best.held
        assert first["gpus"] == best.gpus
    # Those that fit come first, in the order the plan's own ranking puts their best options:
    # a what-if as any option where it saves its model cards (the 70B's fp8 on one H200, where
    # its bf16 takes two); the ones a card serves on the smallest class of card first (the MIG
    # slice, the A100, the H200: on it the 70B before Mixtral, by what a unit of load costs), then
    # the wider ones by what a unit of load costs on them.
    assert [d["repo"]["id"] for d in docs[: len(fitting)]] == [
        "llmfit-fixtures/Tiny-Llama-GGUF",
        "meta-llama/Llama-3.1-8B-Instruct",
        "Qwen/Qwen3-8B",
        "openai/gpt-oss-20b",
        "google/gemma-3-27b-it",
        "Qwen/Qwen3-30B-A3B",
        "meta-llama/Meta-Llama-3.1-70B",
        "mistralai/Mixtral-8x7B-v0.1",
        "Qwen/Qwen3-235B-A22B",  # 8 H200s at TP 8, bf16
        "meta-llama/Meta-Llama-3.1-405B",  # 4 H200s (fp8 what-if): 144 tok/s a GPU
        "deepseek-ai/DeepSeek-V3",  # 8 H200s: 113 tok/s a GPU
    ]
    assert all(not d["options"] for d in docs[len(fitting) :])


def _per_gpu(run, repo: str) -> float:
    """The output a card of the repository's best option, as `llmfit REPO --json` gives it."""
    code, out, err = run(repo, "--fleet", str(EXAMPLE_FLEET), "--json")
    assert code == 0, err
    return float(json.loads(out)["options"][0]["serving"]["output_tokens_per_s_per_gpu"])


def _same(shown: str, figure: float) -> bool:
    """Whether a figure the listing shows (to three figures) is the plan's (the JSON's, to a
    tenth): within the capacity search's 2 % of each other (each run searches the capacity
    anew, to that tolerance)."""
    return abs(float(shown.replace(",", "")) / figure - 1) <= 0.02


def test_the_text_listing_is_one_line_a_model(run):
    code, out, _ = run("models", "--fleet", str(EXAMPLE_FLEET))
    assert code == 0
    row = next(line for line in out.splitlines() if " Qwen/Qwen3-235B-A22B " in line)
    # What the listing ranks by, the output a card at the workload, and whether it meets the
    # workload's targets: the plan's own figures.
    assert row.split()[-2:] == ["yes", "free"]
    assert _same(row.split()[-3], _per_gpu(run, "Qwen/Qwen3-235B-A22B"))
    # Its best option's numbers, as the plan prints them: the checkpoint as stored (bf16) on
    # 8 × h200 at TP 8 with expert parallelism, 60.6 GiB (weights 54.9, KV 1.8, overhead 3.8 with
    # vLLM's fused-MoE workspace, issue 26) of the card's 140.0 (vLLM 0.34's share is the whole
    # card, its cache measured after warm-up), 43.41 sequences of 40,960 at once.
    assert re.search(
        r"bf16\s+vllm\s+8 × h200-141g \(tp8\+ep\)\s+16\.0\s+60\.6/140\.0\s+40,960\s+43\.41",
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
    # The name with what the listing ranks by (it meets the targets: nothing more is said).
    at = next(i for i, line in enumerate(lines) if line.startswith(" 9 Qwen/Qwen3-235B-A22B · "))
    shown = lines[at].split(" · ")[1].removesuffix(" tok/s/GPU")
    assert _same(shown, _per_gpu(run, "Qwen/Qwen3-235B-A22B"))
    assert lines[at + 1] == (
        "    bf16, vllm, 8 × h200-141g (tp8+ep), 60.6/140.0 GiB, ctx 40,960, 43.41 seqs"
    )
    assert lines[at + 2].startswith("10 ")
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
    # Only the GGUF fixture, of 1,706,240 parameters, has fewer than 2,000,000 ("1m" to the digit
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


def test_a_what_if_that_saves_a_model_cards_is_ranked_by_its_cards(run):
    """Whether a what-if saves cards is the model's own question: Llama-3.1-70B's bf16 checkpoint
    (141 GB of weights) needs two H200s, its fp8 what-if one. Against the fewest cards any
    model's checkpoint took (one), the what-if was listed after DeepSeek-V3 on eight H200s; now
    it goes with the one-card models, on the largest class, before the wider ones."""
    code, out, _ = run("models", "--fleet", str(EXAMPLE_FLEET), "--json")
    assert code == 0
    best = [(d["repo"]["id"], d["options"][0]) for d in json.loads(out) if d["options"]]
    order = [repo for repo, _ in best]
    llama = dict(best)["meta-llama/Meta-Llama-3.1-70B"]
    assert (llama["what_if"], llama["gpus"]) == ("fp8 weights and KV cache", 1)
    one_card = [repo for repo, o in best if o["gpus"] == 1]
    assert order[: len(one_card)] == one_card
    assert order.index("meta-llama/Meta-Llama-3.1-70B") < order.index("deepseek-ai/DeepSeek-V3")
