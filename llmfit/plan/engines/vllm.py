"""vLLM: what one card of a tensor × pipeline parallel replica holds, and what vLLM will refuse.

See ENGINES.md (shared) sections a-c for the engine behaviour each rule reproduces.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.fleet import GIB
from llmfit.plan.model import Shape
from llmfit.plan.options import PerCard

# vLLM allocates KV in blocks of 16 tokens (CacheConfig.DEFAULT_BLOCK_SIZE), so a request's cache is
# rounded up to whole blocks and the longest context that fits is a multiple of 16.
BLOCK_SIZE = 16


@dataclass(frozen=True)
class VllmOptions:
    # The share of each card's reported total vLLM may use; passed on as --gpu-memory-utilization
    # so that plan and engine agree by construction.
    gpu_memory_utilization: float = 0.90


def overhead_bytes(weights_per_card: int) -> int:
    """What the runtime costs a card beyond its weights and cache.

    A flat allowance plus a tenth of the card's weights, as the reference planner charges: the flat
    part is the CUDA context, the framework and its allocator, which a small model pays as much as a
    large one; the fraction stands in for activations and fragmentation, which do scale. Each
    process pays its own, so it is charged per card, not shared.
    """
    return 2 * GIB + weights_per_card // 10


def blocks(tokens: int) -> int:
    """Tokens rounded up to whole KV blocks."""
    return -(-tokens // BLOCK_SIZE) * BLOCK_SIZE


def per_card(shape: Shape, weight_bytes: int, tp: int, pp: int, context: int) -> PerCard:
    """One card's weights, KV cache for one sequence of `context` tokens, and overhead.

    Tensor parallelism splits the weights across the width and pipeline stages split the layers, so
    each card holds 1/(tp·pp) of them; a MoE's experts shard across every rank with or without
    expert parallelism (FusedMoEParallelConfig), so the same division holds for them.
    """
    weights = -(-weight_bytes // (tp * pp))
    kv = shape.kv_bytes_per_token(tp, pp) * blocks(context)
    return PerCard(weights=weights, kv_cache=kv, overhead=overhead_bytes(weights))


def width_refusal(shape: Shape, tp: int) -> str | None:
    """The reason vLLM refuses this tensor-parallel width, or None when it accepts it."""
    if shape.attention_heads and shape.attention_heads % tp:
        # ModelConfig.verify_with_parallel_config, word for word.
        return (
            f"Total number of attention heads ({shape.attention_heads}) must be divisible by "
            f"tensor parallel size ({tp})."
        )
    kv = shape.kv_heads
    if kv and kv % tp and tp % kv:
        # QKVParallelLinear splits KV heads evenly, or past their number replicates them evenly.
        return (
            f"{kv} KV heads can be neither split evenly across nor replicated evenly over "
            f"{tp} cards."
        )
    return None


def max_context(
    shape: Shape, card: PerCard, have: int, tp: int, pp: int, trained: int | None
) -> int:
    """The longest single sequence this card's KV budget holds, in whole blocks.

    Capped at the trained context: vLLM refuses a --max-model-len past the one the config derives
    unless told to with VLLM_ALLOW_LONG_MAX_MODEL_LEN, which the plan does not assume.
    """
    budget = have - card.weights - card.overhead
    per_token = shape.kv_bytes_per_token(tp, pp)
    if budget <= 0:
        return 0
    if per_token == 0:
        return trained or 0
    tokens = budget // per_token // BLOCK_SIZE * BLOCK_SIZE
    return min(tokens, trained) if trained else tokens


def concurrency(shape: Shape, card: PerCard, have: int, tp: int, pp: int, context: int) -> float:
    """How many sequences of `context` tokens the KV budget holds at once, as vLLM reports it."""
    per_seq = shape.kv_bytes_per_token(tp, pp) * blocks(context)
    budget = have - card.weights - card.overhead
    if per_seq == 0 or budget <= 0:
        return 0.0
    return round(budget / per_seq, 2)
