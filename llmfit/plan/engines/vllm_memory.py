"""vLLM's memory on one card, as a named vLLM release's code works it out.

`estimate(model, weight_bytes, rank, card, settings)` follows, for one rank (one GPU) of a
TP × PP × DP (× EP) layout, what vLLM does between `vllm serve` and "Maximum concurrency for L
tokens per request": the weights the rank loads, its profile run, the CUDA-graph estimate, the
budget left for the KV cache, how that budget is cut into blocks and layer groups, and the
concurrency and KV tokens vLLM then logs. Every behaviour that changed between releases is a
switch of `vllm_versions.SWITCHES`; the file and function each step follows is cited where it is
done. Everything here is pure arithmetic on plain values.

The model is split by concern, one module each: `vllm_inputs` (the rank, the flags, the card's
family, the model's layer kinds), `vllm_weights` (what the rank loads), `vllm_kv` (the cache's
pages, blocks and groups, and the start-up check), `vllm_runtime` (batch defaults, the profile
run, memory outside torch, CUDA graphs); this module puts them together into one rank's budget.

The sources are vLLM's wheels from 0.11.0 to 0.33.0 (`pip download vllm==X --no-deps`):
- the budget: vllm/v1/worker/gpu_worker.py Worker.determine_available_memory and
  vllm/utils/mem_utils.py memory_profiling;
- the cache: vllm/v1/kv_cache_interface.py (page sizes, max_memory_usage_bytes of each spec),
  vllm/v1/core/kv_cache_utils.py and, from 0.28, kv_cache_planning.py (groups, blocks, the
  capacity log, the start-up check), vllm/platforms/interface.py (hybrid block alignment);
- the defaults: vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, vllm/config/vllm.py.

What was fitted rather than read is said where it is: the V1 sampler's warm-up in 0.11 and the
per-graph cost of CUDA graphs (fixtures/calibration/engine-logs.jsonl; docs/accuracy.md).

Calling it for a layout: a TP × PP × DP replica set is one `estimate` a pipeline stage
(`Rank(tp, pp, stage, dp, ep)`; every TP and DP rank of a stage holds the same), combined with
`combine_stages`, which gives every stage the smallest stage's blocks as vLLM does; the card
figure to check is the fullest stage's `need`. Data-parallel attention with expert parallelism
is `Rank(tp=1, dp=N, ep=True)`: attention whole on each rank, routed experts over N, and each
rank its own KV pool (N × its concurrency for the set). `fits` is vLLM's start-up check at
`max_model_len`; `max_model_len_fit` the longest that passes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from llmfit.plan.artifact import WeightLayout
from llmfit.plan.engines.vllm_inputs import (
    GIB,
    STATE_KINDS,
    Context,
    LoRA,
    Rank,
    Settings,
    Speculative,
    card_arch,
    card_family,
    layer_kinds,
    pp_indices,
)
from llmfit.plan.engines.vllm_kv import KvLayout, kv_layout, request_bytes
from llmfit.plan.engines.vllm_runtime import (
    NON_TORCH,
    EncoderProfile,
    activation,
    batch_defaults,
    cuda_graph_bytes,
    encoder_profile,
    indexer_topk_buffer,
    moe_scratch,
    moe_workspace,
    stage_buffers,
)
from llmfit.plan.engines.vllm_versions import VllmVersion
from llmfit.plan.engines.vllm_weights import Weights, parts_of, rank_weights
from llmfit.plan.layout import Card
from llmfit.plan.model import Model

# What a caller of estimate() needs beside it: the inputs it takes and what it returns.
__all__ = [
    "GIB", "LoRA", "Rank", "Settings", "Speculative", "VllmMemory", "Weights", "combine_stages",
    "estimate", "longest_max_model_len", "parts_of", "pp_indices",
]  # fmt: skip


@dataclass(frozen=True)
class VllmMemory:
    """One rank under one vLLM release: the budget part by part, the KV layout, and what vLLM
    logs. Bytes are ints; `kv_tokens` and `max_concurrency` are what "GPU KV cache size: N
    tokens" and "Maximum concurrency for L tokens per request: C x" print."""

    version: VllmVersion
    card_total: int
    gpu_memory_utilization: float
    # total × utilisation: what vLLM may use (gpu_worker request_memory).
    requested: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    model_runner_v2: bool
    weights: Weights
    # The profile run's transient peak: logits and sampler, live hidden states, encoder cache.
    activation: int
    # Buffers the runner keeps (Model Runner V2's sampler state), counted since 0.27.
    persistent_buffers: int
    # Memory outside torch: cuBLAS workspaces, attention workspaces.
    non_torch: int
    cuda_graphs: int
    # Whether the CUDA graphs come out of the KV budget (0.20 on) or the headroom (before).
    cuda_graphs_in_budget: bool
    encoder_cache: int
    # "Available KV cache memory": requested less everything above that counts.
    kv_budget: int
    layout: KvLayout | None
    num_blocks: int
    kv_tokens: int
    max_concurrency: float
    # Whether vLLM starts with this max_model_len (its check_enough_kv_cache_memory).
    fits: bool
    # The longest max_model_len that start-up check passes, up to the model's trained context.
    max_model_len_fit: int
    notes: tuple[str, ...] = field(default=())
    # The fused MoE's workspace, kept from the profile run on (0.13 on; before, a transient
    # peak inside `activation`).
    moe_workspace: int = 0
    # A pipeline stage after the first: the activations it receives (intermediate_tensors).
    stage_buffers: int = 0
    # The vision encoder's profile run, and what its peak adds above the decoder's.
    encoder: EncoderProfile = field(default_factory=EncoderProfile)
    encoder_peak: int = 0
    # Whether the cache was sized after warm-up from measured memory (0.34 on, CUDA and ROCm).
    extensible_kv_cache: bool = False
    # FlashInfer's MoE scratch, allocated and freed on every call: part of `activation`.
    moe_scratch: int = 0
    # The flag that set the pool's size, where one did (--kv-cache-memory-bytes,
    # --num-gpu-blocks-override): the card then holds all of it. "": the pool is what is left.
    kv_pinned: str = ""

    @property
    def runtime(self) -> int:
        """Everything the budget pays beside the weights and the KV pool: the profile run's peak,
        the runner's buffers, memory outside torch, CUDA graphs where they come out of the
        budget, a MoE's workspace, a later stage's receive buffers, a multimodal model's
        encoder outputs and its encoder run."""
        graphs = self.cuda_graphs if self.cuda_graphs_in_budget else 0
        return (
            self.activation
            + self.persistent_buffers
            + self.non_torch
            + graphs
            + self.encoder_cache
            + self.moe_workspace
            + self.stage_buffers
            + self.encoder_peak
        )

    @property
    def kv_cache(self) -> int:
        """Bytes the KV pool takes: whole blocks."""
        return self.num_blocks * (self.layout.bytes_per_block if self.layout else 0)

    @property
    def need(self) -> int:
        """What the card holds at its peak outside the KV pool, plus the pool: for 0.11-0.19 the
        CUDA graphs come after, in what the profile run's peak left free."""
        return self.weights.total + self.runtime + self.kv_cache


