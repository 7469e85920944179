"""Derive llmfit/data/kernel_curves.json from aiconfigurator's measured kernel tables (opt-in).

Run once, by hand; llmfit and its tests never import this script or aiconfigurator:

    pip download aiconfigurator-core==0.12.0 --no-deps -d /tmp/aic-wheel
    (cd /tmp/aic-wheel && unzip -q -o aiconfigurator_core-0.12.0-*.whl)
    python -m venv /tmp/aic && /tmp/aic/bin/pip install pandas pyarrow   # to read parquet
    /tmp/aic/bin/python benchmarks/derive_kernel_curves.py /tmp/aic-wheel

aiconfigurator 0.12.0 (Apache-2.0; its measured tables ship in the aiconfigurator-core wheel
it depends on) holds, per system, kernel latencies measured under each engine:
aiconfigurator_core/systems/data/<system>/<op>/<backend>/<version>/*.parquet. Latencies are
milliseconds; communication `message_size` is in elements of the dtype (16-bit: the models call
`CustomAllReduce(name, layers, hidden_size, tp)`, a token's hidden vector, and NCCL's 8-GPU
all-reduce of 2^28 elements in 2.04 ms on H200 is a bus bandwidth of 460 GB/s, NVLink's 450 one
way, which as bytes it could not be).

Every efficiency is the one definition the serving model reads (llmfit/plan/curves.py):

    efficiency = roofline time / measured time,
    roofline time = max(bytes / memory_bandwidth, FLOPs / dense peak at the dtype),

with the bandwidth and peaks of llmfit's own card table (llmfit/data/cards.toml) for the card
the system is, clamped to (0, 1]. Where several kernels of one engine were measured for one
shape, the fastest is kept (the one a tuned engine runs). Curves are medians over the shapes of
typical LLM layers at each point of a log grid.

The grouped GEMM is also kept kernel by kernel ("moe_kernels": {kernel: {dtype: curve}}, whole
experts): each row's `kernel_source` named by the kernel family it measured (KERNELS below), so a
plan prices a MoE's experts by the kernel its engine runs at its default flags
(llmfit/data/moe_kernels.toml), not by the fastest measured.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from llmfit.plan.cards import BY_KEY, CardSpec  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "llmfit" / "data" / "kernel_curves.json"
VERSION = "0.12.0"
DATA = "aiconfigurator_core/systems/data"

# aiconfigurator's system → llmfit's card. b60 (Intel Arc Pro B60) is not in llmfit's table.
SYSTEMS = {
    "h100_sxm": "h100-80g", "h200_sxm": "h200-141g", "b200_sxm": "b200-180g",
    "b300_sxm": "b300-288g", "gb200": "gb200-186g", "gb300": "gb300-288g",
    "a100_sxm": "a100-80g", "l40s": "l40s-48g", "rtx_pro_6000_server": "rtxpro6000-96g",
}  # fmt: skip
# The versions the issue names (vLLM 0.24, SGLang 0.5.14), else the newest with the table.
PREFERRED = {"vllm": "0.24.0", "sglang": "0.5.14"}

# aiconfigurator dtype → (llmfit curve key, weight bytes, activation bytes, peak field).
DTYPES = {
    "bfloat16": ("bf16", 2.0, 2.0, "bf16_flops"),
    "fp8": ("fp8", 1.0, 1.0, "fp8_flops"),
    "fp8_block": ("fp8_block", 1.0, 1.0, "fp8_flops"),
    "nvfp4": ("fp4", 0.5, 0.5, "fp4_flops"),
    "w4a16_mxfp4": ("w4a16", 0.5, 2.0, "bf16_flops"),
    "int4_wo": ("w4a16", 0.5, 2.0, "bf16_flops"),
    "w4a8_mxfp4_mxfp8": ("w4a8", 0.5, 1.0, "fp8_flops"),
}
# aiconfigurator's kernel_source → the kernel family it measured, first match (substrings). The
# TRT-LLM-gen kernels' "modular" rows are the variant vLLM runs behind all-to-all kernels
# (DeepEP); at default flags it runs the "monolithic" one, so modular rows are left out. SGLang's
# w4a16_mxfp4 rows labelled "sglang_fused_moe_triton" (gpt-oss's shapes on Hopper and Ada) are
# taken at their label, Triton's fused_moe: the label does not say they are the triton_kernels
# runner SGLang runs gpt-oss with there, which vLLM's "oaitriton" rows name (at 2.5-3 times the
# speed of SGLang's rows on the same card and shapes).
KERNELS = (
    ("modular", None),
    ("marlin", "marlin"),
    ("oaitriton", "triton_kernels"),
    ("flashinfer_trtllm", "flashinfer_trtllm"),
    ("flashinfer_cutlass", "flashinfer_cutlass"),
    ("xpu", None),
    ("vllm_mxfp4_moe", None),  # vLLM 0.19's label, backend not named (0.24's tables are read)
    ("triton", "triton"),
    ("vllm_fused_moe", "triton"),  # vLLM 0.14-0.22's label for its Triton fused_moe
)
# The kernel tables' dtype names where they differ from DTYPES' (an MXFP4 checkpoint is kept
# apart from an INT4 one: the same bytes, not always the same kernel).
KERNEL_DTYPES = {"w4a16_mxfp4": "mxfp4"}
GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
MOE_X = tuple(2.0**e for e in range(-3, 13))  # tokens per expert, 1/8 .. 4096
# Tensor-parallel widths a MoE's experts are cut to (each its own curve, "moe_sliced").
MOE_SLICES = (2, 4, 8, 16)
DECODE_X = tuple(4**e for e in range(3, 14))  # batch × context tokens, 64 .. 67M
PREFILL_X = (16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
# MLA's latent cache a token (DeepSeek-V3: kv_lora_rank 512 + rope 64), read by every head.
MLA_LATENT, MLA_V = 576, 512

clamped = {"points": 0, "of": 0}
files: list[str] = []


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def table(root: Path, system: str, op: str, backend: str, name: str) -> pd.DataFrame | None:
    base = root / DATA / system / op / backend
    if not base.is_dir():
        return None
    versions = sorted((p.name for p in base.iterdir()), key=version_key, reverse=True)
    pref = PREFERRED.get(backend)
    if pref in versions:
        versions.remove(pref)
        versions.insert(0, pref)
    for v in versions:
        f = base / v / name
        if f.is_file():
            files.append(str(f.relative_to(root)))
            return pd.read_parquet(f)
    return None


def efficiency(roofline_s: float, measured_ms: float) -> float:
    clamped["of"] += 1
    e = roofline_s / (measured_ms * 1e-3)
    if e > 1:
        clamped["points"] += 1
        return 1.0
    return e


def roofline(card: CardSpec, nbytes: float, flops: float, peak: str) -> float | None:
    rate = getattr(card, peak)
    if rate is None:
        return None
    return max(nbytes / card.memory_bandwidth, flops / rate)


def binned(points: list[tuple[float, float]], grid: tuple[float, ...], width: float) -> list:
    """Median efficiency of the points within `width` octaves of each grid point (3 or more)."""
    out = []
    for g in grid:
        near = [e for x, e in points if abs(math.log2(x) - math.log2(g)) <= width]
        if len(near) >= 3:
            out.append([g if g < 1 or g != int(g) else int(g), round(statistics.median(near), 4)])
    return out


def where(df: pd.DataFrame, **equal: object) -> pd.DataFrame:
    """The rows whose columns hold these values; a column an older table lacks is no filter
    (its one value was the default: no window, bf16 cache, step 0)."""
    for col, value in equal.items():
        if col in df.columns:
            df = df[df[col] == value]
    return df


def fastest(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.groupby(keys, as_index=False)["latency"].min()


def gemm(card: CardSpec, df: pd.DataFrame) -> dict:
    df = df[(df.n >= 2048) & (df.k >= 2048) & df.m.isin(GEMM_M)]
    out: dict[str, list] = {}
    for dtype, rows in fastest(df, ["gemm_dtype", "m", "n", "k"]).groupby("gemm_dtype"):
        if dtype not in DTYPES:
            continue
        key, wb, ab, peak = DTYPES[dtype]
        by_m = defaultdict(list)
        for r in rows.itertuples():
            nbytes = r.n * r.k * wb + r.m * r.k * ab + r.m * r.n * 2
            t = roofline(card, nbytes, 2.0 * r.m * r.n * r.k, peak)
            if t is not None:
                by_m[r.m].append(efficiency(t, r.latency))
        curve = [[m, round(statistics.median(by_m[m]), 4)] for m in GEMM_M if by_m[m]]
        if len(curve) >= 4:
            out[key] = curve
    return out


def moe(card: CardSpec, df: pd.DataFrame, slices: int = 1, width: float = 0.5) -> dict:
    # One GPU holding every expert (moe_tp 1, ep 1), tokens spread evenly: what a grouped GEMM
    # costs against the tokens each expert gets. With `slices` > 1, one GPU of a tensor-parallel
    # MoE (moe_tp `slices`, ep 1): every expert cut to inter_size / slices columns, as vLLM's
    # and SGLang's MoE runs without expert parallelism; the thin slices reach far less of the
    # bandwidth (Qwen3-235B's shape on a B200 under SGLang at one token: 0.66 whole, 0.24 at
    # moe_tp 8).
    df = where(df, moe_tp_size=slices, moe_ep_size=1, distribution="balanced")
    keys = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts"]
    out: dict[str, list] = {}
    for dtype, rows in fastest(df, keys).groupby("moe_dtype"):
        if dtype not in DTYPES:
            continue
        key, wb, ab, peak = DTYPES[dtype]
        pts = []
        for r in rows.itertuples():
            routed = r.num_tokens * r.topk
            active = min(r.num_experts, routed)
            inter = r.inter_size / slices  # the columns of each expert this GPU holds
            # gate and up (2·h·i) and down (h·i) of each expert any token reaches
            weights = active * 3 * r.hidden_size * inter * wb
            nbytes = weights + r.num_tokens * r.hidden_size * (ab + 2)
            t = roofline(card, nbytes, 2.0 * routed * 3 * r.hidden_size * inter, peak)
            if t is not None:
                pts.append((routed / r.num_experts, efficiency(t, r.latency)))
        curve = binned(pts, MOE_X, width)
        if len(curve) >= 4:
            out.setdefault(key, curve)
    return out


def kernel_of(source: str) -> str | None:
    """The kernel family a table's kernel_source measured (None: left out)."""
    return next((k for sub, k in KERNELS if sub in source), None)


