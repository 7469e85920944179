"""vLLM's and SGLang's constants are data (llmfit/data/serving_speed.toml), each architecture's
row with its provenance, and every share of a card's datasheet figure at most 1."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest

from llmfit.plan.engines import serving_speed


def test_every_row_says_where_it_comes_from_and_no_share_passes_1():
    doc = tomllib.loads(resources.files("llmfit").joinpath(serving_speed.DATA_FILE).read_text())
    for engine in ("vllm", "sglang"):
        for arch, row in doc[engine]["architectures"].items():
            assert row["provenance"] in ("fitted", "prior"), (engine, arch)
        for k in serving_speed.TABLES[engine].values():
            shares = (
                k.weight_efficiency,
                k.kv_efficiency,
                k.prefill_efficiency,
                k.attention_efficiency,
                k.expert_efficiency,
                k.expert_prefill_efficiency,
            )
            assert all(0 < v <= 1 for v in shares)
    # The file's values are the tables': vLLM on Hopper streams weights at 0.927 of the bandwidth
    # (its fit: serving_speed.toml), and its API server takes one request after another.
    assert serving_speed.constants("vllm", "h100-80g").weight_efficiency == 0.927
    assert serving_speed.constants("vllm", "h100-80g").serial_frontend
    assert not serving_speed.constants("sglang", "h100-80g").serial_frontend
    # MI355X is CDNA 4 and keeps the AMD prior, 0.65; MI300X (CDNA 3) its fit, 0.561.
    assert serving_speed.constants("sglang", "mi355x-288g").weight_efficiency == 0.65
    assert serving_speed.constants("sglang", "mi300x-192g").weight_efficiency == 0.561


def test_sglang_prices_experts_no_measured_kernel_covers_by_the_kernel_that_runs():
    # Where no measured grouped GEMM prices the routed experts, the share is the kernel's: on
    # NVIDIA cards (MXFP4 before Blackwell) SGLang runs vLLM's Triton matmul_ogs and takes vLLM's
    # share, 0.80 (serving_speed.toml [vllm] and [sglang]: its prior, now that vLLM's own experts
    # go by the kernel it runs and no vLLM run the fit prices is left to the share); on AMD cards
    # ROCm's kernels, the share fitted on SGLang's AMD runs, 0.371 (its amd-cdna3 and amd rows).
    sglang = serving_speed.constants
    for card in ("h100-80g", "h200-141g", "a100-80g"):
        assert sglang("sglang", card).expert_efficiency == 0.80
        assert sglang("vllm", card).expert_efficiency == 0.80
    for card in ("mi300x-192g", "mi355x-288g"):
        assert sglang("sglang", card).expert_efficiency == 0.371


def test_a_bad_value_is_refused_in_one_sentence():
    with pytest.raises(ValueError, match=r"vllm\.prefill_efficiency = 1\.2 is out of its range"):
        serving_speed._values({"prefill_efficiency": 1.2}, "vllm")
    with pytest.raises(ValueError, match=r"vllm\.speedup is not a speed constant"):
        serving_speed._values({"speedup": 2.0}, "vllm")
    with pytest.raises(ValueError, match=r"base\.layer_s = 'fast' is not a number"):
        serving_speed._values({"layer_s": "fast"}, "base")


def test_an_engine_brings_its_own_constants_and_names_no_table():
    # The shared step-model inputs take the engine's own table (plan/engines/serving.py
    # speed_inputs), looked up by the card's architecture alone: a fourth engine with a table of
    # one default row gets that row on an H100 (Hopper, a row it lacks), and no engine's name is
    # looked up anywhere on the way (the table by name had vLLM and SGLang only: a KeyError).
    import inspect
    from dataclasses import replace

    from llmfit.plan.engines import serving

    own = {"default": replace(serving_speed.BASE, weight_efficiency=0.5)}
    assert serving_speed.for_card(own, "h100-80g").weight_efficiency == 0.5
    assert "engine" not in inspect.signature(serving.speed_inputs).parameters
    assert serving_speed.for_card(serving_speed.VLLM, "h100-80g") == serving_speed.constants(
        "vllm", "h100-80g"
    )
