"""The CPU's work a step overlaps the GPU's where the engine overlaps them, by release and by flag.

vLLM schedules the next step while the GPU runs this one from 0.14 (vllm/config/scheduler.py
SchedulerConfig.async_scheduling defaults to None there, False before; VllmConfig.__post_init__
turns None on, and in 0.14 off under pipeline parallelism); `--no-async-scheduling` turns it off.
SGLang's overlap scheduler is on unless `--disable-overlap-schedule` (or pipeline parallelism).

Overlapped, a step costs the larger of its CPU work and its GPU work; in series, their sum. For
one sequence the GPU's part is the longer, so the two single-sequence decode times differ by the
whole CPU part: vLLM's step_s + one sequence_s, 0.466 + 0.0294 = 0.4954 ms; SGLang's 0.512 +
0.0598 = 0.5718 ms (llmfit/data/serving_speed.toml).
"""

from __future__ import annotations

import json

import pytest

from llmfit.plan.engines.vllm_versions import VllmVersion


def test_async_scheduling_by_release():
    assert not VllmVersion.parse("0.11").async_scheduling(1)
    assert not VllmVersion.parse("0.13").async_scheduling(1)
    assert VllmVersion.parse("0.14").async_scheduling(1)
    assert not VllmVersion.parse("0.14").async_scheduling(2)
    assert VllmVersion.parse("0.15").async_scheduling(2)
    assert VllmVersion.parse("0.33").async_scheduling(1)


def _one_token_s(run, *args: str) -> float:
    code, out, err = run("meta-llama/Llama-3.1-8B-Instruct", "--fleet", "1xh100-80g", "--json",
                         "--context", "8k", *args)  # fmt: skip
    assert code == 0, err
    return 1 / json.loads(out)["options"][0]["speed"]["decode_tokens_per_s"]


def test_vllm_no_async_scheduling_adds_the_cpu_work_to_a_step(run):
    on = _one_token_s(run)
    off = _one_token_s(run, "--no-async-scheduling")
    assert off - on == pytest.approx(0.4954e-3, abs=2e-6)  # to the JSON's 2 decimals of tok/s
    # vLLM 0.13 had no async scheduling by default: the same step as with the flag.
    assert _one_token_s(run, "--vllm-version", "0.13") == pytest.approx(off, rel=1e-4)


def test_sglang_disable_overlap_schedule_adds_the_cpu_work_to_a_step(run):
    on = _one_token_s(run, "--engine", "sglang")
    off = _one_token_s(run, "--engine", "sglang", "--disable-overlap-schedule")
    assert off - on == pytest.approx(0.5718e-3, abs=2e-6)


def test_check_prices_the_command_it_reads(run):
    # The same launch with and without --no-async-scheduling: check reads the flag and prices
    # the step it runs (its decode speed in the JSON), as the plan does.
    def checked(*flags: str) -> float:
        code, out, err = run("check", "--fleet", "1xh100-80g", "--json", "--", "vllm", "serve",
                             "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192",
                             *flags)  # fmt: skip
        assert code == 0, err
        doc = json.loads(out)
        option = doc["option"] if "option" in doc else doc["options"][0]
        return 1 / option["speed"]["decode_tokens_per_s"]

    assert checked("--no-async-scheduling") - checked() == pytest.approx(0.4954e-3, abs=2e-6)
