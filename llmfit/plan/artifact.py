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
class GgufLayout:
    """What a GGUF file's header says each part of the network weighs, so that placing layers
    on devices is exact: llama.cpp places whole layers, so the plan sums them the same way."""

    # Bytes of every `blk.N.*` tensor, by N, experts included.
    layer_bytes: tuple[int, ...]
    # Of those, the bytes of `blk.N.ffn_{up,down,gate}_exps` (what --n-cpu-moe keeps on the host).
    expert_bytes: tuple[int, ...]
    # `token_embd*`: the input layer, which llama.cpp always keeps on the host.
    embed_bytes: int
    # `output`, `output_norm` and any other tensor outside a block: the output layer.
    output_bytes: int
    # No `output.weight`: llama.cpp copies token_embd to the output layer's device.
    tied_embeddings: bool
    # How each layer keeps its past, in layer order: runs of like layers (see Model.layer_groups).
    kv_layout: tuple[LayerGroup, ...]
    # What the compute buffer is sized by (see plan/engines/llamacpp.py).
    vocab: int
    embedding: int
    feed_forward: int

    @property
    def layers(self) -> int:
        return len(self.layer_bytes)


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

    def bits_per_weight(self, params: int | None) -> float | None:
        """Bits a weight costs: from bytes and parameters when both are known, else the quant's."""
        n = self.params or params
        if n:
            return self.bytes * 8 / n
        if self.quant:
            return QUANT_BITS.get(self.quant.upper())
        return None
