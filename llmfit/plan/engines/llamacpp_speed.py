"""llama.cpp's speed constants: the share of a card's peaks llama-server reaches, and its fixed
costs, fitted per card family (plan/speed.py says what each constant means).

FITTED by benchmarks/accuracy_speed.py --fit to fixtures/calibration/speed.jsonl (a copy of
../shared/calibration/speed.jsonl): least squares on log errors with a robust loss (soft L1),
rows weighted by their confidence (high 1, medium 0.7, low 0.4), prefill at half weight, each
constant held to a prior of what a batch-of-one GEMV kernel reaches (85 % of the bandwidth, some
tens of µs a layer); rounded to two or three figures. docs/accuracy.md ("Speed") has every row,
the medians these constants give, and their leave-one-source-out errors by quantisation.

llama-bench and ./main rows of 2023-2026 CUDA, ROCm and Metal builds (RTX 30x0/40x0, A6000,
RTX 6000 Ada, A100, P40, RX 7900 XTX, Apple M1 Ultra/M3/M3 Max). F16 weights stream at 91 % of
the card's bandwidth, block-quantized ones (k-quants, Q4_0) at 87 % (the GEMV dequantizes every
block it reads), with 98 µs a layer a token besides (kernel launches and the small-matrix slack
of a batch of one: what makes a 1B model far slower than its bytes say); without flash attention
the cache reads at 39 %. Apple GPUs reach 92 % of those bandwidth efficiencies and 98 % of the
prefill one. Prefill: 82 % of the 16-bit tensor rate for f16 weights, 71 % for block-quantized
ones. Residuals (single-sequence decode, median absolute error): 5.9 % on the 43 fitted rows,
6.9 % on the 13 held out; leave-one-source-out 10.7 % (K-quants 10.2 %, legacy quants 14.3 %,
F16 9.0 %).
"""

from __future__ import annotations

from dataclasses import replace

from llmfit.plan.speed import Constants, pick

# llama-server's defaults (tools/server/README.md, common/arg.cpp): 4 slots (-np, "auto" gives
# 4), a logical batch of 2,048 tokens (-b) computed in physical batches of 512 (-ub).
N_BATCH = 2048
N_UBATCH = 512

DEFAULT = Constants(
    weight_efficiency=0.91,
    # Block-quantized weights stream a little slower than f16 ones: mul_mat_vec_q dequantizes
    # every block it reads (ggml-cuda/mmvq.cu), where f16 weights go to a plain GEMV.
    quant_weight_efficiency=0.87,
    kv_efficiency=0.39,
    layer_s=98e-6,
    step_s=0.0,
    sequence_s=0.0,  # no llama.cpp row runs several sequences
    hop_s=30e-6,
    prefill_efficiency=0.82,
    quant_prefill_efficiency=0.71,
    ttft_s=0.0,  # llama-bench times the prompt alone; no server row to fit a fixed cost
    prefill_chunk=N_UBATCH,
    decode_pipelined=False,
)
FITTED: dict[str, Constants] = {
    "default": DEFAULT,
    "apple": replace(
        DEFAULT,
        weight_efficiency=0.91 * 0.92,
        quant_weight_efficiency=0.87 * 0.92,
        kv_efficiency=0.39 * 0.92,
        prefill_efficiency=0.82 * 0.98,
        quant_prefill_efficiency=0.71 * 0.98,
    ),
}


def constants(family: str) -> Constants:
    return pick(FITTED, family)
