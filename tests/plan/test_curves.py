"""Kernel efficiency curves (llmfit/data/kernel_curves.json, read by llmfit/plan/curves.py).

The shipped points were derived by benchmarks/derive_kernel_curves.py from aiconfigurator
0.12.0's measured tables; the rows named below are in its aiconfigurator-core wheel under
aiconfigurator_core/systems/data/.
"""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest

from llmfit.plan import cards
from llmfit.plan.curves import Collective, Curve, curves_for, efficiency_curve

DOC = json.loads(resources.files("llmfit").joinpath("data/kernel_curves.json").read_text())


def test_the_file_names_its_source_and_licence():
    src = DOC["source"]
    assert (src["package"], src["version"], src["licence"]) == (
        "aiconfigurator",
        "0.12.0",
        "Apache-2.0",
    )
    assert src["derived_by"] == "benchmarks/derive_kernel_curves.py"
    assert (
        "aiconfigurator_core/systems/data/h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
        in (src["files"])
    )
    assert 0 < DOC["clamped"]["points"] < DOC["clamped"]["of"]


def test_an_allreduce_point_is_the_measured_row():
    # h200_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet, num_gpus 8, vLLM_custom_graph:
    # message_size 1,048,576 (16-bit elements: 2,097,152 bytes) in 0.018106 ms, faster than
    # NCCL's 0.03746 ms at that size (comm/nccl/2.29.2/nccl_perf.parquet): 1.811e-05 s.
    ar = curves_for("h200-141g", "hopper", "vllm").allreduce(8)
    assert ar.at(2_097_152) == 1.811e-05
    # 4 MiB lies halfway in log bytes between that point and (8,388,608 B, 4.839e-05 s): the
    # geometric mean, sqrt(1.811e-05 × 4.839e-05) = 2.9603e-05 s.
    assert ar.at(4 * 2**20) == pytest.approx(2.9603e-05, rel=1e-4)
    # Past the largest size (2^28 elements, 536,870,912 B, 2.034968 ms → 0.002035 s) at that
    # point's bandwidth: twice the bytes, twice the time. Below the smallest, its latency.
    assert ar.at(2 * 536_870_912) == pytest.approx(0.00407)
    assert ar.at(1) == 4.801e-06


def test_gemm_and_attention_interpolate_in_log_size():
    k = curves_for("h100-80g", "hopper", "vllm")
    assert k.measured and k.source == "aiconfigurator 0.12.0: measured on h100-80g under vllm"
    gemm = k.gemm("bf16")
    # The curve's first points (m = 1: 0.7754, m = 2: 0.7759; medians over n, k >= 2048 of
    # the fastest kernel's roofline / measured). At m = 1.5: 0.7754 + log2(1.5) × 0.0005.
    assert gemm.at(1) == 0.7754
    assert gemm.at(1.5) == pytest.approx(0.7754 + math.log2(1.5) * 0.0005)
    # Decode attention: (1,048,576 tokens read, 0.8565) and (4,194,304, 0.9073); halfway in
    # log size is 2,097,152, where it is their mean.
    assert k.attention_decode.at(2_097_152) == pytest.approx((0.8565 + 0.9073) / 2)


def test_ends_are_held_and_bad_sizes_read_as_the_smallest():
    gemm = curves_for("h100-80g", "hopper", "vllm").gemm("bf16")
    first, last = gemm.points[0][1], gemm.points[-1][1]
    assert gemm.at(0.001) == first and gemm.at(-5) == first and gemm.at(math.nan) == first
    assert gemm.at(1e12) == last and gemm.at(math.inf) == last


def test_every_shipped_efficiency_is_in_zero_to_one():
    def curves(got):
        for kind in ("gemm", "moe"):
            yield from got.get(kind, {}).values()
        for cut in got.get("moe_sliced", {}).values():
            yield from cut.values()
        for kind in ("attention_decode", "attention_prefill", "mla_decode"):
            if kind in got:
                yield got[kind]

    tables = [got for c in DOC["cards"].values() for got in c["backends"].values()]
    n = 0
    for got in [*tables, DOC["priors"]]:
        for points in curves(got):
            curve = efficiency_curve(points)  # raises on a value outside (0, 1]
            for x in (0.5, points[0][0] * 1.37, points[-1][0] * 0.71, 1e9):
                assert 0 < curve.at(x) <= 1
            n += 1
    assert n > 150