def moe_kernels(card: CardSpec, df: pd.DataFrame) -> dict:
    """{kernel: {dtype: curve}}: the whole experts' grouped GEMM (moe_tp 1, ep 1, balanced) of
    each kernel family the table measured, as `moe` derives it from the fastest."""
    df = where(df, moe_tp_size=1, moe_ep_size=1, distribution="balanced")
    if "kernel_source" not in df.columns:
        return {}
    fam = [kernel_of(s) for s in df.kernel_source]
    df = df.assign(kernel=fam).dropna(subset=["kernel"])
    out: dict[str, dict] = {}
    for kernel, rows in df.groupby("kernel"):
        for dtype, some in rows.groupby("moe_dtype"):
            if dtype not in DTYPES:
                continue
            key = KERNEL_DTYPES.get(dtype, DTYPES[dtype][0])
            # A kernel measured on one shape (Marlin's INT4 on Kimi-K2's, 27 token counts an
            # octave apart) has too few points within half an octave of the grid: a whole one.
            some = some.drop(columns=["kernel"])
            got = moe(card, some) or moe(card, some, width=1.0)
            curve = next(iter(got.values()), None)
            if curve:
                out.setdefault(str(kernel), {})[key] = curve
    return out


def attention_decode(card: CardSpec, df: pd.DataFrame) -> list:
    df = where(df, window_size=0, kv_cache_dtype="bfloat16")
    keys = ["batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim"]
    pts = []
    for r in fastest(df, keys).itertuples():
        ctx = r.isl + r.step  # the tokens each sequence's cache holds at this step
        nbytes = r.batch_size * ctx * r.num_key_value_heads * r.head_dim * 2 * 2
        nbytes += r.batch_size * r.num_heads * r.head_dim * 2 * 2
        flops = 4.0 * r.batch_size * ctx * r.num_heads * r.head_dim
        t = roofline(card, nbytes, flops, "bf16_flops")
        if t is not None:
            pts.append((r.batch_size * ctx, efficiency(t, r.latency)))
    return binned(pts, DECODE_X, 1.0)


