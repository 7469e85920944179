"""How close llmfit's serving model comes to measured serving runs, and the fit of its constants.

Every row of fixtures/calibration/load.jsonl (a copy of ../shared/calibration/load.jsonl: vLLM
and SGLang `bench serve`-style runs with their sources) is planned as `llmfit` plans it: the
row's model from its config (fixtures/calibration/configs, copies of the shared fixtures), its
checkpoint's bytes at its precision, the row's cards as an inline fleet, the row's engine and
exact layout pinned (--tp, --dp, --ep), its workload (mean input and output lengths, its
concurrency or rate). The option's serving estimate is then compared with what the row
measured: output tokens a second a GPU, TPOT and TTFT (the mean where the row gives one, else
its median, else the figure it gives without saying which).

A row the model cannot represent is listed with why, never dropped silently: speculative
decoding (its TPOT counts accepted drafts), prefill/decode disaggregation (priced apart by
accuracy_disagg.py),
a model whose config is not at hand, a layout llmfit does not plan (with the engine's reason).

Load kinds (the shared README): `max_concurrency` with more prompts than the concurrency is a
closed loop in steady state (load.at_concurrency); with as many prompts as the concurrency, or
`burst`, one wave: every prompt arrives at once, is prefilled, then all decode together (`wave`
below); `request_rate` is Poisson arrivals (load.at_rate).

Without arguments: the tables with the constants in llmfit/plan/engines/serving_speed.py. With
--fit: re-derive the constants (scipy least squares on log errors, soft L1), print them, and the
leave-one-source-out and leave-one-model-out errors (each source's, or model's, rows predicted by
a fit that never saw them). --rows prints every row. numpy and scipy are needed for --fit only.

--fit --save PATH keeps each run's never-seen estimate for aiconfigurator_compare.py --estimates.
--fit also prints the MoE runs never seen scored without each of the groups furthest off
(GAP_GROUPS: one publisher's runs of a release or backend no other measured) and without all of
them: where the gap to the bar is (docs/accuracy.md "Where the gap is").

--curves prices every step by the card's measured kernel curves where a table covers it (the
step model's SpeedInputs.curves), --curves-experts only the routed experts' grouped GEMM (what
plans do where serving_speed.toml sets `expert_curves`, and then the default here); --fit then
fits their few constants too (CURVE_SHARED, and with --curves CURVE_FAMILY): how
docs/accuracy.md measured them against the fitted shares. --sliced-experts prices each run's
experts by the grouped GEMM measured for experts cut as the run cut them (over its
tensor-parallel cards, unless its launch names expert parallelism), not whole.
--experts-by-kernel=vllm,sglang (with --curves-experts) prices the listed engines' experts by the
grouped GEMM of the kernel the engine runs at its default flags (llmfit/data/moe_kernels.toml,
the run's model, card, checkpoint and expert parallelism), not the fastest measured for the
dtype; as shipped, plans do so for the engines the file's `engines` names (vLLM).

--kernels-a-layer prices a layer's fixed cost as the kernels it launches in a graphed decode step
(plan/kernels.py, from the model's structure) at a fitted cost a kernel (`kernel_s`), in place of
`layer_s` and `moe_layer_s`: measured, not shipped (docs/accuracy.md "Tried after this round, and
not shipped": closer on every run fitted and on AMD's, further on the MoE runs never seen).
--kernels-a-layer is the default where serving_speed.toml prices a kernel (`kernel_s`);
--layer-constants then fits `layer_s` and `moe_layer_s` instead.
--kernels-by-backend counts them by the kernels the run's engine picks on its card for its
checkpoint (plan/engines/layer_backends.py: TRT-LLM-gen's attention on SM100, the routed experts'
kernel of llmfit/data/moe_kernels.toml), with the same fit: measured, not shipped (docs/accuracy.md
"A layer's kernels by the backends the engine picks"). --kernels-engines=vllm prices the listed
engines' layers by their kernels, the others' by `layer_s` and `moe_layer_s` (measured, not
shipped: "A burst through vLLM's API server").

A wave of prompts sent at once reaches vLLM's scheduler one API-server turn apart (`ttft_s`), as
the shipped constants say (serving_speed.toml `serial_frontend`); --serial-engines=vllm,sglang
(or none) prices the listed engines' so, --serial=X a share X of `ttft_s`.

--split-decode prices the runs launched with SGLang's Triton attention backend by the grid of its
split-KV decode (speed.SplitDecode): each block reads its split of the cache at a fitted rate, at
most one block a multiprocessor (measured, not shipped: docs/accuracy.md "SGLang's Triton
decode, block by block").

Where no measured grouped GEMM prices the routed experts (AMD cards, MXFP4 experts before
Blackwell), SGLang's NVIDIA cards take the share vLLM's fit gives the same kernel and its own
share is fitted on its AMD runs (BY_VENDOR); --experts-by-vendor=fit fits SGLang's NVIDIA share on
its NVIDIA runs instead, =one one share for every card (how docs/accuracy.md compared them).
--prefill-by-vendor gives SGLang's NVIDIA cards vLLM's prefill share of that kernel as well.

--prior=X fits with the priors held at strength X, not PRIOR (0.5). --nested=X,Y,… prints the
runs never seen with the strength chosen in each fold, without the fold's runs: for each
publisher held out (with its cells), each strength listed is scored by leave-publisher-out (with
cells) on the other publishers' runs alone, and the fold is fitted at the best (slow: one fit a
publisher, strength and fold, one at a time). --physical-priors holds a layer's fixed costs to
priors from the kernels it launches (plan/kernels.py) at 5 µs each: 55 µs a layer, 20 µs more a
MoE layer, not 20 µs and 10 µs. --from-weak runs each fit twice, from the priors and from the
fit at strength 0.1, and keeps the lower cost; --starts=N from the priors and from N - 1 points
spread over the bounds, keeping the lowest. --pool=a,b,… holds SGLang's listed constants to
vLLM's fit in the same fold, not to the generic priors. docs/accuracy.md "The priors'
strength, chosen without the runs it is scored on" and "The fit's other knobs, measured with it"
have what they measured. FOLDS_AT_ONCE=1 runs the folds one at
a time (2 by default).

Run from the repository root: PYTHONPATH=. python benchmarks/accuracy_load.py [--fit] [--rows]
[--curves] [--experts-by-vendor=vllm|fit|one] [--experts-by-kernel=vllm,sglang|none]
[--kernels-a-layer] [--kernels-by-backend] [--kernels-engines=vllm,sglang|none]
[--serial-engines=vllm,sglang|none] [--serial=X] [--split-decode] [--prior=X]
[--nested=X,Y,…] [--physical-priors] [--from-weak] [--starts=N] [--pool=a,b,…]
[--prefill-by-vendor]
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llmfit.plan import cards, curves, load, speed
from llmfit.plan.artifact import Artifact
from llmfit.plan.engines import expert_kernels, layer_backends, serving_speed
from llmfit.plan.engines import vllm_weights as vm
from llmfit.plan.engines.serving import expert_kernel
from llmfit.plan.engines.sglang_options import SglangOptions
from llmfit.plan.engines.vllm_options import VllmOptions
from llmfit.plan.engines.vllm_versions import NEWEST
from llmfit.plan.kernels import layer_kernels
from llmfit.plan.model import AttentionKind, LayerGroup, Model, ModelShapes
from llmfit.plan.planner import plan
from llmfit.plan.settings import Pins, PlanSettings, Workload
from llmfit.sources.config import load_config, model_from_config
from llmfit.sources.fleet import resolve_fleet

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "fixtures" / "calibration" / "load.jsonl"
SPEED = ROOT / "fixtures" / "calibration" / "speed.jsonl"
CONFIGS = ROOT / "fixtures" / "calibration" / "configs"
# The project's own fixture configs, for speed.jsonl's serving rows' models.
SOURCES = ROOT / "fixtures" / "src"

# Repositories whose config is a sibling's: the same architecture at another precision or
# release (GLM-4.6 and 4.7 are GLM-4.5's 355B architecture; MiniMax-M2 is M2.5's).
SIBLINGS: dict[str, tuple[str, str | None]] = {
    "zai-org/GLM-4.6-FP8": ("zai-org/GLM-4.7-FP8", "fp8"),
    "zai-org/GLM-4.6": ("zai-org/GLM-4.7-FP8", "bf16"),
    "zai-org/GLM-4.7": ("zai-org/GLM-4.7-FP8", "bf16"),
    "MiniMaxAI/MiniMax-M2": ("MiniMaxAI/MiniMax-M2.5", None),
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": ("Qwen/Qwen3-235B-A22B-Instruct-2507", "fp8"),
    "Qwen/Qwen3-14B-AWQ": ("Qwen/Qwen3-14B", "int4"),
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8": ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                                                  "fp8"),
    # speed.jsonl's serving rows: the same architectures as the fixture configs'.
    "meta-llama/Llama-3.1-70B": ("meta-llama/Meta-Llama-3.1-70B", "bf16"),
    "deepseek-ai/DeepSeek-R1-0528": ("deepseek-ai/DeepSeek-R1", "fp8"),
}  # fmt: skip

# Models the config reader does not read as they are (kept out, with why).
UNREAD = {
    "moonshotai/Kimi-Linear-48B-A3B-Instruct": "its KDA linear-attention layers are read as MLA",
}

# Bytes a linear weight takes at a checkpoint's precision (block and group scales included:
# fp8 blocks of 128 × 128 carry a 4-byte scale; int4 groups of 32 a bf16 scale).
WIDTH = {"bf16": 2.0, "fp8": 1.0 + 4 / 128**2, "int4": 0.5 + 2 / 32, "mxfp4": 4.25 / 8}


def card_of(gpu: str) -> str | None:
    """The card class a row's GPU is, by the words it uses."""
    for words, key in (("H200", "h200-141g"), ("H100", "h100-80g"), ("H800", "h800-80g"),
                       ("B200", "b200-180g"), ("A100", "a100-80g"), ("MI300X", "mi300x-192g"),
                       ("MI350X", "mi350x-288g"), ("MI355X", "mi355x-288g")):  # fmt: skip
        if words in gpu:
            return key
    return None


def _mla(model: Model, cfg: dict) -> Model:
    """A config with MLA's low-rank KV (kv_lora_rank) that the reader took for full attention
    (GLM-4.7-Flash's Glm4MoeLite, GLM-5's GlmMoeDsa): its layers as MLA, its latent cached."""
    text = cfg.get("text_config", cfg)
    rank, rope = text.get("kv_lora_rank"), text.get("qk_rope_head_dim")
    if not rank or any(g.kind is AttentionKind.MLA for g in model.layer_groups):
        return model
    latent = rank + rope
    shapes = replace(
        model.shapes or ModelShapes(),
        layer_kinds=("mla",) * model.layers,
        q_lora_rank=text.get("q_lora_rank") or 0,
        kv_lora_rank=rank,
        qk_nope_head_dim=text.get("qk_nope_head_dim") or 0,
        qk_rope_head_dim=rope,
        v_head_dim=text.get("v_head_dim") or 0,
    )
    group = LayerGroup(AttentionKind.MLA, model.layers, latent_dim=latent)
    return replace(model, layer_groups=(group,), kv_heads=1, head_dim=latent, shapes=shapes)