# ------------------------------------------------------------------------------------------------
# The extensible KV cache (0.34 on)
# ------------------------------------------------------------------------------------------------

# Memory the CUDA context holds before vLLM's start-up snapshot (gpu_worker init_snapshot), which
# the extensible cache's measurement of free memory sees and a share of the total does not:
# 512 MiB, what brings Qwen3-8B on one H100 at 32,768 tokens to the 13.46 sequences vLLM 0.34's
# measurement gives (issue 32; worked in tests/plan/test_vllm_034.py).
CUDA_CONTEXT = 512 << 20
# vllm/v1/worker/extensible_kv_cache.py KV_CACHE_MARGIN_FLOOR_BYTES and KV_CACHE_MARGIN_FRACTION.
MARGIN_FLOOR = 1 << 30
MARGIN_FLOOR_ROCM = 3 << 30
MARGIN_FRACTION = 0.75


def extensible_kv_cache(v: VllmVersion, card: Card, settings: Settings) -> bool:
    """Whether the cache is sized after warm-up: from 0.34 on CUDA and ROCm unless turned off
    (CacheConfig.enable_extensible_kv_cache, None → on for those platforms, off where
    --kv-cache-memory-bytes sizes the cache)."""
    if not v.has("extensible_kv_cache") or settings.enable_extensible_kv_cache is False:
        return False
    if settings.kv_cache_memory_bytes and settings.enable_extensible_kv_cache is None:
        return False
    return card_family(card) not in ("", "cpu")


