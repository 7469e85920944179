"""SGLang: what one card of a layout holds, and the defaults it picks, as SGLang 0.5.23 sizes them.

SGLang's unit is not vLLM's. Before it loads the weights, each rank measures the card's free
memory (`pre_model_load_memory`, distributed/bootstrap.py measure_pre_model_load_memory, the
minimum over ranks). `--mem-fraction-static` is the share of that figure kept for the "static"
memory: the weights and the KV pool. After loading, the pool gets whatever the weights left of the
static share (mem_cache/kv_cache_configurator.py KVCacheConfigurator._profile_available_bytes):

    rest = free after loading − pre_model_load_memory × (1 − mem_fraction_static)
         = mem_fraction_static × pre_model_load_memory − weights

and the pool is `rest // cell` tokens, `cell` being the bytes one token costs this rank over its
layers (model_executor/pool_configurator.py DefaultPoolConfigurator.calculate_pool_sizes): the
`max_total_num_tokens` SGLang logs ("KV Cache is allocated. #tokens: N"). Activations, CUDA
graphs and the request table live in the other `1 − mem_fraction_static`, which SGLang's default
share is worked out to leave (arg_groups/memory_hook.py handle_gpu_memory_settings).

Every function here follows one of those files; each cites its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmfit.plan.layout import Layout
from llmfit.plan.model import AttentionKind, MambaShape, Shape, dtype_bytes

VERSION = "0.5.23"

GIB = 1 << 30
MIB = 1 << 20

# What a process holds of a card before SGLang measures its free memory (the CUDA context, torch,
# and with several ranks NCCL's communicators): measured as the card's CUDA total less the "Load
# weight begin. avail mem" SGLang logs, on the seven records of fixtures/calibration/
# sglang-logs.jsonl that give both (H100 TP 1: 0.40, 0.62 and 0.72 GiB; RTX 3090 under WSL 2:
# 0.83; MI300X: 0.65; L4 TP 4: 0.32; RTX 4090 TP 4: 0.56). The median, 0.62 GiB, rounded: 0.6.
PRE_BASELINE = int(0.6 * GIB)
# A desktop card (GeForce, Radeon) often drives a display or runs under Windows and WSL 2, which
# keep more of it: the RTX 3090 under WSL 2 held 0.83 GiB, the RTX 4090s at TP 4 0.56; llmfit takes
# 0.85 GiB there, so that no desktop record's pool is planned larger than SGLang made it.
PRE_DESKTOP = int(0.85 * GIB)
# ROCm with several ranks on a node (RCCL's communicators): an MI300X at DP 8 held 3.66 GiB before
# loading (sglang7691), an MI355X at TP 8 4.4 (kimi-k25-mi355x); one rank 0.65 and 0.80. llmfit
# takes the lesser of the two multi-rank records.
PRE_ROCM_RANKS = int(3.66 * GIB)

# Tokens a page of the pool holds: 1 by default on CUDA (arg_groups/overrides.py
# _page_size_default). Backends that page more coarsely (FlashMLA and TRT-LLM MLA 64, FA4 on
# Blackwell 128) round the pool down to their page: at most 127 tokens fewer.
PAGE_SIZE = 1

# The SWA pool's tokens over the full pool's for a hybrid sliding-window model
# (--swa-full-tokens-ratio, arg_groups/fields/schedule.py: fallback 0.8).
SWA_FULL_TOKENS_RATIO = 0.8
# The share of a hybrid linear-attention model's pool kept for its recurrent states, against its
# KV pool (--mamba-full-memory-ratio: fallback 0.9; KVCacheConfigurator._handle_max_mamba_cache).
MAMBA_FULL_MEMORY_RATIO = 0.9
# State slots a running request takes (KVCacheConfigurator._calculate_mamba_ratio): 3
# (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO) and, with the radix cache's extra buffer that
# --mamba-radix-cache-strategy auto picks on CUDA with the overlap scheduler (overrides.py
# _mamba_radix_cache_resolution; Qwen3-Next's in fixtures/engines/sglang-0.5.23-defaults.json),
# its two tracking slots (allocation_sizing.get_mamba_tracking_slots): 5. A model without the
# extra buffer takes 3, so this can under-count its requests, never its memory.
MAMBA_SLOTS_PER_REQUEST = 5
# Bytes of an element of SGLang's recurrent states (configs/mamba_utils.py mamba2_state_dtype):
# the temporal (SSM) state fp32 unless the config or SGLANG_MAMBA_SSM_DTYPE says otherwise, the
# convolution state bf16 (SGLANG_MAMBA_CONV_DTYPE). Where the model's state shape is not known,
# llmfit's LayerGroup keeps the two together at 2 B and the whole is charged at fp32 (the safe
# side). The states' share of the pool is fixed by the ratio above, so this moves the number of
# state slots, not the KV tokens.
SSM_ELEMENT = 4
CONV_ELEMENT = 2
STATE_ELEMENT_FACTOR = 2
# Row padding of the request table beyond the context (mem_cache/allocation_sizing.py
# get_req_to_token_extra_context_len, without speculative decoding), int32 entries.
REQUEST_TABLE_EXTRA = 4

# Architectures whose sliding-window layers SGLang keeps in a pool of their own, sized by the
# ratio above (configs/model_config.py is_hybrid_swa_model, SWA_SINK_ARCHS, MIMO_V2_MODEL_ARCHS).
# Every other model's sliding layers are given the full context like any other layer: Gemma 2 and
# 3 expressly so (arg_groups/model_overrides/gemma2_gemma3.py sets disable_hybrid_swa_memory).
# (0.5.23's whole list: BeamForCausalLM only with sliding layers, Laguna only with a window.)
HYBRID_SWA_ARCHITECTURES = frozenset(
    {
        "BeamForCausalLM",
        "Llama4ForConditionalGeneration",
        "DeepseekV4ForCausalLM",
        "DeepseekV4ForCausalLMNextN",
        "DeepseekV4ForCausalLMDSpark",
        "GptOssForCausalLM",
        "GraniteSWAForCausalLM",
        "GraniteMoeSWAForCausalLM",
        "IQuestQ1ForCausalLM",
        "IQuestQ1MTP",
        "MiMoV2FlashForCausalLM",
        "MiMoV2ForCausalLM",
        "MiMoV2MTP",
        "Step3p5ForCausalLM",
        "Step3p5MTP",
        "Step3p7ForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
        "EmbeddingGemma2Model",
        "Gemma4UnifiedForConditionalGeneration",
        "DiffusionGemmaForBlockDiffusion",
        "LagunaForCausalLM",
        "MellumForCausalLM",
        "MuseGlimmerForCausalLM",
        "MuseGlimmerForConditionalGeneration",
        "InklingForConditionalGeneration",
        "InklingForConditionalGenerationMTP",
        "UnlimitedOCRForCausalLM",
    }
)

# The multimodal embedding cache SGLang keeps back from the KV budget for a model that reads
# pictures (SGLANG_VLM_CACHE_SIZE_MB, 100; kv_cache_configurator.mm_runtime_reservation_gb).
VLM_CACHE = 100 * MIB
# Architectures with a vision encoder that SGLang serves as text only unless --enable-multimodal
# is given (configs/model_config.py ModelConfig.__init__, mm_disabled_models).
TEXT_ONLY_BY_DEFAULT = frozenset(
    {
        "Gemma3ForConditionalGeneration",
        "Llama4ForConditionalGeneration",
        "Step3VLForConditionalGeneration",
        "InklingForConditionalGeneration",
    }
)
# Multimodal architectures whose prefill SGLang still captures in breakable CUDA graphs
# (multimodal_breakable_cuda_graph_supported_model_archs); for any other, prefill runs eagerly.
MULTIMODAL_PREFILL_GRAPHS = frozenset(
    {
        "MiniMaxM3SparseForConditionalGeneration",
        "Cohere2VisionForConditionalGeneration",
        "Glm5NextForConditionalGeneration",
        "InternS2MobiusForConditionalGeneration",
        "PaddleOCRVLForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen4ExpForConditionalGeneration",
        "MuseGlimmerForConditionalGeneration",
        "MuseSparkForConditionalGeneration",
        "KimiK3ForConditionalGeneration",
        "KimiK25ForConditionalGeneration",
        "MiniMaxM3SparseForCausalLM",
    }
)


# What nvidia-smi reports as a card's memory.total, MiB, for the classes whose figure is known
# (shared/fixtures/fleet/gpu-memory-totals.md): SGLang sizes its default share by it
# (utils/common.py get_device_memory_capacity reads `nvidia-smi --query-gpu=memory.total`), a
# few hundred MiB more than the CUDA total the card table holds (an H100's 454 MiB reserve).
NVIDIA_SMI_MIB: dict[str, int] = {
    "h100-80g": 81_559, "h100-pcie-80g": 81_559, "h100-94g": 95_830, "h200-141g": 143_771,
    "b200-180g": 183_359, "a100-80g": 81_920, "a100-pcie-80g": 81_920,
    "a100-40g": 40_536, "a100-pcie-40g": 40_536, "l40s-48g": 46_068,
    "rtxa6000-48g": 46_068, "l4-24g": 23_034, "a10-24g": 23_028, "rtx4090-24g": 24_564,
    "rtx3090-24g": 24_576, "rtxa5000-24g": 24_564, "h20-96g": 97_871, "t4-16g": 15_360,
}  # fmt: skip


def smi_bytes(gpu_class: str, card_bytes: int) -> int:
    """The card's memory as SGLang's default share reads it: nvidia-smi's total where the class's
    is known, else the card's own (HIP's on AMD, whose rocm path reads the device's total)."""
    mib = NVIDIA_SMI_MIB.get(gpu_class)
    return mib * MIB if mib else card_bytes


