"""vLLM's memory model against vLLM's own start-up lines (fixtures/calibration/engine-logs.jsonl):
the bounds docs/accuracy.md states, as benchmarks/accuracy_vllm.py prints them (issue 26: on every
record whose inputs are known, the concurrency at most 3 % off and never more than 1 % above what
vLLM printed)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "accuracy_vllm", ROOT / "benchmarks" / "accuracy_vllm.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["accuracy_vllm"] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


def test_every_modelled_record_is_within_3_percent_and_at_most_1_percent_optimistic(bench):
    rows = [r for r in bench.rows() if r.modelled]
    assert len(rows) == 7
    errs = {r.id: bench.pct(r.concurrency) for r in rows}
    assert all(e is not None for e in errs.values())
    assert max(abs(e) for e in errs.values() if e is not None) <= 3.0
    assert max(e for e in errs.values() if e is not None) <= 1.0
    # gpt-oss-20b on an A100 under 0.19 was +1.02 %: its Marlin MoE workspace, 2,048 tokens × 4
    # experts × (max(2,944, 3,072) + max(5,888, 3,072)) × 2 B at the padded sizes, kept from
    # 0.13 on, took it to +0.64 %.
    assert round(errs["vllm-gptoss20b-a100-myoceane"] or 0, 2) == 0.64


def test_no_record_that_did_not_start_is_said_to_fit(bench):
    assert not [r.id for r in bench.rows() if r.fits and r.fits[1] and not r.fits[0]]
