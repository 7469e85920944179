"""Online, when the checkpoint fits only as a what-if (or not at all) and no quantised sibling is
cached, the Hub's model tree names its quantisations (issue 16)."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.hubrepos import sharded_repo


def test_the_hubs_quantisations_are_named_when_only_a_what_if_fits(run_online, hubserver):
    for repo_id in ("Qwen/Qwen3-8B-FP8", "someone/Qwen3-8B-AWQ"):
        quantised = sharded_repo(repo_id, "Qwen--Qwen3-8B.json", shards=1)
        hubserver.add(replace(quantised, quantises="Qwen/Qwen3-8B"))
    hubserver.add(sharded_repo("Qwen/Qwen3-8B-Base", "Qwen--Qwen3-8B.json", shards=1))
    # One 16 GB T4: the 16 GB bf16 checkpoint holds no card as shipped.
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", "1xt4-16g", "--json")
    assert code in (0, 1), err
    assert (
        "quantised versions of Qwen/Qwen3-8B on the Hub (its model tree, most downloaded first): "
        "Qwen/Qwen3-8B-FP8, someone/Qwen3-8B-AWQ (plan one with: llmfit NAME)"
    ) in json.loads(out)["notes"]


def test_a_hub_that_fails_the_question_costs_the_plan_nothing(run_online, hubserver):
    quantised = sharded_repo("Qwen/Qwen3-8B-FP8", "Qwen--Qwen3-8B.json", shards=1)
    hubserver.add(replace(quantised, quantises="Qwen/Qwen3-8B"))
    hubserver.mode = "error"
    hubserver.fail_on = lambda path: path == "/api/models"  # the listing only
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", "1xt4-16g", "--json")
    assert code in (0, 1), err
    assert not any("on the Hub" in n for n in json.loads(out)["notes"])


def test_when_the_stored_checkpoint_fits_the_hub_is_not_asked(run_online, hubserver):
    code, _, err = run_online("Qwen/Qwen3-8B", "--fleet", "1xh100", "--json")
    assert code == 0, err
    assert not any("filter=" in r.path for r in hubserver.requests)
