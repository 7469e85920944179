"""llama.cpp's own buffer sizes, from real load logs, against the plan's arithmetic.

Sources: ../shared/calibration/engine-logs.jsonl (engine == "llama.cpp") and
../shared/fixtures/gguf/Meta-Llama-3.1-8B-Instruct-Q6_K.txt. Each log line is quoted beside the
number it checks; MiB are llama.cpp's, 2^20 bytes, printed to two decimals.
"""

from __future__ import annotations

from llmfit.plan.artifact import GgufLayout
from llmfit.plan.engines.llamacpp_sizes import Placement, compute_bytes, estimate
from llmfit.plan.fleet import MIB
from llmfit.plan.model import AttentionKind, LayerGroup


def layout(layers: int, kv_heads: int, vocab: int, embd: int, ff: int, embed_bytes: int = 0):
    return GgufLayout(
        layer_bytes=(0,) * layers,
        expert_bytes=(0,) * layers,
        embed_bytes=embed_bytes,
        output_bytes=0,
        tied_embeddings=False,
        kv_layout=(LayerGroup(AttentionKind.FULL, layers, kv_heads=kv_heads, head_dim=128),),
        vocab=vocab,
        embedding=embd,
        feed_forward=ff,
    )


def mib(n: int) -> float:
    return round(n / MIB, 2)


def test_glm_z1_32b_kv_and_compute_on_one_card():
    # llamacpp-glm-z1-32b-iq4xs-3090ti-32k: 61 layers, 2 KV heads × 128, vocab 151,552,
    # n_embd 6,144, n_ff 23,040; -c 32768 -fa, ub 512.
    glm = layout(61, 2, 151_552, 6144, 23_040)
    card = estimate(glm, Placement(62, 1), 32_768).cards[0]
    assert mib(card.kv_cache) == 1952.00  # "CUDA0 KV buffer size = 1952.00 MiB"
    assert mib(card.compute) == 353.00  # "CUDA0 compute buffer size = 353.00 MiB"


def test_qwen3_30b_a3b_kv_and_compute_on_one_card():
    # ikllama-qwen3-30b-a3b-iq4k-3090ti-32k: 48 layers, 4 KV heads × 128, vocab 151,936.
    qwen = layout(48, 4, 151_936, 2048, 6144)
    card = estimate(qwen, Placement(49, 1), 32_768).cards[0]
    assert mib(card.kv_cache) == 3072.00  # "CUDA0 KV buffer size = 3072.00 MiB"
    # "CUDA0 compute buffer size = 304.75 MiB": the plan counts the dense feed_forward_length
    # (6,144) where the experts' 768 is what runs, and is 8 MiB over, on the safe side.
    assert mib(card.compute) == 312.75
    assert 0 <= card.compute - 304.75 * MIB <= 8 * MIB


def test_llama_8b_keeps_token_embd_on_the_host():
    # ollama-llama-dsr1-distill-llama8b-q4km: token_embd is Q4_K, 128,256 × 4,096 / 256 × 144 B.
    q4 = layout(32, 8, 128_256, 4096, 14_336, embed_bytes=128_256 * 4096 // 256 * 144)
    e = estimate(q4, Placement(33, 1), 8192)
    assert mib(e.host.weights) == 281.81  # "CPU_Mapped model buffer size = 281.81 MiB"
    assert mib(e.cards[0].kv_cache) == 1024.00  # "CUDA0 KV buffer size = 1024.00 MiB"
    # Meta-Llama-3.1-8B-Instruct-Q6_K: token_embd Q6_K, 210 B a 256.
    q6 = layout(32, 8, 128_256, 4096, 14_336, embed_bytes=128_256 * 4096 // 256 * 210)
    assert mib(estimate(q6, Placement(33, 1), 8192).host.weights) == 410.98  # "CPU buffer size"


def test_compute_without_the_output_layer_has_no_logits():
    glm = layout(61, 2, 151_552, 6144, 23_040)
    assert compute_bytes(glm, holds_output=False) == 4 * 512 * (6144 + 23_040)
