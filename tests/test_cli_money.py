"""Money in the words (issue 34 item 3): where the fleet prices its cards, the table, the Best
block, --explain and `models` say what an option costs an hour and what a million output tokens
cost at the workload; `--budget` leaves out what costs more, and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.render.test_deploy_scale import LOAD, PRICED

REPO = "meta-llama/Meta-Llama-3.1-70B"


@pytest.fixture
def priced(tmp_path: Path) -> str:
    path = tmp_path / "priced.toml"
    path.write_text(PRICED)
    return str(path)


def test_the_json_prices_the_load_and_a_million_tokens(run, priced):
    code, out, err = run(REPO, "--fleet", priced, *LOAD, "--json")
    assert code == 0, err
    best = json.loads(out)["options"][0]
    sv = best["serving"]
    # Best is one H200 at 3.59 an hour a card, and 20 requests a second need 5 of it: 17.95 an
    # hour. 20 requests a second of 500 output tokens are 10,000 tokens a second, 36 million an
    # hour: 17.95 / 36 = 0.4986 a million.
    assert (best["gpu_class"], best["gpus"], sv["replicas"]) == ("h200-141g", 1, 5)
    assert sv["cost_per_hour"] == pytest.approx(17.95)
    assert sv["output_tokens_per_s"] == pytest.approx(10_000, rel=1e-3)
    assert sv["cost_per_million_output_tokens"] == pytest.approx(0.4986, abs=1e-4)


def test_the_table_and_best_block_say_the_cost(run, priced, monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")
    code, out, err = run(REPO, "--fleet", priced, *LOAD)
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith(" # artifact"))
    assert " $/h $/Mtok " in header
    row = next(line for line in out.splitlines() if line.startswith(" 1 "))
    assert row.split()[-4:-2] == ["17.95", "0.50"]  # then hosts and now
    flat = " ".join(out.split())
    assert (
        "costs $17.95 an hour (5 replicas × 1 card × $3.59 a card-hour): $0.50 a million output "
        "tokens at this load"
    ) in flat


def test_explain_says_the_cost(run, priced):
    code, out, err = run(REPO, "--fleet", priced, *LOAD, "--explain")
    assert code == 0, err
    assert "serving: costs $17.95 an hour" in " ".join(out.split())


def test_a_budget_leaves_out_what_costs_more_and_says_so(run, priced):
    code, out, err = run(REPO, "--fleet", priced, *LOAD, "--json")
    every = [o["serving"]["cost_per_hour"] for o in json.loads(out)["options"]]
    over = sum(1 for c in every if c is not None and c > 20)
    code, out, err = run(REPO, "--fleet", priced, *LOAD, "--budget", "20", "--json")
    assert code == 0, err
    doc = json.loads(out)
    costs = [o["serving"]["cost_per_hour"] for o in doc["options"]]
    # One H200 × 5 (17.95) and two H100s × 4 (19.92) are within 20 an hour; the next cheapest,
    # two H200s × 3 replicas, is 21.54.
    assert costs and all(c <= 20 for c in costs)
    assert len(costs) == len(every) - over
    assert (
        f"--budget 20 an hour: {over} options that cost more left out (the cheapest of them "
        "$21.54 an hour)"
    ) in doc["notes"]


def test_a_budget_on_a_fleet_with_no_prices_is_refused(run):
    code, out, err = run(REPO, "--fleet", "8xh100-80g", "--budget", "5")
    assert (code, out) == (2, "")
    assert err.startswith(
        "llmfit: --budget 5: the fleet prices no card, so no option has a cost to hold to it.\n"
    )


def test_models_says_the_cost_of_each(run, priced, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run("models", "--fleet", priced, "--rate", "2")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.lstrip().startswith("# model"))
    assert header.rstrip().endswith("$/h $/Mtok now")