@dataclass(frozen=True)
class Checkpoint:
    model: Model
    precision: str  # "bf16", "fp8", "int4", "mxfp4"
    bytes: int


def checkpoint(repo: str, stated: str) -> Checkpoint | str:
    """The row's model and its checkpoint's bytes, or why there is none."""
    if repo in UNREAD:
        return UNREAD[repo]
    name, precision = SIBLINGS.get(repo, (repo, None))
    path = CONFIGS / f"{name.replace('/', '--')}.json"
    if not path.exists():
        path = SOURCES / f"{name.replace('/', '--')}.json"
    if not path.exists():
        return "its config is not at hand (not in the shared fixtures)"
    cfg = load_config(path)
    model = _mla(model_from_config(cfg, path), cfg)
    text = cfg.get("text_config", cfg)
    if model.is_moe and not model.experts_active and text.get("top_k_experts"):
        # Gemma 4 names its experts a token "top_k_experts", which the reader does not read.
        model = replace(model, experts_active=text["top_k_experts"])
    if precision is None:
        q = (model.quantization or "").lower()
        words = stated.upper()
        precision = (
            "mxfp4" if q == "mxfp4" or "MXFP4" in words
            else "int4" if "INT4" in words or "AWQ" in words or q in ("compressed-tensors", "awq")
            else "fp8" if q.startswith("fp8") or "FP8" in words
            else "bf16"
        )  # fmt: skip
    # Parameters from the config, layer by layer (vLLM's own count), and the bytes: 16-bit
    # embedding, head, norms and router gates; the linear weights at the checkpoint's width
    # (gpt-oss: its mxfp4 experts, vm.parts_of's own rule).
    h, vocab = model.hidden_size or 0, model.vocab_size or 0
    tied = bool(model.shapes and model.shapes.tied_embeddings)
    rows = [vm.layer_params(model, i) for i in range(model.layers)]
    total = sum(r[0] for r in rows) + vocab * h * (1 if tied else 2)
    experts = sum(r[1] for r in rows)
    sixteen = sum(r[3] for r in rows) + vocab * h * (1 if tied else 2)
    if precision == "mxfp4":
        nbytes = int(2 * (total - experts) + WIDTH["mxfp4"] * experts)
    else:
        nbytes = int(2 * sixteen + WIDTH[precision] * (total - sixteen))
    active = None
    if model.is_moe and model.experts and model.experts_active:
        active = total - experts * (model.experts - model.experts_active) // model.experts
    if model.model_type == "nemotron_h" and model.is_moe:
        return (
            f"vLLM's parameter count of its layers finds {total / 1e9:.1f}B of its 31.6B "
            "(the hybrid's MoE layers are not counted), so its bytes are not known"
        )
    model = replace(model, params=total, active_params=active)
    if precision == "fp8" and not model.quantization:
        model = replace(model, quantization="fp8")
    return Checkpoint(model, precision, nbytes)


def _mean_len(spec: dict) -> float | None:
    return spec.get("mean") or spec.get("nominal")


def _first(m: dict, keys: tuple[str, ...]) -> tuple[str, float] | None:
    for k in keys:
        if m.get(k) is not None:
            return k, float(m[k])
    return None


@dataclass
class Row:
    raw: dict
    source: str  # the repository (or site) the row comes from: what leave-one-source-out leaves
    model: str
    engine: str
    card: str
    count: int
    tp: int
    dp: int
    ep: bool | None
    input_len: int
    output_len: int
    kind: str  # "closed", "wave", "rate"
    load: float  # concurrency, prompts in the wave, or requests a second
    measured: dict[str, float]  # "per_gpu", "tpot", "ttft" (seconds for the latencies)
    stats: dict[str, str] = field(default_factory=dict)  # which statistic each latency is
    # Every request of the run has the same lengths (--ignore-eos, a range ratio of 1): a closed
    # loop then runs in lockstep waves, all its requests ending and starting together.
    lockstep: bool = False
    # Output lengths drawn uniformly from [1, N] (SGLang's bench_serving at a range ratio of 0):
    # N; 0 where they are fixed or follow a dataset.
    spread: int = 0
    replica: load.Replica | None = None
    gpus: int = 0  # cards of the option planned (the row's count)

    @property
    def family(self) -> str:
        """The card's architecture, what the constants are looked up by."""
        return serving_speed.architecture(self.card)

    @property
    def publisher(self) -> str:
        """Who published the run: a repository (every InferenceX file, the SGLang cookbook, the
        SGLang docs, GPUStack, llm-benchmaxxing, dstack, DataCrunch …) or a site."""
        return self.source

    @property
    def cell(self) -> str:
        """The model × card family the run measured: held out whole with its publisher."""
        return f"{self.model}|{cards.family(self.card)}"

    @property
    def moe(self) -> bool:
        return bool(self.replica and self.replica.inputs.experts)

    @property
    def tuned(self) -> bool:
        """Whether the run's launch names a flag that changes its speed: fp8 KV cache, DP
        attention, CUDA-graph sizes, torch.compile, chunk or batch sizes, expert parallelism, an
        all-to-all backend. Else it ran at the engine's defaults (an attention backend a model
        needs is not a tuning)."""
        if "fp8" in (self.raw["precision"].get("kv_cache") or "").lower():
            return True
        if self.raw.get("dp_attention"):
            return True
        text = launch_text(self.raw)
        return any(f in text for f in TUNING_FLAGS)


# --leave-out: leave out the runs their sources' own account says measured something the model
# does not represent (SGLang's Kimi-K2.5 under load, llm-benchmaxxing's 1,024-token vLLM runs),
# to report the errors without them too. They are priced and fitted by default: a fit with them
# generalises better to the other runs (docs/accuracy.md, "Serving under load").
LEAVE_OUT = "--leave-out" in sys.argv

# Rows priced, but with a measure left out, and why.
PARTLY: list[tuple[dict, str]] = []


# Launch flags that change a run's speed: a run naming any is "tuned", else it ran at defaults.
TUNING_FLAGS = (
    "--kv-cache-dtype", "--enable-dp-attention", "--cuda-graph-max-bs", "--cuda-graph-bs",
    "--enable-torch-compile", "--chunked-prefill-size", "--max-num-batched-tokens",
    "--max-running-requests", "--max-num-seqs", "--moe-a2a-backend", "--enable-expert-parallel",
    "--ep-size", "--ep ", "--async-scheduling", "--compilation-config",
)  # fmt: skip


# Launch flags that turn expert parallelism on.
EP_FLAGS = ("--enable-expert-parallel", "--ep-size", "--ep ", "--expert-parallel-size", " -ep ",
            "deepep")  # fmt: skip


def launch_text(r: dict) -> str:
    """What the row says of how its server was launched (its source detail and notes)."""
    return f"{r.get('source_detail') or ''} {r.get('notes') or ''} "


def _flag(text: str, flag: str) -> int | None:
    """The integer a launch gives `flag`, if it gives one."""
    m = re.search(re.escape(flag) + r"[ =]+([0-9]+)\b", text)
    return int(m.group(1)) if m else None


def engine_options(r: dict) -> tuple[object, ...]:
    """The engine options the row's launch ran with, as llmfit's knobs: the vLLM release (its
    async-scheduling default), the flags that turn the CPU/GPU overlap off or on, the batch and
    chunk sizes. Flags the row does not state are the engine's defaults."""
    text = launch_text(r)
    if r["engine"] == "vllm":
        version = None
        stated = r.get("engine_version") or ""
        m = re.search(r"\bv?0\.([0-9]{1,2})\.([0-9]{1,2})\b", stated)
        if m and 11 <= int(m.group(1)) <= NEWEST.minor:
            version = f"0.{m.group(1)}"
        dated = re.search(r"not stated \(runs dated (20[0-9]{2})([0-9]{2})([0-9]{2})", stated)
        if dated and version is None:
            # The newest release out on the day the runs were made (a pip install then).
            day = "-".join(dated.groups())
            out = [minor for minor, first in VLLM_RELEASED.items() if first <= day]
            version = f"0.{max(out)}" if out else None
        a = True if "--async-scheduling" in text else None
        if "--no-async-scheduling" in text:
            a = False
        return (VllmOptions(version=version, async_scheduling=a,
                            max_num_seqs=_flag(text, "--max-num-seqs"),
                            max_num_batched_tokens=_flag(text, "--max-num-batched-tokens"),
                            api_server_count=_flag(text, "--api-server-count"),
                            enforce_eager="--enforce-eager" in text),)  # fmt: skip
    m = re.search(r"--mem-fraction-static[ =]+(0?\.[0-9]+)", text)
    return (SglangOptions(disable_overlap_schedule="--disable-overlap-schedule" in text,
                          mem_fraction_static=float(m.group(1)) if m else None,
                          chunked_prefill_size=_flag(text, "--chunked-prefill-size"),
                          max_running_requests=_flag(text, "--max-running-requests")),)  # fmt: skip


# The day each vLLM minor release was first on the package index (pypi.org/pypi/vllm/json, the
# earliest upload_time of its files), for runs that state a date and no release.
VLLM_RELEASED = {
    11: "2025-10-04", 12: "2025-12-03", 13: "2025-12-19", 14: "2026-01-20", 15: "2026-01-29",
    16: "2026-02-26", 17: "2026-03-07", 18: "2026-03-20", 19: "2026-04-03", 20: "2026-04-27",
    21: "2026-05-15", 22: "2026-05-29", 23: "2026-06-13", 24: "2026-06-30", 25: "2026-07-11",
    26: "2026-07-25", 27: "2026-08-10", 28: "2026-08-26", 29: "2026-09-09", 30: "2026-09-22",
    31: "2026-10-05", 32: "2026-10-18", 33: "2026-11-02", 34: "2026-11-16",
}  # fmt: skip


def source_of(url: str) -> str:
    parts = url.split("/")
    return "/".join(parts[3:5]) if "github.com" in url else parts[2]


