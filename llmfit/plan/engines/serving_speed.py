"""vLLM's and SGLang's speed constants: the share of a card's peaks each reaches, and its fixed
costs, fitted per engine and card family (plan/speed.py says what each constant means).

FITTED by benchmarks/accuracy_load.py --fit to fixtures/calibration/load.jsonl and the serving
runs of speed.jsonl (copies of ../shared/calibration/): the 161 runs the model represents (vLLM
51, SGLang 110; H100, H200, H800, B200, A100, MI300X, MI350X), each planned as `llmfit` plans it
with the run's layout pinned and compared at the run's load; least squares on the log errors of
output tokens a second a GPU, TPOT and TTFT (TTFT at half weight), a saturating loss (Cauchy),
every source weighted alike, each constant held loosely to a prior of what the kernels are known
to reach; rounded to two or three figures. A card family whose runs come from one source alone
(vLLM's A100 and B200 runs) takes its engine's Hopper efficiency; families without runs
(workstation and GeForce cards, Apple) take the engine's "default" row.

Residuals (median absolute error; docs/accuracy.md "Serving under load" has every row, the
breakdowns by engine, vendor and workload shape, and the runs left out with why):

| | output tok/s a GPU | TPOT | TTFT |
|---|---|---|---|
| these constants, all 161 runs | 14.1 % | 15.9 % | 28.3 % |
| leave-one-source-out | 17.5 % | 18.6 % | 31.9 % |
| leave-one-model-out | 20.5 % | 23.6 % | 31.0 % |
| dense models, these / by source held out | 10.0 / 10.9 % | 12.0 / 16.1 % | 22.4 / 27.0 % |

vLLM 0.11-0.24 and SGLang 0.5.x, as the runs used them. vLLM's weights stream at 83 % of a
card's bandwidth in decode with 49 µs a layer and 54 µs more a MoE layer, its routed experts at
80 % of that and its KV cache at 68 %; it prefills at 99 % of the tensor rate (the top of its
range: docs/accuracy.md says what that may hide), its MoE experts at 15 % of that (Triton's fused
MoE at thousands of tokens). SGLang streams at all of an H100's or H200's bandwidth (94 % of a
B200's, 72 % of an A100's, 52 % of an MI300X's) with 75 µs a layer and 59 µs more a MoE layer,
prefills at 54 % (its experts at 45 % of that).

Not fitted (no run of it): --enforce-eager's cost a layer, 510 µs, from the one eager run of
speed.jsonl (vllm#20469: Qwen3-14B-AWQ on an A100 decoding at 20.9 ms a token, 6.6 ms of it its
bytes, 40 layers; the launches overlap the GPU's work, so they are what the step waits for:
20.9 ms less the step's 0.5 and the graphed layers' 2.0 is 18.4 ms of launches beyond a graph's,
460 µs a layer over the graphed 49); a pipeline hand-off, llama.cpp's 30 µs; an all-to-all's
latency, NCCL's ~25 µs over a fabric.
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
    eager_layer_s=510e-6,
    all_to_all_s=25e-6,
)

_VLLM = replace(
    BASE,
    layer_s=49e-6,
    moe_layer_s=54e-6,
    step_s=0.46e-3,
    sequence_s=29e-6,
    ttft_s=0.051,
    prefill_efficiency=0.99,
    quant_prefill_efficiency=0.99,
    attention_efficiency=0.68,
    expert_efficiency=0.80,
    expert_prefill_efficiency=0.148,
)
# vLLM's runs on cards other than Hopper come from one source each (two of A100s, GPUStack's; 21
# of B200s, one site's): those cards take Hopper's efficiency rather than a constant of their own.
VLLM: dict[str, Constants] = {
    "default": replace(_VLLM, weight_efficiency=0.83, kv_efficiency=0.83),
    "nvidia-hopper": replace(_VLLM, weight_efficiency=0.83, kv_efficiency=0.83),
}

_SGLANG = replace(
    BASE,
    layer_s=75e-6,
    moe_layer_s=59e-6,
    step_s=0.52e-3,
    sequence_s=51e-6,
    ttft_s=0.078,
    prefill_efficiency=0.54,
    quant_prefill_efficiency=0.54,
    attention_efficiency=0.81,
    expert_efficiency=0.55,
    expert_prefill_efficiency=0.45,
)
SGLANG: dict[str, Constants] = {
    "default": replace(_SGLANG, weight_efficiency=0.94, kv_efficiency=0.94),
    "nvidia-hopper": replace(_SGLANG, weight_efficiency=1.0, kv_efficiency=1.0),
    "nvidia-blackwell": replace(_SGLANG, weight_efficiency=0.94, kv_efficiency=0.94),
    "nvidia-ampere": replace(_SGLANG, weight_efficiency=0.72, kv_efficiency=0.72),
    "amd-instinct": replace(_SGLANG, weight_efficiency=0.52, kv_efficiency=0.52),
}
# vLLM has no AMD run to fit: on AMD it takes SGLang's AMD efficiency (the same ROCm kernels,
# AITER's), not NVIDIA's (which the issue measured 58 % too fast there).
VLLM["amd-instinct"] = replace(_VLLM, weight_efficiency=0.52, kv_efficiency=0.52)
TABLES: dict[str, dict[str, Constants]] = {"vllm": VLLM, "sglang": SGLANG}


def constants(engine: str, family: str) -> Constants:
    """The fitted constants of `engine` ("vllm" or "sglang") on a card family."""
    return pick(TABLES[engine], family)
