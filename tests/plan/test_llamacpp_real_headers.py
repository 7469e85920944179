"""llama.cpp's slots and MoE knobs on real models' headers (fixtures/gguf_repos.py): the bytes a
card holds, worked by hand from the loader dumps' shapes and types and llama.cpp's own code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

QWEN = "unsloth/Qwen3-235B-A22B-GGUF"
GEMMA = "unsloth/gemma-3-27b-it-GGUF"


@pytest.fixture
def hub(gguf_hub: Path) -> Path:
    return gguf_hub


def _first(run, *args: str) -> dict:
    code, out, err = run(*args, "--engine", "llama.cpp", "--json")
    assert code == 0, err
    first: dict = json.loads(out)["options"][0]
    return first


# One layer's experts (blk.N.ffn_{gate,up,down}_exps, 128 experts of 1,536 × 4,096 each, the
# tensors llama.cpp's LLM_FFN_EXPS_REGEX keeps in RAM; the router ffn_gate_inp is not one):
# 805,306,368 elements each. Layers 0 and 1 are among the first n/8 = 11 that Q4_K_M keeps at
# Q6_K for ffn_down: gate and up Q4_K (144 B a 256), down Q6_K (210 B a 256):
# 2 × 805,306,368 / 256 × 144 + 805,306,368 / 256 × 210 = 2 × 452,984,832 + 660,602,880.
EXPERTS_OF_A_LAYER = 1_566_572_544


def test_n_cpu_moe_moves_exactly_those_layers_experts_to_ram(run):
    fleet = ("--fleet", "1xb200-180g+256g")
    whole = _first(run, QWEN, *fleet)
    two = _first(run, QWEN, *fleet, "--n-cpu-moe", "2")
    # Every layer on the one card: all 142,148,069,376 B of tensors but token_embd, which
    # llama.cpp keeps on the host (151,936 × 4,096 at Q4_K: 350,060,544 B).
    assert whole["per_card"]["weights"] == 142_148_069_376 - 350_060_544
    assert whole["host_bytes"] == 0
    assert whole["per_card"]["weights"] - two["per_card"]["weights"] == 2 * EXPERTS_OF_A_LAYER
    assert two["cpu_moe_layers"] == 2
    # The host then holds token_embd, the two layers' experts and the graph's inputs
    # (4 B × 512 × (40,960 + 4,096) = 92,274,688).
    assert two["host_bytes"] == 350_060_544 + 2 * EXPERTS_OF_A_LAYER + 92_274_688
    assert "--n-cpu-moe 2" in two["commands"][0]["shell"]


# Gemma 3 27B at --ctx-size 131,072: 62 layers, every sixth full (il % 6 == 5: ten), the other 52
# sliding over a window of 1,024; each layer's cell is 16 KV heads × 128 × 2 (K and V) × 2 B
# = 8,192 B. The full layers hold 131,072 cells however the slots share them: 10 × 131,072 ×
# 8,192 = 10,737,418,240 B.
FULL = 10 * 131_072 * 8_192
SWA_CELL_BYTES = 52 * 8_192


@pytest.mark.parametrize(
    ("words", "swa_cells", "slot_ctx"),
    [
        # llama-server's auto slots (tools/server/server.cpp: 4, kv_unified): one cache whose
        # sliding layers keep pad256(min(n_ctx, 1,024 × 4 + 512)) = 4,608 cells
        # (src/llama-kv-cache-iswa.cpp, `n_swa*(unified ? n_seq_max : 1) + n_ubatch`).
        ((), 4_608, 131_072),
        # --parallel N given: not unified, so N streams of n_ctx_seq = 131,072 / N cells each
        # (src/llama-context.cpp), each sliding layer pad256(min(n_ctx_seq, 1,024 + 512)) = 1,536
        # cells a stream: every slot adds a window of its own, 52 × 1,536 × 8,192 = 654,311,424 B.
        (("--parallel", "1"), 1_536, 131_072),
        (("--parallel", "2"), 2 * 1_536, 65_536),
        (("--parallel", "4"), 4 * 1_536, 32_768),
    ],
)
def test_slots_grow_the_sliding_layers_cache_as_llama_cpp_sizes_it(run, words, swa_cells, slot_ctx):
    o = _first(run, GEMMA, "--fleet", "1xh100-80g", *words)
    assert o["per_card"]["kv_cache"] == FULL + swa_cells * SWA_CELL_BYTES
    # The weights are the file's tensors whatever the slots (token_embd, tied, is copied to the
    # card holding the output): 15,611,411,072 B.
    assert o["per_card"]["weights"] == 15_611_411_072
    assert "--ctx-size 131072" in o["commands"][0]["shell"]
    assert o["max_context"] == slot_ctx