def parse(r: dict) -> Row | str:
    """A row as the benchmark prices it, or why it cannot be."""
    if (r.get("spec_decoding") or "none") != "none":
        return "speculative decoding: its TPOT counts accepted drafts, which llmfit does not model"
    if r.get("pd_disaggregation"):
        return "prefill/decode disaggregation: separate pools, priced by accuracy_disagg.py"
    card = card_of(r["gpu"])
    if card is None:
        return f"card {r['gpu']!r} is not in the card table"
    i, o = _mean_len(r["input_len"]), _mean_len(r["output_len"])
    if not i or not o:
        return "its input or output length is not stated"
    m = r["metrics"]
    measured: dict[str, float] = {"per_gpu": float(m["output_tok_s_per_gpu"])}
    stats = {}
    for what, keys in (("tpot", ("tpot_ms_mean", "tpot_ms_median", "tpot_ms")),
                       ("ttft", ("ttft_ms_mean", "ttft_ms_median", "ttft_ms"))):  # fmt: skip
        got = _first(m, keys)
        if got:
            measured[what] = got[1] / 1000
            stats[what] = got[0].rsplit("_", 1)[-1] if got[0].count("_") > 1 else "unstated"
    if "token_position_decode_slo" in r["source"]:
        # InferenceX's experimental token-position sweep (PR #709, a folder its authors mark
        # work in progress): its median TTFT of a 1k prompt is 0.45-5 s at 4 in flight and flat
        # in the concurrency, ten times its prefill on these cards and what no other source
        # shows (GPUStack's vLLM runs: 62-88 ms at 4 in flight); its TPOT reaches 1.4 s at 64
        # in flight (Qwen3.5-397B, 16k prompts). In a closed loop the throughput follows from
        # those: the sweep holds its requests in some way the rows do not state.
        return (
            "InferenceX's work-in-progress token-position sweep (PR #709): TTFT ten times its "
            "prefill and flat in the concurrency, TPOT up to 1.4 s; its closed-loop throughput "
            "follows from them (see accuracy_load.py)"
        )
    if LEAVE_OUT and "not a clean scaling point" in (r.get("notes") or ""):
        # The source's own words on SGLang's Kimi-K2.5 under load: its output throughput is flat
        # from 16 to 100 in flight and its TPOT grows 7x (9 ms alone, 365 ms at 100), where the
        # bytes a step reads grow less than 2x; a kernel or capacity limit no step model prices.
        return (
            "the source marks it capacity- or kernel-limited, not a clean scaling point: output "
            "throughput flat from 16 to 100 in flight, TPOT 7x (see accuracy_load.py)"
        )
    if LEAVE_OUT and "llm-benchmaxxing" in r["source"] and r["input_len"].get("nominal") == 1024:
        # Each of this source's 14 configurations was run at 1,024, 4,096, 8,192 and 15,000-token
        # prompts; at 1,024 its TTFT sits 0.3-1.6 s above the line through the same
        # configuration's three longer runs (Qwen3-32B on 8 H200s at TP 8: 1,229 ms, where the
        # 4k-15k runs' 0.61 ms a prompt token gives 470), and its TPOT and throughput are off
        # with it: a cost the longer runs do not pay (the first run on a fresh server: kernels
        # compiled or tuned for new shapes). The source leaves its SGLang 1,024-token runs out
        # for the same reason ("multi-second TTFT at 1k input", its notes).
        return (
            "this source's 1,024-token runs: TTFT 0.3-1.6 s above the line through the same "
            "configuration's 4k, 8k and 15k runs, a cost they do not pay (see accuracy_load.py)"
        )
    kind = r["load_kind"]
    n = r.get("num_prompts")
    if "guidellm" in (r.get("notes") or "") and "tpot" in measured:
        # guidellm's TPOT, as the row's notes define it, amortises the time to first token over
        # the output and its median reads near 0 from chunked streaming (GPUStack's Qwen3.5-9B
        # at 1000 in / 2000 out: 0.33 ms mean, 0.03 ms median, below one read of its weights).
        del measured["tpot"], stats["tpot"]
        PARTLY.append((r, "TPOT: guidellm's, which amortises TTFT over the output and reads "
                          "near 0 from chunked streaming (the row's notes)"))  # fmt: skip
    peak = m.get("peak_concurrent_requests")
    if kind == "request_rate" and n and peak and peak >= n:
        # The client had every prompt in flight at once, whatever rate it was asked for (GPUStack's
        # Qwen3.5-35B-A3B "at 1 req/s": 200 requests in 58 s, 200 in flight): a burst.
        kind = "burst"
    fixed = all("fixed" in (r[k].get("distribution") or "") or "ratio 1" in
                (r[k].get("distribution") or "") for k in ("input_len", "output_len"))  # fmt: skip
    if not fixed and (
        kind == "burst" or kind == "request_rate" and float(r["request_rate"]) >= 100
    ):
        return (
            "a one-off burst of requests whose lengths vary: its duration, and so its throughput, "
            "is set by the longest answers' tail, which the row does not state"
        )
    if '"low-latency"' in (r.get("notes") or "") and "qwen3.6-benchmarks" in r["source"]:
        return (
            "the page's low-latency recipe (flags not stated): its dense rows decode faster than "
            "their card reads the weights once (Qwen3.6-27B bf16 at 4.3-7.4 ms a token, 54 GB), "
            "so it speculates"
        )
    c = r.get("concurrency")
    if kind == "request_rate" and n and peak and peak < n and float(r["request_rate"]) >= 100:
        # Every prompt due within a second or so, but never more than `peak` in flight: the
        # client capped them. guidellm 0.4-0.5 holds a constant-rate run to 512 requests in
        # flight unless told otherwise (guidellm/settings.py `Settings.max_concurrency`, which
        # the scheduler takes where the strategy sets no limit); GPUStack's runs at 1,000 a
        # second peak at exactly 512. Its TTFT counts from the request's send, after its slot
        # came (guidellm/schemas/request_stats.py `time_to_first_token_ms`, from
        # `request_start`), as bench_serving's from inside the semaphore: a closed loop at
        # `peak`, its first `peak` prompts at once.
        kind, c = "max_concurrency", peak
    if kind == "max_concurrency":
        kind, amount = ("wave", float(c)) if n is not None and n <= c else ("closed", float(c))
    elif kind == "burst":
        kind, amount = "wave", float(n or r.get("observed_max_concurrency") or 0)
    elif kind == "request_rate":
        kind, amount = "rate", float(r["request_rate"])
    else:
        return f"load kind {kind!r} is not one the benchmark knows"
    if not amount:
        return "its load is not stated"
    # Poisson arrivals below the rate at which the parse above counts a run as a burst (every
    # prompt within a second or so: GPUStack's guidellm runs at 1,000 a second), or a closed
    # loop whose lengths vary.
    steady = kind == "rate" and amount < 100 or kind == "closed" and not fixed
    if steady and m.get("ttft_ms_median") is not None:
        # A steady state's TTFT: the median where the run gives one, priced as a median
        # (load.ttft_quantile). A mean over a few requests carries any one request's one-off
        # cost whole: the SGLang cookbook's MiniMax-M2 on 4 MI300X at one request, 4,529 ms mean
        # and 385 median over 10 requests (one ~40 s: kernels compiled for a shape not seen
        # before); MiniMax-M2.5 on 8 B200s at 16 in flight, 305 ms mean, 107 median. A wave's or
        # a burst's TTFTs are priced as their mean (each request's place in the queue), and
        # keep the run's mean.
        measured["ttft"] = float(m["ttft_ms_median"]) / 1000
        stats["ttft"] = "median"
    tp = r.get("tp") or 1
    dp = r.get("dp") or 1
    ep = bool(r.get("ep")) if r.get("ep") is not None else None
    if SLICED and ep is None and dp == 1 and not any(f in launch_text(r) for f in EP_FLAGS):
        # A run whose launch names no expert parallelism ran without it (vLLM's
        # --enable-expert-parallel and SGLang's --ep-size are off by default): its experts are
        # cut over the tensor-parallel cards, which the step model prices apart from whole
        # experts (speed.SpeedInputs.expert_slices). llmfit's own plans turn it on, and plan a
        # MoE's data-parallel ranks only with it: those runs keep it.
        ep = False
    if r.get("dp_attention"):
        # SGLang's --tp T --dp D --enable-dp-attention: D attention ranks of T / D cards each,
        # the MoE over all T.
        tp, dp, ep = max(tp // dp, 1), dp, True
    return Row(
        raw=r, source=source_of(r["source"]), model=r["model"], engine=r["engine"], card=card,
        count=r["gpu_count"], tp=tp, dp=dp, ep=ep, input_len=round(i), output_len=round(o),
        kind=kind, load=amount, measured=measured, stats=stats, lockstep=fixed,
        spread=_spread(r["output_len"]),
    )  # fmt: skip


def _spread(spec: dict) -> int:
    """N where a row's output lengths are drawn from [1, N]: SGLang's bench_serving with a range
    ratio of 0, stated or its default (the row's distribution says which); else 0."""
    d, nominal, mean = spec.get("distribution") or "", spec.get("nominal"), spec.get("mean")
    uniform = "[1, N]" in d or "range-ratio 0.0" in d or "range ratio 0" in d
    # Draws from [1, N] average (N + 1) / 2 (EOS only shortens them): a row whose realised mean
    # is near N (SGLang's docs pages, 1,000 of 1,000) did not draw them so, whatever it says.
    if not uniform or not nominal or (mean and mean > 0.75 * nominal):
        return 0
    return int(nominal)


def plan_row(row: Row) -> str | None:
    """Plan the row's layout as llmfit does; keep its replica. None, or why it has none."""
    got = checkpoint(row.model, row.raw["precision"]["weights"])
    if isinstance(got, str):
        return got
    model = got.model
    per_node = min(row.count, 8)
    nodes = max(row.count // per_node, 1)
    fleet = resolve_fleet(f"{nodes}x{per_node}x{row.card}@ib0" if nodes > 1 else
                          f"{per_node}x{row.card}")  # fmt: skip
    need = row.input_len + row.output_len
    trained = model.max_context or 32768
    context = max(min(trained, 32768), need)
    kv = row.raw["precision"].get("kv_cache") or ""
    quant = {"bf16": None, "fp8": "fp8", "int4": "int4", "mxfp4": "mxfp4"}[got.precision]
    art = Artifact("safetensors", "safetensors", got.bytes, quant=quant, params=model.params)
    pins = Pins(tp=row.tp, dp=row.dp, ep=row.ep if model.is_moe else None,
                pp=1 if nodes == 1 else None)  # fmt: skip
    settings = PlanSettings(
        context=context, precision="stored", engines=(row.engine,), pins=pins,
        every_layout=True, kv_cache_dtype="fp8" if "fp8" in kv.lower() else "auto",
        workload=Workload("row", row.input_len, row.output_len, named=True, ttft_s=None,
                          tpot_s=None),
    ).with_options(*engine_options(row.raw))  # fmt: skip
    try:
        p = plan(model, [art], fleet, settings)
    except ValueError as e:
        return f"llmfit does not plan it: {e}"
    options = [o for o in p.options if o.gpus == row.count and o.serving is not None]
    if not options:
        why = next((r.reason for r in p.rejected if r.reason), "")
        miss = next((r for r in p.rejected if r.need), None)
        if miss and not why:
            why = f"it needs {miss.need / 2**30:.1f} GiB of {miss.have / 2**30:.1f} a card"
        return f"llmfit does not plan this layout ({why or 'no option'})"
    o = options[0]
    assert o.serving is not None and o.serving.replica is not None
    row.replica = o.serving.replica
    if BY_BACKEND:
        row.replica = replace(row.replica, inputs=backend_kernels(row, model, row.replica.inputs))
    if SPLIT_DECODE and row.engine == "sglang" and TRITON.search(launch_text(row.raw)):
        sd = split_decode(model, row.tp, row.card, launch_text(row.raw))
        row.replica = replace(row.replica, inputs=replace(row.replica.inputs, split_decode=sd))
    row.gpus = o.gpus
    return None


# --split-decode: the runs launched with SGLang's Triton attention backend decode through its
# split-KV kernel (speed.SplitDecode): a grid of sequences × head blocks × splits, each block
# streaming its split of the cache at a fitted rate (`split_kv_gbs`), the card's
# multiprocessors running at most one block each. Measured, not shipped (docs/accuracy.md
# "SGLang's Triton decode, block by block"): the slow MLA path these runs ran (SGLang 0.5.7)
# was rewritten in sgl-project/sglang#20479 (2026-03), before the 0.5.23 plans model.
SPLIT_DECODE = "--split-decode" in sys.argv
TRITON = re.compile(r"--(?:decode-)?attention-backend[ =]+triton\b")
# Multiprocessors (SMs, CUs) of the cards such runs ran on: the makers' figures.
MULTIPROCESSORS = {"b200-180g": 148, "h200-141g": 132, "h100-80g": 132, "a100-80g": 108,
                   "mi300x-192g": 304, "mi350x-288g": 256, "mi355x-288g": 256}  # fmt: skip


def split_decode(model: Model, tp: int, card: str, text: str) -> speed.SplitDecode:
    """SGLang's Triton decode grid for `model` at `tp` on `card` (srt/layers/attention/
    triton_ops/decode_attention.py `_decode_grouped_att_m_fwd`: ceil(H / min(16, H / KV))
    head blocks, each reading one KV head's cache; an MLA layer's latent is one KV head), its
    splits capped at --triton-attention-num-kv-splits (8, and 16 on ROCm: server_args.py
    `_handle_amd_specifics`)."""
    heads = max(model.attention_heads // tp, 1)
    mla = any(g.kind is AttentionKind.MLA for g in model.layer_groups)
    kv = 1 if mla else max(model.kv_heads // tp, 1)
    blocks = -(-heads // min(16, max(heads // kv, 1)))
    most = _flag(text, "--triton-attention-num-kv-splits") or (16 if card.startswith("mi") else 8)
    return speed.SplitDecode(heads=blocks, reads=blocks / kv, max_splits=most,
                             units=MULTIPROCESSORS[card])  # fmt: skip


# An engine's front end (its HTTP handler, chat template and tokenizer: vLLM's API server,
# SGLang's TokenizerManager, each one process) takes one request after another, so prompts sent
# at once reach the scheduler `ttft_s` apart (the fixed cost before a first token, fitted on the
# runs' TTFTs) and a wave of short prompts is prefilled as they arrive, not as fast as the card
# goes: Scicom's waves of 100 prompts of 1,024 tokens took 0.5-1.3 s more to a first token than
# their prefill, those of 15,000 tokens none. On where the shipped constants say so
# (serving_speed.toml `serial_frontend`), as plans price a burst (plan/load.py `burst`);
# --serial=X prices a share X of `ttft_s` so (docs/accuracy.md "Tried after
# this round"). --serial-engines=vllm,sglang (or none) for others than the shipped ones.
_SERIAL = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--serial=")]
SERIAL = float(_SERIAL[0]) if _SERIAL else 1.0
_SERIAL_ENGINES = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--serial-engines=")]
SERIAL_ENGINES = (
    frozenset(e for e in _SERIAL_ENGINES[0].split(",") if e != "none")
    if _SERIAL_ENGINES
    else frozenset(
        e for e, t in serving_speed.TABLES.items() if any(k.serial_frontend for k in t.values())
    )
)


def _inverse_decodes(row_spread: int, out: int) -> float:
    """The mean over a run's requests of 1 / (O − 1), what a wait before a request's decode
    counts in its TPOT: 1 / (O − 1) with fixed lengths; with SGLang's bench_serving at a range
    ratio of 0 (`row_spread` N: lengths drawn uniformly from [1, N], bench_serving.py
    `sample_random_requests`), over the requests of 2 tokens or more (it computes a TPOT only
    for those): H(N − 1) / (N − 1), 2.6 times 1 / (N/2 − 1) at N = 128."""
    if row_spread < 3:
        return 1 / max(out - 1, 1)
    n = row_spread - 1
    return sum(1 / i for i in range(1, n + 1)) / n


def _waves(
    r: load.Replica, w: Workload, n: float, lockstep: bool, closed: bool = False,
    spread: int = 0, serial: float = 0.0,
) -> tuple[float, float, float]:  # fmt: skip
    """`n` prompts arriving at once on one replica: (output tok/s, TPOT, TTFT), means over the
    requests. The engine admits what its batch and pool hold; those prompts are prefilled (in
    steps or batches of its budget), then all decode together, a request's TPOT counting the
    prefills after its own first token. Of the prompts past what it admits, with fixed lengths
    (`lockstep`) every request of a wave ends together and the next wave starts as one; with
    lengths that vary they refill places as they free, a closed loop at what it admits."""
    k = r.inputs.constants
    held = max(min(n, load.admits(r, w)), 1.0)
    _, per_s = load.prefill_service(r, w, 0.0)
    plain = held * w.input_len / per_s
    # Prompts sent at once reach the scheduler `serial` × `ttft_s` apart (the front end takes
    # one after another, plan/load.py `burst`), and their prefill runs no faster than they
    # arrive. A one-off burst's later waves were sent long before their turn: only its first
    # wave waits so; a closed loop's lockstep waves are each sent as the last ends.
    arriving = held * max(w.input_len / per_s, k.ttft_s * serial)
    decoding = max(w.output_len - 1, 1)
    # The replica's own decode round: its pool's calibration (load.Scales) applies here too.
    tau, _ = load.decode_round(r, held, w.input_len + w.output_len / 2)

    def tpot_of(prefill: float) -> float:
        if r.mixed:
            # Prompt chunks ride in decode steps (vLLM's scheduler runs the running requests
            # first, then fills the budget from the waiting queue: vllm/v1/core/sched/
            # scheduler.py `schedule`): a request whose prompt is done decodes a token every step
            # of the others' prefill, each step one of a full chunk (t_c). Its first tokens after
            # the first come at t_c, not after the whole prefill: of the S steps left when its
            # prompt is done (S/2 on average, uniform over the wave), it gains min(S_i, O − 1)
            # tokens that way.
            t_c = r.budget / per_s
            steps = prefill / t_c
            gained = steps / 2 if steps <= decoding else decoding - decoding**2 / (2 * steps)
            return tau + gained * max(t_c - tau, 0.0) * _inverse_decodes(spread, w.output_len)
        # Prefill batches of their own run first while prompts wait (SGLang's scheduler,
        # `get_next_batch_to_run`: a new prefill batch before the decode batch): a request whose
        # prompt is done waits for the rest of the wave's prefill, half of it on average.
        return tau + prefill / 2 * _inverse_decodes(spread, w.output_len)

    ttft = k.ttft_s + arriving * (held + 1) / (2 * held)
    first = k.ttft_s + arriving + decoding * tau
    waves = n / held
    if waves <= 1 or lockstep:
        if closed:
            # A closed loop past what the engine admits: n − held always wait, a wave each.
            return (n * w.output_len / (waves * first), tpot_of(arriving),
                    ttft + (waves - 1) * first)  # fmt: skip
        # A one-off burst: later waves wait for the ones before them, half of them on average.
        if arriving == plain:  # the first wave as fast as the rest (the same sums as they were)
            queued = (waves - 1) * first * 0.5
            return n * w.output_len / (waves * first), tpot_of(plain), ttft + queued
        wave = k.ttft_s + plain + decoding * tau
        later = waves - 1
        queued = (later * first + later * (later - 1) / 2 * wave) / waves
        tpot = (tpot_of(arriving) + later * tpot_of(plain)) / waves
        ttft = (ttft + later * (k.ttft_s + plain * (held + 1) / (2 * held))) / waves
        return n * w.output_len / (first + later * wave), tpot, ttft + queued
    p, client = load.at_concurrency(r, w, held)
    rate = max(p.rate, 1e-9)
    return rate * w.output_len, p.tpot_s, p.ttft_s + (n - held) / rate * (1 if closed else 0.5)


# --curves: price each run's steps by its card's measured kernels (llmfit/data/kernel_curves.json,
# plan/curves.py) where a table covers the card's architecture (SpeedInputs.curves), with the
# fit's extra constants for it (CURVE_SHARED, CURVE_FAMILY): on runs the fit never saw it was
# further off than the fitted shares (docs/accuracy.md "Priced by the measured kernels").
# --curves-experts: only the routed experts' grouped GEMM by its curve, the rest by the shares;
# what plans do where the shipped constants set `expert_curves` (then the fit is this one).
EXPERTS_ONLY = "--curves-experts" in sys.argv or any(
    k.expert_curves for t in serving_speed.TABLES.values() for k in t.values()
)
CURVES = "--curves" in sys.argv or EXPERTS_ONLY
# --sliced-experts: each run's experts by the measured grouped GEMM of experts cut as the run
# cut them (kernel_curves.json "moe_sliced": over its tensor-parallel cards unless its launch
# names expert parallelism), not whole; the runs that name no expert parallelism ran without
# it (the engines' default), where llmfit's plans turn it on. Measured, not shipped: on runs
# never seen it was further off (docs/accuracy.md "Priced by the measured kernels").
SLICED = "--sliced-experts" in sys.argv


def measured_kernels(row: Row, inp: speed.SpeedInputs) -> speed.SpeedInputs:
    """The run's step inputs priced by its card's measured kernels under its engine, where a
    table covers the card or its architecture; the weights' kernels by the checkpoint's dtype
    (fp8 where the plan computes in it, 4-bit weights with 16-bit activations for AWQ, GPTQ and
    MXFP4, else 16-bit)."""
    spec = cards.spec(row.card)
    if spec is None:
        return inp
    kc = curves.curves_for(row.card, spec.architecture, row.engine)
    if not kc.measured:
        return inp
    w = row.raw["precision"]["weights"].lower()
    four = any(s in w for s in ("int4", "awq", "gptq", "mxfp4", "w4"))
    quant = "mxfp4" if "mxfp4" in w else None
    fp8 = inp.compute_dtype == "fp8"
    if row.engine in BY_KERNEL and EXPERTS_ONLY:
        # The experts by the kernel the run's engine runs at its default flags
        # (plan/engines/expert_kernels.py); where no table measured it, the plan's own curves
        # (the fastest kernel measured for the dtype, plan/engines/serving.py expert_pricing,
        # else the shares), as plans price them.
        dtype = "fp8" if fp8 else "w4a16" if four else "bf16"
        got = expert_kernels.expert_curves(
            row.engine, row.card, spec.architecture,
            expert_kernels.checkpoint(quant or ("awq" if "awq" in w else None), four, fp8),
            model_arch(row.model), row.ep is True, "fp8_block" if fp8 else dtype,
        )  # fmt: skip
        if got is None:
            return inp
        return replace(inp, curves=got, curve_dtype=dtype, curves_experts_only=True)
    dtype = expert_kernel(quant, four, fp8, spec.architecture)
    if dtype is None:  # no measured kernel for what the engine runs: the shares, as plans do
        return inp
    slices = 1 if row.ep is not False else row.tp * row.dp
    return replace(inp, curves=kc, curve_dtype=dtype, curves_experts_only=EXPERTS_ONLY,
                   expert_slices=slices if SLICED else 1)  # fmt: skip


# The routed experts by the grouped GEMM of the kernel the run's engine runs at its default flags
# (llmfit/data/moe_kernels.toml), not the fastest measured for the dtype, for the engines the
# rules are shipped for (its `engines`: vLLM as shipped), as plans price them;
# --experts-by-kernel=ENGINES (a comma-separated list, or "none") for others: how
# docs/accuracy.md measured them.
_BY_KERNEL = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--experts-by-kernel=")]
BY_KERNEL = (
    set(expert_kernels.engines()) if not _BY_KERNEL
    else set() if _BY_KERNEL[0] == "none" else set(_BY_KERNEL[0].split(","))
)  # fmt: skip


def backend_kernels(row: Row, model: Model, inp: speed.SpeedInputs) -> speed.SpeedInputs:
    """The run's stages with each layer's kernels counted by the backends its engine picks on
    its card for its checkpoint (--kernels-by-backend), not by the model's structure alone."""
    spec = cards.spec(row.card)
    if spec is None:
        return inp
    w = row.raw["precision"]["weights"].lower()
    four = any(s in w for s in ("int4", "awq", "gptq", "mxfp4", "w4"))
    fp8 = inp.compute_dtype == "fp8"
    ckpt = expert_kernels.checkpoint("mxfp4" if "mxfp4" in w else ("awq" if "awq" in w else None),
                                     four, fp8)  # fmt: skip
    b = layer_backends.backends(row.engine, spec.architecture, ckpt, model_arch(row.model),
                                row.ep is True)  # fmt: skip
    k = layer_kernels(model, fp8 and spec.fp8_flops is not None, b)
    stages = tuple(replace(s, kernels=(s.layers - s.moe_layers) * k.dense + s.moe_layers * k.moe)
                   for s in inp.stages)  # fmt: skip
    return replace(inp, stages=stages)


@functools.cache
def model_arch(repo: str) -> str | None:
    """The row's model's config `architectures[0]` (the engines' model overrides key on it)."""
    name = SIBLINGS.get(repo, (repo, None))[0]
    for folder in (CONFIGS, SOURCES):
        path = folder / f"{name.replace('/', '--')}.json"
        if path.exists():
            return (json.loads(path.read_text()).get("architectures") or [None])[0]
    return None


def predict(row: Row, table: dict[str, speed.Constants] | None = None) -> dict[str, float]:
    """What llmfit estimates for the row: output tok/s a GPU, TPOT and TTFT (seconds)."""
    r = row.replica
    assert r is not None
    if table is not None:
        key = f"{row.engine}|{row.family}"
        k = table.get(key) or table[f"{row.engine}|default"]
        r = replace(r, inputs=replace(r.inputs, constants=k))
    if CURVES:
        r = replace(r, inputs=measured_kernels(row, r.inputs))
    w = Workload("row", row.input_len, row.output_len, ttft_s=None, tpot_s=None)
    copies = r.copies
    share = row.load / copies
    # A median TTFT is priced as one where the queue spreads the TTFTs (steady states); a wave's
    # TTFTs climb step by step through its prefill, whose median is about their mean.
    median = row.stats.get("ttft") == "median"
    # The launch's API servers share its copies' prompts (load.Replica.frontends: vLLM's one a
    # data-parallel rank from 0.15, one before), as plan/load.py `burst` shares them.
    serial = SERIAL * copies / r.frontends if r.inputs.constants.serial_frontend else 0.0
    if row.kind == "rate":
        p = load.at_rate(r, w, share)
        if p.stable:
            ttft = load.ttft_quantile(p, 0.5) if median else p.ttft_s
            return {"per_gpu": row.load * row.output_len / row.gpus, "tpot": p.tpot_s,
                    "ttft": ttft}  # fmt: skip
        # Past what the replica keeps up with, the prompts pile up: a burst of all of them.
        share = (row.raw.get("num_prompts") or 1000) / copies
        tps, tpot, ttft = _waves(r, w, share, row.lockstep, spread=row.spread, serial=serial)
    elif row.kind == "closed" and not row.lockstep:
        p, ttft = load.at_concurrency(r, w, share)
        tps, tpot = p.rate * row.output_len, p.tpot_s
        n = row.raw.get("num_prompts")
        first_share = row.load / n if n and n > row.load else 0.0
        if median and first_share < 0.5:
            # The first wave's requests (a share f of the run) all wait longer than the steady
            # state's: the run's median is the steady state's 1 / (2 (1 − f)) quantile.
            ttft = load.ttft_quantile(p, 0.5 / (1 - first_share), ttft)
        elif first_share:
            # The client starts with `concurrency` requests at once: the first wave's prompts
            # queue for their prefill together, the rest arrive as others end.
            _, _, first = _waves(r, w, share, lockstep=True, serial=serial)
            ttft = (ttft * (n - row.load) + first * row.load) / n
    else:
        tps, tpot, ttft = _waves(
            r, w, share, row.lockstep, closed=row.kind == "closed", spread=row.spread,
            serial=serial,
        )  # fmt: skip
    return {"per_gpu": tps * copies / row.gpus, "tpot": tpot, "ttft": ttft}


def err(est: float, meas: float) -> float:
    return est / meas - 1 if meas else math.nan


def speed_rows() -> list[dict]:
    """speed.jsonl's vLLM and SGLang serving runs at a stated concurrency, as load.jsonl rows
    (the issue: fit on load.jsonl, and on speed.jsonl too)."""
    out = []
    for line in SPEED.read_text().splitlines():
        r = json.loads(line)
        t, m = r.get("test", {}), r.get("metrics", {})
        c = t.get("max_concurrency")
        if r["engine"] == "llama.cpp" or not c or "total_generated_tokens" not in m:
            continue
        n = t.get("num_prompts") or 1
        model = r["model"].split(" ")[0]
        if model.startswith("Qwen/Qwen3-235B"):
            model = "Qwen/Qwen3-235B-A22B-Instruct-2507"
        out.append({
            **r,
            "model": model,
            "vendor": "NVIDIA",
            "moe": None,
            "precision": {"weights": r.get("quant") or "", "kv_cache": "auto"},
            "dp": None, "ep": None, "dp_attention": False, "spec_decoding": "none",
            "pd_disaggregation": None,
            "input_len": {"mean": m["total_input_tokens"] / n, "distribution": "random"},
            "output_len": {"mean": m["total_generated_tokens"] / n, "distribution": "random"},
            "load_kind": "max_concurrency", "concurrency": c, "request_rate": "inf",
            "num_prompts": n,
            "metrics": {"output_tok_s_per_gpu": m["output_tok_s"] / r["gpu_count"],
                        **{k: v for k, v in (("tpot_ms_median", m.get("median_tpot_ms")),
                                             ("ttft_ms_median", m.get("median_ttft_ms")))
                           if v is not None}},
        })  # fmt: skip
    return out


def load_rows() -> tuple[list[Row], list[tuple[dict, str]]]:
    raw = [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]
    raw += speed_rows()
    rows: list[Row] = []
    out: list[tuple[dict, str]] = []
    for r in raw:
        got = parse(r)
        if isinstance(got, str):
            out.append((r, got))
            continue
        why = plan_row(got)
        if why:
            out.append((r, why))
        else:
            rows.append(got)
    return rows, out


METRICS = ("per_gpu", "tpot", "ttft")


def errors(rows: list[Row], predicted: Callable[[Row], dict[str, float]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for row in rows:
        est = predicted(row)
        for m in METRICS:
            if m in row.measured and math.isfinite(est[m]) and est[m] > 0:
                out[m].append(abs(err(est[m], row.measured[m])))
            elif m in row.measured:
                out[m].append(1.0)  # an estimate of nothing (unstable) counts as 100 % off
    return out


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 100:.1f} % ({len(xs)})" if xs else "—"


# --- The fit ----------------------------------------------------------------------------------

ENGINES = ("vllm", "sglang")
# What --fit varies for each engine: (Constants field, prior, low, high), shared by its card
# architectures; and, per architecture, the share of the bandwidth its weights stream at.
# Every bound is a physical range: an efficiency is a share of the card's datasheet figure (at
# most 1; the step model holds it there too), a fixed cost what kernels and a scheduler are known
# to take. The prior is what the engines' kernels are known to reach (weights stream at 80-90 %
# of HBM bandwidth in a memory-bound decode, GEMMs at 60-80 % of the dense tensor rate, a graphed
# layer's kernels a few µs each, a scheduler step half a millisecond, 50 ms from a request to its
# first scheduled step); the fit may leave a prior as far as the rows ask, at a cost (`PRIOR`),
# and says where a value ends at the edge of its range.
SHARED: tuple[tuple[str, float, float, float], ...] = (
    ("layer_s", 20e-6, 2e-6, 100e-6),
    ("step_s", 0.5e-3, 0.05e-3, 2e-3),
    ("sequence_s", 30e-6, 2e-6, 60e-6),
    ("ttft_s", 0.05, 0.005, 0.3),
    ("prefill_efficiency", 0.7, 0.3, 1.0),
    ("attention_efficiency", 0.9, 0.3, 1.0),
    ("expert_efficiency", 0.8, 0.3, 1.0),
    ("expert_prefill_efficiency", 0.6, 0.1, 1.0),
    ("gemm_rows", 64.0, 8.0, 512.0),
    ("expert_rows", 16.0, 1.0, 256.0),
)
PER_FAMILY: tuple[tuple[str, float, float, float], ...] = (("weight_efficiency", 0.8, 0.3, 1.0),)
# With --curves, beside those: the multiple of the measured kernels' efficiencies an engine's
# step reaches (the product held at 1 or below), a MoE layer's routing kernels (the router's
# GEMM, top-k, sorting tokens by expert) beside its grouped GEMM, and a graphed layer's other
# kernels' fixed cost by architecture (launch and tail latencies differ by generation).
CURVE_SHARED: tuple[tuple[str, float, float, float], ...] = (
    ("curve_share", 1.0, 0.3, 1.5),
    ("moe_layer_s", 10e-6, 1e-6, 40e-6),
)
CURVE_FAMILY: tuple[tuple[str, float, float, float], ...] = (("layer_s", 20e-6, 2e-6, 100e-6),)
# --split-decode: a block's rate through SGLang's Triton decode, in GB/s (least squares' step
# tolerance is relative to the whole x's norm, so no value is fitted in bytes a second). Its
# prior is a guess, a fifth of a B200 multiprocessor's share of the card's bandwidth: no
# publisher but the SGLang cookbook measured the kernel (its GLM-4.7-Flash runs; the docs'
# MiniMax-M2.7 runs on MI300X read too few bytes a block to tell).
SPLIT_SHARED: tuple[tuple[str, float, float, float], ...] = (("split_kv_gbs", 10.0, 1.0, 100.0),)
if SPLIT_DECODE:
    SHARED += SPLIT_SHARED
if CURVES:
    SHARED += CURVE_SHARED
    PER_FAMILY += () if EXPERTS_ONLY else CURVE_FAMILY
# --kernels-a-layer: a layer's fixed cost as the kernels it launches in a graphed decode step
# (plan/kernels.py layer_kernels, from the model's structure) times a fitted cost a kernel
# (Constants.kernel_s, bounded to what a graphed kernel's launch and tail take: 1-15 µs), in
# place of one fitted constant a layer (`layer_s`) and one a MoE layer (`moe_layer_s`).
# --kernels-by-backend: the same, each layer counted by the kernels its engine picks on the run's
# card for its checkpoint (plan/engines/layer_backends.py: TRT-LLM-gen's attention on SM100, the
# MoE kernel of llmfit/data/moe_kernels.toml), not by the model's structure alone.
# The default where the shipped constants price a kernel (`kernel_s` in serving_speed.toml), as
# plans then do; --layer-constants fits `layer_s` and `moe_layer_s` instead.
# --kernels-engines=vllm (a comma-separated list): the kernels a layer for those engines alone,
# the others' layers by `layer_s` and `moe_layer_s` (each engine fitted apart, a constant its
# engine does not use held at its prior); by default the engines whose shipped constants price a
# kernel.
BY_BACKEND = "--kernels-by-backend" in sys.argv
_KERNEL_ENGINES = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--kernels-engines=")]
KERNEL_ENGINES: frozenset[str] = (
    frozenset()
    if "--layer-constants" in sys.argv
    else frozenset(e for e in _KERNEL_ENGINES[0].split(",") if e != "none")
    if _KERNEL_ENGINES
    else frozenset(ENGINES)
    if "--kernels-a-layer" in sys.argv or BY_BACKEND
    else frozenset(
        e for e, t in serving_speed.TABLES.items() if any(k.kernel_s > 0 for k in t.values())
    )
)
KERNELS = bool(KERNEL_ENGINES)
if KERNELS:
    if KERNEL_ENGINES >= frozenset(ENGINES):
        SHARED = tuple(p for p in SHARED if p[0] not in ("layer_s", "moe_layer_s"))
    SHARED = (("kernel_s", 5e-6, 1e-6, 15e-6), *SHARED)
# --physical-priors: a layer's fixed cost's prior from the kernels a graphed decode step launches
# for it (plan/kernels.py: a dense GQA layer's two norms, six attention kernels and three MLP
# kernels; a MoE block four more than a dense MLP) at the cost a kernel's prior above (5 µs,
# what a graphed kernel's launch and tail take), not 20 µs and 10 µs: 55 µs a layer, 20 µs more
# a MoE layer. Set from the engines' code, before any run (docs/accuracy.md "Tried after this
# round, and not shipped": "The priors' strength").
PHYSICAL = "--physical-priors" in sys.argv
if PHYSICAL:
    from llmfit.plan import kernels

    _AT = {"layer_s": (kernels.NORMS + kernels.GQA + kernels.MLP) * 5e-6,
           "moe_layer_s": (kernels.MOE - kernels.MLP) * 5e-6}  # fmt: skip
    SHARED = tuple((n, _AT.get(n, a), lo, hi) for n, a, lo, hi in SHARED)
# Each architecture's prior for the share of its bandwidth weights stream at (what a decode GEMV
# reaches on it, before any run): NVIDIA's HBM cards 85 %; AMD's Instinct cards less (ROCm's
# decode kernels on CDNA 3 and 4 reach about two thirds of the datasheet's bandwidth).
ARCH_PRIOR: dict[str, float] = {"amd-cdna3": 0.65, "amd-cdna4": 0.65}
NVIDIA_PRIOR = 0.85
# A parameter away from its prior by a factor e (2.7×) costs as much as 1/PRIOR rows missed by
# a factor e: priors hold where the rows say little, and give way where they agree. --prior=X
# fits with another strength; --nested=X,Y,… chooses it for each publisher held out by
# leave-publisher-out on the other publishers' runs alone (`nested_estimates`).
_PRIOR = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--prior=")]
PRIOR = float(_PRIOR[0]) if _PRIOR else 0.5
# --from-weak: each fit started twice, from the priors and from the fit at strength WEAK, keeping
# the lower cost (the fit's loss is not convex: from the priors a strong prior can stop it in a
# minimum that the weak fit's values beat on the same objective).
FROM_WEAK = "--from-weak" in sys.argv
WEAK = 0.1
# --pool=a,b: the second engine's values of the listed constants held to the first engine's fit
# (its priors there), not to the generic priors.
_POOL = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--pool=")]
POOLED = frozenset(_POOL[0].split(",")) if _POOL else frozenset()
# --starts=N: each engine's fit run from the priors and from N - 1 points spread over the bounds,
# the lowest cost kept (the loss is not convex: a fold's fit lands in one of several minima).
_STARTS = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--starts=")]
STARTS = int(_STARTS[0]) if _STARTS else 1


def _starts(dims: int, count: int) -> list[list[float]]:
    """`count` points of the unit cube in `dims` dimensions, a Halton sequence's (primes as
    bases): spread evenly, and the same every run."""
    primes = [p for p in range(2, 400) if all(p % q for q in range(2, int(p**0.5) + 1))]
    out = []
    for n in range(1, count + 1):
        point = []
        for b in primes[:dims]:
            f, r, k = 1.0, 0.0, n
            while k:
                f /= b
                r += f * (k % b)
                k //= b
            point.append(0.1 + 0.8 * r)  # off the bounds themselves
        out.append(point)
    return out


# How much each measure counts in the fit: latencies a little less than throughput, TTFT least
# (it is the most sensitive to how a benchmark client sends its prompts).
WEIGHT = {"per_gpu": 1.0, "tpot": 1.0, "ttft": 0.5}
LOSS = "cauchy"  # saturating: a source that measured something else moves the fit little
CLIP = math.log(20.0)  # a residual past 20× counts as 20×: an estimate of nothing is not -inf


# The routed experts' share of the bandwidth where no measured grouped GEMM prices them (AMD
# cards; MXFP4 experts before Blackwell, plan/engines/serving.py expert_kernel) is the kernel's
# that runs: ROCm's on AMD, and on NVIDIA before Blackwell the Triton matmul_ogs both engines run
# gpt-oss's MXFP4 experts with (vLLM 0.34 fused_moe/oracle/mxfp4.py
# _get_priority_backends_for_gpt_oss, TRITON first on CUDA from SM90; SGLang 0.5.23
# arg_groups/model_overrides/gpt_oss.py _gpt_oss_overrides: moe_runner_backend "triton_kernel"
# where left "auto", off SM100/SM120, one expert rank). So SGLang's NVIDIA cards take the share
# vLLM's fit gives that kernel (its only share-priced runs are gpt-oss's on NVIDIA: there are no
# vLLM runs on AMD), and SGLang's own `expert_efficiency` is fitted on its AMD runs alone
# (serving_speed.toml's amd rows). --experts-by-vendor=fit gives SGLang's NVIDIA cards a share
# of their own (NVIDIA_EXPERT), fitted on its NVIDIA runs (GPUStack's and llm-benchmaxxing's
# gpt-oss runs); =one one share for every card, as before this round (docs/accuracy.md "Tried
# after this round").
_BY_VENDOR = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--experts-by-vendor=")]
BY_VENDOR = _BY_VENDOR[0] if _BY_VENDOR else "vllm"
PREFILL_BY_VENDOR = "--prefill-by-vendor" in sys.argv
NVIDIA_EXPERT: tuple[tuple[str, float, float, float], ...] = (
    ("nvidia_expert_efficiency", 0.8, 0.3, 1.0),
)
if BY_VENDOR == "fit":
    SHARED += NVIDIA_EXPERT


def arch_prior(key: str) -> float:
    return ARCH_PRIOR.get(key.split("|")[1], NVIDIA_PRIOR)


def families(rows: list[Row]) -> list[str]:
    """The engine × architecture keys the fit gives a weight efficiency of their own: those whose
    runs come from two publishers or more. One publisher's runs are no ground for an
    architecture's own constant (its way of running would pass for the card's physics): such an
    architecture keeps its prior, as one without runs does."""
    pubs: dict[str, set[str]] = {}
    for r in rows:
        pubs.setdefault(f"{r.engine}|{r.family}", set()).add(r.publisher)
    return sorted(k for k, p in pubs.items() if len(p) >= 2)


def table_of(x: list[float], keys: list[str]) -> dict[str, speed.Constants]:
    """The constants an x of the fit stands for: each engine's shared values, then each of its
    architectures' own; "engine|default" for an architecture the fit did not see."""
    out: dict[str, speed.Constants] = {}
    at = 0
    shared: dict[str, dict[str, float]] = {}
    for e in ENGINES:
        shared[e] = {name: float(x[at + i]) for i, (name, *_) in enumerate(SHARED)}
        at += len(SHARED)
    base = serving_speed.BASE

    def make(e: str, own: dict[str, float], arch: str = "default") -> speed.Constants:
        values = {**shared[e], **own}
        nvidia = values.pop("nvidia_expert_efficiency", None)
        if "split_kv_gbs" in values:
            values["split_kv_rate"] = values.pop("split_kv_gbs") * 1e9
        # SGLang's NVIDIA cards run the experts the shares price by vLLM's kernel (BY_VENDOR);
        # vLLM is fitted first (ENGINES), so its share is fixed when SGLang's runs are fitted.
        if not arch.startswith("amd") and e == "sglang":
            if BY_VENDOR == "fit" and nvidia is not None:
                values["expert_efficiency"] = nvidia
            elif BY_VENDOR == "vllm":
                values["expert_efficiency"] = shared["vllm"]["expert_efficiency"]
                if PREFILL_BY_VENDOR:
                    values["expert_prefill_efficiency"] = shared["vllm"][
                        "expert_prefill_efficiency"
                    ]
        if e in KERNEL_ENGINES:
            values.update(layer_s=0.0, moe_layer_s=0.0)
        else:
            values.update(kernel_s=0.0)
        return replace(base, **values, kv_efficiency=own["weight_efficiency"],
                       quant_prefill_efficiency=shared[e]["prefill_efficiency"],
                       expert_curves=EXPERTS_ONLY,
                       serial_frontend=e in SERIAL_ENGINES)  # fmt: skip

    for key in keys:
        e, _ = key.split("|")
        own = {name: float(x[at + i]) for i, (name, *_) in enumerate(PER_FAMILY)}
        at += len(PER_FAMILY)
        out[key] = make(e, own, key.split("|")[1])
    for e in ENGINES:
        out[f"{e}|default"] = make(e, {"weight_efficiency": NVIDIA_PRIOR})
        for _, arch in serving_speed.ARCHITECTURES:
            own = {"weight_efficiency": arch_prior(f"{e}|{arch}")}
            out.setdefault(f"{e}|{arch}", make(e, own, arch))
    return out


def start(keys: list[str]) -> tuple[list[float], list[float], list[float]]:
    x0, lo, hi = [], [], []
    for _ in ENGINES:
        for _, a, b, c in SHARED:
            x0.append(a), lo.append(b), hi.append(c)
    for key in keys:
        for name, a, b, c in PER_FAMILY:
            x0.append(arch_prior(key) if name == "weight_efficiency" else a)
            lo.append(b), hi.append(c)
    return x0, lo, hi


def names(keys: list[str]) -> list[str]:
    """Each x's name, as --fit prints it."""
    out = [f"{e}.{n}" for e in ENGINES for n, *_ in SHARED]
    return out + [f"{k}.{n}" for k in keys for n, *_ in PER_FAMILY]


def residuals(rows: list[Row], table: dict[str, speed.Constants]) -> list[float]:
    out = []
    # Each publisher counts as much as another in all, whatever its number of rows: one site's
    # way of measuring should not set every engine's constants.
    count: dict[str, int] = {}
    for row in rows:
        count[row.source] = count.get(row.source, 0) + 1
    for row in rows:
        est = predict(row, table)
        w = math.sqrt({"high": 1.0, "medium": 0.7, "low": 0.4}.get(row.raw["confidence"], 0.5))
        w *= math.sqrt(40 / count[row.source])
        for m, meas in row.measured.items():
            e = est[m]
            r = math.log(e / meas) if e > 0 and math.isfinite(e) else CLIP
            out.append(w * WEIGHT[m] * max(-CLIP, min(CLIP, r)))
    return out


def fit(
    rows: list[Row],
    keys: list[str],
    x0: list[float] | None = None,
    steps: int = 40,
    prior: float | None = None,
) -> tuple[dict[str, speed.Constants], list[float]]:
    """The constants that fit `rows` best (from `x0`, else the priors), and their x. A key no
    row of `rows` uses keeps its prior. `prior`: the priors' strength (PRIOR where None).

    Each engine is fitted apart, on its own runs, with its own `steps`: no run of one engine
    depends on the other's constants, and one least-squares run over both, stopped after
    `steps` evaluations short of converging, let a change to one engine's runs move the other's
    constants (SGLang's runs' TTFT measured as medians moved vLLM's constants in the folds that
    fit vLLM on a dozen runs, and GPUStack's vLLM TPOT by 30 points)."""
    from scipy.optimize import least_squares  # the fit only: not a project dependency

    first, lo, hi = start(keys)
    x = list(x0 or first)
    x = [min(max(v, a + 1e-12), b - 1e-12) for v, a, b in zip(x, lo, hi, strict=True)]
    every = names(keys)
    strength = PRIOR if prior is None else prior
    for e in ENGINES:
        idx = [i for i, n in enumerate(every) if n.startswith((f"{e}.", f"{e}|"))]
        own = [r for r in rows if r.engine == e]
        if not own:
            continue
        if POOLED and e != ENGINES[0]:
            # The kernels' efficiencies held to the first engine's fit (both run the same
            # kernels on the same cards), its engine's own costs to their priors.
            for i in idx:
                name = every[i].split(".", 1)[1]
                if name in POOLED and f"{ENGINES[0]}.{name}" in every:
                    j = every.index(f"{ENGINES[0]}.{name}")
                    first[i] = min(max(x[j], lo[i] * 1.001), hi[i] / 1.001)
                    x[i] = first[i]

        def f(
            xs: list[float], idx: list[int] = idx, own: list[Row] = own, at: float = strength
        ) -> list[float]:
            full = list(x)
            for i, v in zip(idx, xs, strict=True):
                full[i] = float(v)
            held = [at * math.log(full[i] / first[i]) for i in idx]
            return residuals(own, table_of(full, keys)) + held

        def solve(x0: list[float], at: float, idx: list[int] = idx, f: Any = f) -> Any:
            return least_squares(f, x0, bounds=([lo[i] for i in idx], [hi[i] for i in idx]),
                                 loss=LOSS, f_scale=0.25, x_scale="jac", max_nfev=steps,
                                 method="trf", kwargs={"at": at})  # fmt: skip

        sol = solve([x[i] for i in idx], strength)
        for u in _starts(len(idx), STARTS - 1):
            # From a point spread over the bounds (log-uniformly, a Halton sequence: the same
            # points every run), the lowest cost of all kept.
            at_u = [lo[i] ** (1 - v) * hi[i] ** v for i, v in zip(idx, u, strict=True)]
            other = solve(at_u, strength)
            sol = other if other.cost < sol.cost else sol
        if FROM_WEAK and strength > WEAK:
            # The fit stops in the first minimum it reaches from the priors; a second run starts
            # from the fit at a weak strength, and the lower of the two at `strength` is kept.
            other = solve(list(solve([x[i] for i in idx], WEAK).x), strength)
            sol = other if other.cost < sol.cost else sol
        for i, v in zip(idx, sol.x, strict=True):
            x[i] = float(v)
    return table_of(x, keys), x


def edges(x: list[float], keys: list[str]) -> list[str]:
    """The fitted values that end within 2 % of their range's edge: where the rows would move a
    constant past what is physical, and the model, not the constant, is what is off."""
    _, lo, hi = start(keys)
    out = []
    for name, v, a, b in zip(names(keys), x, lo, hi, strict=True):
        if v <= a * 1.02:
            out.append(f"{name} = {v:.4g} at its floor {a:g}")
        elif v >= b * 0.98:
            out.append(f"{name} = {v:.4g} at its ceiling {b:g}")
    return out


def shape(row: Row) -> str:
    """The workload's shape: prompt-heavy, output-heavy or balanced, at what load."""
    ratio = row.input_len / max(row.output_len, 1)
    kind = "prompt-heavy" if ratio >= 4 else "output-heavy" if ratio <= 0.5 else "balanced"
    load_ = "one at a time" if row.kind == "closed" and row.load <= 1 else "under load"
    return f"{kind}, {load_}"


def _errs(members: list[Row], est: dict[str, dict[str, float]], m: str) -> list[float]:
    """Signed errors of a measure over rows (an estimate of nothing counts as 100 % off)."""
    out = []
    for r in members:
        if m not in r.measured:
            continue
        e = est[r.raw["id"]][m]
        out.append(err(e, r.measured[m]) if e > 0 and math.isfinite(e) else 1.0)
    return out


def cell(errs: list[float]) -> str:
    """ "median |error| (signed median)"."""
    if not errs:
        return "—"
    a = statistics.median(abs(e) for e in errs) * 100
    return f"{a:.1f} % ({statistics.median(errs) * 100:+.0f} %)"


def split_table(rows: list[Row], est: dict[str, dict[str, float]]) -> list[str]:
    """Median absolute (signed) errors, MoE and dense, tuned and default-flag runs apart."""
    out = ["| runs | rows | output tok/s a GPU | TPOT | TTFT |", "|---|---|---|---|---|"]
    groups: dict[str, list[Row]] = {}
    for row in rows:
        kind = "MoE" if row.moe else "dense"
        flags = "tuned" if row.tuned else "default flags"
        for g in (f"{kind}, {flags}", kind, row.engine, row.raw.get("vendor", "?")):
            groups.setdefault(g, []).append(row)
    groups["all"] = rows
    order = ["MoE, tuned", "MoE, default flags", "MoE", "dense, tuned", "dense, default flags",
             "dense", "vllm", "sglang", "NVIDIA", "AMD", "all"]  # fmt: skip
    for g in order:
        members = groups.get(g)
        if members:
            cells = [cell(_errs(members, est, m)) for m in METRICS]
            out.append(f"| {g} | {len(members)} | " + " | ".join(cells) + " |")
    return out


def breakdown(rows: list[Row], est: dict[str, dict[str, float]], label: str) -> list[str]:
    """Median absolute (signed) errors by publisher and workload shape."""
    out = [f"| {label} | rows | output tok/s a GPU | TPOT | TTFT |", "|---|---|---|---|---|"]
    groups: dict[str, list[Row]] = {}
    for row in rows:
        for g in (row.publisher, shape(row)):
            groups.setdefault(g, []).append(row)
    for g, members in sorted(groups.items()):
        cells = [cell(_errs(members, est, m)) for m in METRICS]
        out.append(f"| {g} | {len(members)} | " + " | ".join(cells) + " |")
    return out


def unseen_estimates(
    rows: list[Row], steps: int = 40, prior: float | None = None
) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """Each row's estimate by a fit that never saw its publisher nor its model × card family:
    one fold a publisher, its rows the test, the training every other publisher's rows whose
    model × card-family cell none of the test rows measured (a group k-fold over cells and
    publishers together). With the training rows each fold kept."""
    out: dict[str, dict[str, float]] = {}
    kept: dict[str, int] = {}
    pubs = sorted({r.publisher for r in rows})
    _FOLDS[:] = [rows]
    # One process a fold, two at a time (each fold is a fit of its own, minutes of CPU).
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(int(os.environ.get("FOLDS_AT_ONCE", "2"))) as p:
        done = p.starmap(_fold, [(pub, steps, prior) for pub in pubs])
    for pub, (n, est) in zip(pubs, done, strict=True):
        kept[pub] = n
        out.update(est)
    return out, kept


_FOLDS: list[list[Row]] = []


def _fold(
    pub: str, steps: int, prior: float | None = None, rows: list[Row] | None = None
) -> tuple[int, dict[str, dict[str, float]]]:
    """One fold of `unseen_estimates`: the publisher's rows priced by a fit to the training rows
    that share neither its publisher nor any of its rows' cells (of `rows`, else every row)."""
    test, train = split(rows if rows is not None else _FOLDS[0], pub)
    # From the priors, with the keys the training rows can fit: no value of the fit to every
    # row, nor an architecture's constant fitted on the held-out runs alone, reaches them.
    table, _ = fit(train, families(train), None, steps=steps, prior=prior)
    return len(train), {r.raw["id"]: predict(r, table) for r in test}


def split(rows: list[Row], pub: str) -> tuple[list[Row], list[Row]]:
    """A publisher's rows, and the rows that share neither its publisher nor any of its cells."""
    test = [r for r in rows if r.publisher == pub]
    cells = {r.cell for r in test}
    return test, [r for r in rows if r.publisher != pub and r.cell not in cells]


def score(rows: list[Row], est: dict[str, dict[str, float]]) -> float:
    """What the nested choice of the priors' strength minimises: the median absolute error of
    each measure over MoE and over dense rows apart (the bar is for each), weighed as the fit
    weighs the measures, averaged over the groups and measures that have rows."""
    total, weight = 0.0, 0.0
    for moe in (True, False):
        members = [r for r in rows if r.moe == moe]
        for m in METRICS:
            errs = _errs(members, est, m)
            if errs:
                total += WEIGHT[m] * statistics.median(abs(e) for e in errs)
                weight += WEIGHT[m]
    return total / weight if weight else math.inf


def nested_estimates(
    rows: list[Row], grid: list[float], steps: int = 40
) -> tuple[dict[str, dict[str, float]], dict[str, tuple[float, dict[float, float]]]]:
    """Each row's estimate never seen, with the priors' strength chosen without its runs: for
    each publisher held out (with its cells), every strength of `grid` is scored by
    leave-publisher-out (with cells) on the training rows alone, and the training rows are then
    fitted at the strength that scored best. Choosing the strength by the outer folds' own
    figure would tune it on the runs it is scored on. One fit at a time (the machine is
    shared). With each fold's choice and inner scores."""
    out: dict[str, dict[str, float]] = {}
    chosen: dict[str, tuple[float, dict[float, float]]] = {}
    for pub in sorted({r.publisher for r in rows}):
        test, train = split(rows, pub)
        inner: dict[float, float] = {}
        for strength in grid:
            est: dict[str, dict[str, float]] = {}
            for q in sorted({r.publisher for r in train}):
                est.update(_fold(q, steps, strength, train)[1])
            inner[strength] = score(train, est)
            print(f"  {pub}: strength {strength:g} scores {inner[strength] * 100:.2f} % "
                  "on its training publishers", file=sys.stderr, flush=True)  # fmt: skip
        best = min(grid, key=lambda s: (inner[s], s))
        chosen[pub] = (best, inner)
        out.update(_fold(pub, steps, best, rows)[1])
    return out, chosen


# The MoE runs furthest off never seen, by what they ran: one publisher's runs each (the SGLang
# cookbook's and docs' pages), of a release, kernel or checkpoint no other publisher measured,
# so no fold can learn them. `gap_table` scores the MoE runs without each group and without all
# of them: where the gap to the bar is, not a figure to quote (the figure is every run's).
GAP_GROUPS: tuple[tuple[str, str, str], ...] = (
    (
        "GLM-4.7-Flash, one B200, SGLang 0.5.7",
        "^sglcb2-glm47flash-",
        "launched with --attention-backend triton: its TPOT grows with the context as no other "
        "run's (docs/accuracy.md \"SGLang's Triton decode, block by block\")",
    ),
    (
        "Kimi-K2.5, SGLang (8 H200s, 4 MI350Xs)",
        "^sglcb2-kimik25-",
        "INT4 experts; TPOT 1.3 to 6 times the price on both vendors; the H200 rows name "
        "0.5.6.post2, a release with no Kimi-K2.5 model class, and their notes say it is not a "
        "clean scaling point",
    ),
    (
        "GLM-5.1-FP8, 8 MI300Xs, SGLang 0.5.13",
        "^sgldocs-glm51-fp8-8xmi300x-",
        "--dsa-prefill-backend and --dsa-decode-backend tilelang: 28 ms a token for one request, "
        "priced 13",
    ),
    (
        "MiniMax-M2.5, 8 B200s, SGLang 0.5.8",
        "^sglcb2-minimaxm25-8xb200-",
        "slower than the same launch on 8 H100s (0.5.9), whose TPOT is priced within 4 %",
    ),
)


def gap_table(rows: list[Row], est: dict[str, dict[str, float]]) -> list[str]:
    """The MoE runs' median absolute (signed) errors without each of GAP_GROUPS' runs scored,
    and without all of them."""
    moe = [r for r in rows if r.moe]
    out = ["| MoE runs scored | rows | output tok/s a GPU | TPOT | TTFT |", "|---|---|---|---|---|"]

    def line(label: str, members: list[Row]) -> str:
        cells = [cell(_errs(members, est, m)) for m in METRICS]
        return f"| {label} | {len(members)} | " + " | ".join(cells) + " |"

    # Each run with the groups it is of, matched once.
    tagged = [(r, {i for i, (_, p, _) in enumerate(GAP_GROUPS) if re.search(p, r.raw["id"])})
              for r in moe]  # fmt: skip
    out.append(line("all", moe))
    for i, (label, _, _) in enumerate(GAP_GROUPS):
        out.append(line(f"without {label}", [r for r, g in tagged if i not in g]))
    out.append(line(f"without all {len(GAP_GROUPS)}", [r for r, g in tagged if not g]))
    out.append(line("… their runs alone", [r for r, g in tagged if g]))
    out.append("")
    out.append("| group | rows | what it ran |")
    out.append("|---|---|---|")
    for i, (label, _, why) in enumerate(GAP_GROUPS):
        out.append(f"| {label} | {sum(1 for _, g in tagged if i in g)} | {why} |")
    return out


def never_seen(rows: list[Row], estimates: dict[str, dict[str, float]], heading: str) -> None:
    """The tables of runs never seen: by model kind and engine, then by publisher and shape."""
    print(f"#### {heading}")
    print()
    print("\n".join(split_table(rows, estimates)))
    print()
    print("\n".join(breakdown(rows, estimates, "never seen, by publisher and shape")))
    print()


def main(argv: list[str]) -> int:
    rows, unrepresented = load_rows()
    keys = families(rows)
    total = len(rows) + len(unrepresented)
    print(f"{len(rows)} rows priced of {total} ({len(rows) / total:.0%} coverage), "
          f"{len(unrepresented)} not (listed at the end)")  # fmt: skip
    print()
    now = {r.raw["id"]: predict(r) for r in rows}
    grid = [float(v) for a in argv if a.startswith("--nested=") for v in a[9:].split(",")]
    if grid:
        nested, chosen = nested_estimates(rows, grid)
        never_seen(rows, nested, f"never seen, the priors' strength chosen in each fold from "
                   f"{grid} by leave-publisher-out on its training publishers")  # fmt: skip
        print("| publisher held out | strength chosen | inner score by strength |")
        print("|---|---|---|")
        for pub, (best, inner) in chosen.items():
            scores = ", ".join(f"{s:g}: {v * 100:.2f} %" for s, v in inner.items())
            print(f"| {pub} | {best:g} | {scores} |")
        return 0
    if "--fit" in argv:
        table, x = fit(rows, keys, steps=60)
        for key, k in table.items():
            print(f"{key}: " + ", ".join(
                f"{n} = {getattr(k, n):.4g}" for n in [*(a[0] for a in SHARED),
                                                      *(a[0] for a in PER_FAMILY)]
                if hasattr(k, n)))  # fmt: skip
        print()
        for line in edges(x, keys) or ["no fitted value at the edge of its range"]:
            print(f"- {line}")
        print()
        fitted = {r.raw["id"]: predict(r, table) for r in rows}
        unseen, kept = unseen_estimates(rows)
        if "--save" in argv:
            # For aiconfigurator_compare.py --estimates: the folds' estimates, not refitted there.
            Path(argv[argv.index("--save") + 1]).write_text(json.dumps(unseen))
        never_seen(rows, unseen, "never seen: each publisher's runs by a fit without that "
                   "publisher nor its runs' model × card-family cells")  # fmt: skip
        print("| publisher held out | training rows left |")
        print("|---|---|")
        for pub, n in kept.items():
            print(f"| {pub} | {n} |")
        print()
        print("#### never seen: where the MoE runs' gap is")
        print()
        print("\n".join(gap_table(rows, unseen)))
        print()
        print("#### fitted to every row")
        print()
        print("\n".join(split_table(rows, fitted)))
        print()
    print("#### with the constants as shipped (llmfit/plan/engines/serving_speed.py)")
    print()
    print("\n".join(split_table(rows, now)))
    print()
    print("\n".join(breakdown(rows, now, "runs")))
    if "--rows" in argv:
        print()
        print("| row | engine | card × n | layout | load | per GPU: measured / llmfit | "
              "TPOT ms | TTFT ms |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for row in rows:
            est = now[row.raw["id"]]
            cells = []
            for m, scale in (("per_gpu", 1), ("tpot", 1000), ("ttft", 1000)):
                if m in row.measured:
                    cells.append(f"{row.measured[m] * scale:,.1f} / {est[m] * scale:,.1f} "
                                 f"({err(est[m], row.measured[m]) * 100:+.0f} %)")  # fmt: skip
                else:
                    cells.append("")
            print(
                f"| {row.raw['id']} | {row.engine} | {row.card} × {row.count} | "
                f"tp{row.tp} dp{row.dp} | {row.kind} {row.load:g} | " + " | ".join(cells) + " |"
            )
    print()
    print("| row | measure not compared, and why |")
    print("|---|---|")
    for r, why in PARTLY:
        print(f"| {r['id']} | {why} |")
    print()
    print("| row | why it is not priced |")
    print("|---|---|")
    for r, why in unrepresented:
        print(f"| {r['id']} | {why} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