# On ROCm, SGLang's aiter attention backend (the default for MHA models, and for MLA at 16 or 128
# heads a rank: arg_groups/model_override_base.py) scales --mem-fraction-static by 0.85 once the
# context is over 8,192 tokens, a share given on the command line too (attention_hook.py
# handle_attention_backend_compatibility; SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION keeps it).
AITER_SHARE_FACTOR = 0.85
AITER_CONTEXT = 8192


def aiter_scaled(backend: str, mla: bool, heads_per_rank: int, context_len: int) -> bool:
    """Whether SGLang's aiter backend lowers the static share on this card for this model."""
    if backend != "rocm" or context_len <= AITER_CONTEXT:
        return False
    return not mla or heads_per_rank in (16, 128)


def hybrid_swa(architecture: str | None) -> bool:
    return architecture in HYBRID_SWA_ARCHITECTURES


def multimodal(architecture: str | None, vision_tower: tuple[int, int] | None) -> bool:
    """Whether SGLang serves the model's vision encoder by default (and so keeps room for it)."""
    return vision_tower is not None and architecture not in TEXT_ONLY_BY_DEFAULT


@dataclass(frozen=True)
class ServerSizes:
    """A layout as SGLang's own parallel sizes spell it.

    A MoE's data-parallel ranks are SGLang's data-parallel attention: one tensor-parallel group of
    `tp × dp` cards (`--tp-size`), whose attention runs in `dp` groups (`--attn-dp-size`) while
    the experts are sharded over all of them (`--ep-size`). A dense model's ranks are replicas
    (`--dp-size`), each a `--tp-size` group of its own.
    """

    tp_size: int
    pp_size: int = 1
    dp_size: int = 1
    attn_dp_size: int = 1
    ep_size: int = 1

    @property
    def attn_tp(self) -> int:
        """The attention's tensor-parallel width (runtime_context.derive_attn_tp_size)."""
        return self.tp_size // self.attn_dp_size

    @property
    def ranks(self) -> int:
        """KV pools that hold sequences independently: replicas or attention-DP groups."""
        return self.dp_size * self.attn_dp_size


