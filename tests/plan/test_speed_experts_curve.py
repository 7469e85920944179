"""The step time of a MoE whose routed experts alone are priced by their measured grouped GEMM
(what every plan's MoE is: `SpeedInputs.curves_experts_only`), worked out stage by stage in one
pass (speed.py `_experts_measured_total`), is the same to the last bit as `stage_parts` gives it
part by part: a plan ranks and prints these figures, and a faster sum may not move one of them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmfit.plan.curves import curves_for
from llmfit.plan.speed import (
    SpeedInputs,
    _stage_total,
    inputs_for,
    pair_pricer,
    round_pair,
    round_total,
    step_total,
    stepper,
    total_pricer,
)
from tests.plan.test_load import CTX, H100, K, fixture


def _by_parts(inp: SpeedInputs, batch: float, ctx: float, chunk: float, chunk_ctx: float) -> float:
    """`step_total` as its general branch adds it up: each stage's `stage_parts`, summed."""
    st = stepper(inp)
    n = batch + chunk
    gpu = st.hop_fixed + st.hop_token * n
    cpu = st.step_s + st.sequence_s * batch
    gpu += sum(_stage_total(st, c, batch, ctx, chunk, chunk_ctx) for c in st.coefs)
    if st.overlap:
        return cpu if cpu > gpu else gpu
    return gpu + cpu


def _measured(name: str, kv: int, **kw: object) -> SpeedInputs:
    """`name` on an H100 priced as every plan prices it: the experts' measured curve set (a
    dense model has no experts for it to price), the rest by the shares."""
    m, layout = fixture(name)
    return inputs_for(m, layout, H100, constants=K, context=CTX, kv_bytes_per_token=kv,
                      curves=curves_for("h100-80g", "hopper", "vllm"), curves_experts_only=True,
                      **kw)  # fmt: skip


def _moes() -> list[SpeedInputs]:
    def moe(**kw: object) -> SpeedInputs:
        return _measured("Qwen--Qwen3-30B-A3B", 98_304, **kw)

    return [
        moe(),
        moe(ranks=4),  # attention ranks sharing the experts (expert parallel)
        moe(pp=2),  # two stages, each its own share of the layers
        replace(moe(), overlap=True),  # CPU work beside the GPU's
        # Past the largest captured graph, the launches where they outlast the GPU's work.
        replace(moe(), graph_batch=8, constants=replace(K, eager_layer_s=400e-6, gemm_rows=64.0)),
        replace(moe(), constants=replace(K, expert_rows=16.0, gemm_rows=64.0)),
    ]


@pytest.mark.parametrize("chunk", [0.0, 3.0, 2048.0])
@pytest.mark.parametrize("batch", [0.0, 1.0, 16.0, 300.0])
def test_one_pass_equals_the_parts_exactly(batch, chunk):
    for inp in _moes():
        assert stepper(inp).kernels is not None and stepper(inp).kernels.experts_only
        if batch + chunk <= 0:
            continue
        assert step_total(inp, batch, CTX, chunk, 1024) == _by_parts(inp, batch, CTX, chunk, 1024)


@pytest.mark.parametrize("batch", [1.0, 16.0, 300.0])
def test_a_round_with_and_without_a_chunk_equals_two_rounds_exactly(batch):
    for inp in _moes():
        plain, full = round_pair(inp, batch, CTX, 2048, 1024)
        assert plain == round_total(inp, batch, CTX)
        assert full == round_total(inp, batch, CTX, 2048, 1024)
        if len(inp.stages) == 1:  # one micro-batch a round: a round is a step
            assert plain == _by_parts(inp, batch, CTX, 0.0, 0.0)
            assert full == _by_parts(inp, batch, CTX, 2048, 1024)


def _denses() -> list[SpeedInputs]:
    """Qwen3-8B priced as every plan prices a dense model (the experts' curve set, no experts)."""

    def dense(**kw: object) -> SpeedInputs:
        return _measured("Qwen--Qwen3-8B", 147_456, **kw)

    return [
        dense(),
        dense(tp=2),
        dense(pp=2),  # pipelined: a round of two micro-batches, priced as round_total does
        replace(dense(), overlap=True),
        replace(dense(), graph_batch=8, constants=replace(K, eager_layer_s=400e-6, gemm_rows=64.0)),
    ]


def _ubatched() -> list[SpeedInputs]:
    """Steps in passes of a ubatch, priced by the constants' shares (llama.cpp's): a dense
    model and a MoE, one stage and two, graphed and past the largest graph."""
    out = []
    for name, kv in (("Qwen--Qwen3-8B", 147_456), ("Qwen--Qwen3-30B-A3B", 98_304)):
        m, layout = fixture(name)
        for pp in (1, 2):
            inp = inputs_for(m, layout, H100, constants=K, context=CTX, kv_bytes_per_token=kv,
                             pp=pp)  # fmt: skip
            out.append(replace(inp, ubatch=512))
        eager = replace(K, eager_layer_s=400e-6, gemm_rows=64.0, expert_rows=16.0)
        out.append(replace(out[-2], ubatch=256, graph_batch=8, constants=eager))
    return out


@pytest.mark.parametrize("chunk", [0.0, 3.0, 2048.0])
@pytest.mark.parametrize("batch", [0.0, 1.0, 16.0, 300.0, 1500.0])
def test_a_ubatched_steps_bound_pricers_equal_the_rounds_exactly(batch, chunk):
    # llama.cpp's steps (no curves, passes of --ubatch-size): `_ubatch_total`'s sums are
    # `stage_parts`' to the last bit, and a round with a chunk is two rounds, as `round_pair`
    # prices it.
    for inp in _ubatched():
        assert stepper(inp).kernels is None and stepper(inp).ubatch
        assert total_pricer(inp).__name__ == "total" and pair_pricer(inp).__name__ == "apart"
        for b, c, cc in ((batch, chunk, 1024.0), (batch, 0.0, 0.0)):
            assert total_pricer(inp)(b, CTX, c, cc) == round_total(inp, b, CTX, c, cc)
            assert pair_pricer(inp)(b, CTX, c, cc) == round_pair(inp, b, CTX, c, cc)


@pytest.mark.parametrize("chunk", [0.0, 3.0, 2048.0])
@pytest.mark.parametrize("batch", [0.0, 1.0, 1.5, 16.0, 300.0])
def test_the_bound_pricers_equal_the_rounds_exactly(batch, chunk):
    # A fixed point asks `pair_pricer`'s and `total_pricer`'s functions, bound once to their
    # inputs, where it asked `round_pair` and `round_total`: the same figures, to the last bit,
    # for a MoE's and a dense model's stages (the latter's experts' terms each 0).
    for inp in [*_moes(), *_denses()]:
        # Bound to the one-pass sums, not the general path.
        assert pair_pricer(inp).__name__ == total_pricer(inp).__name__ == "measured"
        for b, c, cc in ((batch, chunk, 1024.0), (batch, 0.0, 0.0)):
            assert total_pricer(inp)(b, CTX, c, cc) == round_total(inp, b, CTX, c, cc)
            assert pair_pricer(inp)(b, CTX, c, cc) == round_pair(inp, b, CTX, c, cc)
