"""Model and Shape: what a repository says about the network, and what of that sizes memory.

Every field is read from the model's own files (config.json, safetensors headers, GGUF headers);
a field the files do not state is None, never a guess, because a plan is only worth having if it
is the one the hardware will agree with.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum


class AttentionKind(StrEnum):
    """How a layer keeps its past, which decides what a token of context costs it."""

    FULL = "full"  # K and V for every token of the context (MHA, GQA, MQA)
    MLA = "mla"  # one compressed latent per token (DeepSeek V2/V3, Kimi K2)
    SLIDING = "sliding"  # K and V for a window of recent tokens only
    LINEAR = "linear"  # a fixed state per sequence (linear attention, Mamba/SSM)


@dataclass(frozen=True)
class LayerGroup:
    """Layers that keep their past the same way, with the sizes that cost."""

    kind: AttentionKind
    layers: int
    kv_heads: int = 0
    head_dim: int = 0
    # Value head size where it differs from the key's (else equal to head_dim).
    head_dim_v: int = 0
    # MLA: kv_lora_rank + qk_rope_head_dim elements per token, stored once, not per head.
    latent_dim: int = 0
    # SLIDING: tokens in the window (or the chunk, for chunked local attention).
    window: int = 0
    # LINEAR: bytes of state one sequence keeps in one layer, before tensor parallelism.
    state_bytes: int = 0
    # SLIDING: chunked local attention (Llama 4), which vLLM sizes without the window's -1 and +1.
    chunked: bool = False
    # LINEAR: which recurrence ("gated_delta_net", "kda", "mamba2", "mamba1"), for saying so.
    state_kind: str = ""
    # MLA with a sparse-attention indexer (DeepSeek-V3.2, GLM-5): how many of the layers keep
    # the indexer's own key cache, and the bytes a token costs each of them whatever the cache
    # dtype (index_head_dim fp8 bytes + a 4-byte scale per 128: vllm/models/deepseek_v32/
    # attention.py DeepseekV32Indexer, a uint8 DeepseekV32IndexerCache replicated on every rank).
    indexer_layers: int = 0
    indexer_bytes: int = 0

    @property
    def value_dim(self) -> int:
        return self.head_dim_v or self.head_dim

    def kv_heads_per_rank(self, tp: int) -> int:
        """vLLM ModelConfig.get_num_kv_heads: split across ranks until one each, then replicated."""
        return max(1, self.kv_heads // tp)

    def token_bytes(self, elem: float, tp: int) -> float:
        """Bytes one token costs one layer of this group on one rank (0 for a linear state)."""
        if self.kind is AttentionKind.MLA:
            # The latent is stored once per token and every rank holds all of it.
            return self.latent_dim * elem
        if self.kind in (AttentionKind.FULL, AttentionKind.SLIDING):
            return self.kv_heads_per_rank(tp) * (self.head_dim + self.value_dim) * elem
        return 0.0


@dataclass(frozen=True)
class SplitRule:
    """A size tensor parallelism splits, whose share on each rank the checkpoint's quantisation
    needs to be a multiple of (a weight block, or a quantisation group)."""

    # The config field it comes from ("moe_intermediate_size").
    name: str
    size: int
    multiple: int
    # "block_fp8_moe", "block_fp8" or "group": which of vLLM's checks refuses it.
    check: str
    # Whether expert parallelism keeps the tensor whole on each rank (routed experts only).
    experts: bool = False


@dataclass(frozen=True)
class ParamSplit:
    """Where a network's parameters are, as config.json describes them: what spreads a
    checkpoint's bytes over its parts when the tensors' own sizes are not at hand."""

    # The input embedding (vocabulary × hidden).
    embed: int
    # The output layer: the final norm, and the head unless tied to the embedding.
    output: int
    # Each repeating layer, routed experts included, in layer order.
    layers: tuple[int, ...]
    # Of each layer, its routed experts.
    experts: tuple[int, ...]
    tied_embeddings: bool


# Bytes per element of the dtypes that checkpoints are stored in and KV caches are kept in.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    # vLLM's --kv-cache-dtype spellings of the two fp8 formats (vllm/config/cache.py CacheDType).
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}

# The short names people use for a checkpoint's precision.
DTYPE_SHORT: dict[str, str] = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}


@dataclass(frozen=True)
class MambaShape:
    """The state a Mamba or linear-attention layer keeps, as vLLM sizes it
    (vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator)."""

    # "mamba2", "mamba1", "gated_delta_net" or "kda" (Kimi Delta Attention).
    kind: str
    conv_kernel: int
    # mamba2: heads × head_dim is the inner size; n_groups share B and C.
    heads: int = 0
    head_dim: int = 0
    state_size: int = 0
    n_groups: int = 1
    # mamba1: the inner size (expand × hidden).
    inner: int = 0
    # gated_delta_net: key and value heads and their sizes.
    k_heads: int = 0
    k_head_dim: int = 0
    v_heads: int = 0
    v_head_dim: int = 0
    # The Mamba-2 kernels' chunk size (config chunk_size / mamba_chunk_size).
    chunk_size: int = 0
    # The SSM (recurrent) state's dtype as the config states it (Nemotron-H's
    # mamba_ssm_cache_dtype, Qwen3.5's mamba_ssm_dtype); None when it does not.
    ssm_dtype: str | None = None


@dataclass(frozen=True)
class ModelShapes:
    """Sizes of the network's parts that decide what vLLM holds beside the KV cache: the
    weights a rank loads, the activation of its profile run, the adapters and the draft."""

    # The kind of each layer in order ("full", "sliding", "chunked", "mla", "mamba2",
    # "mamba1", "gated_delta_net", "" for a layer that caches nothing): pipeline stages take
    # consecutive layers, and vLLM's groups take layers in this order.
    layer_kinds: tuple[str, ...] = ()
    tied_embeddings: bool = False
    intermediate_size: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    # Leading layers with a dense MLP in a MoE (DeepSeek first_k_dense_replace).
    dense_layers: int = 0
    # MLA (DeepSeek): the low-rank projections.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # Multi-token-prediction layers the checkpoint carries beside the model's own
    # (DeepSeek-V3 num_nextn_predict_layers; Qwen3-Next's mtp.*): vLLM skips them unless
    # speculative decoding runs them.
    mtp_layers: int = 0
    # A sparse-attention indexer (DeepSeek-V3.2, GLM-5): the layers that build one, its heads
    # and their size (index_n_heads, index_head_dim).
    indexer_layers: tuple[int, ...] = ()
    index_heads: int = 0
    index_head_dim: int = 0
    # The top-k the indexer keeps a token (index_topk): the model holds their indices for a
    # whole step's tokens.
    index_topk: int = 0
    # Rotary embedding: dimensions rotated a head, and how many distinct caches vLLM builds
    # (Gemma 3: a local and a global one).
    rotary_dim: int = 0
    rope_caches: int = 1
    mamba: MambaShape | None = None
    # A multimodal checkpoint's vision tower and projector, in parameters (0 for text models),
    # and what one image costs: the tokens it becomes and the encoder's hidden size.
    vision_params: int = 0
    vision_hidden: int = 0
    mm_tokens_per_item: int = 0
    # What vLLM's profile run of the vision encoder holds (multimodal/encoder_budget.py): the
    # encoder's MLP width and whether it is gated (gate and up, SwiGLU), the patches the encoder
    # sees for each token it hands the text model (its spatial merge, squared), the pixels a
    # patch carries (channels × temporal frames × patch²), the frames a temporal patch takes
    # (a model that reads video: Qwen2-VL, 2; 0 for images only), and the modalities it reads
    # (each has its own --limit-mm-per-prompt; the tower is built while any is above 0).
    vision_intermediate: int = 0
    vision_gated: bool = False
    mm_patches_per_token: int = 0
    mm_pixels_per_patch: int = 0
    mm_video_temporal: int = 0
    mm_modalities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Yarn:
    """How a model is served past the context it was trained for, as its own documentation says:
    YaRN rope scaling over its native `original` tokens, vouched for up to `longest` tokens."""

    original: int
    longest: int
    # The config's rope_theta, which an override of the rope parameters must carry (vLLM sets
    # them whole); None where the config gives none.
    rope_theta: float | None
    # Where the way is documented ("the Qwen3 model card").
    source: str


def yarn_overrides(model: Model, context: int) -> dict[str, object] | None:
    """The config overrides that serve `context` tokens with YaRN, where the model's own
    documentation allows it (`Model.yarn`) and the context is past the trained one but within
    what it vouches for; None otherwise (the engines then need their long-context switch).

    The factor is the context over the native length, rounded up to a tenth (4.0 for 131,072 over
    32,768; the Qwen3 card: "modify the factor as needed"), and max_position_embeddings is the
    context: vLLM 0.33 takes a YaRN config's max_position_embeddings as already scaled
    (vllm/config/model.py _get_and_verify_max_len skips the factor for "yarn"), older releases
    multiply the original length by the factor, and SGLang 0.5.23 reads max_position_embeddings
    as it is when original_max_position_embeddings is given (utils/hf_transformers/common.py
    get_context_length): each derives at least the context, so none needs its override switch.
    """
    y = model.yarn
    if y is None or not model.max_context or not model.max_context < context <= y.longest:
        return None
    factor = -(-context * 10 // y.original) / 10
    rope: dict[str, object] = {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": y.original,
    }
    if y.rope_theta is not None:
        rope["rope_theta"] = int(y.rope_theta) if y.rope_theta.is_integer() else y.rope_theta
    return {"rope_scaling": rope, "max_position_embeddings": context}


def yarn_json(model: Model, context: int) -> str | None:
    """`yarn_overrides` as the JSON an engine's flag takes (vLLM's --hf-overrides, SGLang's
    --json-model-override-args); None where there are none."""
    import json

    overrides = yarn_overrides(model, context)
    return json.dumps(overrides) if overrides else None


@dataclass(frozen=True)
class Model:
    """What config.json (or a GGUF header) says about the network."""

    architecture: str | None
    model_type: str | None
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    layer_groups: tuple[LayerGroup, ...]
    hidden_size: int | None = None
    vocab_size: int | None = None
    max_context: int | None = None
    # The stored dtype, as torch names it ("bfloat16"); None when the files do not say.
    dtype: str | None = None
    # The checkpoint's quantisation method ("fp8", "awq", ...); None for plain weights.
    quantization: str | None = None
    experts: int | None = None
    experts_active: int | None = None
    shared_experts: int | None = None
    params: int | None = None
    active_params: int | None = None
    # Assumptions made while reading, said to the user rather than hidden.
    notes: tuple[str, ...] = field(default=())
    # The KV cache dtype the checkpoint was calibrated for (compressed-tensors kv_cache_scheme),
    # as vLLM names it ("fp8"); None when it states none.
    kv_cache_dtype: str | None = None
    # Sizes tensor parallelism must split evenly into the checkpoint's quantisation blocks.
    split_rules: tuple[SplitRule, ...] = ()
    # "generate", or what a model that does not generate is for ("embed", "classify").
    task: str = "generate"
    # Where its parameters are, part by part; None when the config does not say enough.
    param_split: ParamSplit | None = None
    # The config names code of its own (auto_map): engines load it only when trusted to.
    custom_code: bool = False
    # Config keys that change what an engine holds but that llmfit does not model: a plan of
    # such a model is an estimate, and its notes name them.
    unmodelled: tuple[str, ...] = ()
    # What vLLM's memory model needs besides (llmfit/plan/engines/vllm_memory.py); each has a
    # default so that a Model built without them (GGUF headers, tests) still plans.
    shapes: ModelShapes | None = None
    # The vision encoder a model that reads pictures carries, as (layers, hidden size); None for
    # a text-only model. SGLang lowers its static share by the encoder's size.
    vision_tower: tuple[int, int] | None = None
    # How its documentation serves it past its trained context (YaRN); None where it says none.
    yarn: Yarn | None = None

    def __hash__(self) -> int:
        # By what tells two models apart at a glance, not by every field: the engines' caches are
        # keyed by the model (vllm_weights.parts_of, vllm_kv._kv_groups), looked up 380 times
        # in a plan of the example fleet, and hashing all of it (its shapes, layer groups,
        # notes) took 4 µs a lookup. Equal models still hash equal; models alike in these are
        # told apart by ==.
        return hash(
            (self.architecture, self.model_type, self.layers, self.hidden_size, self.params)
        )

    @property
    def is_moe(self) -> bool:
        return bool(self.experts and self.experts > 1)

    @property
    def kv_dtype(self) -> str:
        """The KV cache dtype planned with `auto`: the one the checkpoint was calibrated for, else
        the model's own (bf16 if unknown)."""
        if self.kv_cache_dtype:
            return self.kv_cache_dtype
        if self.dtype in ("float16", "bfloat16", "float32"):
            return self.dtype
        # A quantised checkpoint still computes attention in bf16, so its cache is bf16.
        return "bfloat16"


