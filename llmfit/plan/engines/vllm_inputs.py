"""What vLLM's memory model of one rank takes: the rank of a layout, the flags that change memory,
the card's family, and the model's layers by kind (vllm_kv, vllm_weights and vllm_runtime all
read these; vllm_memory.estimate puts them together)."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.engines.vllm_versions import NEWEST, VllmVersion
from llmfit.plan.layout import Card, Layout
from llmfit.plan.model import AttentionKind, LayerGroup, Model

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
    # The embedding the draft's checkpoint stores (0: none), and what building one costs (its
    # vocabulary × hidden size in 16-bit): under pipeline parallelism the last stage builds it.
    draft_embed_bytes: int = 0
    draft_embedding_size: int = 0
    # What every rank holds whole of an EAGLE head: its fc, a ReplicatedLinear from the target's
    # hidden states (EAGLE-1: 2 × hidden; EAGLE-3: its 3 auxiliary layers' hidden states) to the
    # head's hidden size (models/llama_eagle.py, llama_eagle3.py).
    draft_replicated_bytes: int = 0
    # The draft's repository when its files give no size (a pytorch_model.bin): its weights are
    # then its config's parameters at 2 B, the most vLLM would load, and the plan says so.
    draft_unweighed: str = ""


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
    # --enable-extensible-kv-cache (0.34 on); None: vLLM's default, on for CUDA and ROCm.
    enable_extensible_kv_cache: bool | None = None
    # --kv-cache-memory-bytes: the pool's bytes a rank, as given; None: sized by the share.
    kv_cache_memory_bytes: int | None = None
    # --num-gpu-blocks-override: the pool's blocks a rank, as given; None: as its memory gives.
    num_gpu_blocks_override: int | None = None
    # --cpu-offload-gb: GiB of each rank's layer weights kept in the host's memory.
    cpu_offload_gb: float = 0.0


# ------------------------------------------------------------------------------------------------
# Layers, and the KV spec of each
# ------------------------------------------------------------------------------------------------

STATE_KINDS = ("mamba2", "mamba1", "gated_delta_net", "kda")
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


def group_of(model: Model, kind: str) -> LayerGroup | None:
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


@dataclass(frozen=True)
class Context:
    """One estimate's inputs, with the defaults the release picked for the card resolved."""

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
