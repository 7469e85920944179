"""vLLM: what one card of a tensor × pipeline parallel replica holds, and what vLLM will refuse.

See ENGINES.md (shared) sections a-c for the engine behaviour each rule reproduces.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.engines.serving import split_refusal
from llmfit.plan.fleet import GIB
from llmfit.plan.model import AttentionCharge, AttentionKind, Shape
from llmfit.plan.options import PerCard

# vLLM allocates KV in blocks of 16 tokens (CacheConfig.DEFAULT_BLOCK_SIZE), so a request's cache is
# rounded up to whole blocks and the longest context that fits is a multiple of 16.
BLOCK_SIZE = 16

# Tokens vLLM schedules in one step (--max-num-batched-tokens), which a sliding-window layer keeps
# beside its window. `vllm serve` defaults to 8192 on cards of 70 GiB or more other than the A100,
# and to 2048 elsewhere (EngineArgs.get_batch_defaults in vllm/engine/arg_utils.py). The plan
# assumes the larger everywhere: on smaller cards it over-counts a sliding layer by 6,144 tokens,
# never under-counts it.
MAX_NUM_BATCHED_TOKENS = 8192


@dataclass(frozen=True)
class Runtime:
    """What sizes vLLM's working memory beside weights and cache: the profile run's batch of
    tokens, and the model's vocabulary and hidden size."""

    batched_tokens: int
    vocab_size: int
    hidden_size: int


def batched_tokens(card_bytes: int, gpu_class: str) -> int:
    """vLLM serve's default --max-num-batched-tokens for a card (EngineArgs.get_batch_defaults):
    8192 on cards of at least 70 GiB that are not A100s, 2048 elsewhere."""
    return 8192 if card_bytes >= 70 * GIB and not gpu_class.startswith("a100") else 2048


# Fitted to vLLM V1's own startup lines (fixtures/calibration/engine-logs.jsonl, llm-d's H100
# table): the profile run's activation peak is 5.56 GiB for Qwen3-0.6B, 4.76 for Llama-3.1-8B and
# 7.38 for gpt-oss-20b at 8192 batched tokens, which 4.75 B per token per vocabulary entry (fp32
# logits and the sampler's copy) plus 2.75 B per token per hidden unit reproduces within 0.03 GiB;
# the same formula at 2048 tokens gives Llama-3-8B's 1.19 GiB against the 1.26 printed in vLLM PR
# #10511. It depends on the vocabulary, not the weights: the reference planner's 2 GiB + 10 % of
# the weights under-charged these three by 1.4 to 4.2 GiB, every one of them a wrong "it fits".
LOGITS_BYTES_X4 = 19  # 4.75 B, as quarters so the arithmetic stays in integers
HIDDEN_BYTES_X4 = 11  # 2.75 B
# Memory outside torch's allocator after the snapshot: 0.13 GiB in every V1 record at TP 1; with
# TP 2 the NCCL and custom all-reduce buffers added 1.79 GiB a card in PR #10511's figures.
NON_TORCH = GIB // 4
NON_TORCH_TP = 1_920_000_000  # 1.79 GiB
# CUDA graphs, subtracted from the KV budget since v0.21: 0.10-0.39 GiB in the records, up to
# 1.3 GiB reported for large models (PR #21489).
CUDA_GRAPHS = GIB // 2


def overhead_bytes(
    weights_per_card: int, runtime: Runtime | None = None, tp: int = 1, graphs: bool = True
) -> int:
    """What the runtime costs a card beyond its weights and cache; each process pays its own.

    With the model's vocabulary and hidden size known, it is vLLM's profile-run activation peak
    (fitted above), plus non-torch memory and CUDA graphs. Without them, the reference planner's
    allowance: 2 GiB + a tenth of the card's weights, a flat part for the CUDA context and
    allocator and a fraction standing in for activations. See docs/accuracy.md for both against
    the records.
    """
    if runtime is None:
        return 2 * GIB + weights_per_card // 10
    t = runtime.batched_tokens
    activation = (
        t * (LOGITS_BYTES_X4 * runtime.vocab_size + HIDDEN_BYTES_X4 * runtime.hidden_size) // 4
    )
    non_torch = NON_TORCH + (NON_TORCH_TP if tp > 1 else 0)
    return activation + non_torch + (CUDA_GRAPHS if graphs else 0)


