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
    # Best is two H100s at 2.49 an hour a card, and 20 requests a second need 4 of them: 19.92
    # an hour. 20 requests a second of 500 output tokens are 10,000 tokens a second, 36 million an
    # hour: 19.92 / 36 = 0.5533 a million.
    assert (best["gpu_class"], best["gpus"], sv["replicas"]) == ("h100-80g", 2, 4)
    assert sv["cost_per_hour"] == pytest.approx(19.92)
    assert sv["output_tokens_per_s"] == pytest.approx(10_000, rel=1e-3)
    assert sv["cost_per_million_output_tokens"] == pytest.approx(0.5533, abs=1e-4)


def test_the_table_and_best_block_say_the_cost(run, priced, monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")
    code, out, err = run(REPO, "--fleet", priced, *LOAD)
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith(" # artifact"))
    assert " $/h $/Mtok " in header
    row = next(line for line in out.splitlines() if line.startswith(" 1 "))
    assert row.split()[-4:-2] == ["19.92", "0.55"]  # then hosts and now
    flat = " ".join(out.split())
    assert (
        "costs $19.92 an hour (4 replicas × 2 cards × $2.49 a card-hour): $0.55 a million output "
        "tokens at this load"
    ) in flat


def test_explain_says_the_cost(run, priced):
    code, out, err = run(REPO, "--fleet", priced, *LOAD, "--explain")
    assert code == 0, err
    assert "serving: costs $19.92 an hour" in " ".join(out.split())


def test_a_budget_leaves_out_what_costs_more_and_says_so(run, priced):
    code, out, err = run(REPO, "--fleet", priced, *LOAD, "--json")
    every = [o["serving"]["cost_per_hour"] for o in json.loads(out)["options"]]
    over = sum(1 for c in every if c is not None and c > 30)
    code, out, err = run(REPO, "--fleet", priced, *LOAD, "--budget", "30", "--json")
    assert code == 0, err
    doc = json.loads(out)
    costs = [o["serving"]["cost_per_hour"] for o in doc["options"]]
    # Two H100s × 4 and eight × 1 (19.92), two H100s × 5 (24.90), one H200 × 7 (7 × 3.59 =
    # 25.13), the H200s at 28.72 and four H100s × 3 (29.88) are within 30 an hour; the cheapest
    # above it is another one-H200 option that needs 9 replicas: 9 × 3.59 = 32.31.
    assert costs and all(c <= 30 for c in costs)
    assert len(costs) == len(every) - over
    assert (
        f"--budget 30 an hour: {over} options that cost more left out (the cheapest of them "
        "$32.31 an hour)"
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
