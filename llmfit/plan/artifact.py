"""Artifact: one thing a repository offers to serve, and what its bytes are."""

from __future__ import annotations

from dataclasses import dataclass

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

    def bits_per_weight(self, params: int | None) -> float | None:
        """Bits a weight costs: from bytes and parameters when both are known, else the quant's."""
        n = self.params or params
        if n:
            return self.bytes * 8 / n
        if self.quant:
            return QUANT_BITS.get(self.quant.upper())
        return None
