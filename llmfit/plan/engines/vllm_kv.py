"""vLLM's KV cache on one rank: each layer kind's spec (bytes a token, state pages), how the
budget is cut into pages, blocks and layer groups, and what one request of max_model_len takes
(vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py and, from 0.28,
kv_cache_planning.py, vllm/platforms/interface.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from llmfit.plan.engines.vllm_inputs import (
    STATE_KINDS,
    Context,
    card_arch,
    cdiv,
    group_of,
    layer_kinds,
)
from llmfit.plan.engines.vllm_versions import VllmVersion
from llmfit.plan.model import AttentionCharge, AttentionKind, Model, Shape


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
    # Tokens a block of this kind holds where vLLM grew it to the largest page (a layer kind
    # whose token costs less: Gemma 4's sliding layers beside its wider global ones,
    # kv_cache_planning.py unify_kv_cache_spec_page_size); 0 = the layout's block size.
    block_size: int = 0


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
    g = group_of(model, kind) or group_of(model, "full") or group_of(model, "mla")
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
    if shape is not None and shape.kind == "kda":
        # MambaStateDtypeCalculator.kda_state_dtype: the recurrent state in float32 unless
        # bfloat16 is asked for (KimiGatedDeltaNetAttention passes no SSM dtype: always auto).
        return conv, 4
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
    elif s.kind == "kda":
        # kda_state_shape: q, k and v convolved, heads × head_dim each; heads × head_dim².
        conv = rows * (3 * s.heads * s.head_dim // tp)
        ssm = (s.heads // tp) * s.head_dim * s.head_dim
    else:
        conv = (s.conv_kernel - 1) * (s.inner // tp)
        ssm = (s.inner // tp) * s.state_size
    return conv * conv_b + ssm * ssm_b


# ------------------------------------------------------------------------------------------------
# The KV layout
# ------------------------------------------------------------------------------------------------


def in_flight_tokens(ctx: Context) -> int:
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


def _mla_block_size(ctx: Context) -> int:
    """MLA backends' block size (vllm/platforms/cuda.py): FlashMLA's 64 on Hopper in 0.11, then
    FLASH_ATTN_MLA's 16; CUTLASS MLA's 128 on Blackwell until 0.14, then FlashInfer MLA's 32."""
    arch, v = card_arch(ctx.card), ctx.version
    if arch == "hopper":
        return 16 if v.has("mla_block_16_on_hopper") else 64
    if arch == "blackwell":
        return 32 if v.minor >= 15 else 128
    return 16


def mamba_mode(ctx: Context, hybrid: bool) -> tuple[str, bool]:
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


def _checkpoint_pages(ctx: Context, mode: str) -> int:
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


