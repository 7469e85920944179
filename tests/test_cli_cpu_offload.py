"""vLLM's --cpu-offload-gb: each rank keeps that many GiB of its layers' weights in pinned host
memory, which the GPU reads over PCIe every step (model_executor/offloader/uva.py UVAOffloader;
config/offload.py UVAOffloadConfig). `llmfit check` had read it and said it changed nothing."""

from __future__ import annotations

import pytest

from llmfit.plan import speed
from llmfit.plan.engines import serving_speed
from llmfit.plan.engines.serving import offloaded_inputs

GIB = 1 << 30
CHECK = ["check", "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B"]


def test_offloaded_weights_leave_the_card_and_its_pool_grows_by_them(run):
    code, plain, err = run(*CHECK)
    assert code == 0, err
    code, out, err = run(*CHECK, "--cpu-offload-gb", "10")
    assert code == 0, err
    said, before = " ".join(out.split()), " ".join(plain.split())
    # 15.3 GiB of weights, 10 GiB of its layers in the host's memory: 5.3 GiB on the card.
    assert "weights 15.3 GiB" in before
    assert "weights 5.3 GiB" in said
    assert "less 10.00 GiB of the layers kept in the host's memory (--cpu-offload-gb)" in said
    # vLLM 0.34 sizes the cache from the memory free after warm-up: 10 GiB more of it, in blocks
    # of 64 tokens × 147,456 B (9,437,184 B): 10,737,418,240 / 9,437,184 = 1,137.8, so 1,137 or
    # 1,138 more blocks as the remainder falls; here 1,138, 72,832 tokens.
    assert "KV pool: 441,664 tokens" in before
    assert "KV pool: 514,496 tokens" in said
    assert "not modelled" not in said


def test_the_offloaded_bytes_are_read_over_pcie_every_step():
    k = serving_speed.for_card(serving_speed.VLLM, "h100-80g")
    stage = speed.Stage(layers=36, dense_bytes=16e9, expert_bytes=4e9)
    inp = speed.SpeedInputs(
        constants=k, stages=(stage,), memory_bandwidth=3.35e12, flops=989.5e12,
        pcie_bandwidth=64e9,
    )  # fmt: skip
    # 18 GiB offloaded: the stage's 16 GB of dense weights first, then 3,327,352,832 B of its
    # experts; the card reads 672,647,168 B of experts of its own.
    out = offloaded_inputs(inp, 18 * GIB)
    assert out.stages[0].dense_bytes == 0
    assert out.stages[0].expert_bytes == 4e9 - (18 * GIB - 16e9) == 672_647_168
    assert out.host is not None and out.host.dense_bytes == 18 * GIB
    # The host's part of a step: 19,327,352,832 B over PCIe (64 GB/s) at vLLM's Hopper share of
    # a bandwidth (0.927): 0.32577 s, whatever the batch.
    assert k.weight_efficiency == 0.927
    host = speed._host(out, 1, 1000)
    assert host.memory == pytest.approx(18 * GIB / (64e9 * 0.927), rel=1e-12)
    assert host.memory == pytest.approx(0.325772, abs=1e-6)
    assert speed._host(out, 64, 1000).memory == host.memory


def test_an_offload_out_of_range_is_refused_in_one_sentence(run):
    code, out, err = run(*CHECK, "--cpu-offload-gb", "-1")
    assert (code, out) == (2, "")
    assert err == "llmfit: the command to check: --cpu-offload-gb -1 is not from 0 to 1,048,576.\n"


def test_sglang_offloaded_weights_leave_the_card_and_its_pool_grows_by_them(run):
    argv = ["check", "--fleet", "1xh100-80g", "--", "sglang", "serve", "--model-path",
            "Qwen/Qwen3-8B"]  # fmt: skip
    code, plain, err = run(*argv)
    assert code == 0, err
    code, out, err = run(*argv, "--cpu-offload-gb", "10")
    assert code == 0, err
    said, before = " ".join(out.split()), " ".join(plain.split())
    assert "weights 15.3 GiB" in before
    assert "weights 5.3 GiB" in said
    assert "less up to 10 GiB of its layers kept in the host's memory (--cpu-offload-gb)" in said
    # SGLang's pool is in tokens: the static share less the weights, 10 GiB more of it at
    # 147,456 B a token: 10,737,418,240 / 147,456 = 72,817.8, so 72,818 more as it floors.
    assert "KV pool: 363,841 tokens" in before
    assert "KV pool: 436,659 tokens" in said
    # Every step copies the 10 GiB up over PCIe: 5.4 tok/s for one sequence, 94.4 without.
    assert "speed: decode 94.4 tok/s for one sequence" in before
    assert "speed: decode 5.4 tok/s for one sequence" in said
    assert "not modelled" not in said
