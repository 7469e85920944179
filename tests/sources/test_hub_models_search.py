"""`llmfit models --search` against the loopback Hub (issue 19): the search's repositories planned
from their metadata, and one that fails to read a line of its own, not the end of the listing."""

from __future__ import annotations

import json

from tests.hubrepos import sharded_repo


def test_search_plans_the_hubs_repositories_and_a_failure_is_one_line(run_online, hubserver):
    # A second repository whose every request fails: listed as not read, the listing goes on.
    hubserver.add(sharded_repo("Qwen/Qwen3-8B-Broken", "Qwen--Qwen3-8B.json", shards=2))
    hubserver.mode, hubserver.fail_on = "error", "Qwen3-8B-Broken"
    code, out, err = run_online("models", "--fleet", "1xh100-80g", "--search", "qwen3", "--json")
    assert code == 0, err
    docs = json.loads(out)
    assert [d["repo"]["id"] for d in docs] == ["Qwen/Qwen3-8B", "Qwen/Qwen3-8B-Broken"]
    assert docs[0]["repo"]["source"] == "hub"
    assert docs[0]["options"][0]["gpus"] == 1
    assert docs[1]["error"]["message"].startswith("the Hub (")
    assert "answered 500" in docs[1]["error"]["message"]
    # The Hub was searched once; each repository then read from its metadata.
    assert [r.path for r in hubserver.requests].count("/api/models") == 1
    code, out, _ = run_online("models", "--fleet", "1xh100-80g", "--search", "qwen3")
    assert "could not be read:\n  Qwen/Qwen3-8B-Broken: the Hub (" in out


def test_a_hub_that_trickles_is_given_up_on_at_the_searchs_deadline(
    run_online, hubserver, monkeypatch
):
    # Each answer about the repository comes a byte every 50 ms, never slow enough for the
    # per-read timeout and each within the 60 s a request may take: twenty such repositories held
    # `models --search` for five minutes. The search and its repositories share one deadline.
    import time

    from llmfit import models

    monkeypatch.setattr(models, "SEARCH_DEADLINE", 1.5)
    hubserver.mode, hubserver.trickle_seconds = "trickle", 0.05
    hubserver.fail_on = lambda path: path != "/api/models"
    start = time.monotonic()
    code, out, err = run_online("models", "--fleet", "1xh100-80g", "--search", "qwen3", "--json")
    took = time.monotonic() - start
    assert code == 1, err
    (doc,) = json.loads(out)
    assert doc["error"]["message"] == (
        f"the Hub ({hubserver.url}) did not answer for Qwen/Qwen3-8B within the 1.5 s llmfit "
        "gives a search and its repositories."
    )
    assert doc["error"]["hint"].startswith("search for fewer (--limit N), or try again later")
    assert took < 15  # 1.5 s of deadline; the rest is the start and a loaded machine


def test_a_search_the_hub_answers_with_a_server_error_is_a_hub_failure(run_online, hubserver):
    # huggingface_hub retries a 500 until the search's time is up: that exited 9, a timeout's
    # code, where the Hub had failed (issue 33). A Hub failure is exit 4 (README's exit codes).
    hubserver.mode, hubserver.fail_on = "error", "/api/models"
    code, out, err = run_online("models", "--fleet", "1xh100-80g", "--search", "qwen3")
    assert (code, out) == (4, "")
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) answered 500 to the search for 'qwen3'."
    )


def test_a_repository_the_search_repeats_is_listed_once(run_online, hubserver):
    hubserver.repeat = 30
    code, out, err = run_online("models", "--fleet", "1xh100-80g", "--search", "qwen3", "--json")
    assert code == 0, err
    assert [d["repo"]["id"] for d in json.loads(out)] == ["Qwen/Qwen3-8B"]
