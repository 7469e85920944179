"""Artifact: one thing a repository offers to serve, and what its bytes are."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.model import LayerGroup

# Roughly what each quantisation spends a weight, for when the parameter count is not known and
# the bits cannot be worked out from the file's size. From the reference planner's table.
QUANT_BITS: dict[str, float] = {
    "F32": 32, "FP32": 32, "F16": 16, "BF16": 16, "FP16": 16, "FP8": 8, "INT8": 8, "INT4": 4,
    "AWQ": 4.25, "GPTQ": 4.25, "MXFP4": 4.25, "NVFP4": 4.5,
    "Q8_0": 8.5, "Q6_K": 6.6, "Q5_K_M": 5.7, "Q5_K_S": 5.5, "Q5_0": 5.5, "Q5_1": 6,
    "Q4_K_M": 4.8, "Q4_K_S": 4.6, "Q4_0": 4.5, "Q4_1": 5, "IQ4_XS": 4.3, "IQ4_NL": 4.5,
    "Q3_K_L": 4.3, "Q3_K_M": 3.9, "Q3_K_S": 3.5, "IQ3_M": 3.7, "IQ3_XS": 3.3, "IQ3_XXS": 3.1,
    "Q2_K": 3.0, "IQ2_M": 2.7, "IQ2_XS": 2.3, "IQ2_XXS": 2.1, "IQ1_M": 1.8, "IQ1_S": 1.6,
}  # fmt: skip


@dataclass(frozen=True)
class WeightLayout:
    """What each part of the network weighs: engines place whole layers (pipeline stages,
    llama.cpp's layer split), keep the embedding with the first and the output layer with the
    last, and shard routed experts apart from the rest, so a card's share is summed part by part
    rather than taken as an average that hides the fullest card.

    Exact where the tensors' own sizes are known (GGUF headers, safetensors headers); else the
    checkpoint's bytes spread over the parts in proportion to the parameters config.json gives
    them (Artifact.weights_exact says which).
    """

    # Bytes of each repeating layer (`blk.N.*`, `model.layers.N.*`), by N, experts included.
    layer_bytes: tuple[int, ...]
    # Of those, the bytes of the routed experts (what expert parallelism shards, and what
    # llama.cpp's --n-cpu-moe keeps on the host).
    expert_bytes: tuple[int, ...]
    # The input embedding (`token_embd`, `embed_tokens`).
    embed_bytes: int
    # The output layer: the final norm, and the output head unless it is tied to the embedding.
    output_bytes: int
    # No separate output head: it is the embedding (an engine's last stage keeps its own copy).
    tied_embeddings: bool

    @property
    def layers(self) -> int:
        return len(self.layer_bytes)

    @property
    def total(self) -> int:
        return sum(self.layer_bytes) + self.embed_bytes + self.output_bytes


@dataclass(frozen=True)
class GgufLayout(WeightLayout):
    """What a GGUF file's header says each part of the network weighs, exactly, with what
    llama.cpp needs besides to place it: `token_embd` stays on the host, and with tied
    embeddings llama.cpp copies it to the output layer's device."""

    # How each layer keeps its past, in layer order: runs of like layers (see Model.layer_groups).
    kv_layout: tuple[LayerGroup, ...]
    # What the compute buffer is sized by (see plan/engines/llamacpp.py).
    vocab: int
    embedding: int
    feed_forward: int


@dataclass(frozen=True)
class Artifact:
    """The original safetensors weights, or one GGUF file (a split GGUF is one artifact)."""

    name: str
    format: str  # "safetensors" or "gguf"
    bytes: int
    shards: int = 1
    # "bf16", "fp8", "Q4_K_M": what people call its precision.
    quant: str | None = None
    # Parameters these weights hold, where their headers were counted; else the model's.
    params: int | None = None
    # Local path of the (first) file, where it is on disk; None when only metadata is at hand.
    path: str | None = None
    # GGUF: every file of a split artifact, first part first (paths in the repository).
    files: tuple[str, ...] = ()
    # GGUF: per-layer bytes and KV layout from the header; None for safetensors.
    layout: GgufLayout | None = None
    # GGUF: the multimodal projector (`mmproj*.gguf`) this model needs to read pictures, if any.
    projector: str | None = None
    projector_bytes: int = 0
    # Safetensors: what each part weighs (None when the config cannot say); for GGUF see `parts`.
    weights: WeightLayout | None = None
    # Whether `weights` was summed from the tensors' own sizes rather than spread by parameters.
    weights_exact: bool = False
    # Whether `bytes` is the config's parameters at its dtype, no checkpoint's sizes being at hand
    # (a config-only repository; plan/weights.py estimated).
    estimated: bool = False

    @property
    def parts(self) -> WeightLayout | None:
        """What each part of the network weighs, from whichever source this artifact has."""
        return self.layout if self.layout is not None else self.weights

    def bits_per_weight(self, params: int | None) -> float | None:
        """Bits a weight costs: from bytes and parameters when both are known, else the quant's."""
        n = self.params or params
        if n:
            return self.bytes * 8 / n
        if self.quant:
            return QUANT_BITS.get(self.quant.upper())
        return None
