"""Model and Shape: what a repository says about the network, and what of that sizes memory.

Every field is read from the model's own files (config.json, safetensors headers, GGUF headers);
a field the files do not state is None, never a guess, because a plan is only worth having if it
is the one the hardware will agree with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

    @property
    def value_dim(self) -> int:
        return self.head_dim_v or self.head_dim


# Bytes per element of the dtypes that checkpoints are stored in and KV caches are kept in.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}

# The short names people use for a checkpoint's precision.
DTYPE_SHORT: dict[str, str] = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "fp8": "fp8",
}


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

    @property
    def is_moe(self) -> bool:
        return bool(self.experts and self.experts > 1)

    @property
    def kv_dtype(self) -> str:
        """The KV cache dtype an engine picks with `auto`: the model's own (bf16 if unknown)."""
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

    @classmethod
    def of(cls, model: Model, kv_dtype: str | None = None) -> Shape:
        return cls(
            layer_groups=model.layer_groups,
            attention_heads=model.attention_heads,
            kv_heads=model.kv_heads,
            kv_dtype=kv_dtype or model.kv_dtype,
            params=model.params,
            experts=model.experts,
        )

    @property
    def layers(self) -> int:
        return sum(g.layers for g in self.layer_groups)

    def kv_bytes_per_token(self, tp: int = 1, pp: int = 1) -> int:
        """Bytes one more token of context costs one card of a tp × pp replica.

        Only layers that grow with context count: a sliding window or a linear state costs the
        same at any context, so it is charged separately (see `fixed_kv_bytes`).

        Tensor parallelism splits KV heads across the width until there is one a rank; past that
        each rank keeps a whole head, so the cache is replicated rather than split further
        (vLLM ModelConfig.get_num_kv_heads: max(1, kv_heads // tp)). Pipeline stages each keep
        their own layers' cache, and the largest stage is the one that runs out.
        """
        elem = dtype_bytes(self.kv_dtype)
        total = 0.0
        for g in self.layer_groups:
            layers = -(-g.layers // pp)
            if g.kind is AttentionKind.FULL:
                heads = max(1, g.kv_heads // tp)
                total += layers * heads * (g.head_dim + g.value_dim) * elem
            elif g.kind is AttentionKind.MLA:
                # The latent is stored once per token and every rank holds all of it.
                total += layers * g.latent_dim * elem
        return int(total)
