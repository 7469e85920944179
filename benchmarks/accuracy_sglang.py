"""How close llmfit's SGLang memory model comes to what SGLang itself printed, record by record.

Reads fixtures/calibration/sglang-logs.jsonl (SGLang start-ups as people pasted them, each with
its source) and, for every record whose inputs are known (the model's config, the static share,
the weights or the checkpoint they come from, and the card or the free memory SGLang measured),
predicts the KV pool SGLang sized, in tokens (`max_total_num_tokens`, or the "#tokens" of its "KV
Cache is allocated" line), and a rank's weights:

- "card": llmfit's whole path, as a plan computes it: the card table's total less
  sglang_sizes.PRE_BASELINE, times the static share, less what a rank loads (sglang.rank_weights:
  the checkpoint's parts over TP, what SGLang keeps whole, its fp32 rotary cache; the weights
  SGLang logged where the checkpoint's size is not in the fixtures), in cells of the config's
  layers (sglang_sizes.cells);
- "logged free": SGLang's rule alone: the free memory it logged at "Load weight begin" times the
  share, less the weights it logged loading, in the same cells.

The static share is the record's own where it states one; where it ran with the default, the
default of the release its log format dates it to (recorded per row below, from that release's
server_args.py), which on these cards does not depend on which card of its class it was.

Run from the repository root: PYTHONPATH=. python benchmarks/accuracy_sglang.py
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfit.plan import cards
from llmfit.plan.engines import sglang_sizes as sizes
from llmfit.plan.engines.sglang import rank_weights
from llmfit.plan.engines.vllm_weights import parts_of
from llmfit.plan.model import Model, Shape
from llmfit.sources.config import load_config, model_from_config

GIB = 1 << 30
ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "fixtures" / "calibration" / "sglang-logs.jsonl"
SRC = ROOT / "fixtures" / "src"

# Models not in the fixtures, by the fields of their config.json that size the cache.
CONFIGS: dict[str, dict[str, Any]] = {
    # deepseek-ai/DeepSeek-R1-Distill-Qwen-7B: Qwen2-7B's shape.
    "qwen2-7b": {"model_type": "qwen2", "num_hidden_layers": 28, "num_attention_heads": 28,
                 "num_key_value_heads": 4, "hidden_size": 3584, "torch_dtype": "bfloat16"},
    # Qwen/QwQ-32B: Qwen2.5-32B's shape.
    "qwq-32b": {"model_type": "qwen2", "num_hidden_layers": 64, "num_attention_heads": 40,
                "num_key_value_heads": 8, "hidden_size": 5120, "torch_dtype": "bfloat16"},
    "qwen2.5-0.5b": {"model_type": "qwen2", "num_hidden_layers": 24, "num_attention_heads": 14,
                     "num_key_value_heads": 2, "hidden_size": 896, "torch_dtype": "bfloat16"},
    "qwen3-0.6b": {"model_type": "qwen3", "num_hidden_layers": 28, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 1024,
                   "torch_dtype": "bfloat16"},
    "qwen3-14b": {"model_type": "qwen3", "num_hidden_layers": 40, "num_attention_heads": 40,
                  "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 5120,
                  "torch_dtype": "bfloat16"},
    # meta-llama/Meta-Llama-3-8B-Instruct: Llama-3.1-8B's shapes (only its rope differs).
    "llama-3-8b": {"model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "bfloat16"},
}  # fmt: skip

LLAMA_31_8B_BYTES = 16_060_522_496  # fixtures: the published index's total_size
QWEN3_30B_A3B_BYTES = 61_064_245_248  # fixtures: 2 B × 30,532,122,624 params


@dataclass(frozen=True)
class Inputs:
    """What a record leaves to be known, and where it comes from."""

    model: str  # a fixture repository ("meta-llama/Llama-3.1-8B-Instruct") or a CONFIGS key
    card: str | None  # the llmfit card class it ran on, where the record says
    share: float
    share_source: str
    # The checkpoint's bytes, where the fixtures know them (else the logged weights stand in).
    checkpoint: int | None = None
    # False for a build that is not SGLang's own (a PR branch sizing the pool otherwise): shown,
    # and kept out of the mean errors.
    stock: bool = True


INPUTS: dict[str, Inputs] = {
    "docs-send-request-llama31-8b-2025-01": Inputs(
        "meta-llama/Llama-3.1-8B-Instruct", "h100-80g", 0.88, "ServerArgs", LLAMA_31_8B_BYTES),
    "maxuhl98-thesis-llama31-8b-24gb-2025-07": Inputs(
        # 0.4.9-0.5.0's default on a 24 GB card (3090 or 4090 alike): 1 − 2.9 GiB / 24 GiB.
        "meta-llama/Llama-3.1-8B-Instruct", None, 0.879, "0.4.9 default", LLAMA_31_8B_BYTES),
    "jerryzsj-r1-distill-qwen7b-rtx3090-2025-02": Inputs(
        "qwen2-7b", "rtx3090-24g", 0.88, "ServerArgs"),
    "didierdurand-qwq32b-4xl4-2025-03": Inputs("qwq-32b", "l4-24g", 0.85, "ServerArgs"),
    "willxxy-qwen25-05b-h100nvl-shared-2026-07": Inputs(
        "qwen2.5-0.5b", None, 0.86, "ServerArgs"),
    "rtx5080-qwen3-06b-2025-08": Inputs(
        # 0.4.9-0.5.0's default under 20 GiB: 1 − 2.9 GiB / 15.92 GiB.
        "qwen3-0.6b", None, 0.818, "0.4.9 default"),
    "wsl-qwen3-06b-4gb-2025-05": Inputs("qwen3-0.6b", None, 0.88, "ServerArgs"),
    "kimi-k25-mi355x-tp8-2026-02": Inputs(
        "moonshotai/Kimi-K2-Instruct", "mi355x-288g", 0.8260405859375, "ServerArgs"),
    "augmxnt-mi300x-llama3-8b-bench-2024-10": Inputs(
        # 0.3.x's default at TP 1 (a table by TP size).
        "llama-3-8b", "mi300x-192g", 0.88, "0.3 default", LLAMA_31_8B_BYTES),
    "qwen3-14b-4x4090-tp4-2026-06": Inputs("qwen3-14b", "rtx4090-24g", 0.8, "ServerArgs"),
    "pr4760-llama31-8b-fa3-h100-2025-03": Inputs(
        # 0.4.4's default at TP 1 (the same table).
        "meta-llama/Llama-3.1-8B-Instruct", "h100-80g", 0.88, "0.4.4 default", LLAMA_31_8B_BYTES),
    "pr18263-qwen3-30b-a3b-mi355x-aiter-2026-07": Inputs(
        "Qwen/Qwen3-30B-A3B", "mi355x-288g", 0.911, "ServerArgs", QWEN3_30B_A3B_BYTES,
        stock=False),
    "kt-qwen3-30b-a3b-h100-cpu-experts": Inputs(
        "Qwen/Qwen3-30B-A3B", "h100-80g", 0.85, "command"),
}  # fmt: skip

# Records whose K and V sizes (or KV size) and tokens give SGLang's bytes a token, beyond those
# above, with the model whose config sizes it (Kimi-K2.6's attention is Kimi-K2's).
CELL_ONLY = {
    "vllm21348-qwen3-235b-fp8-4xh100-2025-07": "Qwen/Qwen3-235B-A22B-FP8",
    "kimi-k26-int4-8xh20-tp8-2026-05": "moonshotai/Kimi-K2-Instruct",
    "docs-vision-qwen25vl-7b-ci-2025-06-15": "Qwen/Qwen2.5-VL-7B-Instruct",
}

# Why each other record is left out.
LEFT_OUT = {
    "vllm21348-qwen3-235b-fp8-4xh100-2025-07": "only the KV line: neither weights nor free memory",
    "docs-vision-qwen25vl-7b-ci-2025-06-15": "CI caps the pool at 20,480 tokens",
    "docs-vision-qwen25vl-7b-ci-2025-06-17": "CI caps the pool at 20,480 tokens",
    "pr11309-dsv32exp-8xb200-dpattn-pr-2025-10": "no static share; DSA cache not modelled",
    "pr11309-dsv32exp-8xb200-dpattn-main-2025-10": "no weights or free memory; DSA cache",
    "sglang6027-deepseek-2x8xh100-dpattn-2025-05": "no static share, weights or free memory",
    "sglang7691-dsr1-mi300x-dp8-fail-2025-07": "a failed start: no pool",
    "inferencex2128-dsv4pro-fp8-8xh200-fail-2026-07": "a failed start; DeepSeek-V4 not modelled",
    "pr11716-llama70b-class-8xh200-2025-10": "no static share; model unconfirmed",
    "pr15464-mimo-v2-flash-swa-tp4-2025-12": "no static share, config or weights",
    "glm5-nvfp4-8x-rtxpro6000-2026": "DSA cache (GLM-5) not modelled",
    "qwen35-4b-rtx4090-hybrid-2026": "no pool size logged",
    "issue8538-llama4-maverick-cudagraph-2025-07": "CUDA graph memory only",
    "pr11830-qwen2-7b-class-b200-2025-11": "no static share; model unconfirmed",
    "kimi-k26-int4-8xh20-tp8-2026-05": "neither weights nor free memory logged",
    "ktransformers1870-qwen35-moe-2x4090-kt": "no static share; Qwen3.5 config not at hand",
    "dgxspark-qwen38-27b-nvfp4-gb10-2026-09": "unified memory; no weights or free memory",
    "dgxspark-dsv41-flash-3node-tp3-2026-09": "DeepSeek-V4.1's compressed attention; pool capped",
}


def model_of(name: str) -> Model:
    if name in CONFIGS:
        return model_from_config(CONFIGS[name], Path(f"<{name}>"))
    path = SRC / f"{name.replace('/', '--')}.json"
    return model_from_config(load_config(path), path)


def logged_tokens(r: dict[str, Any]) -> int | None:
    return r.get("max_total_num_tokens") or r.get("kv_tokens")


def rows() -> list[dict[str, Any]]:
    out = []
    for line in RECORDS.read_text().splitlines():
        r = json.loads(line)
        inp = INPUTS.get(r["id"])
        if inp is None:
            continue
        tp = r["tp"] or 1
        m = model_of(inp.model)
        cell = math.ceil(sizes.cells(Shape.of(m), tp, swa_pool=False).token())
        before = r["avail_before_load_gb"]
        if before is None and r["avail_after_load_gb"] is not None and r["weights_gb"]:
            before = r["avail_after_load_gb"] + r["weights_gb"]
        weights_logged = r["weights_gb"]
        if weights_logged is None and before is not None and r["avail_after_load_gb"]:
            weights_logged = before - r["avail_after_load_gb"]
        ours_weights = None
        if inp.checkpoint:
            # What a rank of the record's TP loads, as the plan counts it.
            parts = parts_of(m, inp.checkpoint, None)
            ours_weights = rank_weights(
                m, parts, 0, m.layers, True, True, sizes.ServerSizes(tp_size=tp)
            )
        tokens = logged_tokens(r)
        # The whole path: the card table's card, the checkpoint's weights where known.
        by_card = None
        spec = cards.spec(inp.card) if inp.card else None
        if spec is not None:
            w = ours_weights if ours_weights else int(weights_logged * GIB)
            pre = sizes.pre_baseline(inp.card, tp)
            by_card = (sizes.static_budget(spec.memory_bytes, inp.share, pre) - w) // cell
        # SGLang's rule on the free memory it logged and the weights it logged loading.
        by_free = None
        if before is not None and weights_logged is not None:
            by_free = (int(before * GIB * inp.share) - int(weights_logged * GIB)) // cell
        out.append(
            {
                "id": r["id"],
                "model": inp.model,
                "card": inp.card or r["gpu"]["class"],
                "tp": tp,
                "share": inp.share,
                "share_source": inp.share_source,
                "cell": cell,
                "weights_logged": weights_logged,
                "weights_ours": ours_weights / GIB if ours_weights else None,
                "tokens": tokens,
                "by_card": by_card,
                "by_free": by_free,
                "confidence": r["confidence"],
                "stock": inp.stock,
            }
        )
    return out


def cell_rows() -> list[dict[str, Any]]:
    """SGLang's bytes a token (its K + V sizes, in the GiB it prints to two places, over its
    #tokens) against llmfit's cell, for every record that logs both and whose model is known."""
    out = []
    for line in RECORDS.read_text().splitlines():
        r = json.loads(line)
        name = INPUTS[r["id"]].model if r["id"] in INPUTS else CELL_ONLY.get(r["id"])
        tokens = logged_tokens(r)
        kv = r["kv_size_gb"] or (
            r["k_size_gb"] + r["v_size_gb"] if r["k_size_gb"] and r["v_size_gb"] else None
        )
        if name is None or not tokens or kv is None:
            continue
        tp = r["tp"] or 1
        ours = math.ceil(sizes.cells(Shape.of(model_of(name)), tp, swa_pool=False).token())
        # Two decimals of GiB: ±0.005 GiB (±0.01 with K and V apart) over the tokens.
        slack = (0.005 if r["kv_size_gb"] else 0.01) * GIB / tokens
        out.append(
            {"id": r["id"], "model": name, "tp": tp, "logged": kv * GIB / tokens, "ours": ours,
             "slack": slack}
        )  # fmt: skip
    return out


