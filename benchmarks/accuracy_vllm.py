"""How close llmfit's vLLM memory model comes to what vLLM printed, record by record and release by
release.

Each vLLM record of fixtures/calibration/engine-logs.jsonl whose model, card and settings are
known is planned with llmfit/plan/engines/vllm_memory.py under the release it ran (the ~0.11-era
records as 0.11), and compared with what vLLM logged: the weights a rank ("Model loading took"),
the KV budget ("Available KV cache memory"), the KV tokens and the maximum concurrency at the
record's max_model_len. Where a record gives the KV budget but not the concurrency, vLLM's own
arithmetic turns the logged budget into the concurrency it then printed (whole blocks of the
same layout), so the concurrency error is the budget error seen through the cache.

Records of releases before 0.11 (V0, 0.7-0.8) are listed apart: their engine is not modelled.
The held-out run of issue 14 (Qwen3-32B bf16, one H100, 16,000 tokens, 4.45 GiB of KV cache) is
planned the same way.

Run from the repository root: PYTHONPATH=. python benchmarks/accuracy_vllm.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfit.plan.engines.vllm_memory import (
    GIB,
    Rank,
    Settings,
    VllmMemory,
    estimate,
)
from llmfit.plan.engines.vllm_versions import VllmVersion
from llmfit.plan.fleet import REPORTED_TOTALS
from llmfit.plan.layout import Card
from llmfit.plan.model import Model
from llmfit.sources.config import load_config, model_from_config

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "fixtures" / "calibration" / "engine-logs.jsonl"
HUB = ROOT / "fixtures" / "hub"


def hub_model(repo: str) -> Model:
    folder = HUB / ("models--" + repo.replace("/", "--")) / "snapshots"
    path = next(folder.iterdir()) / "config.json"
    return model_from_config(load_config(path), path)


# The published config.json values of the records' models that the fixture cache does not hold.
QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "num_key_value_heads": 8,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-0.6B": QWEN3
    | {
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_attention_heads": 16,
        "num_hidden_layers": 28,
        "tie_word_embeddings": True,
    },
    "Qwen/Qwen3-14B": QWEN3
    | {
        "hidden_size": 5120,
        "intermediate_size": 17408,
        "num_attention_heads": 40,
        "num_hidden_layers": 40,
        "tie_word_embeddings": False,
    },
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "max_position_embeddings": 131072,
        "num_attention_heads": 12,
        "num_hidden_layers": 28,
        "num_key_value_heads": 2,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 151936,
    },
    "meta-llama/Meta-Llama-3-8B": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "max_position_embeddings": 8192,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 128256,
    },
}


def config_model(repo: str) -> Model:
    if repo in CONFIGS:
        return model_from_config(CONFIGS[repo], Path(f"{repo} (published config.json)"))
    if repo == "Qwen/Qwen3-32B":
        # Qwen3-32B bf16 is Qwen3-32B-FP8's network without the fp8 quantisation.
        cfg = load_config(
            next((HUB / "models--Qwen--Qwen3-32B-FP8/snapshots").iterdir()) / "config.json"
        )
        cfg.pop("quantization_config")
        return model_from_config(cfg, Path("Qwen/Qwen3-32B"))
    return hub_model(repo)


# Checkpoint bytes: the index's total_size where the fixtures hold it, else 2 B × the parameters
# the published config gives (bf16 checkpoints). Qwen3-0.6B stores lm_head.weight beside its tied
# embedding (1.5 GB file), which vLLM skips.
WEIGHTS = {
    "Qwen/Qwen3-0.6B": 2 * (596_049_920 + 151_936 * 1024),
    "Qwen/Qwen3-14B": 2 * 14_768_307_200,
    "Qwen/Qwen3-32B": 2 * 32_762_123_264,
    "Qwen/Qwen3-30B-A3B": 61_064_245_248,
    "meta-llama/Llama-3.1-8B-Instruct": 16_060_522_496,
    "meta-llama/Meta-Llama-3-8B": 16_060_522_496,
    "openai/gpt-oss-20b": 13_761_264_768,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": 2 * 1_777_088_000,
}

# The release each record's logs come from, as llmfit models it; None: not a modelled release.
VERSION = {
    "V1 (version not stated; ~0.11-era logs with CUDAGraph memory + --kv-cache-memory hints)": (
        "0.11"
    ),
    "V1 (2025-10)": "0.11",
    "0.19.0": "0.19",
}

CARDS = {"H100": "h100-80g", "A100": "a100-80g", "L40S": "l40s-48g", "RTX3090": "rtx3090-24g"}


@dataclass(frozen=True)
class Row:
    id: str
    version: str  # the release modelled, or what the record says when it is not one
    modelled: bool
    weights: tuple[float, float] | None = None  # (vLLM GiB, llmfit GiB)
    kv_budget: tuple[float, float] | None = None
    tokens: tuple[int, int] | None = None
    concurrency: tuple[float, float] | None = None
    fits: tuple[bool, bool] | None = None
    note: str = ""


def held_out() -> dict[str, Any]:
    return {
        "id": "held-out-qwen3-32b-h100-16k (issue 14)",
        "engine": "vllm",
        "engine_version": VERSION_KEY_011,
        "model": "Qwen/Qwen3-32B",
        "gpu": "H100-80G (79.18 GiB)",
        "tp": 1,
        "max_model_len_or_n_ctx": 16000,
        "gpu_memory_utilization": 0.9,
        "reported": {"available_kv_cache_gib": 4.45, "total_gpu_memory_gib": 79.18},
    }


VERSION_KEY_011 = next(iter(VERSION))


def plan(r: dict[str, Any], version: VllmVersion) -> tuple[Model, VllmMemory, Card, Settings]:
    rep = r["reported"]
    m = config_model(r["model"])
    family = next((v for k, v in CARDS.items() if (r.get("gpu") or "").startswith(k)), "")
    total = rep.get("total_gpu_memory_gib")
    card = Card(family, int(total * GIB) if total else REPORTED_TOTALS.get(family, 0))
    settings = Settings(
        version=version,
        gpu_memory_utilization=r.get("gpu_memory_utilization") or 0.9,
        max_model_len=r.get("max_model_len_or_n_ctx") or None,
    )
    tp = r.get("tp") or 1
    return m, estimate(m, WEIGHTS[r["model"]], Rank(tp=tp), card, settings), card, settings


def logged_concurrency(mem: VllmMemory, kv_gib: float) -> tuple[int, float]:
    """(tokens, concurrency) vLLM printed for a logged KV budget: whole blocks of the layout."""
    assert mem.layout is not None
    blocks = int(kv_gib * GIB) // mem.layout.bytes_per_block
    conc = blocks / mem.layout.blocks_per_request
    if mem.version.has("kv_tokens_from_concurrency"):
        return int(conc * mem.max_model_len), conc
    return blocks // mem.layout.groups * mem.layout.block_size, conc


def rows() -> list[Row]:
    out: list[Row] = []
    records = [json.loads(line) for line in RECORDS.read_text().splitlines()]
    for r in [*records, held_out()]:
        if r["engine"] != "vllm":
            continue
        rep = r["reported"]
        name = VERSION.get(r.get("engine_version") or "")
        if r["model"] not in WEIGHTS:
            why = "its model's config is not at hand (not in the fixtures, nor stated)"
            out.append(Row(r["id"], r.get("engine_version") or "?", False, note=why))
            continue
        version = VllmVersion.parse(name or "0.11")
        m, mem, card, settings = plan(r, version)
        w = rep.get("weights_gib_per_rank")
        weights = (w, mem.weights.total / GIB) if w else None
        if name is None:
            out.append(
                Row(
                    r["id"],
                    r.get("engine_version") or "?",
                    False,
                    weights=weights,
                    note=(
                        "tensor parallelism and release not stated"
                        if r.get("tp") is None
                        else "a release before 0.11 (V0 or early V1), not modelled; weights only"
                    ),
                )
            )
            continue
        kv = rep.get("available_kv_cache_gib")
        budget = tokens = conc = fits = None
        if kv is not None and card.total_bytes:
            budget = (kv, mem.kv_budget / GIB)
            t, c = logged_concurrency(mem, kv)
            tokens = (rep.get("kv_cache_tokens") or t, mem.kv_tokens)
            conc = (c, mem.max_concurrency)
            fits = (rep.get("status", "SUCCESS") == "SUCCESS", mem.fits)
        elif kv is not None:
            # No card: vLLM's cache arithmetic on the budget it logged.
            t, c = logged_concurrency(mem, kv)
            tokens = (rep["kv_cache_tokens"], t)
            conc = (float(rep["max_concurrency"].rstrip("x")), round(c, 2))
        out.append(Row(r["id"], str(version), True, weights, budget, tokens, conc, fits))
    return out


def pct(pair: tuple[float, float] | None) -> float | None:
    if pair is None or not pair[0]:
        return None
    return (pair[1] - pair[0]) / pair[0] * 100


def main() -> None:
    rs = rows()
    print(
        "| record | vLLM | weights GiB: vLLM / llmfit (error) | KV budget GiB: vLLM / llmfit | "
        "KV tokens: vLLM / llmfit | max concurrency: vLLM / llmfit (error) | starts: vLLM / "
        "llmfit |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rs:
        if not r.modelled:
            continue
        w = (
            f"{r.weights[0]:.4g} / {r.weights[1]:.4f} ({pct(r.weights):+.2f} %)"
            if r.weights
            else ""
        )
        b = f"{r.kv_budget[0]:.2f} / {r.kv_budget[1]:.2f}" if r.kv_budget else ""
        t = f"{r.tokens[0]:,} / {r.tokens[1]:,}" if r.tokens else ""
        c = (
            f"{r.concurrency[0]:.2f} / {r.concurrency[1]:.2f} ({pct(r.concurrency):+.2f} %)"
            if r.concurrency
            else ""
        )
        f = f"{'yes' if r.fits[0] else 'no'} / {'yes' if r.fits[1] else 'no'}" if r.fits else ""
        print(f"| {r.id} | {r.version} | {w} | {b} | {t} | {c} | {f} |")
    print()
    print("Records of releases llmfit does not model (weights only):")
    print()
    print("| record | vLLM | weights GiB: vLLM / llmfit (error) | why |")
    print("|---|---|---|---|")
    for r in rs:
        if r.modelled:
            continue
        w = (
            f"{r.weights[0]:.4g} / {r.weights[1]:.4f} ({pct(r.weights):+.2f} %)"
            if r.weights
            else ""
        )
        print(f"| {r.id} | {r.version} | {w} | {r.note} |")
    print()
    print("| release | records | mean abs. error, max concurrency | mean abs. error, weights |")
    print("|---|---|---|---|")
    for version in sorted({r.version for r in rs if r.modelled}) + ["all"]:
        sel = [r for r in rs if r.modelled and (version == "all" or r.version == version)]
        conc = [abs(e) for r in sel if (e := pct(r.concurrency)) is not None]
        wts = [abs(e) for r in (rs if version == "all" else sel) if (e := pct(r.weights))]
        mc = f"{sum(conc) / len(conc):.2f} % ({len(conc)})" if conc else "-"
        mw = f"{sum(wts) / len(wts):.2f} % ({len(wts)})" if wts else "-"
        print(f"| {version} | {len(sel)} | {mc} | {mw} |")
    errs = [e for r in rs if r.modelled and (e := pct(r.concurrency)) is not None]
    print()
    print(
        f"max concurrency: largest error {max(abs(e) for e in errs):.2f} %, most optimistic "
        f"{max(errs):+.2f} % over {len(errs)} records"
    )
    wrong = [r.id for r in rs if r.fits and r.fits[1] and not r.fits[0]]
    print()
    print(f"wrong 'fits': {len(wrong)} {wrong if wrong else ''}")


if __name__ == "__main__":
    main()
