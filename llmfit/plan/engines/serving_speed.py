"""vLLM's and SGLang's speed constants: the share of a card's peaks each reaches, and its fixed
costs, fitted per engine and card architecture (plan/speed.py says what each constant means).

FITTED by benchmarks/accuracy_load.py --fit to fixtures/calibration/load.jsonl and the serving
runs of speed.jsonl (copies of ../shared/calibration/): the 180 runs the model prices (vLLM 65,
SGLang 115; H100, H200, H800, B200, A100, MI300X, MI350X), each planned as `llmfit` plans it with
the run's layout, engine release and launch flags, compared at the run's load; least squares on
the log errors of output tokens a second a GPU, TPOT and TTFT (TTFT at half weight), a saturating
loss (Cauchy), every publisher weighted alike, each constant held loosely to a prior and bounded
to a physical range (accuracy_load.py SHARED, ARCH_PRIOR); rounded to two or three figures. An
architecture whose runs come from one publisher, or none, keeps its prior.

Scored on runs the fit never saw (each publisher's runs priced by a fit without that publisher
nor any run of the same model × card family; docs/accuracy.md "Serving under load" has the split
by MoE and dense, tuned and default flags, and the model before this one scored the same way):

| | output tok/s a GPU | TPOT | TTFT |
|---|---|---|---|
| dense models (52 runs) | 9.9 % | 8.5 % | 31.5 % |
| MoE models (128 runs) | 27.8 % | 27.8 % | 44.6 % |
| all 180 | 16.9 % | 19.7 % | 39.5 % |
| these constants, fitted to all 180 | 15.2 % | 19.0 % | 35.4 % |

vLLM streams a Hopper card's weights at 72 % of its bandwidth with 83 µs a graphed layer, its
routed experts at 45 % of that, prefills at 88 % of the dense tensor rate (its grouped GEMM at
17 % of that at most); its CPU work (0.46 ms a step, 29 µs a sequence) overlaps the GPU's from
0.14. SGLang streams at 96 % of a Hopper card's bandwidth (80 % of a B200's, 79 % of an A100's,
56 % of an MI300X's), 100 µs a layer (the top of its range: its steps at few requests are slower
than their bytes, docs/accuracy.md), prefills at 54 %.

Not fitted (no run of it): --enforce-eager's launches a layer, 510 µs, from the one eager run of
speed.jsonl (vllm#20469: Qwen3-14B-AWQ on an A100 decoding at 20.9 ms a token, 6.6 ms of it its
bytes, 40 layers); a pipeline hand-off, llama.cpp's 30 µs; an all-to-all's latency, NCCL's ~25 µs
over a fabric.
"""

from __future__ import annotations

from dataclasses import replace

from llmfit.plan import cards
from llmfit.plan.speed import Constants, pick

# Architectures an engine's efficiencies are looked up by (the card table's `architecture`):
# cards of one architecture run the same kernels (MI355X is CDNA 4, not the MI300X's CDNA 3; B300
# is Blackwell Ultra, priced as Blackwell). A card of none of these takes its family's row
# (plan/cards.py FAMILIES), else its vendor's, else "default"; its own peaks and bandwidth are
# always the card table's.
ARCHITECTURES: tuple[tuple[str, str], ...] = (
    ("hopper", "nvidia-hopper"),
    ("blackwell", "nvidia-blackwell"),
    ("blackwell-ultra", "nvidia-blackwell"),
    ("ampere", "nvidia-ampere"),
    ("cdna3", "amd-cdna3"),
    ("cdna4", "amd-cdna4"),
)
_BY_ARCH = dict(ARCHITECTURES)


def architecture(key: str) -> str:
    """The architecture a card class's efficiencies are looked up by, else its family."""
    card = cards.spec(key)
    found = _BY_ARCH.get(card.architecture) if card is not None else None
    return found or cards.family(key)