def measured_kv_bytes(card: Card, requested: int, resident: int, transient: int) -> int:
    """What measure_kv_cache_bytes gives the cache: within the requested share, and within the
    memory free after warm-up (the card less the CUDA context and what stays resident) less a
    margin of max(1 GiB, 0.75 × the transient peak), less the transient peak kept free."""
    floor = MARGIN_FLOOR_ROCM if card_family(card).startswith("mi") else MARGIN_FLOOR
    margin = max(floor, int(transient * MARGIN_FRACTION))
    headroom = card.total_bytes - CUDA_CONTEXT - resident
    return min(requested - resident, headroom - margin) - transient


def mla_context_pass(ctx: Context) -> int:
    """What the sizing warm-up's chunked-context pass of an MLA model holds above the profile
    run (v1/worker/gpu/warmup.py run_kv_cache_sizing_warmup, 0.34 on): a workspace of
    min(max(8 × max_model_len, 4 × max_num_seqs × block), 65,536) tokens
    (determine_chunked_prefill_workspace_size), their latents gathered and up-projected to
    each head's K (nope) and V on the rank, in 16-bit."""
    m, v = ctx.model, ctx.version
    s = m.shapes
    if not v.has("sizing_warmup") or s is None or not s.kv_lora_rank:
        return 0
    block = ctx.settings.block_size or v.default_block_size
    tokens = min(max(8 * ctx.max_model_len, 4 * ctx.seqs * block), 65_536)
    heads = max(1, m.attention_heads // ctx.rank.tp)
    latent = s.kv_lora_rank + s.qk_rope_head_dim
    return tokens * (latent + heads * (s.qk_nope_head_dim + s.v_head_dim)) * 2


# ------------------------------------------------------------------------------------------------
# The estimate
# ------------------------------------------------------------------------------------------------


def estimate(
    model: Model,
    weight_bytes: int,
    rank: Rank | None = None,
    card: Card | None = None,
    settings: Settings | None = None,
    parts: WeightLayout | None = None,
) -> VllmMemory:
    """One rank of a layout under `settings.version`: its budget, its KV pool, and what vLLM logs.

    `weight_bytes` is the artifact's bytes (index total_size or the headers' sum) and `parts`
    its WeightLayout when the artifact has one. For pipeline parallelism call this once a stage
    (Rank.stage) and combine with `combine_stages`: vLLM gives every stage the smallest stage's
    block count.
    """
    rank = rank or Rank()
    card = card or Card("", 0)
    settings = settings or Settings()
    v = settings.version
    notes: list[str] = []
    extensible = extensible_kv_cache(v, card, settings)
    pinned = settings.kv_cache_memory_bytes
    util = settings.gpu_memory_utilization or (
        1.0 if extensible else v.default_gpu_memory_utilization
    )
    if pinned:
        # --kv-cache-memory-bytes: vLLM ignores the share; the card's whole memory is at stake.
        util = 1.0
    batched_default, seqs_default = batch_defaults(v, card)
    batched = settings.max_num_batched_tokens or batched_default
    seqs = settings.max_num_seqs or seqs_default
    max_len = settings.max_model_len or model.max_context or 0
    kinds = layer_kinds(model)
    hybrid = any(k in STATE_KINDS for k in kinds)
    mrv2 = v.uses_model_runner_v2(
        model.architecture,
        moe=model.is_moe,
        hybrid=hybrid,
        quantized=model.quantization is not None,
    )
    spec = settings.speculative
    num_spec = spec.num_speculative_tokens if spec and spec.method != "ngram" else 0
    ctx = Context(v, model, card, rank, settings, max_len, batched, seqs, mrv2, num_spec)
    last = rank.stage == rank.pp - 1

    weights = rank_weights(ctx, weight_bytes, parts, notes)
    if settings.cpu_offload_gb > 0:
        # --cpu-offload-gb (model_executor/offloader/uva.py UVAOffloader): the decoder layers'
        # parameters, one after another from the first layer, move to pinned host memory until
        # the bytes moved reach the limit (the last tensor may pass it); the embedding and the
        # output head stay. Counted to the limit, within one tensor.
        layers = weights.layers + weights.experts + weights.replicated
        weights = replace(weights, offloaded=min(int(settings.cpu_offload_gb * GIB), layers))
    workspace = moe_workspace(ctx)
    kept = v.has("moe_workspace_persistent")
    # FlashInfer's own MoE scratch is allocated and freed on every call: a transient, like the
    # workspace itself before 0.13.
    scratch = moe_scratch(ctx)
    act, persistent = activation(ctx, last, scratch + (0 if kept else workspace))
    workspace = workspace if kept else 0
    stage = stage_buffers(ctx)
    if not v.has("non_kv_from_free_memory"):
        # Before 0.27 vLLM counts weights + torch's peak increase during the profile run +
        # non-torch memory (mem_utils.memory_profiling): buffers allocated before the run are
        # not seen (Model Runner V2's sampler state, and its receive buffers, made at load).
        persistent = 0
        if mrv2:
            stage = 0
    persistent += indexer_topk_buffer(ctx)
    graphs = cuda_graph_bytes(ctx)
    in_budget = v.has("cuda_graphs_in_budget")
    profile = encoder_profile(ctx, weights)
    enc = profile.outputs
    # The encoder runs first, alone (profile_run): its peak counts where it passes what the
    # decoder's run holds with the encoder outputs kept.
    peak = max(0, profile.peak - (act + enc + workspace + stage))
    requested = math.ceil(card.total_bytes * util)
    runtime = act + persistent + NON_TORCH + enc + workspace + stage + peak
    non_kv = weights.total + runtime + (graphs if in_budget else 0)
    budget = requested - non_kv
    if graphs and v.has("blackwell_split_capture_sizes") and card_arch(card) == "blackwell":
        notes.append(
            f"vLLM {v} captures Blackwell's prefill and decode CUDA graphs on wider grids of "
            "their own (VllmConfig._split_cudagraph_capture_sizes), which llmfit counts as 0.33 "
            "did: the CUDA-graph figure is an estimate."
        )
    pinned_by = (
        "--num-gpu-blocks-override"
        if settings.num_gpu_blocks_override
        else "--kv-cache-memory-bytes"
        if pinned and not extensible
        else ""
    )
    if pinned and not extensible:
        # The cache is the bytes given, after a profile run that compiles the model
        # (gpu_worker.py determine_available_memory): nothing is measured against the card,
        # which must hold it beside the rest or run out of memory at start.
        budget = pinned
    if extensible:
        # The warm-up's steps run one at a time: the peak is the larger of the profile's and
        # the MLA context pass's (counted as activation, which is what it is).
        resident = non_kv - act - peak
        transient = max(act + peak, mla_context_pass(ctx))
        act = transient - peak
        budget = measured_kv_bytes(card, requested, resident, transient)
        notes.append(
            f"vLLM {v} sizes the KV cache after warm-up and CUDA-graph capture, from the memory "
            "then free (its extensible KV cache): the figures are what that measurement "
            "should find."
        )

    layout = kv_layout(ctx, notes)
    if layout is None or layout.bytes_per_block == 0:
        return VllmMemory(
            v, card.total_bytes, util, requested, max_len, seqs, batched, mrv2, weights, act,
            persistent, NON_TORCH, graphs, in_budget, enc, budget, layout, 0, 0, 0.0,
            budget > 0, max_len if budget > 0 else 0, tuple(notes), workspace, stage, profile,
            peak, extensible, scratch, pinned_by,
        )  # fmt: skip
    num_blocks = max(0, budget // layout.bytes_per_block)
    if settings.num_gpu_blocks_override:
        # v1/core/kv_cache_planning.py may_override_num_blocks: the blocks as given, whatever the
        # memory measured; the start-up check and the longest context are against them.
        num_blocks = settings.num_gpu_blocks_override
        budget = num_blocks * layout.bytes_per_block
    per_request = layout.blocks_per_request
    concurrency = num_blocks / per_request if per_request else 0.0
    if v.has("kv_tokens_from_concurrency"):
        tokens = int(concurrency * max_len)
    else:
        tokens = num_blocks // layout.groups * layout.block_size
    check = budget - (layout.bytes_per_block if v.has("null_block_reserved") else 0)
    fits = budget > 0 and request_bytes(ctx, layout, max_len) <= check
    longest = longest_max_model_len(ctx, layout, check) if budget > 0 else 0
    if pinned_by:
        # What the card must hold: the weights, the runtime, the CUDA graphs and the whole pool,
        # whatever the context: a shorter one does not shrink the pool.
        held = non_kv + (0 if in_budget else graphs) + num_blocks * layout.bytes_per_block
        if held > card.total_bytes:
            fits, longest = False, 0
    if not in_budget and graphs:
        notes.append(
            f"CUDA graphs ({graphs / GIB:.2f} GiB) are captured after the KV cache in vLLM "
            f"{v}: they must fit in what the profile run's peak and the "
            f"{1 - util:.0%} left by --gpu-memory-utilization leave free."
        )
    return VllmMemory(
        version=v,
        card_total=card.total_bytes,
        gpu_memory_utilization=util,
        requested=requested,
        max_model_len=max_len,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        model_runner_v2=mrv2,
        weights=weights,
        activation=act,
        persistent_buffers=persistent,
        non_torch=NON_TORCH,
        cuda_graphs=graphs,
        cuda_graphs_in_budget=in_budget,
        encoder_cache=enc,
        kv_budget=budget,
        layout=layout,
        num_blocks=num_blocks,
        kv_tokens=tokens,
        max_concurrency=concurrency,
        fits=fits,
        max_model_len_fit=longest,
        notes=tuple(notes),
        moe_workspace=workspace,
        stage_buffers=stage,
        encoder=profile,
        encoder_peak=peak,
        extensible_kv_cache=extensible,
        moe_scratch=scratch,
        kv_pinned=pinned_by,
    )


def longest_max_model_len(ctx: Context, layout: KvLayout, check: int) -> int:
    """The longest max_model_len the start-up check passes (estimate_max_model_len: a binary
    search from 1), searched up to the model's trained context (vLLM refuses longer without
    VLLM_ALLOW_LONG_MAX_MODEL_LEN) or the asked length, whichever is longer."""
    top = max(ctx.model.max_context or 0, ctx.max_model_len)
    if top == 0 or request_bytes(ctx, layout, 1) > check:
        return 0
    lo, hi, best = 1, top, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if request_bytes(ctx, layout, mid) <= check:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def combine_stages(stages: list[VllmMemory]) -> tuple[int, float, int]:
    """(num_blocks, max concurrency, KV tokens) of a pipeline: vLLM gives every stage the
    smallest stage's block count (get_kv_cache_configs); blocks a request are the same on
    every stage (the groups are the model's)."""
    with_layout = [s for s in stages if s.layout is not None]
    if not with_layout:
        return 0, 0.0, 0
    blocks = min(s.num_blocks for s in with_layout)
    first = with_layout[0]
    assert first.layout is not None
    conc = blocks / first.layout.blocks_per_request
    if first.version.has("kv_tokens_from_concurrency"):
        tokens = int(conc * first.max_model_len)
    else:
        tokens = blocks // first.layout.groups * first.layout.block_size
    return blocks, conc, tokens
