"""vLLM's memory on one card, as a named vLLM release's code works it out.

`estimate(model, weight_bytes, rank, card, settings)` follows, for one rank (one GPU) of a
TP × PP × DP (× EP) layout, what vLLM does between `vllm serve` and "Maximum concurrency for L
tokens per request": the weights the rank loads, its profile run, the CUDA-graph estimate, the
budget left for the KV cache, how that budget is cut into blocks and layer groups, and the
concurrency and KV tokens vLLM then logs. Every behaviour that changed between releases is a
switch of `vllm_versions.SWITCHES`; the file and function each step follows is cited where it is
done. Everything here is pure arithmetic on plain values.

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
from functools import lru_cache

from llmfit.plan.artifact import WeightLayout
from llmfit.plan.engines.vllm_versions import NEWEST, VllmVersion
from llmfit.plan.layout import Card, Layout
from llmfit.plan.model import AttentionKind, LayerGroup, Model, ModelShapes

GIB = 1 << 30
KIB = 1 << 10


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return cdiv(a, b) * b


# ------------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------------

# Streaming multiprocessors by card family: the V1 sampler's Triton top-k/top-p keeps one row of
# the vocabulary a multiprocessor (vllm/v1/sample/ops/topk_topp_triton.py, its buffer cache).
_SMS = {
    "h100": 132,
    "h200": 132,
    "h800": 132,
    "gh200": 132,
    "h20": 78,
    "b200": 148,
    "b300": 148,
    "gb200": 152,
    "a100": 108,
    "a800": 108,
    "l40s": 142,
    "l40": 142,
    "l4": 58,
    "a10": 72,
    "a40": 84,
    "rtx4090": 128,
    "rtx3090": 82,
    "rtx5090": 170,
}


def card_family(card: Card) -> str:
    """ "h100" of "h100-80g"."""
    return card.gpu_class.split("-")[0].lower()


def card_arch(card: Card) -> str:
    """ "hopper", "blackwell" (SM100), "ampere" or "" for the rest: what picks kernels whose memory
    differs (MLA block size, mxfp4 padding, the GDN prefill backend, capture sizes)."""
    f = card_family(card)
    if f in ("h100", "h200", "h800", "h20", "gh200"):
        return "hopper"
    if f in ("b200", "b300", "gb200", "gb300"):
        return "blackwell"
    if f in ("a100", "a800", "a10", "a30", "a40", "a6000", "rtx3090"):
        return "ampere"
    return ""


def card_sms(card: Card) -> int:
    return _SMS.get(card_family(card), 132)


@dataclass(frozen=True)
class Rank:
    """Which GPU of a layout this is: tensor parallel width, pipeline stages and this rank's
    stage, data-parallel width, and expert parallelism (--enable-expert-parallel).

    Data-parallel attention with expert parallelism (DeepSeek's `--data-parallel-size 8
    --enable-expert-parallel`) is tp=1, dp=8, ep=True: attention whole on every rank, routed
    experts spread over all eight.
    """

    tp: int = 1
    pp: int = 1
    stage: int = 0
    dp: int = 1
    ep: bool = False
    # This stage's layers as [start, end); None: vLLM's own split (get_pp_indices).
    layers: tuple[int, int] | None = None

    @classmethod
    def of(cls, layout: Layout, stage: int = 0) -> Rank:
        """A card of stage `stage` of the planner's layout."""
        return cls(layout.tp, layout.pp, stage, layout.dp, layout.ep)

    def layer_range(self, num_layers: int) -> tuple[int, int]:
        if self.layers is not None:
            return self.layers
        return pp_indices(num_layers, self.stage, self.pp)


def pp_indices(num_layers: int, stage: int, pp: int) -> tuple[int, int]:
    """vllm/distributed/utils.py get_pp_indices: equal stages, the remainder one layer each to
    the stages before the last, counting back from it."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    start = sum(parts[:stage])
    return start, start + parts[stage]


@dataclass(frozen=True)
class LoRA:
    """--enable-lora --max-loras N --max-lora-rank R."""

    max_loras: int = 1
    max_lora_rank: int = 16


@dataclass(frozen=True)
class Speculative:
    """--speculative-config: its method ("mtp", "eagle", "eagle3", "draft_model", "ngram") and
    how many tokens it proposes; for a draft model or EAGLE head, its weights on this rank and
    its cached layers (each costing, a token, what a target full-attention layer costs unless
    `draft_token_bytes` says otherwise)."""

    method: str
    num_speculative_tokens: int = 1
    draft_weight_bytes: int = 0
    draft_layers: int = 0
    draft_token_bytes: int = 0


@dataclass(frozen=True)
class Settings:
    """The flags that change memory; None is the version's default for the card."""

    version: VllmVersion = NEWEST
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    # "auto" (the model's, or the fp8 a checkpoint is calibrated for), "fp8", "bfloat16", ...
    kv_cache_dtype: str = "auto"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    block_size: int | None = None
    lora: LoRA | None = None
    speculative: Speculative | None = None
    # --limit-mm-per-prompt as (modality, count) pairs; () keeps vLLM's default (every modality
    # allowed). (("image", 0),) is a text-only launch of a multimodal model.
    limit_mm_per_prompt: tuple[tuple[str, int], ...] = ()
    # --quantization for online quantisation of a 16-bit checkpoint ("fp8"), else None.
    quantization: str | None = None
    disable_hybrid_kv_cache_manager: bool = False


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KvGroup:
    """One kind of cached layer on the rank and the block tables vLLM gives it."""

    # "full", "mla", "sliding", "chunked", "mamba2", "mamba1", "gated_delta_net"
    kind: str
    # Real layers of this kind on this rank.
    layers: int
    # Block tables (KV cache groups) of this kind, model-wide; each holds `group_size` slots.
    groups: int
    # Blocks one request of max_model_len takes in each of these groups.
    blocks_per_request: int
    window: int = 0


@dataclass(frozen=True)
class KvLayout:
    """How vLLM cuts the rank's KV budget: pages, blocks and layer groups."""

    # Tokens a block holds (after a hybrid model's attention block is grown to the state page).
    block_size: int
    # Bytes one layer's page (a block) takes; a state page is padded up to it.
    page_bytes: int
    # Layers each group holds (padding included): the block tables share group_size tensors.
    group_size: int
    kinds: tuple[KvGroup, ...]
    # Bytes one block of the shared pool costs: the fullest group's pages on this rank.
    bytes_per_block: int
    # "none", "align" or "all" for Mamba/GDN layers; "" for a model without them.
    mamba_mode: str = ""
    # Mamba state page before padding to the attention page (0 without Mamba layers).
    mamba_page_bytes: int = 0
    # 'all' mode: tokens a state page covers (its block); a prefill-checkpoint page in 'align'.
    mamba_block_size: int = 0
    checkpoint_pages: int = 0
    # Tokens a window layer keeps past its window for multi-token speculation.
    retained_tokens: int = 0

    @property
    def groups(self) -> int:
        return sum(k.groups for k in self.kinds)

    @property
    def blocks_per_request(self) -> int:
        return sum(k.groups * k.blocks_per_request for k in self.kinds)


@dataclass(frozen=True)
class Weights:
    """What the rank loads ("Model loading took X GiB"), part by part, and what it skips."""

    # The stage's repeating layers: attention, dense MLP, shared experts (split by TP).
    layers: int = 0
    # Their routed experts (split over TP × DP, with or without expert parallelism).
    experts: int = 0
    # Tensors every TP rank keeps whole: router gates, norms, MLA's fused q/kv-a projection,
    # KV projections past one head a rank.
    replicated: int = 0
    embedding: int = 0
    output: int = 0
    # Rotary cos/sin caches: max positions × rotary dims × 2 B each.
    rope: int = 0
    # MLA: W_UK/W_UV decompressed from kv_b_proj at load, bf16.
    mla_decompressed: int = 0
    # mxfp4 experts padded to the MoE kernel's tile (gpt-oss).
    mxfp4_padding: int = 0
    vision: int = 0
    lora: int = 0
    draft: int = 0
    # Bytes of the checkpoint vLLM does not load on this rank's account: MTP layers, a tied
    # output head stored beside the embedding.
    skipped: int = 0

    @property
    def total(self) -> int:
        return (
            self.layers
            + self.experts
            + self.replicated
            + self.embedding
            + self.output
            + self.rope
            + self.mla_decompressed
            + self.mxfp4_padding
            + self.vision
            + self.lora
            + self.draft
        )


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

    @property
    def kv_cache(self) -> int:
        """Bytes the KV pool takes: whole blocks."""
        return self.num_blocks * (self.layout.bytes_per_block if self.layout else 0)

    @property
    def need(self) -> int:
        """What the card holds at its peak outside the KV pool, plus the pool: for 0.11-0.19 the
        CUDA graphs come after, in what the profile run's peak left free."""
        graphs = self.cuda_graphs if self.cuda_graphs_in_budget else 0
        return (
            self.weights.total
            + self.activation
            + self.persistent_buffers
            + self.non_torch
            + graphs
            + self.encoder_cache
            + self.kv_cache
        )


# ------------------------------------------------------------------------------------------------
# Defaults a version picks for a card
# ------------------------------------------------------------------------------------------------


def batch_defaults(version: VllmVersion, card: Card) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) `vllm serve` uses on this card
    (vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, OPENAI_API_SERVER): 16,384 and
    1,024 on cards of 160 GiB or more from 0.28; 8,192 and 1,024 on cards of 70 GiB or more
    that are not A100s (nor, in 0.33, a GB10); 2,048 and 256 elsewhere."""
    total = card.total_bytes
    if version.has("big_card_batch_defaults") and total >= 160 * GIB:
        return 16_384, 1024
    if total >= 70 * GIB and card_family(card) not in ("a100", "gb10"):
        return 8192, 1024
    return 2048, 256


# The sampler warm-up's peak a request a vocabulary entry, bytes (see activation()).
# 0.11's V1 sampler (FlashInfer top-k/top-p): fitted to llm-d's three H100 records (Qwen3-0.6B
# 5.56 GiB, Llama-3.1-8B 4.76, gpt-oss-20b 7.38 at 1,024 requests): 38 B a request a vocabulary
# entry, with 2.75 B a batched token a hidden unit (the old fit's 4.75 B x 8,192 tokens is the
# same 38 B x 1,024 requests).
SAMPLER_BYTES_FLASHINFER = 38
# 0.12-0.16 (PyTorch sort in apply_top_k_top_p_pytorch): the bf16 logits (2) and their fp32 copy
# (4) stay alive while the sort holds values (4) and int64 indices (8), the top-p softmax (4) and
# the two bool masks (1 + 1): 24 B.
SAMPLER_BYTES_SORT = 24
# 0.17 on (Triton top-k/top-p, in place): bf16 logits 2 + fp32 4 + the softmax probs 4 + the
# exponential noise random_sample divides by 4 = 14 B, plus the kernel's per-SM row buffer.
SAMPLER_BYTES_TRITON = 14
# Model Runner V2 (vllm/v1/worker/gpu/model_runner.py _dummy_sampler_run, sample/sampler.py):
# the bf16 logits and the fp32 copy its warm-up pass makes (2 + 4); everything after runs in
# place in Triton kernels. Its penalties keep output_bin_counts (int32, 4 B) and prompt_bin_mask
# (1 bit) a request a vocabulary entry for good: buffers, not activation.
SAMPLER_BYTES_MRV2 = 6
SAMPLER_STATE_BYTES_MRV2_X8 = 33  # 4 B + 1/8 B, in eighths
HIDDEN_BYTES_X4 = 11  # 2.75 B a batched token a hidden unit (the old fit; the live hidden states)
# Memory outside torch after the snapshot: 0.13 GiB in every 0.11 record at TP 1. NCCL starts
# before the snapshot since V1 (gpu_worker.init_device), so tensor parallelism adds nothing: the
# 1.79 GiB a card plan/engines/vllm_sizes.py charged (NON_TORCH_TP) came from a V0 record
# (PR #10511).
NON_TORCH = 139_586_437  # 0.13 GiB
# CUDA graphs, a layer a captured size: Qwen3-0.6B's 28 dense layers took 0.10 GiB and
# gpt-oss-20b's 24 MoE layers 0.39 GiB, each over 0.11's 67 capture sizes (llm-d's H100
# records): 56 KiB a dense layer, 254 KiB a MoE layer (its routing, expert and all-to-all
# kernels). Fitted: vLLM measures this by a trial capture (gpu/cudagraph_utils.py
# profile_cudagraph_memory), which no arithmetic reproduces.
GRAPH_BYTES_DENSE_LAYER = 56 * KIB
GRAPH_BYTES_MOE_LAYER = 254 * KIB


def capture_sizes(
    version: VllmVersion, model: Model, card: Card, max_num_seqs: int, batched: int, spec: int
) -> int:
    """How many batch sizes vLLM captures CUDA graphs for (vllm/config/vllm.py
    _set_cudagraph_sizes): up to min(2 × max_num_seqs × (1 + speculative tokens), 512) tokens
    (1,024 for gpt-oss from 0.12 and on Blackwell from 0.28), never past max_num_batched_tokens;
    1, 2, 4, then every 8 (0.11: every 8 to the end; from 0.12 every 16 past 256)."""
    limit = 512
    if version.has("gpt_oss_capture_1024") and model.model_type == "gpt_oss":
        limit = 1024
    elif version.has("blackwell_capture_1024") and card_arch(card) == "blackwell":
        limit = 1024
    top = min(max_num_seqs * (1 + spec) * 2, limit, batched)
    sizes = {s for s in (1, 2, 4) if s <= top}
    if version.has("capture_sizes_step16"):
        sizes |= set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))
    else:
        sizes |= set(range(8, top + 1, 8))
    return len(sizes)


# ------------------------------------------------------------------------------------------------
# Layers, and the KV spec of each
# ------------------------------------------------------------------------------------------------

STATE_KINDS = ("mamba2", "mamba1", "gated_delta_net")
_GROUP_KIND = {
    AttentionKind.FULL: "full",
    AttentionKind.MLA: "mla",
}


def layer_kinds(model: Model) -> tuple[str, ...]:
    """Each layer's kind, in order: the config's, else spread from the layer groups."""
    if model.shapes and model.shapes.layer_kinds:
        return model.shapes.layer_kinds
    kinds: list[str] = []
    for g in model.layer_groups:
        if g.kind is AttentionKind.SLIDING:
            kinds += ["chunked" if g.chunked else "sliding"] * g.layers
        elif g.kind is AttentionKind.LINEAR:
            kinds += [g.state_kind or "mamba2"] * g.layers
        else:
            kinds += [_GROUP_KIND[g.kind]] * g.layers
    kinds += [""] * (model.layers - len(kinds))
    return tuple(kinds)


def _group_of(model: Model, kind: str) -> LayerGroup | None:
    for g in model.layer_groups:
        if kind == "full" and g.kind is AttentionKind.FULL:
            return g
        if kind == "mla" and g.kind is AttentionKind.MLA:
            return g
        if kind == "sliding" and g.kind is AttentionKind.SLIDING and not g.chunked:
            return g
        if kind == "chunked" and g.kind is AttentionKind.SLIDING and g.chunked:
            return g
    return None


def kv_elem_bytes(model: Model, kv_cache_dtype: str) -> int:
    """Bytes an element of the cache takes (vllm/config/cache.py CacheDType)."""
    dtype = model.kv_dtype if kv_cache_dtype == "auto" else kv_cache_dtype
    if dtype.startswith("fp8") or dtype.startswith("float8"):
        return 1
    return 4 if dtype == "float32" else 2


def attention_token_bytes(model: Model, kind: str, tp: int, elem: int) -> int:
    """Bytes one token costs one attention layer on one rank (AttentionSpec /
    MLAAttentionSpec.page_size_bytes over block_size): KV heads split until one a rank
    (ModelConfig.get_num_kv_heads), K and V; MLA's latent once, whole on every rank."""
    g = _group_of(model, kind) or _group_of(model, "full") or _group_of(model, "mla")
    if g is None:
        return 0
    if g.kind is AttentionKind.MLA:
        return g.latent_dim * elem
    return max(1, g.kv_heads // tp) * (g.head_dim + g.value_dim) * elem


def _dtype_size(name: str | None, model_dtype: str | None) -> int:
    if name in (None, "auto"):
        name = model_dtype
    return 4 if name == "float32" else 2


def mamba_state_dtypes(
    model: Model, version: VllmVersion, kv_cache_dtype: str = "auto"
) -> tuple[int, int]:
    """Bytes an element of the conv state and of the SSM (temporal) state take
    (MambaStateDtypeCalculator: the model's dtype unless --mamba-ssm-cache-dtype says).
    Nemotron-H's SSM state follows the config's mamba_ssm_cache_dtype, else float16 (0.13-0.19)
    or float32 (from 0.20) (model_executor/models/config.py NemotronHForCausalLMConfig)."""
    shape = model.shapes.mamba if model.shapes else None
    conv = _dtype_size(None, model.dtype)
    ssm_name = shape.ssm_dtype if shape else None
    if ssm_name is None and model.model_type == "nemotron_h":
        ssm_name = version.nemotron_h_ssm_dtype
    return conv, _dtype_size(ssm_name, model.dtype) if ssm_name else conv


def mamba_page_bytes(model: Model, version: VllmVersion, tp: int, num_spec: int = 0) -> int:
    """One state page, before padding (MambaSpec.page_size_bytes over the shapes of
    MambaStateShapeCalculator): mamba2's conv state is (kernel − 1 + speculative) ×
    (inner + 2 × n_groups × state) / tp, n_groups padded up to a multiple of tp
    (extra_groups_for_head_shards), and its SSM state heads/tp × head_dim × state; GDN's conv
    is (kernel − 1 + speculative) × (2 × k_heads × k_dim + v_heads × v_dim) / tp and its state
    v_heads/tp × v_dim × k_dim; mamba1's conv (kernel − 1) × inner/tp and state inner/tp ×
    state."""
    s = model.shapes.mamba if model.shapes else None
    if s is None:
        return 0
    conv_b, ssm_b = mamba_state_dtypes(model, version)
    rows = s.conv_kernel - 1 + num_spec
    if s.kind == "mamba2":
        groups = s.n_groups if s.n_groups % tp == 0 else s.n_groups + tp - s.n_groups
        conv = rows * ((s.inner + 2 * groups * s.state_size) // tp)
        ssm = (s.heads // tp) * s.head_dim * s.state_size
    elif s.kind == "gated_delta_net":
        conv = rows * ((2 * s.k_heads * s.k_head_dim + s.v_heads * s.v_head_dim) // tp)
        ssm = (s.v_heads // tp) * s.v_head_dim * s.k_head_dim
    else:
        conv = (s.conv_kernel - 1) * (s.inner // tp)
        ssm = (s.inner // tp) * s.state_size
    return conv * conv_b + ssm * ssm_b


# ------------------------------------------------------------------------------------------------
# The KV layout
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    version: VllmVersion
    model: Model
    card: Card
    rank: Rank
    settings: Settings
    max_model_len: int
    batched: int
    seqs: int
    mrv2: bool
    num_spec: int


def in_flight_tokens(ctx: _Context) -> int:
    """Tokens a window layer keeps beside its window (VllmConfig.max_in_flight_tokens): from
    0.26, every batch in flight — 2 with async scheduling (on by default since 0.14), pp + 1
    under Model Runner V2 with pipeline parallelism, pp with the V1 runner (which turns async
    scheduling off under pp) — times max_num_batched_tokens; before, one batch."""
    if not ctx.version.has("window_in_flight_batches"):
        return ctx.batched
    pp = ctx.rank.pp
    if ctx.mrv2:
        batches = pp + 1
    else:
        batches = 2 if pp == 1 else pp
    return batches * ctx.batched


def _mla_block_size(ctx: _Context) -> int:
    """MLA backends' block size (vllm/platforms/cuda.py): FlashMLA's 64 on Hopper in 0.11, then
    FLASH_ATTN_MLA's 16; CUTLASS MLA's 128 on Blackwell until 0.14, then FlashInfer MLA's 32."""
    arch, v = card_arch(ctx.card), ctx.version
    if arch == "hopper":
        return 16 if v.has("mla_block_16_on_hopper") else 64
    if arch == "blackwell":
        return 32 if v.minor >= 15 else 128
    return 16


def mamba_mode(ctx: _Context, hybrid: bool) -> tuple[str, bool]:
    """(mode, prefix caching) for the state layers: prefix caching is on by default for every
    model but hybrids, and for hybrids from 0.26 (ModelConfig.is_prefix_caching_supported); with
    it on, Mamba models that support it run 'all' mode (0.15-0.27) and the rest 'align' (from
    0.15; MambaModelConfig); before 0.15 vLLM turned prefix caching off for them."""
    s, v = ctx.settings, ctx.version
    caching = s.enable_prefix_caching
    if caching is None:
        caching = not hybrid or v.has("hybrid_prefix_caching")
    if not hybrid:
        return "", caching
    if not caching or not v.has("mamba_align_mode"):
        return "none", False
    shape = ctx.model.shapes.mamba if ctx.model.shapes else None
    if v.has("mamba_all_mode") and shape is not None and shape.kind in ("mamba1", "mamba2"):
        return "all", True
    return "align", True


def _checkpoint_pages(ctx: _Context, mode: str) -> int:
    """The extra prefill-checkpoint page an align-mode state layer keeps: Mamba-2 from 0.32,
    GDN from 0.33 when its prefill runs on FlashInfer (Hopper)."""
    if mode != "align":
        return 0
    shape = ctx.model.shapes.mamba if ctx.model.shapes else None
    if shape is None:
        return 0
    if shape.kind == "mamba2" and ctx.version.has("mamba2_checkpoint_page"):
        return 1
    if (
        shape.kind == "gated_delta_net"
        and ctx.version.has("gdn_checkpoint_page")
        and card_arch(ctx.card) == "hopper"
    ):
        return 1
    return 0


def kv_layout(ctx: _Context, notes: list[str]) -> KvLayout | None:
    """Pages, block size and layer groups on this rank, as vLLM builds them."""
    m, v, rank, s = ctx.model, ctx.version, ctx.rank, ctx.settings
    kinds = list(layer_kinds(m))
    if ctx.settings.speculative and ctx.settings.speculative.method == "mtp":
        # The MTP layers' own attention joins the cache (DeepSeekMTP, Qwen3NextMTP).
        mtp = m.shapes.mtp_layers if m.shapes else 0
        attn = "mla" if "mla" in kinds else "full"
        kinds += [attn] * mtp
    elif ctx.settings.speculative and ctx.settings.speculative.draft_layers:
        kinds += ["draft"] * ctx.settings.speculative.draft_layers
    cached = [k for k in kinds if k]
    if not cached:
        return None
    hybrid = any(k in STATE_KINDS for k in cached)
    elem = kv_elem_bytes(m, s.kv_cache_dtype)

    # Local windows become full attention when the hybrid allocator is off: for Llama 4's
    # chunked layers before 0.14, and with EAGLE (VllmConfig.__post_init__).
    spec = s.speculative
    hma_off = s.disable_hybrid_kv_cache_manager
    if "chunked" in cached and (
        not v.has("chunked_local_hybrid_allocator")
        or (spec is not None and spec.method.startswith("eagle"))
    ):
        hma_off = True
        notes.append(
            "Llama 4's chunked layers are cached as full attention: vLLM turns the hybrid "
            "allocator off for chunked local attention "
            + ("in this release." if not v.has("chunked_local_hybrid_allocator") else "with EAGLE.")
        )
    if hma_off and not hybrid:
        kinds = ["full" if k in ("sliding", "chunked") else k for k in kinds]

    mode, _ = mamba_mode(ctx, hybrid)
    block = s.block_size or (_mla_block_size(ctx) if "mla" in kinds else 16)
    attn_kind = next((k for k in kinds if k in ("full", "mla", "sliding", "chunked")), "")
    per_token = attention_token_bytes(m, attn_kind, rank.tp, elem) if attn_kind else 0
    draft_token = spec.draft_token_bytes if spec and spec.draft_token_bytes else per_token
    state_page = mamba_page_bytes(m, v, rank.tp, ctx.num_spec if hybrid else 0)
    mamba_block = 0
    if hybrid and per_token:
        # vllm/platforms/interface.py _align_hybrid_block_size (0.11: HybridAttentionMamba-
        # ModelConfig.verify_and_update_config): the attention block grows, in multiples of the
        # kernel alignment (16, or lcm with GDN's 64-token FlashInfer checkpoints), until its
        # page holds a state page; 'all' mode rounds it to the Mamba chunk size instead.
        align = max(16, block)
        if _checkpoint_pages(ctx, mode) and m.shapes and m.shapes.mamba:
            if m.shapes.mamba.kind == "gated_delta_net":
                align = math.lcm(align, 64)
        if mode == "all":
            chunk_size = m.shapes.mamba.chunk_size if m.shapes and m.shapes.mamba else 0
            chunk = math.lcm(chunk_size or align, align)
            need = chunk * cdiv(cdiv(state_page, per_token), chunk)
            mamba_block = need
        else:
            need = align * cdiv(state_page, align * per_token)
        block = max(block, need)
        if mode == "align":
            mamba_block = block
    elif hybrid:
        # A model of state layers only (Mamba): one page a state.
        block = 1
    page = block * per_token if per_token else state_page
    if hybrid and state_page > page:
        page = state_page

    if draft_token != per_token and "draft" in kinds:
        notes.append(
            "The draft's cached layers cost a token what the target's do not; vLLM unifies "
            "their pages, which this estimate leaves out."
        )
    start, end = rank.layer_range(m.layers)
    group_size, groups, fullest = _kv_groups(
        m,
        tuple(kinds),
        draft_token == per_token,
        v.has("group_size_max_under_1_5"),
        start,
        end,
        rank.stage == rank.pp - 1,
    )
    retained = 0
    if spec and spec.method in ("mtp", "eagle", "eagle3") and v.minor >= 28:
        # get_global_kv_cache_groups: multi-module MTP retains lookahead − 1 tokens more.
        retained = max(0, (spec.num_speculative_tokens if spec.method == "mtp" else 1) - 1)
    kinds_out = [KvGroup(kind, here, n, 0, window) for kind, window, here, n in groups]
    layout = KvLayout(
        block_size=block,
        page_bytes=page,
        group_size=group_size,
        kinds=tuple(kinds_out),
        bytes_per_block=fullest * page,
        mamba_mode=mode,
        mamba_page_bytes=state_page if hybrid else 0,
        mamba_block_size=mamba_block,
        checkpoint_pages=_checkpoint_pages(ctx, mode),
        retained_tokens=retained,
    )
    blocks = kind_blocks(ctx, layout, ctx.max_model_len)
    return replace(
        layout,
        kinds=tuple(
            replace(k, blocks_per_request=b) for k, b in zip(layout.kinds, blocks, strict=True)
        ),
    )


# Like rank_weights' layer sums: the same stage recurs on every card class a plan tries.
@lru_cache(maxsize=256)
def _kv_groups(
    m: Model,
    kinds: tuple[str, ...],
    draft_is_full: bool,
    max_under_1_5: bool,
    start: int,
    end: int,
    last: bool,
) -> tuple[int, tuple[tuple[str, int, int, int], ...], int]:
    """(group size, (kind, window, layers on this rank, groups) for each kind of cached layer,
    the most layers of one group on this rank) for layers [start, end) of `kinds`; MTP and draft
    layers (index ≥ m.layers) on the last stage."""

    # Specs, in layer order: vLLM buckets like specs in order of first appearance.
    def key(kind: str) -> tuple[str, int]:
        if kind in ("sliding", "chunked"):
            g = _group_of(m, kind)
            return kind, g.window if g else 0
        if kind == "draft":
            return ("full" if draft_is_full else "draft"), 0
        if kind in STATE_KINDS:
            return "state", 0
        return kind, 0

    buckets: dict[tuple[str, int], list[int]] = {}
    for i, k in enumerate(kinds):
        if k:
            buckets.setdefault(key(k), []).append(i)
    counts = [len(b) for b in buckets.values()]
    if len(buckets) == 1:
        group_size = counts[0]
    else:
        # _get_kv_cache_groups_uniform_page_size: the smallest type's count, or the largest's
        # when under 1.5 × the smallest (from 0.18); every type is padded to whole groups and
        # group i of a type takes layers[i::groups] (so pipeline stages share the groups).
        group_size = min(counts)
        if max_under_1_5 and max(counts) < 1.5 * min(counts):
            group_size = max(counts)

    # MTP and draft layers run on the last stage (the drafter lives with the sampler).
    def on_rank(i: int) -> bool:
        return start <= i < end if i < m.layers else last

    out = []
    fullest = 0
    for (kind, window), layers in buckets.items():
        n_groups = cdiv(len(layers), group_size)
        here = [sum(1 for i in layers[j::n_groups] if on_rank(i)) for j in range(n_groups)]
        fullest = max(fullest, max(here))
        if kind == "state":
            kind = m.shapes.mamba.kind if m.shapes and m.shapes.mamba else "mamba2"
        out.append((kind, window, sum(here), n_groups))
    return group_size, tuple(out), fullest


def kind_blocks(ctx: _Context, layout: KvLayout, max_model_len: int) -> list[int]:
    """Blocks one request of max_model_len takes in one group of each kind."""
    inflight = in_flight_tokens(ctx)
    out = []
    for k in layout.kinds:
        b = blocks_for(
            k.kind,
            k.window,
            max_model_len,
            layout.block_size,
            inflight,
            layout.retained_tokens,
            layout.mamba_mode,
            layout.mamba_block_size,
            layout.checkpoint_pages,
        )
        out.append(b + (ctx.num_spec if k.kind in STATE_KINDS else 0))
    return out


def blocks_for(
    kind: str,
    window: int,
    max_model_len: int,
    block: int,
    inflight: int,
    retained: int,
    mode: str,
    mamba_block: int,
    checkpoint_pages: int,
) -> int:
    """Blocks one request of max_model_len takes in one group (each spec's
    max_memory_usage_bytes over its page, vllm/v1/kv_cache_interface.py):
    - full, MLA: cdiv(L, block) (FullAttentionSpec);
    - sliding: cdiv(min(window − 1 + retained + in-flight tokens, L), block) + 1, the window need
      not start on a block (SlidingWindowSpec);
    - chunked: cdiv(min(chunk + in-flight tokens, L), block) (ChunkedLocalAttentionSpec);
    - state: 1 page ('none'), 2 ('align', + 1 prefill checkpoint from 0.32/0.33), or
      cdiv(L, Mamba block) ('all') (MambaSpec)."""
    L = max_model_len
    if kind in ("full", "mla", "draft"):
        return cdiv(L, block)
    if kind in STATE_KINDS:
        kind = "state"
    if kind == "sliding":
        return cdiv(min(window - 1 + retained + inflight, L), block) + 1
    if kind == "chunked":
        return cdiv(min(window + inflight, L), block)
    if mode == "all":
        return cdiv(L, mamba_block)
    if mode == "align":
        return 2 + checkpoint_pages
    return 1


def request_bytes(ctx: _Context, layout: KvLayout, max_model_len: int) -> int:
    """What vLLM's start-up check says one request of max_model_len needs on this rank
    (check_enough_kv_cache_memory): the sum over the rank's layers of each spec's need until
    0.13; from 0.14 the fullest group's pages × the groups' blocks (0.14-0.18 counted only the
    first group's blocks, from 0.19 every group's: _max_memory_usage_bytes_from_groups)."""
    v = ctx.version
    per_kind = kind_blocks(ctx, layout, max_model_len)
    pairs = list(zip(layout.kinds, per_kind, strict=True))
    if not v.has("admission_by_groups"):
        return sum(k.layers * b * layout.page_bytes for k, b in pairs)
    if not v.has("admission_sums_groups"):
        return layout.bytes_per_block * per_kind[0]
    return layout.bytes_per_block * sum(k.groups * b for k, b in pairs)


# ------------------------------------------------------------------------------------------------
# Weights a rank loads
# ------------------------------------------------------------------------------------------------


def _elem(model: Model) -> int:
    return 4 if model.dtype == "float32" else 2


def layer_params(model: Model, index: int) -> tuple[int, int, int, int]:
    """(parameters, routed-expert parameters, replicated linear parameters, 16-bit parameters)
    of layer `index`, from the config: attention or mixer, MLP or experts, norms. Replicated are
    the tensors vLLM keeps whole on every TP rank (ReplicatedLinear / disable_tp): MLA's fused
    q_a/kv_a projection (stored like the other linear weights), and, always 16-bit, the MoE
    router gate and the norms."""
    s = model.shapes or ModelShapes()
    h = model.hidden_size or 0
    kinds = layer_kinds(model)
    kind = kinds[index] if index < len(kinds) else "full"
    heads, kvh, hd = model.attention_heads, model.kv_heads, model.head_dim
    params = expert = repl = sixteen = 0
    nemotron = model.model_type == "nemotron_h"
    if kind == "mla":
        nope, rope, vdim = s.qk_nope_head_dim, s.qk_rope_head_dim, s.v_head_dim
        q_a = h * s.q_lora_rank if s.q_lora_rank else 0
        q_b = (s.q_lora_rank or h) * heads * (nope + rope)
        kv_a = h * (s.kv_lora_rank + rope)
        kv_b = s.kv_lora_rank * heads * (nope + vdim)
        o = heads * vdim * h
        params += q_a + q_b + kv_a + kv_b + o + s.q_lora_rank + s.kv_lora_rank
        repl += q_a + kv_a
        sixteen += s.q_lora_rank + s.kv_lora_rank
    elif kind in ("full", "sliding", "chunked"):
        params += h * heads * hd + 2 * h * kvh * hd + heads * hd * h
    elif kind == "mamba2" and s.mamba:
        mb = s.mamba
        conv_dim = mb.inner + 2 * mb.n_groups * mb.state_size
        params += h * (mb.inner + conv_dim + mb.heads) + conv_dim * mb.conv_kernel
        params += 3 * mb.heads + mb.inner + mb.inner * h
    elif kind == "gated_delta_net" and s.mamba:
        mb = s.mamba
        qkvz = 2 * mb.k_heads * mb.k_head_dim + 2 * mb.v_heads * mb.v_head_dim
        conv_dim = 2 * mb.k_heads * mb.k_head_dim + mb.v_heads * mb.v_head_dim
        params += h * (qkvz + 2 * mb.v_heads) + conv_dim * mb.conv_kernel
        params += 2 * mb.v_heads + mb.v_head_dim + mb.v_heads * mb.v_head_dim * h
    elif kind == "mamba1" and s.mamba:
        mb = s.mamba
        params += h * 2 * mb.inner + mb.inner * mb.conv_kernel + mb.inner * h
        params += mb.inner * (mb.state_size * 2 + 2)
    # The MLP: Nemotron-H's layers each hold one block (mixer, attention or MLP); every other
    # family pairs the mixer with an MLP or the experts.
    if nemotron:
        if kind == "":
            params += 2 * h * s.intermediate_size  # relu² MLP: up and down
        params += h
        sixteen += h
        return params, expert, repl, sixteen
    moe_layer = model.is_moe and index >= s.dense_layers
    if moe_layer:
        e = model.experts or 0
        routed = e * 3 * h * s.moe_intermediate_size
        shared = 3 * h * s.shared_expert_intermediate_size
        router = e * h
        params += routed + shared + router
        expert += routed
        sixteen += router
    else:
        params += 3 * h * s.intermediate_size
    params += 2 * h
    sixteen += 2 * h
    return params, expert, repl, sixteen


@dataclass(frozen=True)
class Parts:
    """The checkpoint's bytes by part, as vLLM places them: the stage's layers, the embedding
    with the first stage, the output with the last; MTP layers and a tied output head stored
    beside the embedding are bytes vLLM skips, the vision tower is built beside the layers."""

    layer_bytes: tuple[int, ...]
    expert_bytes: tuple[int, ...]
    # Bytes of each layer kept whole on every TP rank.
    replicated_bytes: tuple[int, ...]
    embed_bytes: int
    output_bytes: int
    mtp_bytes: int = 0
    vision_bytes: int = 0
    # Bytes outside the layout that are neither (loaded with the first stage).
    extra_bytes: int = 0
    # Output-head bytes the checkpoint stores though the embeddings are tied.
    tied_head_bytes: int = 0


# A plan sizes every layout of every pool with the same model and checkpoint (a 94-layer MoE
# on the example fleet: 140 estimates, 2 distinct parts): walking the layers each time was
# most of the plan's time. Model, WeightLayout and Parts are frozen, so one result is shared.
@lru_cache(maxsize=64)
def parts_of(model: Model, weight_bytes: int, parts: WeightLayout | None) -> Parts:
    """The checkpoint's bytes by part: from the artifact's WeightLayout when it has one, else
    spread over the config's parameters.

    With a WeightLayout: layers at index ≥ model.layers are MTP layers (DeepSeek-V3's layer 61);
    bytes outside the layout (weight_bytes − parts.total) are the vision tower, up to its size
    from the config, and the rest MTP weights kept under another name (Qwen3-Next's mtp.*) when
    the model has MTP layers, else loaded with the first stage.

    From the config: 16-bit parameters for the embedding, the output head, norms, router gates
    and the vision tower (quantised checkpoints leave them unquantised); what remains of
    weight_bytes spread over the linear weights in proportion to their parameters, except
    gpt-oss's mxfp4 experts, which take 4.25 bits a weight (a 4-bit value and an 8-bit scale a
    32) and a bf16 bias an output. An MTP module counts as one more layer like the last and a
    2H → H projection, with DeepSeek's own embedding and head.
    """
    s = model.shapes or ModelShapes()
    elem = _elem(model)
    h, vocab = model.hidden_size or 0, model.vocab_size or 0
    rows = [layer_params(model, i) for i in range(model.layers)]
    head = vocab * h * elem
    if parts is not None:
        n = model.layers
        layers = tuple(parts.layer_bytes[:n])
        experts = tuple(parts.expert_bytes[:n])
        repl = []
        for i, (params, exp, rep_lin, six) in enumerate(rows[: len(layers)]):
            lin_params = params - exp - six
            rate = (layers[i] - experts[i] - six * elem) / lin_params if lin_params > 0 else 0.0
            repl.append(six * elem + int(rep_lin * rate))
        mtp = sum(parts.layer_bytes[n:])
        other = max(0, weight_bytes - parts.total)
        vision = min(other, s.vision_params * elem)
        rest = other - vision
        tied_head = head if s.tied_embeddings and parts.output_bytes >= head else 0
        return Parts(
            layer_bytes=layers,
            expert_bytes=experts,
            replicated_bytes=tuple(repl),
            embed_bytes=parts.embed_bytes,
            output_bytes=parts.output_bytes - tied_head,
            mtp_bytes=mtp + (rest if s.mtp_layers else 0),
            vision_bytes=vision,
            extra_bytes=0 if s.mtp_layers else rest,
            tied_head_bytes=tied_head,
        )
    embed = vocab * h * elem
    output = h * elem + (0 if s.tied_embeddings else head)
    vision = s.vision_params * elem
    sixteen = [r[3] * elem for r in rows]
    mtp_params = 0
    if s.mtp_layers and rows:
        mtp_params = s.mtp_layers * (rows[-1][0] + 2 * h * h)
        if model.model_type in ("deepseek_v3", "deepseek_v2", "kimi_k2"):
            mtp_params += s.mtp_layers * 2 * vocab * h
    expert_b = 0
    if model.quantization == "mxfp4" and model.is_moe:
        e, inter = model.experts or 0, s.moe_intermediate_size
        # gate_up (2I × H) and down (H × I) weights at 4.25 bits, a bf16 bias an output row.
        expert_b = e * (3 * h * inter * 17 // 32 + (2 * inter + h) * 2)
    fixed = embed + output + vision + sum(sixteen)
    fixed += expert_b * sum(1 for r in rows if r[1])
    linear = [r[0] - r[3] - (r[1] if expert_b else 0) for r in rows]
    tied_head = 0
    if s.tied_embeddings and model.quantization is None:
        # A tied checkpoint that stores lm_head.weight anyway (Qwen3-0.6B's 1.5 GB file holds
        # 0.75 B parameters for a 0.6 B model): vLLM skips it (skip_prefixes "lm_head.").
        plain = fixed + (sum(linear) + mtp_params) * elem
        if weight_bytes - plain >= head * 9 // 10:
            tied_head = head
    if sum(linear) + mtp_params <= 0 and rows:
        # A config that gives no sizes (no hidden size, no vocabulary): the checkpoint as that
        # many equal layers, as before parts were known, rather than weights of nothing.
        each, extra = divmod(max(0, weight_bytes - fixed), len(rows))
        return Parts(
            layer_bytes=tuple(each + (1 if i < extra else 0) for i in range(len(rows))),
            expert_bytes=(0,) * len(rows),
            replicated_bytes=(0,) * len(rows),
            embed_bytes=embed,
            output_bytes=output,
            vision_bytes=vision,
        )
    if fixed + tied_head >= weight_bytes and rows:
        # The config's 16-bit parts alone outweigh the checkpoint: config and bytes disagree,
        # and a share of what is left would be negative (weights of less than nothing a card).
        # The checkpoint's bytes are what loads: spread as equal layers, as weights.spread does.
        each, extra = divmod(weight_bytes, len(rows))
        return Parts(
            layer_bytes=tuple(each + (1 if i < extra else 0) for i in range(len(rows))),
            expert_bytes=(0,) * len(rows),
            replicated_bytes=(0,) * len(rows),
            embed_bytes=0,
            output_bytes=0,
            vision_bytes=0,
        )
    rate = (weight_bytes - fixed - tied_head) / max(1, sum(linear) + mtp_params)
    layer_b, exp_b, repl_b = [], [], []
    for (_, exp, rep_lin, six), lin in zip(rows, linear, strict=True):
        e_bytes = expert_b if (expert_b and exp) else int(exp * rate)
        layer_b.append(int(lin * rate) + six * elem + (expert_b if expert_b and exp else 0))
        exp_b.append(e_bytes)
        repl_b.append(six * elem + int(rep_lin * rate))
    return Parts(
        layer_bytes=tuple(layer_b),
        expert_bytes=tuple(exp_b),
        replicated_bytes=tuple(repl_b),
        embed_bytes=embed,
        output_bytes=output,
        mtp_bytes=int(mtp_params * rate),
        vision_bytes=vision,
        tied_head_bytes=tied_head,
    )


def mxfp4_padded(model: Model, card: Card) -> tuple[int, int]:
    """(hidden, intermediate) an mxfp4 MoE's experts are padded to on this card: the Marlin
    kernel (Ampere) pads hidden to 256 and intermediate to 128 (quantization/mxfp4.py
    Mxfp4MoEMethod.create_weights; fused_moe/oracle/mxfp4.py from 0.2x); on Hopper triton_kernels'
    swizzled layout pads hidden to 256 (gpt-oss-20b loads 13.47 GiB where it stores 12.82:
    inferred from that record, the layout is triton_kernels', not vLLM's); Blackwell's TRTLLM
    kernels pad hidden to 256 and intermediate to 128."""
    h = model.hidden_size or 0
    inter = model.shapes.moe_intermediate_size if model.shapes else 0
    arch = card_arch(card)
    if arch in ("ampere", "blackwell"):
        return round_up(h, 256), round_up(inter, 128)
    if arch == "hopper":
        return round_up(h, 256), round_up(inter, 64)
    return h, round_up(inter, 64)


# The same stage of the same split recurs on every card class a plan tries (120 estimates of
# a 94-layer MoE on the example fleet, about 15 distinct stages); its per-layer sums are kept.
@lru_cache(maxsize=256)
def _stage_layer_bytes(
    m: Model, p: Parts, start: int, end: int, tp: int, dp: int, online_fp8: bool
) -> tuple[int, int, int]:
    """(layer, routed-expert, replicated) bytes of layers [start, end) on one rank, rounded up
    layer by layer as each layer's tensors are split."""
    elem = _elem(m)
    h = m.hidden_size or 0
    kinds = layer_kinds(m)
    layers = experts = replicated = 0
    kv_extra = 0
    for i in range(start, min(end, len(p.layer_bytes))):
        whole = p.layer_bytes[i]
        exp = p.expert_bytes[i]
        rep = p.replicated_bytes[i]
        split = whole - exp - rep
        if online_fp8:
            # --quantization fp8 stores every linear weight in one byte (embedding, head,
            # norms and router gates stay 16-bit).
            split, exp = split * 1 // elem, exp * 1 // elem
        layers += cdiv(split, tp)
        replicated += rep
        experts += cdiv(exp, tp * dp)
        if kinds[i] in ("full", "sliding", "chunked") and tp > m.kv_heads > 0:
            # Past one KV head a rank, QKVParallelLinear replicates K and V: each rank holds
            # 1/kv_heads of them, not 1/tp.
            kv = 2 * h * m.kv_heads * m.head_dim * (1 if online_fp8 else elem)
            kv_extra += kv // m.kv_heads - cdiv(kv, tp)
    return layers + kv_extra, experts, replicated


def rank_weights(ctx: _Context, weight_bytes: int, layout: WeightLayout | None) -> Weights:
    """What "Model loading took" reports on this rank."""
    m, rank, v, s = ctx.model, ctx.rank, ctx.version, ctx.settings
    shapes = m.shapes or ModelShapes()
    p = parts_of(m, weight_bytes, layout)
    tp, pp, dp = rank.tp, rank.pp, rank.dp
    start, end = rank.layer_range(m.layers)
    first, last = rank.stage == 0, rank.stage == pp - 1
    elem = _elem(m)
    h, vocab = m.hidden_size or 0, m.vocab_size or 0
    online_fp8 = s.quantization in ("fp8", "fp8_per_tensor") and m.quantization is None

    kinds = layer_kinds(m)
    layers, experts, replicated = _stage_layer_bytes(m, p, start, end, tp, dp, online_fp8)

    # VocabParallelEmbedding / ParallelLMHead: the vocabulary padded to a multiple of 64,
    # split across TP (replicated across DP).
    pad = round_up(vocab, 64) / vocab if vocab else 1.0
    embedding = math.ceil(p.embed_bytes * pad / tp) + p.extra_bytes if first else 0
    output = 0
    skipped = p.mtp_bytes + p.tied_head_bytes
    if last:
        head = vocab * h * elem
        norm = h * elem
        if shapes.tied_embeddings:
            # Tied: the head is the embedding, kept once; a last stage that is not the first
            # loads its own copy of it.
            output = norm + (math.ceil(head * pad / tp) if not first else 0)
        else:
            output = norm + math.ceil(max(0, p.output_bytes - norm) * pad / tp)

    rope = 0
    if (
        shapes.rotary_dim
        and m.max_context
        and any(k in ("full", "sliding", "chunked", "mla") for k in kinds[start:end])
    ):
        # RotaryEmbedding's cos/sin cache: max positions × rotary dims in the model's dtype,
        # one a distinct rotary (get_rope caches them), on every rank.
        rope = shapes.rope_caches * m.max_context * shapes.rotary_dim * elem

    mla = 0
    if shapes.kv_lora_rank:
        # MLAAttention.process_weights_after_loading: kv_b_proj dequantised to W_UK and W_UV,
        # kv_lora_rank × (heads / tp) × (qk_nope + v_head) in bf16, a layer.
        n = sum(1 for k in kinds[start:end] if k == "mla")
        mla = n * shapes.kv_lora_rank * (m.attention_heads // tp)
        mla *= (shapes.qk_nope_head_dim + shapes.v_head_dim) * 2

    pad_b = 0
    if m.quantization == "mxfp4" and m.is_moe and experts:
        hp, ip = mxfp4_padded(m, ctx.card)
        inter = shapes.moe_intermediate_size
        if hp and inter:
            e = m.experts or 0
            stored = e * (3 * h * inter * 17 // 32 + (2 * inter + h) * 2)
            padded = e * (3 * hp * ip * 17 // 32 + (2 * ip + hp) * 2)
            n = sum(1 for i in range(start, end) if p.expert_bytes[i])
            pad_b = cdiv(n * (padded - stored), tp * dp)

    vision = 0
    if p.vision_bytes:
        text_only = bool(s.limit_mm_per_prompt) and all(c == 0 for _, c in s.limit_mm_per_prompt)
        if text_only and v.has("tower_skipped_text_only"):
            vision = 0
        elif v.has("tower_first_stage_only") and ctx.mrv2 and not first:
            vision = 0
        else:
            vision = cdiv(p.vision_bytes, tp)

    lora = lora_bytes(ctx) if s.lora else 0
    draft = 0
    spec = s.speculative
    if spec is not None and last:
        if spec.method == "mtp":
            draft = cdiv(p.mtp_bytes, tp)
            skipped -= p.mtp_bytes
        else:
            draft = spec.draft_weight_bytes
    return Weights(
        layers=layers,
        experts=experts,
        replicated=replicated,
        embedding=embedding,
        output=output,
        rope=rope,
        mla_decompressed=mla,
        mxfp4_padding=pad_b,
        vision=vision,
        lora=lora,
        draft=draft,
        skipped=skipped,
    )


def lora_bytes(ctx: _Context) -> int:
    """LoRA adapter slots vLLM allocates at load (vllm/lora/layers: each LoRA-able linear keeps
    max_loras stacked A (rank × input) and B (output × rank) in the model's dtype, the
    TP-sharded side divided): q/k/v and o, gate/up and down of every layer on the stage. MoE
    experts' adapters are not counted."""
    lora = ctx.settings.lora
    if lora is None:
        return 0
    m, tp = ctx.model, ctx.rank.tp
    s = m.shapes or ModelShapes()
    h, r = m.hidden_size or 0, lora.max_lora_rank
    q = m.attention_heads * m.head_dim
    kv = m.kv_heads * m.head_dim
    inter = s.intermediate_size if not m.is_moe else s.shared_expert_intermediate_size
    per_layer = (
        3 * r * h  # qkv A: one a slice, whole input
        + r * (q + 2 * kv) // tp  # qkv B: column-parallel output
        + r * q // tp  # o A: row-parallel input
        + h * r  # o B
    )
    if inter:
        per_layer += 2 * r * h + 2 * inter * r // tp + r * inter // tp + h * r
    start, end = ctx.rank.layer_range(m.layers)
    return lora.max_loras * (end - start) * per_layer * _elem(m)


# ------------------------------------------------------------------------------------------------
# The profile run
# ------------------------------------------------------------------------------------------------


def activation(ctx: _Context, last: bool) -> tuple[int, int]:
    """(transient peak, persistent buffers) of the profile run on this rank
    (gpu_model_runner.py / gpu/model_runner.py profile_run): a dummy forward of
    max_num_batched_tokens tokens over min(tokens, max_num_seqs) requests, then, on the last
    stage, logits for one token a request and the sampler's warm-up, while the forward's hidden
    states are still held. The sampler's peak a request a vocabulary entry is the release's
    (SAMPLER_BYTES_*); the hidden states cost 2.75 B a token a hidden unit (the fit of 0.11)."""
    m, v = ctx.model, ctx.version
    vocab, h = m.vocab_size or 0, m.hidden_size or 0
    reqs = min(ctx.batched, ctx.seqs)
    hidden = ctx.batched * HIDDEN_BYTES_X4 * h // 4
    if not last or m.task != "generate":
        return hidden, 0
    if ctx.mrv2:
        persistent = reqs * vocab * SAMPLER_STATE_BYTES_MRV2_X8 // 8
        return hidden + reqs * vocab * SAMPLER_BYTES_MRV2, persistent
    per = {
        "flashinfer": SAMPLER_BYTES_FLASHINFER,
        "sort": SAMPLER_BYTES_SORT,
        "triton": SAMPLER_BYTES_TRITON,
    }[v.sampler]
    buffer = card_sms(ctx.card) * vocab * 4 if v.sampler == "triton" else 0
    return hidden + reqs * vocab * per + buffer, 0


def encoder_cache_bytes(ctx: _Context, weights: Weights) -> int:
    """The encoder outputs the profile run keeps while the decoder runs (MultiModalBudget:
    max(max_num_batched_tokens, tokens of one item) tokens of the text model's hidden size),
    on the rank that builds the vision tower."""
    s = ctx.model.shapes
    if not weights.vision or s is None:
        return 0
    tokens = max(ctx.batched, s.mm_tokens_per_item)
    return tokens * (ctx.model.hidden_size or 0) * _elem(ctx.model)


def cuda_graph_bytes(ctx: _Context) -> int:
    """Captured sizes × a layer's cost, over the stage's layers (MoE layers cost more)."""
    if ctx.settings.enforce_eager:
        return 0
    m = ctx.model
    start, end = ctx.rank.layer_range(m.layers)
    dense = m.shapes.dense_layers if m.shapes else 0
    moe_layers = max(0, end - max(start, dense)) if m.is_moe else 0
    dense_layers = (end - start) - moe_layers
    sizes = capture_sizes(ctx.version, m, ctx.card, ctx.seqs, ctx.batched, ctx.num_spec)
    per_size = dense_layers * GRAPH_BYTES_DENSE_LAYER + moe_layers * GRAPH_BYTES_MOE_LAYER
    return sizes * per_size


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
    util = settings.gpu_memory_utilization or v.default_gpu_memory_utilization
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
    ctx = _Context(v, model, card, rank, settings, max_len, batched, seqs, mrv2, num_spec)
    last = rank.stage == rank.pp - 1

    weights = rank_weights(ctx, weight_bytes, parts)
    act, persistent = activation(ctx, last)
    if not v.has("non_kv_from_free_memory"):
        # Before 0.27 vLLM counts weights + torch's peak increase during the profile run +
        # non-torch memory (mem_utils.memory_profiling): buffers allocated before the run are
        # not seen.
        persistent = 0
    graphs = cuda_graph_bytes(ctx)
    in_budget = v.has("cuda_graphs_in_budget")
    enc = encoder_cache_bytes(ctx, weights)
    requested = math.ceil(card.total_bytes * util)
    non_kv = weights.total + act + persistent + NON_TORCH + enc + (graphs if in_budget else 0)
    budget = requested - non_kv

    layout = kv_layout(ctx, notes)
    if layout is None or layout.bytes_per_block == 0:
        return VllmMemory(
            v, card.total_bytes, util, requested, max_len, seqs, batched, mrv2, weights, act,
            persistent, NON_TORCH, graphs, in_budget, enc, budget, layout, 0, 0, 0.0,
            budget > 0, max_len if budget > 0 else 0, tuple(notes),
        )  # fmt: skip
    num_blocks = max(0, budget // layout.bytes_per_block)
    per_request = layout.blocks_per_request
    concurrency = num_blocks / per_request if per_request else 0.0
    if v.has("kv_tokens_from_concurrency"):
        tokens = int(concurrency * max_len)
    else:
        tokens = num_blocks // layout.groups * layout.block_size
    check = budget - (layout.bytes_per_block if v.has("null_block_reserved") else 0)
    fits = budget > 0 and request_bytes(ctx, layout, max_len) <= check
    longest = longest_max_model_len(ctx, layout, check) if budget > 0 else 0
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
    )


def longest_max_model_len(ctx: _Context, layout: KvLayout, check: int) -> int:
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
