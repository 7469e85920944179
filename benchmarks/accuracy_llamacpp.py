"""How close llmfit's llama.cpp memory model comes to what llama.cpp itself printed.

Without arguments: every llama.cpp record in fixtures/calibration/engine-logs.jsonl that states
enough inputs (the model's shapes, -c, -ub, the slots, flash attention), record by record: the
host's weights (token_embd, which llama.cpp keeps in RAM), the card's KV cache, the card's compute
buffer and the host's compute buffer, llama.cpp's figure beside llmfit's. The shapes are the
models' published ones (config.json, or the GGUF's metadata), listed in MODELS below; the weights
on the card are not compared, because the records do not carry the files' tensor types.

With --measure: also the llama.cpp runs of the engine suite (tests/engine), measured here on the
CPU with llama-cpp-python (the `validate` extra): each architecture at each context, weights, KV
and compute buffer.

Run from the repository root: PYTHONPATH=. python benchmarks/accuracy_llamacpp.py [--measure]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from llmfit.plan.artifact import GgufLayout
from llmfit.plan.engines.llamacpp_sizes import Placement, estimate, host_inputs_bytes
from llmfit.plan.model import AttentionKind, LayerGroup

MIB = 1 << 20
RECORDS = Path(__file__).resolve().parent.parent / "fixtures" / "calibration" / "engine-logs.jsonl"


@dataclass(frozen=True)
class Shape:
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    embd: int
    ff: int
    # token_embd's quant: bytes a block of 256 (Q4_K 144, IQ4_XS 136) or of 32 (Q8_0 34).
    embd_block: tuple[int, int]


# Published shapes. GLM-Z1-32B-0414 (THUDM config.json: 61 layers, 2 KV heads of 128, hidden
# 6,144, intermediate 23,040, vocab 151,552); Qwen3-30B-A3B (48 layers, 4 KV heads of 128, hidden
# 2,048, intermediate 6,144, vocab 151,936); DeepSeek-R1-Distill-Llama-8B (Llama-3.1-8B: 32
# layers, 8 KV heads of 128, 4,096, 14,336, vocab 128,256); Phi-3-mini-4k (32 layers, 32 KV heads
# of 96, 3,072, 8,192, vocab 32,064). token_embd's type is what each file's CPU buffer shows.
MODELS = {
    "llamacpp-glm-z1-32b-iq4xs-3090ti-32k": Shape(61, 2, 128, 151_552, 6144, 23_040, (256, 136)),
    "ikllama-qwen3-30b-a3b-iq4k-3090ti-32k": Shape(48, 4, 128, 151_936, 2048, 6144, (32, 34)),
    "ollama-llama-dsr1-distill-llama8b-q4km": Shape(32, 8, 128, 128_256, 4096, 14_336, (256, 144)),
    "llamacpp-phi3-mini-q4km-rtx3070": Shape(32, 32, 96, 32_064, 3072, 8192, (256, 144)),
}


def layout(s: Shape) -> GgufLayout:
    block, size = s.embd_block
    return GgufLayout(
        layer_bytes=(0,) * s.layers,
        expert_bytes=(0,) * s.layers,
        embed_bytes=s.vocab * s.embd // block * size,
        output_bytes=0,
        tied_embeddings=False,
        kv_layout=(
            LayerGroup(AttentionKind.FULL, s.layers, kv_heads=s.kv_heads, head_dim=s.head_dim),
        ),
        vocab=s.vocab,
        embedding=s.embd,
        feed_forward=s.ff,
    )


def record_rows() -> list[dict]:
    out = []
    for line in RECORDS.read_text().splitlines():
        r = json.loads(line)
        if r["engine"] != "llama.cpp" or r["id"] not in MODELS:
            continue
        s = MODELS[r["id"]]
        rep = r["reported"]
        ctx, ub = r["max_model_len_or_n_ctx"], rep["n_ubatch"]
        n_seq = rep.get("n_seq_max", 1)
        e = estimate(layout(s), Placement(s.layers + 1, 1), ctx, n_seq=n_seq, n_ubatch=ub)
        card = e.cards[0]
        host_model = rep["model_buffer_mib"].get("CPU_Mapped", rep["model_buffer_mib"].get("CPU"))
        fa = "on" if r["flash_attn"] else "off"
        setting = f"-c {ctx} -ub {ub} -np {n_seq} -fa {fa}"
        pairs = [
            ("host weights (token_embd)", host_model, e.host.weights),
            ("card KV cache", rep["kv_buffer_mib"]["CUDA0"], card.kv_cache),
            ("card compute buffer", rep["compute_buffer_mib"]["CUDA0"], card.compute),
            (
                "host compute buffer",
                rep["compute_buffer_mib"]["CUDA_Host"],
                host_inputs_bytes(layout(s), ctx, n_ubatch=ub),
            ),
        ]
        for what, engine, ours in pairs:
            out.append(
                {
                    "id": r["id"],
                    "setting": setting,
                    "what": what,
                    "engine": engine,
                    "llmfit": ours / MIB,
                    "error": ours / MIB - engine,
                    "pct": (ours / MIB - engine) / engine * 100,
                }
            )
    return out


def print_records() -> None:
    print("| record | settings | what | llama.cpp MiB | llmfit MiB | error MiB (%) |")
    print("|---|---|---|---|---|---|")
    for x in record_rows():
        print(
            f"| {x['id']} | {x['setting']} | {x['what']} | {x['engine']:.2f} | {x['llmfit']:.2f}"
            f" | {x['error']:+.2f} ({x['pct']:+.1f} %) |"
        )


def measured_rows() -> list[dict]:
    import tempfile

    from fixtures.llamacpp_run import Settings, available, measure, predict

    why = available()
    if why:
        raise SystemExit(f"--measure needs llama-cpp-python: {why}")
    from tests.engine.test_llamacpp_engine import ALL, CASES

    out = []
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, n_ctx, n_ubatch in CASES:
            if name not in paths:
                m = ALL[name]()
                paths[name] = (m.write(Path(d)), m.what)
            path, what_model = paths[name]
            s = Settings(n_ctx=n_ctx, n_ubatch=n_ubatch)
            got, want = measure(path, s), predict(path, s)
            for what, engine, ours in (
                ("weights", got.model, want.model),
                ("KV cache", got.kv, want.kv),
                ("compute buffer", got.compute, want.compute),
            ):
                out.append(
                    {
                        "arch": f"{name} ({what_model})",
                        "setting": f"-c {n_ctx} -ub {n_ubatch}",
                        "what": what,
                        "engine": engine,
                        "llmfit": ours / MIB,
                        "error": ours / MIB - engine,
                        "pct": (ours / MIB - engine) / engine * 100,
                    }
                )
    return out


def print_measured() -> None:
    """One row a run: each of weights, KV and compute as llama.cpp's MiB / llmfit's (error)."""
    print(
        "| architecture | settings | weights: llama.cpp / llmfit MiB (error) "
        "| KV cache: llama.cpp / llmfit | compute buffer: llama.cpp / llmfit |"
    )
    print("|---|---|---|---|---|")
    rows = measured_rows()
    for i in range(0, len(rows), 3):
        run = rows[i : i + 3]
        cells = [
            f"{x['engine']:.2f} / {x['llmfit']:.3f} ({x['error']:+.3f}, {x['pct']:+.1f} %)"
            for x in run
        ]
        print(f"| {run[0]['arch']} | {run[0]['setting']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    print_records()
    if "--measure" in sys.argv[1:]:
        print()
        print_measured()