# What the two engines share before their fits, and the priors the fit starts from: the prefill
# chunk the planner assumes where the engine's own is not known, pipelined decode across stages
# (virtual engines), flash attention; --enforce-eager's launches a layer (below).
BASE = Constants(
    weight_efficiency=0.8,
    kv_efficiency=0.8,
    layer_s=20e-6,
    step_s=0.5e-3,
    sequence_s=30e-6,
    hop_s=30e-6,
    prefill_efficiency=0.7,
    quant_prefill_efficiency=0.7,
    ttft_s=0.05,
    prefill_chunk=8192,  # --max-num-batched-tokens on large cards (plan/engines/vllm.py)
    decode_pipelined=True,
    eager_layer_s=510e-6,
    all_to_all_s=25e-6,
    expert_efficiency=0.8,
    expert_prefill_efficiency=0.7,
    gemm_rows=64.0,
    expert_rows=16.0,
)

# FITTED (see the module's text): each engine's shared values, then each architecture's share of
# the bandwidth its weights stream at; an architecture whose runs come from one publisher, or
# none, keeps its prior (benchmarks/accuracy_load.py ARCH_PRIOR): NVIDIA's 0.85, AMD's 0.65.
_VLLM = replace(
    BASE,
    layer_s=83e-6,
    step_s=0.464e-3,
    sequence_s=29e-6,
    ttft_s=0.0458,
    prefill_efficiency=0.88,
    quant_prefill_efficiency=0.88,
    attention_efficiency=0.93,
    expert_efficiency=0.45,
    expert_prefill_efficiency=0.174,
    gemm_rows=63.0,
    expert_rows=10.7,
)
VLLM: dict[str, Constants] = {
    "default": replace(_VLLM, weight_efficiency=0.85, kv_efficiency=0.85),
    "nvidia-hopper": replace(_VLLM, weight_efficiency=0.72, kv_efficiency=0.72),
    # vLLM's B200 and A100 runs each come from one publisher: the prior.
    "nvidia-blackwell": replace(_VLLM, weight_efficiency=0.85, kv_efficiency=0.85),
    "nvidia-ampere": replace(_VLLM, weight_efficiency=0.85, kv_efficiency=0.85),
    # No vLLM run on AMD: the AMD prior (ROCm's decode kernels).
    "amd": replace(_VLLM, weight_efficiency=0.65, kv_efficiency=0.65),
}
_SGLANG = replace(
    BASE,
    layer_s=100e-6,  # the top of its range (benchmarks/accuracy_load.py SHARED): see the text
    step_s=0.50e-3,
    sequence_s=52e-6,
    ttft_s=0.0714,
    prefill_efficiency=0.54,
    quant_prefill_efficiency=0.54,
    attention_efficiency=0.77,
    expert_efficiency=0.41,
    expert_prefill_efficiency=0.39,
    gemm_rows=72.0,
    expert_rows=16.4,
)
SGLANG: dict[str, Constants] = {
    "default": replace(_SGLANG, weight_efficiency=0.85, kv_efficiency=0.85),
    "nvidia-hopper": replace(_SGLANG, weight_efficiency=0.96, kv_efficiency=0.96),
    "nvidia-blackwell": replace(_SGLANG, weight_efficiency=0.80, kv_efficiency=0.80),
    "nvidia-ampere": replace(_SGLANG, weight_efficiency=0.79, kv_efficiency=0.79),
    "amd-cdna3": replace(_SGLANG, weight_efficiency=0.56, kv_efficiency=0.56),
    # MI350X/MI355X: one publisher's two MI350X runs; the AMD prior, not MI300X's fit.
    "amd": replace(_SGLANG, weight_efficiency=0.65, kv_efficiency=0.65),
}
TABLES: dict[str, dict[str, Constants]] = {"vllm": VLLM, "sglang": SGLANG}


def constants(engine: str, key: str) -> Constants:
    """The fitted constants of `engine` ("vllm" or "sglang") on a card class (or a family)."""
    # A key that is no card is taken for an architecture or family itself ("nvidia-hopper").
    return pick(TABLES[engine], architecture(key) if cards.spec(key) is not None else key)
