"""What a plan is asked for: the context, the share of a card, the precisions to offer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlanSettings:
    # The token pool planned for; None plans the model's trained context.
    context: int | None = None
    gpu_memory_utilization: float = 0.90
    # The share of a host's RAM one replica may be planned to use: the system keeps the rest.
    host_share: float = 0.85
    # "auto" keeps the model's own dtype for the cache (or the one its checkpoint was calibrated
    # for); else "bfloat16" or "fp8".
    kv_cache_dtype: str = "auto"
    # Which precisions to offer: "all" (as stored, and the what-ifs an engine flag makes of a
    # 16-bit checkpoint), "stored", "fp8" (weights quantised on load) or "kv-fp8" (an fp8 cache).
    precision: str = "all"


PRECISIONS = ("all", "stored", "fp8", "kv-fp8")