def dtype_bytes(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}") from None


@dataclass(frozen=True)
class Shape:
    """What sizes the KV cache and constrains splitting, at one KV-cache dtype."""

    layer_groups: tuple[LayerGroup, ...]
    attention_heads: int
    kv_heads: int
    kv_dtype: str
    params: int | None = None
    experts: int | None = None
    split_rules: tuple[SplitRule, ...] = ()
    # Every layer of the network, cached or not (pipeline stages split these); 0 = the groups'.
    num_layers: int = 0

    @classmethod
    def of(cls, model: Model, kv_dtype: str | None = None) -> Shape:
        return cls(
            layer_groups=model.layer_groups,
            attention_heads=model.attention_heads,
            kv_heads=model.kv_heads,
            kv_dtype=kv_dtype or model.kv_dtype,
            params=model.params,
            experts=model.experts,
            split_rules=model.split_rules,
            num_layers=model.layers,
        )

    @property
    def layers(self) -> int:
        return self.num_layers or sum(g.layers for g in self.layer_groups)

    def stage(self, layers: int) -> Shape:
        """The shape of a pipeline stage holding `layers` of the model's layers: each kind of
        layer in its proportion, rounded up (exact where all layers are alike), so a stage's
        cache is never counted short."""
        total = self.layers
        if layers >= total or total <= 0:
            return self
        groups = tuple(replace(g, layers=-(-g.layers * layers // total)) for g in self.layer_groups)
        return replace(self, layer_groups=groups, num_layers=layers)

    def kv_bytes_per_token(self, tp: int = 1, pp: int = 1) -> int:
        """Bytes one more token of context costs one card of a tp × pp replica.

        Only layers that grow with context count: a sliding window or a linear state costs the
        same at any context, so it is charged separately (see `fixed_kv_bytes`).

        Tensor parallelism splits KV heads across the width until there is one a rank; past that
        each rank keeps a whole head, so the cache is replicated rather than split further
        (vLLM ModelConfig.get_num_kv_heads: max(1, kv_heads // tp)). An MLA latent is not split
        at all. Pipeline stages each keep their own layers' cache, and the largest stage is the
        one that runs out.
        """
        elem = dtype_bytes(self.kv_dtype)
        total = 0.0
        for g in self.layer_groups:
            if g.kind in (AttentionKind.FULL, AttentionKind.MLA):
                total += -(-g.layers // pp) * g.token_bytes(elem, tp)
                total += -(-g.indexer_layers // pp) * g.indexer_bytes
        return int(total)

    def fixed_kv_bytes(
        self,
        tp: int = 1,
        pp: int = 1,
        context: int = 0,
        *,
        batched_tokens: int = 8192,
        block_size: int = 16,
    ) -> int:
        """Bytes one sequence costs one card whatever its length: sliding windows and states.

        vLLM (v1/kv_cache_interface.py, max_memory_usage_bytes of each spec):
        - a sliding-window layer holds min(window - 1 + max_num_batched_tokens, max_model_len)
          tokens, in whole blocks plus one (the window need not start at a block's edge);
        - a chunked-local layer (Llama 4) holds min(chunk + max_num_batched_tokens, max_model_len)
          tokens, in whole blocks;
        - a linear-attention or state-space layer keeps one state a sequence, split across
          tensor-parallel ranks (MambaSpec with prefix caching off: one page). Not modelled:
          the "align" prefix-caching mode's second page, Mamba-2 n_groups padded up to a
          multiple of tp, and the attention block size vLLM inflates to the state's page.
        """
        elem = dtype_bytes(self.kv_dtype)
        total = 0
        for g in self.layer_groups:
            layers = -(-g.layers // pp)
            if g.kind is AttentionKind.SLIDING:
                if g.chunked:
                    tokens = min(g.window + batched_tokens, context)
                    nblocks = -(-tokens // block_size)
                else:
                    tokens = min(g.window - 1 + batched_tokens, context)
                    nblocks = -(-tokens // block_size) + 1
                total += int(layers * nblocks * block_size * g.token_bytes(elem, tp))
            elif g.kind is AttentionKind.LINEAR:
                total += layers * -(-g.state_bytes // tp)
        return total


@dataclass(frozen=True)
class AttentionCharge:
    """How one kind of layer was charged, for saying so (one replica, tp = pp = 1)."""

    kind: str  # "full", "mla", "sliding", "chunked" or "linear"
    layers: int
    # Bytes one more token of context costs (0 for layers that do not grow with it).
    bytes_per_token: int
    # Bytes one sequence costs whatever its length (windows and states), at the planned context.
    bytes_per_sequence: int
    how: str
    window: int | None = None