def attention_prefill(card: CardSpec, df: pd.DataFrame) -> list:
    df = where(df, window_size=0, kv_cache_dtype="bfloat16", step=0)
    keys = ["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim"]
    pts = []
    for r in fastest(df, keys).itertuples():
        # causal: QK and PV each 2·s²·d a head, halved
        flops = 2.0 * r.batch_size * r.isl * r.isl * r.num_heads * r.head_dim
        nbytes = (
            r.batch_size * r.isl * (2 * r.num_heads + 2 * r.num_key_value_heads) * r.head_dim * 2
        )
        t = roofline(card, nbytes, flops, "bf16_flops")
        if t is not None:
            pts.append((r.isl, efficiency(t, r.latency)))
    return binned(pts, PREFILL_X, 0.25)


def mla_decode(card: CardSpec, df: pd.DataFrame) -> list:
    df = where(df, kv_cache_dtype="bfloat16")
    pts = []
    for r in fastest(df, ["batch_size", "isl", "step", "num_heads"]).itertuples():
        ctx = r.isl + r.step
        nbytes = r.batch_size * ctx * MLA_LATENT * 2
        flops = 2.0 * r.batch_size * ctx * r.num_heads * (MLA_LATENT + MLA_V)
        t = roofline(card, nbytes, flops, "bf16_flops")
        if t is not None:
            pts.append((r.batch_size * ctx, efficiency(t, r.latency)))
    return binned(pts, DECODE_X, 1.0)


