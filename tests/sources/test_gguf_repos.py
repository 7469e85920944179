"""The real models' GGUF repositories the contract test plans (fixtures/gguf_repos.py) hold what
the real files hold: each dump's tensor count, its type counts, and the bytes llama.cpp loaded
(../shared/fixtures/gguf/*.txt, the loader's own lines)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import gguf

from llmfit.sources.gguf import read_header
from llmfit.sources.repo import load_repo

MIB = 1 << 20


def _headers(snap: Path) -> list:
    return [read_header(p) for p in sorted(snap.rglob("*.gguf"))]


def _snapshot(hub: Path, repo: str) -> Path:
    (snap,) = (hub / ("models--" + repo.replace("/", "--")) / "snapshots").iterdir()
    return snap


def test_qwen3_235b_q4_k_m_is_the_dumped_file(gguf_hub):
    # Qwen3-235B-A22B-Q4_K_M_unsloth.txt: "1131 tensors", "type f32: 471", "type q4_K: 567",
    # "type q6_K: 93", "CPU buffer size = 135562.96 MiB", three split files.
    headers = _headers(_snapshot(gguf_hub, "unsloth/Qwen3-235B-A22B-GGUF"))
    assert len(headers) == 3
    tensors = [t for h in headers for t in h.tensors]
    assert len(tensors) == 1131
    assert Counter(gguf.GGMLQuantizationType(t.type).name for t in tensors) == {
        "F32": 471,
        "Q4_K": 567,
        "Q6_K": 93,
    }
    total = sum(t.nbytes for t in tensors)
    assert total == 142_148_069_376
    assert f"{total / MIB:.2f}" == "135562.96"
    assert headers[0].get("qwen3moe.expert_count") == 128


def test_qwen3_235b_q4_k_m_model_counts_all_three_parts(gguf_hub):
    # The dump's "model params = 235.094 B", by hand from its shapes (94 layers, embedding 4,096,
    # 64 heads and 4 KV heads of 128, 128 experts of 1,536, 8 used, vocab 151,936). A layer
    # outside its experts: attn_q and attn_output 4,096 × 8,192 each, attn_k and attn_v 4,096 ×
    # 512 each, the router 4,096 × 128, norms 4,096 × 2 + 128 × 2 (q_norm, k_norm) = 71,835,904;
    # its experts 3 × 128 × 1,536 × 4,096 = 2,415,919,104; token_embd and output 151,936 × 4,096
    # each, output_norm 4,096. The first of the three parts alone holds a third of the tensors
    # (77.8B), which the model once counted as the whole.
    layer, experts = 71_835_904, 2_415_919_104
    rest = 2 * 151_936 * 4_096 + 4_096
    model = load_repo("unsloth/Qwen3-235B-A22B-GGUF").model
    assert model.params == 94 * (layer + experts) + rest == 235_093_634_560
    assert f"{model.params / 1e9:.3f}" == "235.094"
    # Active: all but the experts, and 8 of each layer's 128: 22.2B, the "A22B" of its name.
    assert model.active_params == 94 * (layer + experts * 8 // 128) + rest == 22_190_763_520


def test_gemma_3_27b_q4_0_is_the_dumped_file(gguf_hub):
    # gemma-3-27b-it-Q4_0_unsloth.txt: "808 tensors", "type f32: 373", "type q4_0: 427",
    # "type q4_1: 7", "type q6_K: 1", "CPU buffer size = 14888.20 MiB".
    (h,) = _headers(_snapshot(gguf_hub, "unsloth/gemma-3-27b-it-GGUF"))
    assert len(h.tensors) == 808
    counts = Counter(gguf.GGMLQuantizationType(t.type).name for t in h.tensors)
    assert counts == {"F32": 373, "Q4_0": 427, "Q4_1": 7, "Q6_K": 1}
    total = sum(t.nbytes for t in h.tensors)
    assert total == 15_611_411_072
    assert f"{total / MIB:.2f}" == "14888.20"
    assert h.get("gemma3.attention.sliding_window") == 1024