def _pct(ours: int | float | None, logged: int | float | None) -> float | None:
    if ours is None or not logged:
        return None
    return (ours - logged) / logged * 100


def errors(table: list[dict[str, Any]]) -> dict[str, tuple[float, int]]:
    """Mean absolute error in percent, and how many records, of each prediction: the pools over
    the records of SGLang's own builds, the weights over all."""
    out = {}
    for key, logged in (("by_card", "tokens"), ("by_free", "tokens"),
                        ("weights_ours", "weights_logged")):  # fmt: skip
        errs = [
            abs(e)
            for r in table
            if (r["stock"] or key == "weights_ours") and (e := _pct(r[key], r[logged])) is not None
        ]
        out[key] = (sum(errs) / len(errs), len(errs))
    return out


def main() -> None:
    table = rows()
    print(
        "| record | model | card | TP | share | B a token | SGLang #tokens | "
        "llmfit from the card | llmfit from SGLang's free memory | "
        "weights GiB | llmfit GiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def cell(ours: float | None, logged: float | None, fmt: str) -> str:
        e = _pct(ours, logged)
        return "–" if ours is None else f"{ours:{fmt}} ({e:+.1f} %)" if e is not None else "?"

    for r in table:
        print(
            f"| {r['id']} | {r['model']} | {r['card']} | {r['tp']} | "
            f"{r['share']:.3f} ({r['share_source']}) | {r['cell']:,} | {r['tokens']:,} | "
            f"{cell(r['by_card'], r['tokens'], ',')} | {cell(r['by_free'], r['tokens'], ',')} | "
            f"{r['weights_logged']:.2f} | {cell(r['weights_ours'], r['weights_logged'], '.2f')} |"
        )
    print()
    for key, (mae, n) in errors(table).items():
        print(f"mean absolute error, {key}: {mae:.2f} % over {n} records")
    for key in ("by_card", "by_free"):
        errs = [e for r in table if r["stock"] and (e := _pct(r[key], r["tokens"])) is not None]
        print(
            f"{key}: largest error {max(abs(e) for e in errs):.1f} %, most optimistic "
            f"{max(errs):+.1f} % (the pool, so the sequences it holds at once) over "
            f"{len(errs)} records"
        )
    print()
    print("| record | model | TP | SGLang B a token (K + V over #tokens) | llmfit's cell | error |")
    print("|---|---|---|---|---|---|")
    for c in cell_rows():
        print(
            f"| {c['id']} | {c['model']} | {c['tp']} | {c['logged']:,.0f} ± {c['slack']:,.0f} | "
            f"{c['ours']:,} | {c['ours'] - c['logged']:+,.0f} B |"
        )
    print()
    for rid, why in LEFT_OUT.items():
        print(f"- {rid}: {why}")


if __name__ == "__main__":
    main()
