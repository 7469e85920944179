"""vLLM's and SGLang's speed constants: the share of a card's peaks each reaches, and its fixed
costs, fitted per engine and card family (plan/speed.py says what each constant means).

FITTED by benchmarks/accuracy_load.py --fit to fixtures/calibration/load.jsonl and the serving
runs of speed.jsonl (copies of ../shared/calibration/): the 180 runs the model prices (vLLM 65,
SGLang 115; H100, H200, H800, B200, A100, MI300X, MI350X), each planned as `llmfit` plans it
with the run's layout pinned and compared at the run's load; least squares on the log errors of
output tokens a second a GPU, TPOT and TTFT (TTFT at half weight), a saturating loss (Cauchy),
every source weighted alike, each constant held loosely to a prior of what the kernels are known
to reach; rounded to two or three figures. A card family whose runs come from one source alone
(vLLM's A100 and B200 runs) takes its engine's Hopper efficiency; families without runs
(workstation and GeForce cards, Apple) take the engine's "default" row.

Residuals (median absolute error; docs/accuracy.md "Serving under load" has every row, the
breakdowns by engine, vendor and workload shape, and the runs the model misses with why):

| | output tok/s a GPU | TPOT | TTFT |
|---|---|---|---|
| these constants, all 180 runs | 13.9 % | 16.0 % | 33.8 % |
| leave-one-source-out | 14.0 % | 15.9 % | 33.5 % |
| leave-one-model-out | 17.2 % | 18.4 % | 35.2 % |
| dense models, these / by source held out | 10.6 / 10.9 % | 12.6 / 12.8 % | 26.8 / 26.7 % |

vLLM 0.11-0.24 and SGLang 0.5.x, as the runs used them. vLLM's weights stream at 89 % of a
card's bandwidth in decode with 51 µs a layer and 55 µs more a MoE layer, its routed experts at
69 % of that and its KV cache at 84 %; it prefills at 98 % of the tensor rate (the top of its
range: docs/accuracy.md says what that may hide), its MoE experts at 14 % of that (Triton's fused
MoE at thousands of tokens). SGLang streams at all of an H100's or H200's bandwidth (95 % of a
B200's, 72 % of an A100's, 52 % of an MI300X's) with 75 µs a layer and 60 µs more a MoE layer,
prefills at 51 % (its experts at 44 % of that).

Not fitted (no run of it): --enforce-eager's cost a layer, 510 µs, from the one eager run of
speed.jsonl (vllm#20469: Qwen3-14B-AWQ on an A100 decoding at 20.9 ms a token, 6.6 ms of it its
bytes, 40 layers; the launches overlap the GPU's work, so they are what the step waits for:
20.9 ms less the step's 0.5 and the graphed layers' 2.0 is 18.4 ms of launches beyond a graph's,
460 µs a layer over the graphed 51); a pipeline hand-off, llama.cpp's 30 µs; an all-to-all's
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
    layer_s=51e-6,
    moe_layer_s=55e-6,
    step_s=0.45e-3,
    sequence_s=53e-6,
    ttft_s=0.052,
    prefill_efficiency=0.98,
    quant_prefill_efficiency=0.98,
    attention_efficiency=0.84,
    expert_efficiency=0.69,
    expert_prefill_efficiency=0.143,
)
# vLLM's runs on cards other than Hopper come from one source each (two of A100s, GPUStack's; 21
# of B200s, one site's): those cards take Hopper's efficiency rather than a constant of their own.
VLLM: dict[str, Constants] = {
    "default": replace(_VLLM, weight_efficiency=0.89, kv_efficiency=0.89),
    "nvidia-hopper": replace(_VLLM, weight_efficiency=0.89, kv_efficiency=0.89),
}

_SGLANG = replace(
    BASE,
    layer_s=75e-6,
    moe_layer_s=60e-6,
    step_s=0.53e-3,
    sequence_s=46e-6,
    ttft_s=0.079,
    prefill_efficiency=0.51,
    quant_prefill_efficiency=0.51,
    attention_efficiency=0.86,
    expert_efficiency=0.52,
    expert_prefill_efficiency=0.44,
)
SGLANG: dict[str, Constants] = {
    "default": replace(_SGLANG, weight_efficiency=0.95, kv_efficiency=0.95),
    "nvidia-hopper": replace(_SGLANG, weight_efficiency=1.0, kv_efficiency=1.0),
    "nvidia-blackwell": replace(_SGLANG, weight_efficiency=0.95, kv_efficiency=0.95),
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