def collective(frames: list[pd.DataFrame]) -> dict:
    """{"2": [[bytes, seconds], …], …}: the fastest measured of the frames at each size (16-bit
    elements × 2 bytes), every fourth size (a factor of 4 apart)."""
    df = pd.concat(frames)
    out: dict[str, list] = {}
    for n, rows in fastest(df, ["num_gpus", "message_size"]).groupby("num_gpus"):
        pts = [
            [int(r.message_size * 2), float(f"{r.latency * 1e-3:.4g}")]
            for r in rows.sort_values("message_size").itertuples()
            if int(math.log2(r.message_size)) % 2 == 0
        ]
        out[str(int(n))] = pts
    return out


def lower_quartile(values: list[float]) -> float:
    return round(statistics.quantiles(values, n=4, method="inclusive")[0], 4)


def prior_curve(curves: list[list]) -> list:
    """At each grid point most of the curves reach, their lower quartile."""
    at: dict[float, list[float]] = defaultdict(list)
    for curve in curves:
        for x, e in curve:
            at[x].append(e)
    most = max(len(v) for v in at.values())
    return [[x, lower_quartile(at[x])] for x in sorted(at) if len(at[x]) >= max(3, most // 2)]


def priors(cards: dict[str, dict]) -> dict[str, object]:
    """Curves for a card of no architecture a table covers (AMD, Apple, Turing, …): at each
    point the lower quartile of what the covered cards reach under either engine (per dtype for
    GEMM and MoE), so such a card is priced no faster than three in four measured ones."""
    every = [got for card in cards.values() for got in card["backends"].values()]
    out: dict[str, object] = {}
    for kind in ("gemm", "moe"):
        # fp8_block is left to fp8's prior: vLLM 0.24's DeepGEMM block-scaled GEMM on Blackwell
        # takes 0.16-0.18 ms at any m up to 4096 (b200_sxm gemm_perf, n = k = 4096), 1-3 % of
        # the roofline, which would make every uncovered card's fp8_block prior that slow.
        dtypes = sorted({d for got in every for d in got.get(kind, {})} - {"fp8_block"})
        by = {
            d: prior_curve([got[kind][d] for got in every if d in got.get(kind, {})])
            for d in dtypes
        }
        out[kind] = {d: c for d, c in by.items() if len(c) >= 4}
    for kind in ("attention_decode", "attention_prefill", "mla_decode"):
        out[kind] = prior_curve([got[kind] for got in every if kind in got])
    return out


def main(root: Path) -> None:
    cards: dict[str, dict] = {}
    for system, key in SYSTEMS.items():
        card = BY_KEY[key]
        nccl = table(root, system, "comm", "nccl", "nccl_perf.parquet")
        half = nccl[nccl.nccl_dtype == "half"] if nccl is not None else None
        backends = {}
        for backend in ("vllm", "sglang"):
            got: dict[str, object] = {}
            if (g := table(root, system, "gemm", backend, "gemm_perf.parquet")) is not None:
                got["gemm"] = gemm(card, g)
            if (m := table(root, system, "moe", backend, "moe_perf.parquet")) is not None:
                got["moe"] = moe(card, m)
                if by_kernel := moe_kernels(card, m):
                    got["moe_kernels"] = by_kernel
                sliced = {str(n): c for n in MOE_SLICES if (c := moe(card, m, n))}
                if sliced:
                    got["moe_sliced"] = sliced
            gen = table(root, system, "attention", backend, "generation_attention_perf.parquet")
            if gen is not None:
                got["attention_decode"] = attention_decode(card, gen)
            ctx = table(root, system, "attention", backend, "context_attention_perf.parquet")
            if ctx is not None:
                got["attention_prefill"] = attention_prefill(card, ctx)
            mla = table(root, system, "mla", backend, "generation_mla_perf.parquet")
            if mla is not None:
                got["mla_decode"] = mla_decode(card, mla)
            ar = table(root, system, "comm", backend, "custom_allreduce_perf.parquet")
            frames = [f for f in (ar,) if f is not None]
            if half is not None:
                frames.append(half[half.op_name == "all_reduce"])
            if frames:
                got["allreduce"] = collective(frames)
            if half is not None and (half.op_name == "alltoall").any():
                got["alltoall"] = collective([half[half.op_name == "alltoall"]])
            got = {k: v for k, v in got.items() if v}
            if got:
                backends[backend] = got
        if backends:
            cards[key] = {"system": system, "backends": backends}
    doc = {
        "priors": priors(cards),
        "source": {
            "package": "aiconfigurator",
            "version": VERSION,
            "licence": "Apache-2.0",
            "files": sorted(set(files)),
            "derived_by": "benchmarks/derive_kernel_curves.py",
        },
        "definition": (
            "efficiency = roofline time / measured time; roofline time = max(bytes / the card's "
            "datasheet memory bandwidth, FLOPs / its dense peak at the dtype), from llmfit's "
            "card table; clamped to (0, 1]"
        ),
        "clamped": clamped,
        "cards": cards,
    }
    OUT.write_text(json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{OUT}: {OUT.stat().st_size:,} bytes, {len(cards)} cards; "
          f"{clamped['points']:,} of {clamped['of']:,} points clamped to 1")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/aic-src"))
