"""What the fleet can serve (issue 34 item 3): where no one layout's replicas fit the free cards
for the named load, the plan says the most the fleet serves — on each class of card the replicas
of the option that serves the most there, mixed — with the load each carries, and what is
missing; the JSON too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# 32 H100 of which 28 free (7 a node: no node has a whole eight free), and 16 H200, on one fabric.
MIXED = """
[[pool]]
name = "h100"
gpu = "h100-80g"
gpus = 8
count = 4
free_gpus = 7
fabric = "ib0"

[[pool]]
name = "h200"
gpu = "h200-141g"
gpus = 8
count = 2
fabric = "ib0"
"""
REPO = "deepseek-ai/DeepSeek-V3"


def load(rate: str) -> tuple[str, ...]:
    return ("--input-len", "2000", "--output-len", "500", "--rate", rate, "--ttft", "2",
            "--tpot", "50")  # fmt: skip


@pytest.fixture
def mixed(tmp_path: Path) -> str:
    path = tmp_path / "mixed.toml"
    path.write_text(MIXED)
    return str(path)


def plan(run, fleet: str, rate: str) -> dict:
    code, out, err = run(REPO, "--fleet", fleet, *load(rate), "--json")
    assert code == 0, err
    return json.loads(out)


def test_out_of_reach_the_most_the_fleet_serves_and_what_is_missing(run, mixed):
    doc = plan(run, mixed, "20")
    c = doc["ceiling"]
    options = doc["options"]
    assert (c["unit"], c["load"]) == ("rate", 20)
    # No option's replicas for 20 requests a second fit the free cards.
    assert all(o["serving"]["replicas"] is None
               or o["serving"]["replicas"] > o["serving"]["free_replicas"]
               for o in options if not o["cpu"])  # fmt: skip
    classes = [s["gpu_class"] for s in c["shares"]]
    assert sorted(classes) == ["h100-80g", "h200-141g"]
    for s in c["shares"]:
        o = options[s["option"] - 1]
        sv = o["serving"]
        # Out of reach, every free replica of the chosen option runs, carrying all it serves:
        # replicas × one replica's capacity a second.
        assert s["replicas"] == sv["free_replicas"]
        assert s["carries"] == pytest.approx(s["replicas"] * sv["capacity_rate"], rel=1e-3)
        assert s["gpus"] == s["replicas"] * o["gpus"]
        # The option chosen on its class is the one whose free replicas serve the most there.
        same = [p for p in options if p["gpu_class"] == s["gpu_class"] and p["serving"]]
        best = max(p["serving"]["free_replicas"] * p["serving"]["capacity_rate"] for p in same)
        assert s["capacity"] == pytest.approx(best, rel=1e-3)
    assert c["served"] == pytest.approx(sum(s["carries"] for s in c["shares"]), rel=1e-3)
    assert c["missing"] == pytest.approx(20 - c["served"], rel=1e-3)


def test_within_reach_the_mix_serves_it_and_says_what_each_carries(run, mixed):
    doc = plan(run, mixed, "4.5")
    c = doc["ceiling"]
    assert c["missing"] == 0 and c["served"] == pytest.approx(4.5)
    first, second = c["shares"]
    sv = doc["options"][first["option"] - 1]["serving"]
    # The class that serves the most first, all of its free replicas (they serve less than 4.5);
    # the rest of the 4.5 on the other class.
    assert first["carries"] == pytest.approx(first["replicas"] * sv["capacity_rate"], rel=1e-3)
    assert second["carries"] == pytest.approx(4.5 - first["carries"], rel=1e-3)
    code, out, err = run(REPO, "--fleet", mixed, *load("4.5"))
    flat = " ".join(out.split())
    assert (
        "no one layout serves 4.5 requests a second on the free cards; replicas of these, mixed, "
        f"serve it: {first['replicas']} replicas of option {first['option']}, {first['label']}: "
        f"{first['carries']:.3g} requests a second"
    ) in flat


def test_the_text_says_what_is_missing(run, mixed):
    doc = plan(run, mixed, "20")
    c = doc["ceiling"]
    code, out, err = run(REPO, "--fleet", mixed, *load("20"))
    assert code == 0, err
    flat = " ".join(out.split())
    assert (
        f"what the fleet can serve: its free cards serve at most {c['served']:.3g} requests a "
        f"second of the 20 requests a second asked, {c['missing']:.3g} requests a second missing:"
    ) in flat


def test_where_one_layout_fits_the_free_cards_there_is_no_ceiling(run, mixed):
    assert plan(run, mixed, "1")["ceiling"] is None