def kv_layout(ctx: Context, notes: list[str]) -> KvLayout | None:
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
    if s.block_size:
        block = s.block_size
    elif v.has("block_size_64"):
        block = v.default_block_size
    else:
        block = _mla_block_size(ctx) if "mla" in kinds else 16
    attn_kinds = [k for k in ("full", "mla", "sliding", "chunked") if k in kinds]
    token_of: dict[str, int] = {k: attention_token_bytes(m, k, rank.tp, elem) for k in attn_kinds}
    # Every page is the largest kind's (unify_kv_cache_spec_page_size): a kind whose token costs
    # less holds more tokens a block, where its token divides the page.
    per_token = max(token_of.values()) if token_of else 0
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
    kinds_out = []
    for kind, window, here, n in groups:
        pt = token_of.get(kind, per_token)
        grown = block * per_token // pt if pt and pt != per_token and per_token % pt == 0 else 0
        kinds_out.append(KvGroup(kind, here, n, 0, window, grown))
    # A sparse-attention indexer's keys are MLA specs of their own, one a token like the
    # latent's, so vLLM keeps them in the same group (UniformTypeKVCacheSpecs): each block
    # carries them beside the latents, on the rank's share of the indexer layers.
    index = _indexer_block_bytes(ctx, kinds, block)
    layout = KvLayout(
        block_size=block,
        page_bytes=page,
        group_size=group_size,
        kinds=tuple(kinds_out),
        bytes_per_block=fullest * page + index,
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


def _indexer_block_bytes(ctx: Context, kinds: list[str], block: int) -> int:
    """Bytes a block's indexer keys take on this rank: the indexer layers in the proportion of
    the model's MLA layers the rank holds (all of them without pipeline parallelism)."""
    g = group_of(ctx.model, "mla")
    if g is None or not g.indexer_layers:
        return 0
    start, end = ctx.rank.layer_range(ctx.model.layers)
    here = sum(1 for k in kinds[start:end] if k == "mla")
    total = sum(1 for k in kinds[: ctx.model.layers] if k == "mla") or 1
    return cdiv(g.indexer_layers * here, total) * g.indexer_bytes * block


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
            g = group_of(m, kind)
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


def kind_blocks(ctx: Context, layout: KvLayout, max_model_len: int) -> list[int]:
    """Blocks one request of max_model_len takes in one group of each kind."""
    inflight = in_flight_tokens(ctx)
    out = []
    for k in layout.kinds:
        b = blocks_for(
            k.kind,
            k.window,
            max_model_len,
            k.block_size or layout.block_size,
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


def request_bytes(ctx: Context, layout: KvLayout, max_model_len: int) -> int:
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
# The plan's summary of each kind of layer
# ------------------------------------------------------------------------------------------------

# vLLM allocates KV in blocks of 16 tokens (CacheConfig.DEFAULT_BLOCK_SIZE).
BLOCK_SIZE = 16
# Tokens vLLM schedules in one step (--max-num-batched-tokens), which a sliding-window layer keeps
# beside its window: `vllm serve`'s default on cards of 70 GiB or more other than the A100
# (EngineArgs.get_batch_defaults). The summary is for the model, not a card: each card's
# estimate counts what its own release and card keep (kv_layout).
MAX_NUM_BATCHED_TOKENS = 8192


def fixed_kv(shape: Shape, context: int) -> int:
    """What one sequence's sliding windows and linear states cost one card, at any length."""
    return shape.fixed_kv_bytes(
        1, 1, context, batched_tokens=MAX_NUM_BATCHED_TOKENS, block_size=BLOCK_SIZE
    )


def attention_charges(shape: Shape, context: int) -> tuple[AttentionCharge, ...]:
    """Each kind of layer, what it costs a replica of one card, and in words how it was charged."""
    out: list[AttentionCharge] = []
    for g in shape.layer_groups:
        one = Shape((g,), shape.attention_heads, shape.kv_heads, shape.kv_dtype)
        per_token = one.kv_bytes_per_token()
        per_seq = fixed_kv(one, context)
        if g.kind is AttentionKind.FULL:
            kind, how = "full", "K and V for every token of the context"
        elif g.kind is AttentionKind.MLA:
            kind = "mla"
            how = (
                f"one latent of {g.latent_dim} per token, stored once and not split by tensor "
                "parallelism"
            )
        elif g.kind is AttentionKind.SLIDING and g.chunked:
            kind = "chunked"
            how = (
                f"a chunk of {g.window:,} tokens + {MAX_NUM_BATCHED_TOKENS:,} batched tokens a "
                "sequence, whatever the context (here at vLLM's max_num_batched_tokens on cards of "
                "70 GiB or more; each card's plan counts what its release keeps for it)"
            )
        elif g.kind is AttentionKind.SLIDING:
            kind = "sliding"
            how = (
                f"a window of {g.window:,} tokens + {MAX_NUM_BATCHED_TOKENS:,} batched tokens a "
                "sequence, whatever the context (here at vLLM's max_num_batched_tokens on cards of "
                "70 GiB or more; each card's plan counts what its release keeps for it)"
            )
        else:
            kind = "linear"
            how = (
                f"a fixed {g.state_kind or 'recurrent'} state of {g.state_bytes:,} B a sequence "
                "a layer, split by tensor parallelism, whatever the context"
            )
        window = g.window if g.kind is AttentionKind.SLIDING else None
        out.append(AttentionCharge(kind, g.layers, per_token, per_seq, how, window))
    return tuple(out)