def test_experts_cut_over_cards_take_the_measured_cut():
    # aiconfigurator measured the grouped GEMM of one GPU whose experts are cut to moe_tp 2, 4,
    # 8 and 16 (kernel_curves.json "moe_sliced"); a cut takes the widest measured one no wider,
    # whole experts (and a cut no table holds) the "moe" curve.
    k = curves_for("b200-180g", "blackwell", "sglang")
    got = DOC["cards"]["b200-180g"]["backends"]["sglang"]
    assert k.moe("bf16", 8) == efficiency_curve(got["moe_sliced"]["8"]["bf16"])
    assert k.moe("bf16", 8).at(1) == 0.7049  # whole experts: 0.8425
    assert k.moe("bf16") == k.moe("bf16", 1) == efficiency_curve(got["moe"]["bf16"])
    assert k.moe("bf16", 6) == k.moe("bf16", 4) != k.moe("bf16", 8)
    assert k.moe("bf16", 64) == k.moe("bf16", 16)
    # A dtype's aliases hold for a cut as for whole experts (mxfp4 and nvfp4 are "fp4").
    assert k.moe("mxfp4", 8) == k.moe("nvfp4", 8)
    assert k.moe("mxfp4", 8) == efficiency_curve(got["moe_sliced"]["8"]["fp4"])
    # The A100 has no grouped GEMM under vLLM: the same card's SGLang one, cut or whole.
    a100 = curves_for("a100-80g", "ampere", "vllm")
    sgl = DOC["cards"]["a100-80g"]["backends"]["sglang"]
    assert a100.moe("bf16", 8) == efficiency_curve(sgl["moe_sliced"]["8"]["bf16"])


def test_a_card_not_measured_takes_its_architectures_card():
    k = curves_for("h800-80g", "hopper", "sglang")
    assert k.measured
    assert k.source == (
        "aiconfigurator 0.12.0: measured on h100-80g (the hopper card measured) under sglang"
    )
    assert k.gemm("bf16") == curves_for("h100-80g", "hopper", "sglang").gemm("bf16")


def test_a_card_of_no_measured_architecture_takes_the_priors():
    k = curves_for("mi355x-288g", "cdna4", "vllm")
    assert not k.measured and k.source.startswith("prior: ")
    # The priors are the lower quartile of the measured cards at each size; a dtype the
    # priors lack is read from its nearest (fp8_block from fp8), int4 is w4a16.
    assert k.gemm("fp8_block") == k.gemm("fp8") == efficiency_curve(DOC["priors"]["gemm"]["fp8"])
    assert k.gemm("fp8").at(1) == 0.3141
    assert k.moe("int4") == efficiency_curve(DOC["priors"]["moe"]["w4a16"])
    # No collective was measured on Infinity Fabric: a ring over the card's link, one way
    # 537.6 GB/s: 10 µs + 2 × 7/8 × 1 GiB / 537.6e9 B/s = 0.0035052 s.
    link = cards.BY_KEY["mi355x-288g"].link_bandwidth
    assert k.allreduce(8).at(2**30) == pytest.approx(10e-6 + 1.75 * 2**30 / link)
    assert k.allreduce(8).at(2**30) == pytest.approx(0.0035052, rel=1e-4)


def test_an_engine_not_measured_takes_the_priors():
    assert not curves_for("h100-80g", "hopper", "llamacpp").measured


def test_ranks_not_measured():
    k = curves_for("h100-80g", "hopper", "vllm")
    assert k.allreduce(3) == k.allreduce(4)  # the next larger count measured
    # 16 ranks: none measured on h100: the NVLink ring, 450 GB/s one way.
    assert k.allreduce(16).at(2**30) == pytest.approx(10e-6 + 2 * 15 / 16 * 2**30 / 450e9)
    with pytest.raises(ValueError, match="2 or more ranks, not 1"):
        k.allreduce(1)


@pytest.mark.parametrize(
    "points",
    [(), ((0.0, 0.5),), ((2.0, 0.5), (1.0, 0.6)), ((1.0, math.nan),), ((1.0, -0.1),)],
)
def test_a_bad_curve_is_refused(points):
    with pytest.raises(ValueError):
        Curve(points)


def test_an_efficiency_above_one_is_refused():
    with pytest.raises(ValueError, match="at most 1"):
        efficiency_curve([[1, 0.5], [2, 1.2]])
    assert Collective(((1.0, 1e-5),)).at(0.5) == 1e-5