def blocks(tokens: int) -> int:
    """Tokens rounded up to whole KV blocks."""
    return -(-tokens // BLOCK_SIZE) * BLOCK_SIZE


def fixed_kv(shape: Shape, tp: int, pp: int, context: int) -> int:
    """What one sequence's sliding windows and linear states cost a card, at any length."""
    return shape.fixed_kv_bytes(
        tp, pp, context, batched_tokens=MAX_NUM_BATCHED_TOKENS, block_size=BLOCK_SIZE
    )


def sequence_kv(shape: Shape, tp: int, pp: int, context: int) -> int:
    """One sequence of `context` tokens on one card: the growing layers in whole blocks, plus the
    windows and states that do not grow."""
    return shape.kv_bytes_per_token(tp, pp) * blocks(context) + fixed_kv(shape, tp, pp, context)


def per_card(
    shape: Shape,
    weight_bytes: int,
    tp: int,
    pp: int,
    context: int,
    runtime: Runtime | None = None,
) -> PerCard:
    """One card's weights, KV cache for one sequence of `context` tokens, and overhead.

    Tensor parallelism splits the weights across the width and pipeline stages split the layers, so
    each card holds 1/(tp·pp) of them; a MoE's experts shard across every rank with or without
    expert parallelism (FusedMoEParallelConfig), so the same division holds for them.
    """
    weights = -(-weight_bytes // (tp * pp))
    kv = sequence_kv(shape, tp, pp, context)
    return PerCard(weights=weights, kv_cache=kv, overhead=overhead_bytes(weights, runtime, tp))


def width_refusal(shape: Shape, tp: int, expert_parallel: bool = False) -> str | None:
    """The reason vLLM refuses this tensor-parallel width, or None when it accepts it: its
    attention heads, in vLLM's words, then the layers it splits (serving.split_refusal)."""
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
    return split_refusal(shape, tp, expert_parallel)


def max_context(
    shape: Shape, card: PerCard, have: int, tp: int, pp: int, trained: int | None
) -> int:
    """The longest single sequence this card's KV budget holds, in whole blocks.

    Capped at the trained context: vLLM refuses a --max-model-len past the one the config derives
    unless told to with VLLM_ALLOW_LONG_MAX_MODEL_LEN, which the plan does not assume.
    """
    # The windows and states a sequence keeps at any length come first, at their largest (a
    # window's worth): what is left grows with the context.
    budget = have - card.weights - card.overhead - fixed_kv(shape, tp, pp, trained or 1 << 62)
    per_token = shape.kv_bytes_per_token(tp, pp)
    if budget <= 0:
        return 0
    if per_token == 0:
        return trained or 0
    tokens = budget // per_token // BLOCK_SIZE * BLOCK_SIZE
    return min(tokens, trained) if trained else tokens


def concurrency(shape: Shape, card: PerCard, have: int, tp: int, pp: int, context: int) -> float:
    """How many sequences of `context` tokens the KV budget holds at once, as vLLM reports it."""
    per_seq = sequence_kv(shape, tp, pp, context)
    budget = have - card.weights - card.overhead
    if per_seq == 0 or budget <= 0:
        return 0.0
    return round(budget / per_seq, 2)


def attention_charges(shape: Shape, context: int) -> tuple[AttentionCharge, ...]:
    """Each kind of layer, what it costs a replica of one card, and in words how it was charged."""
    out: list[AttentionCharge] = []
    for g in shape.layer_groups:
        one = Shape((g,), shape.attention_heads, shape.kv_heads, shape.kv_dtype)
        per_token = one.kv_bytes_per_token()
        per_seq = fixed_kv(one, 1, 1, context)
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
