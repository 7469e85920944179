"""vLLM's and SGLang's speed constants: the share of a card's peaks each reaches, and its fixed
costs, fitted per engine and card family (plan/speed.py says what each constant means).

FITTED by benchmarks/accuracy_load.py --fit to fixtures/calibration/load.jsonl and the serving
runs of speed.jsonl (copies of ../shared/calibration/): the 225 runs the model represents (vLLM
114, SGLang 111; H100, H200, H800, B200, A100, MI300X, MI350X), each planned as `llmfit` plans it
with the run's layout pinned and compared at the run's load; least squares on the log errors of
output tokens a second a GPU, TPOT and TTFT (TTFT at half weight), a saturating loss (Cauchy),
every source weighted alike, each constant held loosely to a prior of what the kernels are known
to reach; rounded to two or three figures. Card families without runs (workstation and GeForce
cards, Apple) take the engine's "default" row.

Residuals (median absolute error; docs/accuracy.md "Serving under load" has every row and the
breakdowns by engine, vendor and workload shape):

| | output tok/s a GPU | TPOT | TTFT |
|---|---|---|---|
| fitted to all 225 runs | 21.2 % | 26.9 % | 44.9 % |
| leave-one-source-out | 24.6 % | 33.3 % | 45.3 % |
| leave-one-model-out | 22.8 % | 36.3 % | 48.3 % |
| dense models, fitted / by source held out | 11.4 / 11.6 % | 22.8 / 20.7 % | 36.5 / 36.7 % |

vLLM 0.11-0.24 and SGLang 0.5.x, as the runs used them. vLLM's weights stream at 66 % of an
H100's or H200's bandwidth in decode (57 % of a B200's, 98 % of an A100's) with 107 µs a layer
and 122 µs more a MoE layer; it prefills at 69 % of the tensor rate, its MoE experts at 44 % of
that (Triton's fused MoE at thousands of tokens). SGLang streams at 98 % of an H100's or H200's
(88 % of a B200's, 76 % of an A100's, 43 % of an MI300X's) with 79 µs a layer and 61 µs more a
MoE layer, prefills at 51 % (its experts at 54 % of that).

Not fitted (no run of it): --enforce-eager's cost a layer, 350 µs, from the one eager run of
speed.jsonl (vllm#20469: Qwen3-14B-AWQ on an A100 decoding at 20.9 ms a token, 6.6 ms of it its
bytes, 40 layers); a pipeline hand-off, llama.cpp's 30 µs; an all-to-all's latency, NCCL's
~25 µs over a fabric.
"""

from __future__ import annotations

from dataclasses import replace

from llmfit.plan.speed import Constants, pick

# What the two engines share before their fits: the prefill chunk the planner assumes where the
# engine's own is not known, pipelined decode across stages (virtual engines), flash attention.
BASE = Constants(
    weight_efficiency=0.8,
    kv_efficiency=0.8,
    layer_s=60e-6,
    step_s=0.5e-3,
    sequence_s=30e-6,
    hop_s=30e-6,
    prefill_efficiency=0.6,
    quant_prefill_efficiency=0.6,
    ttft_s=0.05,
    prefill_chunk=8192,  # --max-num-batched-tokens on large cards (plan/engines/vllm.py)
    decode_pipelined=True,
    eager_layer_s=350e-6,
    all_to_all_s=25e-6,
)

_VLLM = replace(
    BASE,
    layer_s=107e-6,
    moe_layer_s=122e-6,
    step_s=0.59e-3,
    sequence_s=51e-6,
    ttft_s=0.050,
    prefill_efficiency=0.69,
    quant_prefill_efficiency=0.69,
    attention_efficiency=0.99,
    expert_efficiency=0.63,
    expert_prefill_efficiency=0.44,
)
VLLM: dict[str, Constants] = {
    "default": replace(_VLLM, weight_efficiency=0.66, kv_efficiency=0.66),
    "nvidia-hopper": replace(_VLLM, weight_efficiency=0.66, kv_efficiency=0.66),
    "nvidia-blackwell": replace(_VLLM, weight_efficiency=0.57, kv_efficiency=0.57),
    "nvidia-ampere": replace(_VLLM, weight_efficiency=0.98, kv_efficiency=0.98),
}

_SGLANG = replace(
    BASE,
    layer_s=79e-6,
    moe_layer_s=61e-6,
    step_s=0.55e-3,
    sequence_s=34e-6,
    ttft_s=0.049,
    prefill_efficiency=0.51,
    quant_prefill_efficiency=0.51,
    attention_efficiency=0.80,
    expert_efficiency=0.56,
    expert_prefill_efficiency=0.54,
)
SGLANG: dict[str, Constants] = {
    "default": replace(_SGLANG, weight_efficiency=0.88, kv_efficiency=0.88),
    "nvidia-hopper": replace(_SGLANG, weight_efficiency=0.98, kv_efficiency=0.98),
    "nvidia-blackwell": replace(_SGLANG, weight_efficiency=0.88, kv_efficiency=0.88),
    "nvidia-ampere": replace(_SGLANG, weight_efficiency=0.76, kv_efficiency=0.76),
    "amd-instinct": replace(_SGLANG, weight_efficiency=0.43, kv_efficiency=0.43),
}
# vLLM has no AMD run to fit: on AMD it takes SGLang's AMD efficiency (the same ROCm kernels,
# AITER's), not NVIDIA's (which the issue measured 58 % too fast there).
VLLM["amd-instinct"] = replace(_VLLM, weight_efficiency=0.43, kv_efficiency=0.43)
TABLES: dict[str, dict[str, Constants]] = {"vllm": VLLM, "sglang": SGLANG}


def constants(engine: str, family: str) -> Constants:
    """The fitted constants of `engine` ("vllm" or "sglang") on a card family."""
    return pick(TABLES[engine], family)
