"""SGLang's memory model against SGLang's own start-up lines (fixtures/calibration/
sglang-logs.jsonl): the figures docs/accuracy.md states, as benchmarks/accuracy_sglang.py prints
them."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "accuracy_sglang", ROOT / "benchmarks" / "accuracy_sglang.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["accuracy_sglang"] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


def test_every_record_is_compared_or_says_why_not(bench):
    ids = [json.loads(line)["id"] for line in bench.RECORDS.read_text().splitlines()]
    assert len(ids) == 31
    for rid in ids:
        assert (rid in bench.INPUTS) != (rid in bench.LEFT_OUT), rid


def test_the_stated_mean_errors(bench):
    # docs/accuracy.md, "SGLang": the pool from the card table 1.46 % over 8 records (1.86 before
    # issue 32 took a desktop card's and a multi-rank ROCm node's own pre-load hold), from the
    # free memory SGLang logged 0.04 % over 12, a rank's weights 0.30 % over 5 (the fp32 rotary
    # cache SGLang counts in its weights, issue 26, took it from 0.56).
    got = {k: (round(v[0], 2), v[1]) for k, v in bench.errors(bench.rows()).items()}
    assert got == {"by_card": (1.46, 8), "by_free": (0.04, 12), "weights_ours": (0.30, 5)}


def test_from_the_card_no_record_is_planned_more_than_1_percent_optimistic(bench):
    # Issue 32: from the card table alone (llmfit's whole path), the RTX 3090 under WSL 2 was
    # +3.6 % and the MI355X at TP 8 +2.0 % while llmfit took 0.6 GiB before SGLang's measurement
    # on every card; with a desktop card's 0.85 GiB and a multi-rank ROCm node's 3.66 GiB they
    # are -0.3 % and +0.4 %.
    errs = {r["id"]: (r["by_card"] - r["tokens"]) / r["tokens"] for r in bench.rows()
            if r["stock"] and r["by_card"] is not None}  # fmt: skip
    assert len(errs) == 8
    assert max(errs.values()) <= 0.01
    assert round(100 * errs["jerryzsj-r1-distill-qwen7b-rtx3090-2025-02"], 1) == -0.3
    assert round(100 * errs["kimi-k25-mi355x-tp8-2026-02"], 1) == 0.4


def test_on_every_record_whose_inputs_are_known_the_pool_is_within_the_issue_26_bounds(bench):
    # With the free memory SGLang measured before loading (the input its rule takes, logged on
    # these 12 stock records), the pool, and so the sequences it holds at once, is never more
    # than 3 % off nor more than 1 % optimistic.
    errs = [(r["by_free"] - r["tokens"]) / r["tokens"] for r in bench.rows() if r["stock"]]
    assert len(errs) == 12
    assert max(abs(e) for e in errs) <= 0.03 and max(errs) <= 0.01


def test_sglangs_rule_on_its_own_free_memory_is_within_a_fifth_of_a_percent(bench):
    for r in bench.rows():
        if r["stock"]:
            assert abs(r["by_free"] - r["tokens"]) / r["tokens"] < 0.002, r["id"]


def test_every_logged_cell_is_llmfits_to_the_rounding_of_the_log(bench):
    cells = bench.cell_rows()
    assert len(cells) == 15
    for c in cells:
        assert abs(c["ours"] - c["logged"]) <= c["slack"], c["id"]
