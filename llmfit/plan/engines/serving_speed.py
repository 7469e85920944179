"""vLLM's and SGLang's speed constants: the share of a card's peaks each reaches, and its fixed
costs, fitted per engine and card family (plan/speed.py says what each constant means).

FITTED by benchmarks/accuracy_load.py --fit to fixtures/calibration/load.jsonl and the serving
runs of speed.jsonl (copies of ../shared/calibration/): the 176 runs the model represents (vLLM
65, SGLang 111; H100, H200, H800, B200, A100, MI300X, MI350X), each planned as `llmfit` plans it
with the run's layout pinned and compared at the run's load; least squares on the log errors of
output tokens a second a GPU, TPOT and TTFT (TTFT at half weight), a saturating loss (Cauchy),
every source weighted alike, each constant held loosely to a prior of what the kernels are known
to reach; rounded to two or three figures. A card family whose runs come from one source alone
(vLLM's A100 and B200 runs) takes its engine's Hopper efficiency; families without runs
(workstation and GeForce cards, Apple) take the engine's "default" row.

Residuals (median absolute error; docs/accuracy.md "Serving under load" has every row and the
breakdowns by engine, vendor and workload shape):

| | output tok/s a GPU | TPOT | TTFT |
|---|---|---|---|
| these constants, all 176 runs | 16.9 % | 21.7 % | 43.8 % |
| leave-one-source-out | 19.2 % | 29.0 % | 45.1 % |
| leave-one-model-out | 24.5 % | 27.8 % | 49.8 % |
| dense models, these / by source held out | 10.8 / 14.5 % | 14.9 / 22.9 % | 31.2 / 37.4 % |

vLLM 0.11-0.24 and SGLang 0.5.x, as the runs used them. vLLM's weights stream at 77 % of a
card's bandwidth in decode with 45 µs a layer and 45 µs more a MoE layer, its KV cache at 68 % of
that; it prefills at 98 % of the tensor rate (the top of its range: docs/accuracy.md says what
that may hide), its MoE experts at 16 % of that (Triton's fused MoE at thousands of tokens).
SGLang streams at all of an H100's or H200's bandwidth (98 % of a B200's, 69 % of an A100's, 55 %
of an MI300X's) with 67 µs a layer and 72 µs more a MoE layer, prefills at 53 % (its experts at
43 % of that).

Not fitted (no run of it): --enforce-eager's cost a layer, 510 µs, from the one eager run of
speed.jsonl (vllm#20469: Qwen3-14B-AWQ on an A100 decoding at 20.9 ms a token, 6.6 ms of it its
bytes, 40 layers; the launches overlap the GPU's work, so they are what the step waits for:
20.9 ms less the step's 0.6 and the graphed layers' 1.8 is 18.5 ms of launches beyond a graph's,
465 µs a layer over the graphed 45); a pipeline hand-off, llama.cpp's 30 µs; an all-to-all's
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
    layer_s=45e-6,
    moe_layer_s=45e-6,
    step_s=0.45e-3,
    sequence_s=114e-6,
    ttft_s=0.054,
    prefill_efficiency=0.98,
    quant_prefill_efficiency=0.98,
    attention_efficiency=0.68,
    expert_efficiency=0.51,
    expert_prefill_efficiency=0.155,
)
# vLLM's runs on cards other than Hopper come from one source each (two of A100s, GPUStack's; 21
# of B200s, one site's): those cards take Hopper's efficiency rather than a constant of their own.
VLLM: dict[str, Constants] = {
    "default": replace(_VLLM, weight_efficiency=0.77, kv_efficiency=0.77),
    "nvidia-hopper": replace(_VLLM, weight_efficiency=0.77, kv_efficiency=0.77),
}

_SGLANG = replace(
    BASE,
    layer_s=67e-6,
    moe_layer_s=72e-6,
    step_s=0.51e-3,
    sequence_s=58e-6,
    ttft_s=0.057,
    prefill_efficiency=0.53,
    quant_prefill_efficiency=0.53,
    attention_efficiency=0.72,
    expert_efficiency=0.54,
    expert_prefill_efficiency=0.43,
)
SGLANG: dict[str, Constants] = {
    "default": replace(_SGLANG, weight_efficiency=0.98, kv_efficiency=0.98),
    "nvidia-hopper": replace(_SGLANG, weight_efficiency=1.0, kv_efficiency=1.0),
    "nvidia-blackwell": replace(_SGLANG, weight_efficiency=0.98, kv_efficiency=0.98),
    "nvidia-ampere": replace(_SGLANG, weight_efficiency=0.69, kv_efficiency=0.69),
    "amd-instinct": replace(_SGLANG, weight_efficiency=0.55, kv_efficiency=0.55),
}
# vLLM has no AMD run to fit: on AMD it takes SGLang's AMD efficiency (the same ROCm kernels,
# AITER's), not NVIDIA's (which the issue measured 58 % too fast there).
VLLM["amd-instinct"] = replace(_VLLM, weight_efficiency=0.55, kv_efficiency=0.55)
TABLES: dict[str, dict[str, Constants]] = {"vllm": VLLM, "sglang": SGLANG}


def constants(engine: str, family: str) -> Constants:
    """The fitted constants of `engine` ("vllm" or "sglang") on a card family."""
    return pick(TABLES[engine], family)
