"""Option: one way to run one artifact; and how options are ranked, labelled and described."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.artifact import Artifact


@dataclass(frozen=True)
class PerCard:
    """What one card of an option holds, part by part (for a CPU option, the host's RAM)."""

    weights: int
    kv_cache: int
    overhead: int

    @property
    def need(self) -> int:
        return self.weights + self.kv_cache + self.overhead


@dataclass(frozen=True)
class Option:
    artifact: Artifact
    engine: str  # "vllm" or "llama.cpp"
    per_card: PerCard
    # What a card (or, for CPU, the node's RAM) offers the plan: its share, not its total.
    have: int
    cpu: bool = False
    gpu_class: str | None = None
    fabric: str | None = None
    gpus_per_node: int = 0
    nodes: int = 1
    tp: int = 1
    pp: int = 1
    expert_parallel: bool = False
    # How many nodes could run it at all, and whether one (or enough, together) could right now.
    hosts: int = 0
    free_now: bool = False
    bits_per_weight: float | None = None
    # The token pool it was checked against, the largest it could hold, and how many sequences of
    # `context` tokens its KV budget holds at once.
    context: int = 0
    max_context: int = 0
    concurrency: float = 0.0
    # The nodes a multi-node launch would use, head first.
    node_ids: tuple[str, ...] = ()
    gpu_memory_utilization: float = 0.90
    # The KV cache dtype to pass to the engine (vLLM's name, "fp8"); None leaves it at auto.
    kv_cache_dtype: str | None = None
    # A what-if: what an engine flag would make of the checkpoint ("fp8 weights"), with the flags
    # that make it so; None for the artifact as stored.
    what_if: str | None = None
    engine_flags: tuple[str, ...] = ()
    # How many things the what-if changes (weights, cache): fewer changes rank first.
    changes: int = 0
    # The formula's inputs, kept so that an explanation reads them rather than recomputing:
    # KV bytes one token costs one card, and the batch vLLM profiles its working memory with.
    kv_per_token: int = 0
    batched_tokens: int = 0
    # llama.cpp: --n-gpu-layers (n_layer + 1 is every layer and the output layer), the equal
    # --tensor-split across the cards (empty on one card), --n-cpu-moe, and what the host's RAM
    # holds of a part-offloaded model (weights, KV and compute kept there).
    gpu_layers: int | None = None
    tensor_split: tuple[int, ...] = ()
    cpu_moe_layers: int = 0
    host_bytes: int = 0

    @property
    def gpus(self) -> int:
        return 0 if self.cpu else self.gpus_per_node * max(self.nodes, 1)

    @property
    def room(self) -> int:
        return self.have - self.per_card.need


@dataclass(frozen=True)
class Rejection:
    """A way that was considered and refused, with the engine's reason or the arithmetic's."""

    artifact: str
    engine: str
    where: str
    # The engine's refusal, word for word; empty when the refusal is that it does not fit.
    reason: str
    need: int = 0
    have: int = 0
    # The longest context this way could hold instead, where it is only the context that is
    # too long (0 when even the weights do not fit).
    max_context: int = 0
    what_if: str | None = None


# The precision past which a bigger file is not a better model worth its memory: eight bits keep
# what sixteen do, near enough. On a CPU the cap is lower: every bit is read from memory for every
# token, so a file twice the size answers at half the speed, and Q4_K_M or Q5 is the usual balance.
QUALITY_CAP = 8.6
CPU_QUALITY_CAP = 5.8


def quality(o: Option) -> float:
    """Scores an option's precision: rising to the cap, falling gently past it."""
    bits = o.bits_per_weight
    if not bits:
        return 0.0
    limit = CPU_QUALITY_CAP if o.cpu else QUALITY_CAP
    return bits if bits <= limit else limit - (bits - limit) * 0.25


def rank_key(o: Option) -> tuple:
    """Best first by what the hardware is, not what it is doing.

    On a GPU before the CPU; the fewest cards, then nodes; then the better precision, up to eight
    bits. Whether it could run now only breaks a tie, then the most room left. Busy is not unfit:
    ranking free first made every file come out on the CPU on a cluster whose one card was in use,
    turning down the very file the card was there for.

    A what-if (the checkpoint quantised on load, a smaller KV cache) ranks first only where it
    saves cards or nodes: on the same hardware the checkpoint as its authors shipped it comes
    first, since the what-if buys nothing there but a changed model.
    """
    return (o.cpu, o.gpus, o.nodes, o.changes, -quality(o), not o.free_now, -o.room)


def rank(options: list[Option]) -> list[Option]:
    return sorted(options, key=rank_key)
