"""How close llmfit's vLLM memory model comes to what vLLM itself printed, record by record.

Reads fixtures/calibration/engine-logs.jsonl (real vLLM startup figures, each with its source) and,
for every record that states the card's total, the utilisation, the weights and the KV memory,
compares the runtime overhead vLLM kept beside weights and KV cache (its usable memory less the
weights less the KV memory: activation peak + non-torch memory + CUDA graphs) with llmfit's, both
the current model and the reference planner's flat allowance. The weights fed to llmfit are vLLM's
own "Model loading took" figure, so the comparison measures the overhead model alone.

Run from the repository root: PYTHONPATH=. python benchmarks/accuracy_vllm.py
"""

from __future__ import annotations

import json
from pathlib import Path

from llmfit.plan.engines.vllm_sizes import Runtime, batched_tokens, overhead_bytes

GIB = 1 << 30
RECORDS = Path(__file__).resolve().parent.parent / "fixtures" / "calibration" / "engine-logs.jsonl"

# (vocab_size, hidden_size) from each model's config.json.
MODELS = {
    "Qwen/Qwen3-0.6B": (151_936, 1024),
    "meta-llama/Llama-3.1-8B-Instruct": (128_256, 4096),
    "meta-llama/Meta-Llama-3-8B": (128_256, 4096),
    "openai/gpt-oss-20b": (201_088, 2880),
}
# Cards by the record's own words, for vLLM's batch default (8192 tokens on >= 70 GiB non-A100).
CLASS = {"H100": "h100-80g", "RTX3090": "rtx3090-24g", "RTX4060": "rtx4060-8g", "80GB": "h100-80g"}


def rows() -> list[dict]:
    out = []
    for line in RECORDS.read_text().splitlines():
        r = json.loads(line)
        if r["engine"] != "vllm":
            continue
        rep = r["reported"]
        total, util = rep.get("total_gpu_memory_gib"), r.get("gpu_memory_utilization")
        weights = rep.get("weights_gib_per_rank")
        kv = rep.get("available_kv_cache_gib", rep.get("kv_cache_size_gib"))
        if None in (total, util, weights, kv):
            continue
        usable = total * util
        actual = usable - weights - kv
        card = int(total * GIB)
        gpu_class = next((v for k, v in CLASS.items() if (r["gpu"] or "").startswith(k)), "")
        runtime = None
        if r["model"] in MODELS:
            vocab, hidden = MODELS[r["model"]]
            runtime = Runtime(batched_tokens(card, gpu_class), vocab, hidden)
        w = int(weights * GIB)
        ours = overhead_bytes(w, runtime, r["tp"] or 1) / GIB
        flat = overhead_bytes(w) / GIB
        out.append(
            {
                "id": r["id"],
                "era": "V1" if "V1" in r["engine_version"] else "V0",
                "actual": actual,
                "ours": ours,
                "flat": flat,
                "kv": kv,
                "ours_kv": usable - weights - ours,
                "tokens": runtime.batched_tokens if runtime else None,
            }
        )
    return out


def main() -> None:
    print(
        "| record | vLLM | batched tokens | vLLM overhead GiB | llmfit GiB (error) | "
        "reference 2 GiB + 10 % (error) | vLLM KV GiB | llmfit KV GiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows():
        print(
            f"| {r['id']} | {r['era']} | {r['tokens'] or '?'} | {r['actual']:.2f} | "
            f"{r['ours']:.2f} ({r['ours'] - r['actual']:+.2f}) | "
            f"{r['flat']:.2f} ({r['flat'] - r['actual']:+.2f}) | {r['kv']:.2f} | "
            f"{r['ours_kv']:.2f} |"
        )


if __name__ == "__main__":
    main()