def server_sizes(layout: Layout, moe: bool) -> ServerSizes:
    if moe and layout.dp > 1:
        width = layout.tp * layout.dp
        return ServerSizes(width, layout.pp, 1, layout.dp, width if layout.ep else 1)
    ep = layout.tp if moe and layout.ep else 1
    return ServerSizes(layout.tp, layout.pp, layout.dp, 1, ep)


# -- the static share SGLang picks (arg_groups/memory_hook.py handle_gpu_memory_settings) ---------


def chunked_prefill_default(gpu_mem_mib: float) -> int:
    """--chunked-prefill-size by the card's memory: 2k under 20 GiB, 4k under 60, 8k under 160,
    16k above."""
    if gpu_mem_mib < 20 * 1024:
        return 2048
    if gpu_mem_mib < 60 * 1024:
        return 4096
    if gpu_mem_mib < 160 * 1024:
        return 8192
    return 16384


def decode_graph_max_bs(gpu_mem_mib: float, tp_size: int) -> int:
    """The largest decode batch captured in a CUDA graph, by the card's memory and --tp-size."""
    if gpu_mem_mib < 20 * 1024:
        return 8
    if gpu_mem_mib < 35 * 1024:
        return 48 if tp_size < 4 else 160
    if gpu_mem_mib < 60 * 1024:
        return 32 if tp_size < 4 else 160
    if gpu_mem_mib < 160 * 1024:
        return 256 if tp_size < 4 else 512
    return 512


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill token counts SGLang captures a graph for, up to `max_tokens`
    (arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes)."""
    fixed = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64)]
    fixed += range(1280, 4097, 256)
    # The last run counted, not listed: a --chunked-prefill-size of 10**40 is one division.
    return sum(1 for s in fixed if s <= max_tokens) + max(0, (max_tokens - 4608) // 512 + 1)


@dataclass(frozen=True)
class Reserve:
    """What SGLang keeps outside the static share on a card, and the share that leaves."""

    chunked_prefill_size: int
    decode_max_bs: int
    # Whether the prefill forward is captured too (breakable CUDA graphs, on by default on CUDA).
    prefill_graphs: bool
    reserved_mib: float
    mem_fraction_static: float


def default_reserve(
    card_bytes: int,
    sizes: ServerSizes,
    *,
    mla: bool,
    chunked_prefill_size: int | None = None,
    max_running_requests: int | None = None,
    vision_tower: tuple[int, int] | None = None,
    architecture: str | None = None,
    backend: str = "cuda",
    graphs: bool = True,
    decode_max_bs: int | None = None,
) -> Reserve:
    """SGLang's default --mem-fraction-static on this card for this layout.

    reserved = 512 MiB + 1.5 MiB × max(chunked prefill, 2048) tokens of activation
             + tp × pp / 8 GiB + the CUDA graphs' reserve, at least 10 GiB on cards over 60 GiB;
    share    = (card − reserved) / card, to three places.

    The graphs' reserve (memory_hook.reserve_for_graph_mb): 2 MiB a decode batch size up to the
    largest captured; with data-parallel attention 3 MiB more a size a rank (4.5 past 300); and
    for the prefill graphs 8 MiB a captured token count (1.5 GiB for an MLA model). Prefill
    graphs are off by default with pipeline parallelism (cuda_graph_hook
    apply_cuda_graph_compatibility) and for most models that read pictures (breakable graphs
    are refused for multimodal models not on SGLang's list); for a model that reads pictures,
    SGLang then lowers the share again by the vision tower's size (adjust_mem_fraction_for_vlm).
    The vision encoder is `vision_tower`, counted only where SGLang serves it by default
    (`multimodal`).

    `card_bytes` is what SGLang reads the card's memory as (`smi_bytes`: nvidia-smi's total).
    Prefill graphs are captured on CUDA only (cuda_graph_hook: breakable CUDA graphs); on ROCm
    (`backend`) only the decode graphs are reserved for. Without `graphs` (--disable-cuda-graph:
    both phases' backends disabled) neither is; data-parallel attention's padding still is.
    """
    gpu_mem = card_bytes / MIB
    cps = chunked_prefill_size or chunked_prefill_default(gpu_mem)
    max_bs = decode_graph_max_bs(gpu_mem, sizes.tp_size)
    if max_running_requests is not None and max_bs > max_running_requests:
        max_bs = max_running_requests
    if decode_max_bs is not None:
        # --cuda-graph-max-bs-decode as given, whatever --max-running-requests says.
        max_bs = decode_max_bs
    vlm = multimodal(architecture, vision_tower)
    prefill_graphs = (
        graphs
        and backend == "cuda"
        and sizes.pp_size == 1
        and cps > 0
        and (not vlm or architecture in MULTIMODAL_PREFILL_GRAPHS)
    )
    activation_tokens = max(cps, 2048)
    reserved = 512 + activation_tokens * 1.5 + sizes.tp_size * sizes.pp_size / 8 * 1024
    kept = max_bs * 2.0 if graphs else 0.0
    if sizes.attn_dp_size > 1:
        kept += max_bs * sizes.attn_dp_size * 3
        if max_bs > 300:
            kept += max_bs * sizes.attn_dp_size * 1.5
    if prefill_graphs:
        kept += 1.5 * 1024 if mla else prefill_graph_sizes(min(cps, 8192) if mla else cps) * 8
    reserved += kept
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    # Past the card (data-parallel attention over many ranks reserves graphs for each), SGLang's
    # share would be negative and it would not start: nothing is counted on.
    share = max(round((gpu_mem - reserved) / gpu_mem, 3), 0.0)
    if vlm and vision_tower is not None:
        share = share * vision_factor(vision_tower)
    return Reserve(cps, max_bs, prefill_graphs, reserved, share)


def three_places(share: float) -> float:
    """A share rounded down to three places, as a command passes it (0.7064675 → 0.706; 0.829
    stays 0.829, which binary floating point holds as 0.82899…)."""
    from decimal import ROUND_DOWN, Decimal  # 2 ms to import, for a plan that runs SGLang only

    return float(Decimal(repr(share)).quantize(Decimal("0.001"), rounding=ROUND_DOWN))


def vision_factor(vision_tower: tuple[int, int]) -> float:
    """How much SGLang lowers the share for a vision encoder of (layers, hidden size): 0.95, then
    a tenth for each doubling of layers × hidden² past ViT-L/14's 24 × 1024², held to 0.8-1.05
    (memory_hook.adjust_mem_fraction_for_vlm)."""
    layers, hidden = vision_tower
    ratio = layers * hidden**2 / (24 * 1024**2)
    dynamic = max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return 0.95 * dynamic


# -- the pool (model_executor/pool_configurator.py, mem_cache/kv_cache_configurator.py) ----------


@dataclass(frozen=True)
class Cells:
    """Bytes one token costs one rank: in full-context layers, and in sliding-window layers kept
    in a pool of their own."""

    full: int
    swa: int = 0

    def token(self, ratio: float = SWA_FULL_TOKENS_RATIO) -> float:
        """Bytes a token of max_total_num_tokens costs (HybridSWAPoolConfigurator
        _recompute_cell_size: the SWA pool holds `ratio` tokens for every full one)."""
        return self.full + ratio * self.swa if self.full else float(self.swa)


def cells(shape: Shape, attn_tp: int, *, swa_pool: bool) -> Cells:
    """A rank's bytes a token, layer kind by layer kind.

    Full attention: KV heads a rank × (head + value dim) × dtype bytes a layer
    (DefaultPoolConfigurator._compute_cell_size; ModelConfig.get_num_kv_heads splits the heads
    over the attention's TP width down to one, then replicates). MLA: the latent
    (kv_lora_rank + qk_rope_head_dim) a layer, whole on every rank (calculate_mla_kv_cache_dim).
    Sliding windows: a pool of their own where the architecture has one (`swa_pool`), else full
    context like a full layer. Linear attention and state-space layers: no cell (their state is
    a slot a request, `state_bytes`).
    """
    elem = dtype_bytes(shape.kv_dtype)
    full = swa = 0.0
    for g in shape.layer_groups:
        if g.kind is AttentionKind.MLA:
            full += g.layers * g.latent_dim * elem
            # A sparse-attention indexer's keys, fp8 and a scale a token, beside the latent:
            # SGLang's cell size adds indexer_size_per_token × num_layers for a DeepSeek NSA
            # model (is_deepseek_nsa; NSATokenToKVPool.index_k_with_scale_buffer, uint8), on
            # every layer whether or not the model shares its top-k.
            if g.indexer_layers:
                full += g.layers * g.indexer_bytes
        elif g.kind is AttentionKind.FULL or (g.kind is AttentionKind.SLIDING and not swa_pool):
            full += g.layers * g.kv_heads_per_rank(attn_tp) * (g.head_dim + g.value_dim) * elem
        elif g.kind is AttentionKind.SLIDING:
            swa += g.layers * g.kv_heads_per_rank(attn_tp) * (g.head_dim + g.value_dim) * elem
    return Cells(int(full), int(swa))


def state_bytes(shape: Shape, attn_tp: int, mamba: MambaShape | None = None) -> int:
    """One request's recurrent state on one rank over its linear-attention and state-space layers
    (BaseLinearStateParams.mamba_cache_per_req), split across the attention's TP width: with the
    state's shape known (`mamba`), its convolution state in bf16 and its temporal state in fp32
    (configs/mamba_utils.py: Mamba2StateShape's conv (kernel − 1) × conv channels and temporal
    heads × head dim × state; GDN's conv over q, k and v and temporal v heads × v dim × k dim);
    else the whole state at fp32."""
    total = 0
    per_layer = _state_layer(mamba, attn_tp) if mamba is not None else 0
    for g in shape.layer_groups:
        if g.kind is AttentionKind.LINEAR:
            if per_layer:
                total += g.layers * per_layer
            else:
                total += g.layers * -(-g.state_bytes * STATE_ELEMENT_FACTOR // attn_tp)
    return total


def _state_layer(m: MambaShape, tp: int) -> int:
    """One layer's state on one rank, conv in bf16 and temporal in fp32 (0 if not known)."""
    rows = max(m.conv_kernel - 1, 0)
    if m.kind == "gated_delta_net":
        conv = rows * (2 * m.k_heads * m.k_head_dim + m.v_heads * m.v_head_dim)
        ssm = m.v_heads * m.v_head_dim * m.k_head_dim
    elif m.kind == "kda":
        # Kimi Delta Attention: q, k and v convolved, heads × head_dim each; heads × head_dim².
        conv = rows * 3 * m.heads * m.head_dim
        ssm = m.heads * m.head_dim * m.head_dim
    elif m.kind == "mamba2":
        conv = rows * (m.inner + 2 * m.n_groups * m.state_size)
        ssm = m.heads * m.head_dim * m.state_size
    else:
        conv = rows * m.inner
        ssm = m.inner * m.state_size
    if not (conv or ssm):
        return 0
    return -(-conv // tp) * CONV_ELEMENT + -(-ssm // tp) * SSM_ELEMENT


@dataclass(frozen=True)
class Pool:
    """A rank's pool as SGLang sizes it and logs it."""

    # max_total_num_tokens: the full-attention tokens the pool holds.
    tokens: int
    # Tokens of the SWA pool beside it (0 without one).
    swa_tokens: int
    # Bytes a token of `tokens` costs (full layers, plus the SWA pool's share).
    cell: float
    # Recurrent-state slots, and their bytes (0 for a model without linear layers).
    state_slots: int
    state_bytes: int
    # max_running_requests a rank (its scheduler's), and its request table's bytes.
    max_running_requests: int
    request_table: int


def kv_pool(
    budget: float,
    c: Cells,
    *,
    state_per_request: int = 0,
    context_len: int,
    attn_dp: int = 1,
    max_running_requests: int | None = None,
    max_total_tokens: int | None = None,
    page: int = PAGE_SIZE,
) -> Pool:
    """What a rank's pool holds when `budget` bytes are left for it.

    With linear layers, `MAMBA_FULL_MEMORY_RATIO / (1 + ratio)` of the budget goes to state slots
    first, one held back as padding (KVCacheConfigurator._handle_max_mamba_cache); the rest is
    cut into tokens of `c.token()` bytes, in whole pages (calculate_pool_sizes), capped at
    --max-total-tokens (_apply_token_constraints). The requests a scheduler runs at once
    (resolve_max_num_reqs): 512 a context's worth of tokens, held to 2,048-4,096, at most half the
    tokens, fewer when asked, or when the state slots run short.
    """
    rest = float(budget)
    slots = states = 0
    if state_per_request:
        share = rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO)
        slots = max(int((share - state_per_request) // state_per_request), 0)
        states = (slots + 1) * state_per_request
        rest -= states
    cell = c.token()
    if cell:
        tokens = max(int(rest // cell), 0) // page * page
    else:
        # No KV layer at all: SGLang's pool is the context (DefaultPoolConfigurator
        # _zero_kv_max_tokens).
        tokens = max_total_tokens or context_len
    if max_total_tokens is not None:
        tokens = min(tokens, max_total_tokens) // page * page
    swa_tokens = int(tokens * SWA_FULL_TOKENS_RATIO) // page * page if c.swa and c.full else 0
    estimated = max(min(int(tokens / context_len * 512), 4096), 2048)
    if max_running_requests is not None:
        reqs = min(max(1, max_running_requests // attn_dp), tokens // 2)
    else:
        reqs = min(estimated, tokens // 2)
    if state_per_request:
        reqs = min(reqs, slots // MAMBA_SLOTS_PER_REQUEST)
    reqs = max(reqs, 0)
    table = (reqs + 1) * (context_len + REQUEST_TABLE_EXTRA) * 4
    return Pool(tokens, swa_tokens, cell, slots, states, reqs, table)


def sequence_bytes(c: Cells, state_per_request: int, context: int, page: int = PAGE_SIZE) -> int:
    """The least a rank's budget must be for its pool to hold one sequence of `context` tokens:
    the tokens at `c.token()` bytes each and, with linear layers, the states' share of the budget
    beside them (at least the slots one request takes, and the padding slot)."""
    tokens = -(-context // page) * page
    kv = math.ceil(tokens * c.token())
    if not state_per_request:
        return kv
    ratio = MAMBA_FULL_MEMORY_RATIO
    least_states = (MAMBA_SLOTS_PER_REQUEST + 1) * state_per_request
    return max(math.ceil(kv * (1 + ratio)), math.ceil(least_states * (1 + ratio) / ratio) + 1)


def pre_baseline(gpu_class: str, ranks: int) -> int:
    """What a process holds of a card before SGLang measures it, by the records: a desktop card
    PRE_DESKTOP, an AMD card with several tensor-parallel ranks PRE_ROCM_RANKS, else
    PRE_BASELINE."""
    from llmfit.plan import cards

    if cards.consumer(gpu_class):
        return PRE_DESKTOP
    spec = cards.spec(gpu_class)
    if spec is not None and spec.vendor == "amd" and ranks > 1:
        return PRE_ROCM_RANKS
    return PRE_BASELINE


def static_budget(card_bytes: int, mem_fraction_static: float, pre: int = PRE_BASELINE) -> int:
    """The static share of the free memory SGLang measures: a card's total less what precedes the
    measurement (`pre`, pre_baseline's), times the share."""
    return int((card_bytes - pre) * mem_fraction_static)
