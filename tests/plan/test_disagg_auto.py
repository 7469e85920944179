"""`--disagg auto` prices only the pairs that might win, and lists what `--disagg on` would have
listed as winning: the search under auto skips a what-if other than the best's, a ranking no
disaggregation improves, and pairs of card classes whose smallest unit already takes more cards
than the plan's best (plan/disagg.py `offers`), and none of that may change what it lists
(issue 37: auto lists a disaggregated option only where it wins under the targets)."""

from __future__ import annotations

import pytest

from llmfit.plan import disagg, planner
from tests.conftest import EXAMPLE_FLEET, ROOT

FLEET = str(EXAMPLE_FLEET)
FOUR = str(ROOT / "examples" / "fleet-4-nodes.toml")
LOAD = ("--input-len", "2000", "--output-len", "500")
CASES = [
    ("Qwen/Qwen3-235B-A22B", FLEET),
    ("Qwen/Qwen3-235B-A22B", FLEET, "--rate", "20"),
    ("Qwen/Qwen3-235B-A22B", FLEET, "--concurrency", "64", *LOAD),
    ("Qwen/Qwen3-235B-A22B", FLEET, "--rate", "20", "--rank", "throughput"),
    ("Qwen/Qwen3-235B-A22B", FLEET, "--rate", "20", "--rank", "speed"),
    ("Qwen/Qwen3-235B-A22B", FLEET, "--rate", "20", "--tpot", "20"),
    ("Qwen/Qwen3-8B", "2x8xh100-80g@ib0", "--rate", "50", *LOAD),
    ("Qwen/Qwen3-30B-A3B", FOUR, "--concurrency", "256", *LOAD),
    ("deepseek-ai/DeepSeek-V3", "4x8xh200-141g@ib0", "--rate", "10", *LOAD),
    ("meta-llama/Meta-Llama-3.1-70B", "4x8xa100-80g@ib0,2xl40s-48g", "--rate", "5"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: " ".join(c).replace(str(ROOT), "."))
def test_auto_lists_what_on_finds_winning(run, monkeypatch, case):
    real = disagg.offers
    seen: list[tuple[int, int]] = []

    def both(*args, **kwargs):
        auto = real(*args, **kwargs)
        if not kwargs.get("every"):
            on = real(*args, **{**kwargs, "every": True})
            assert auto == [o for o in on if o.wins]
            seen.append((len(auto), len(on)))
        return auto

    monkeypatch.setattr(planner, "offers", both)
    code, _, err = run(case[0], "--fleet", *case[1:])
    assert code == 0, err
    assert len(seen) == 1


def test_the_winning_case_is_priced_and_listed(run, monkeypatch):
    # Qwen3-235B on the example fleet at 20 requests a second: the plan's best is 16 × H200
    # (two replicas of tp8+ep), and a pair of H200 workers wins (tests/test_cli_disagg.py
    # test_a_winning_disaggregated_option_in_words); every offer auto lists wins.
    real = disagg.offers
    got: list[list[disagg.Offer]] = []

    def keep(*args, **kwargs):
        out = real(*args, **kwargs)
        got.append(out)
        return out

    monkeypatch.setattr(planner, "offers", keep)
    code, _, err = run("Qwen/Qwen3-235B-A22B", "--fleet", FLEET, "--rate", "20")
    assert code == 0, err
    assert got and got[0] and all(o.wins for o in got[0])
