"""SGLang's --disable-cuda-graph (0.5.23: deprecated for --cuda-graph-backend-{decode,prefill}=
disabled, still taken): no graphs of either phase (arg_groups/cuda_graph_hook.py), so nothing is
kept back for them in the default --mem-fraction-static (memory_hook.py reserve_for_graph_mb),
and every step launches its kernels from the host. `llmfit check` had read it and said it
changed nothing."""

from __future__ import annotations

from llmfit.plan.engines import sglang_sizes
from llmfit.plan.engines.sglang_sizes import ServerSizes, default_reserve

CHECK = ["check", "--fleet", "1xh100-80g", "--", "sglang", "serve", "--model-path",
         "Qwen/Qwen3-8B"]  # fmt: skip


def test_no_graphs_keeps_nothing_back_for_them():
    card = sglang_sizes.smi_bytes("h100-80g", 0)
    assert card == 81_559 << 20  # nvidia-smi's total for an H100 80GB
    # 512 MiB + 1.5 MiB × 8,192 prefill tokens + 1/8 GiB for tp × pp = 12,928 MiB; the graphs
    # add 2 MiB × 256 decode sizes and 8 MiB × 58 prefill token counts (976 MiB).
    with_graphs = default_reserve(card, ServerSizes(1), mla=False)
    without = default_reserve(card, ServerSizes(1), mla=False, graphs=False)
    assert (with_graphs.reserved_mib, without.reserved_mib) == (13_904, 12_928)
    # (81,559 − 13,904) / 81,559 = 0.8295; (81,559 − 12,928) / 81,559 = 0.8415.
    assert (with_graphs.mem_fraction_static, without.mem_fraction_static) == (0.830, 0.841)
    assert not without.prefill_graphs


def test_a_command_without_graphs_is_planned_so(run):
    code, plain, err = run(*CHECK)
    assert code == 0, err
    code, out, err = run(*CHECK, "--disable-cuda-graph")
    assert code == 0, err
    before, said = " ".join(plain.split()), " ".join(out.split())
    assert "--mem-fraction-static 0.830" in before
    assert "--mem-fraction-static 0.841" in said
    assert "KV pool: 363,841 tokens" in before
    assert "KV pool: 370,137 tokens" in said
    # Eager: 36 layers × 510 µs of host launches (speed.py Constants.eager_layer_s) = 18.36 ms
    # a step, longer than its reads: 54.5 tokens a second for one sequence, where 94.4 graphed.
    assert "speed: decode 94.4 tok/s for one sequence" in before
    assert "speed: decode 54.5 tok/s for one sequence" in said
    assert "not modelled" not in said


def test_the_largest_decode_graph_is_the_one_given():
    card = sglang_sizes.smi_bytes("h100-80g", 0)
    # --max-running-requests 32 caps the default decode graphs at 32 sizes: 12,928 + 2 × 32 + 464
    # MiB for the prefill graphs = 13,456; --cuda-graph-max-bs-decode 64 is taken as given
    # (memory_hook.py caps only the default): 12,928 + 2 × 64 + 464 = 13,520 MiB,
    # (81,559 − 13,520) / 81,559 = 0.8342.
    capped = default_reserve(card, ServerSizes(1), mla=False, max_running_requests=32)
    given = default_reserve(
        card, ServerSizes(1), mla=False, max_running_requests=32, decode_max_bs=64
    )
    assert (capped.decode_max_bs, capped.reserved_mib) == (32, 13_456)
    assert (given.decode_max_bs, given.reserved_mib, given.mem_fraction_static) == (
        64, 13_520, 0.834,
    )  # fmt: skip


def test_a_command_with_its_largest_decode_graph_is_planned_so(run):
    code, out, err = run(*CHECK, "--cuda-graph-max-bs-decode", "64")
    assert code == 0, err
    said = " ".join(out.split())
    assert "--mem-fraction-static 0.834" in said
    assert "not modelled" not in said
