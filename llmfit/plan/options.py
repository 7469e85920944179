"""Option[Any]: one way to run one artifact; and how options are ranked, labelled and described."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from llmfit.plan.artifact import Artifact
from llmfit.plan.layout import Card, Layout
from llmfit.plan.load import Serving
from llmfit.plan.speed import Speed


@dataclass(frozen=True)
class PerCard:
    """What one card of an option holds, part by part, in the one vocabulary every engine fills
    (for a CPU option, the host's RAM). An engine fills the parts it has and leaves the others 0:
    their sum is what the card needs of the share of it the engine may use (`Option.have`, the
    card's total × `Option.share`), so that `need/have` means the same for every engine.

    `runtime` is third so that a plain (weights, KV, runtime) card is written as before."""

    # The weights the card loads.
    weights: int
    # One sequence of the context's KV cache (attention layers' keys and values, or latents).
    kv_cache: int
    # What the engine's process holds beside its tensors: the CUDA context, memory outside torch,
    # buffers and workspaces it keeps.
    runtime: int = 0
    # One sequence's fixed recurrent state (linear-attention and state-space layers), where the
    # engine keeps it apart from the KV cache.
    states: int = 0
    # A forward pass's transient peak (the profile run, a compute buffer, encoder outputs).
    activations: int = 0
    # CUDA graphs captured within the share.
    graphs: int = 0
    # What the engine keeps back of the card without sizing it part by part (SGLang's
    # 1 − --mem-fraction-static, for its activations, CUDA graphs and request table).
    reserve: int = 0

    @property
    def cache(self) -> int:
        """One sequence's cache, its states included (schema 1's `per_card.kv_cache`)."""
        return self.kv_cache + self.states

    @property
    def overhead(self) -> int:
        """Everything but the weights and one sequence's cache (schema 1's `per_card.overhead`)."""
        return self.runtime + self.activations + self.graphs + self.reserve

    @property
    def need(self) -> int:
        return self.weights + self.cache + self.overhead

    def named(self) -> dict[str, int]:
        """The parts by their names, in the vocabulary's order (JSON's `per_card.parts`)."""
        return {
            "weights": self.weights,
            "kv_cache": self.kv_cache,
            "states": self.states,
            "activations": self.activations,
            "graphs": self.graphs,
            "runtime": self.runtime,
            "reserve": self.reserve,
        }


# The type of an engine's launch part (a VllmLaunch, a LlamaCppLaunch, …).
L = TypeVar("L")


@dataclass(frozen=True)
class Option(Generic[L]):
    """One way to run one artifact: an engine, a layout on cards of one class (or a CPU), what
    the fullest card holds, and the engine's own launch part (its flags, typed per engine)."""

    artifact: Artifact
    engine: str  # the engine's registry key
    layout: Layout
    # The card it stands on; None for a CPU option.
    card: Card | None
    # The fullest card (for a CPU option, the host's RAM), part by part.
    per_card: PerCard
    # What a card (or, for CPU, the node's RAM) offers the plan: its total × `share`, the share
    # the engine may use (as the engine rounds it).
    have: int
    # The engine's launch part (a VllmLaunch, a LlamaCppLaunch, …): what its command is made of,
    # typed by the engine that planned it.
    launch: L
    fabric: str | None = None
    # How many nodes could run it at all, and whether one (or enough, together) could right now.
    hosts: int = 0
    free_now: bool = False
    bits_per_weight: float | None = None
    # The token pool it was checked against, the largest one sequence could hold, and how many
    # sequences of `context` tokens its KV budget holds at once, over all its ranks and replicas.
    context: int = 0
    max_context: int = 0
    held: float = 0.0
    # The nodes a multi-node launch would use, head first.
    node_ids: tuple[str, ...] = ()
    # The share of each card (for CPU, of the node's RAM) the engine may use: vLLM's
    # --gpu-memory-utilization, the whole card for SGLang (its static share is a split within
    # it), llama.cpp's margin.
    share: float = 0.90
    # For a CPU option, the RAM of the node `have` is a share of (a card's is `card`'s total).
    ram: int = 0
    # A what-if: what an engine flag would make of the checkpoint ("fp8 weights"), with the flags
    # that make it so; None for the artifact as stored.
    what_if: str | None = None
    engine_flags: tuple[str, ...] = ()
    # How many things the what-if changes (weights, cache): fewer changes rank first.
    changes: int = 0
    # KV bytes one more token of context costs the fullest card, and the tokens of context its
    # KV pool holds (a rank's, as the engine logs it: vLLM's "GPU KV cache size: N tokens",
    # llama.cpp's --ctx-size cells).
    kv_per_token: int = 0
    kv_tokens: int = 0
    # What the host's RAM holds of a part-offloaded model (weights, KV and compute kept there).
    host_bytes: int = 0
    # How fast it runs (plan/speed.py); None where the card's speed is not known.
    speed: Speed | None = None
    # How it serves the plan's workload (plan/load.py); None where its speed is not known.
    serving: Serving | None = None
    # What one of its cards costs an hour, where the fleet prices it; None: not priced.
    price: float | None = None
    # How many replicas of it the fleet's free cards could run now, and its cards in all (the
    # plan's fleet capacity).
    free_replicas: int = 0
    fleet_replicas: int = 0
    # How many copies of it its launch starts: the replicas the plan's named load needs (one
    # where none is named or none serves it), or the user's --replicas (DESIGN.md: a launch
    # carries the plan's scale).
    launched: int = 1

    @property
    def cpu(self) -> bool:
        return self.card is None

    @property
    def total(self) -> int:
        """The card's total as its driver reports it (for a CPU option, the node's RAM)."""
        return self.card.total_bytes if self.card is not None else self.ram

    @property
    def gpu_class(self) -> str | None:
        return self.card.gpu_class if self.card else None

    @property
    def nodes(self) -> int:
        return self.layout.nodes

    @property
    def gpus_per_node(self) -> int:
        return 0 if self.cpu else self.layout.cards_per_node

    @property
    def gpus(self) -> int:
        return 0 if self.cpu else self.layout.cards

    @property
    def tp(self) -> int:
        return self.layout.tp

    @property
    def pp(self) -> int:
        return self.layout.pp

    @property
    def dp(self) -> int:
        return self.layout.dp

    @property
    def expert_parallel(self) -> bool:
        return self.layout.ep

    @property
    def replicas(self) -> int:
        return self.layout.replicas

    @property
    def room(self) -> int:
        return self.have - self.per_card.need


# The refusal of a partial offload on nodes with no RAM given: the planner says it beside the
# nearest miss, since RAM is the one thing the user can add in a word.
NO_RAM = (
    "no RAM is given for these nodes (ram_gb in a fleet file; inline, +RAM as in "
    "1xh100-80g+512g), so none is counted on"
)


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
    # "" for a refusal; "dominated" for a layout that fits but that another shown one beats.
    kind: str = ""
    # The class of cards it was tried on (None: a CPU, or no card in particular).
    gpu_class: str | None = None
    # The nodes the way spans.
    nodes: int = 1


# The precision past which a bigger file is not a better model worth its memory: eight bits keep
# what sixteen do, near enough. On a CPU the cap is lower: every bit is read from memory for every
# token, so a file twice the size answers at half the speed, and Q4_K_M or Q5 is the usual balance.
QUALITY_CAP = 8.6
CPU_QUALITY_CAP = 5.8


def quality(o: Option[Any]) -> float:
    """Scores an option's precision: rising to the cap, falling gently past it."""
    bits = o.bits_per_weight
    if not bits:
        return 0.0
    limit = CPU_QUALITY_CAP if o.cpu else QUALITY_CAP
    return bits if bits <= limit else limit - (bits - limit) * 0.25


def rank_key(o: Option[Any], by: str = "cards") -> tuple[Any, ...]:
    """Best first by what the hardware is, not what it is doing (`--rank cards`,
    `concurrency`, `speed`; the serving orders are `serve_key`'s).

    On a GPU before the CPU; the fewest cards, then nodes; then the better precision, up to eight
    bits. Whether it could run now only breaks a tie, then the most sequences held, then the most
    room left. Busy is not unfit: ranking free first made every file come out on the CPU on a
    cluster whose one card was in use, turning down the very file the card was there for.

    A what-if (the checkpoint quantised on load, a smaller KV cache) ranks first only where it
    saves cards or nodes: on the same hardware the checkpoint as its authors shipped it comes
    first, since the what-if buys nothing there but a changed model.

    `by="concurrency"` puts the most sequences held first, `by="speed"` the fastest decode of
    one sequence (options whose speed is not known last), then the same order.
    """
    key = (
        o.cpu, o.gpus, o.nodes, o.changes, -quality(o), not o.free_now, -o.held, -o.room
    )  # fmt: skip
    if by == "concurrency":
        return (o.cpu, -o.held, *key[1:])
    if by == "speed":
        return (o.cpu, o.speed is None, -(o.speed.decode_tokens_per_s if o.speed else 0.0), *key)
    return key


# Speeds and what a unit of load costs, compared in the serve ranking to two significant figures:
# the serving model is good to a tenth or two against measured runs (docs/accuracy.md), so
# options a few per cent apart are a tie, which the better precision then breaks (to three,
# Tiny-Llama's Q4_K_M ranked above its Q8_0 on the same card for 0.2 % more output a second).
NEAR = 2


def _sig(x: float, figures: int = 3) -> float:
    """A cost to `figures` significant figures: a difference past what the model can tell is
    none."""
    return float(f"{x:.{figures}g}") if math.isfinite(x) else math.inf


@dataclass(frozen=True)
class Market:
    """What ranking by cost needs to know of all the options at once: whether every class is
    priced, and, without prices, the order of the classes from the smallest card up."""

    priced: bool
    # Class → its place from the smallest card (memory, then bandwidth) up.
    order: dict[str | None, int]
    # The fewest cards (priced: the lowest cost) any option of the checkpoint as stored serves
    # the workload on: what a what-if must beat to rank before it.
    stored_cards: float

    @classmethod
    def of(cls, options: list[Option[Any]]) -> Market:
        gpu = [o for o in options if not o.cpu and o.serving is not None]
        priced = bool(gpu) and all(o.price is not None for o in gpu)
        sizes: dict[str | None, tuple[int, float]] = {}
        for o in gpu:
            if o.card is not None:
                spec = o.card.spec
                # Memory to the nearest 8 GiB: an H100's 81,559 MiB and an A100's 81,920 are one
                # size, and the slower card is the smaller class.
                size = round(o.card.total_bytes / (8 * 2**30))
                sizes[o.gpu_class] = (size, spec.memory_bandwidth if spec else 0.0)
        order = {c: i for i, c in enumerate(sorted(sizes, key=lambda c: sizes[c]))}
        stored = [
            cards_for_load(o) * ((o.price or 0.0) if priced else 1.0)
            for o in gpu
            if not o.changes and serves(o)
        ]
        return cls(priced, order, min(stored, default=math.inf))


def serves(o: Option[Any]) -> bool:
    """Whether the option serves the workload within its targets: at some load where none is
    named; where one is, on as many replicas as the load needs and the fleet's cards can run."""
    sv = o.serving
    if sv is None or sv.replicas is None:
        return False
    return not sv.workload.load or sv.replicas <= max(o.fleet_replicas, 1)


def launch_scale(o: Option[Any], asked: int | None = None) -> int:
    """Copies of the option a launch starts: `asked` (--replicas) where given, else the
    replicas its named load needs, else one."""
    if asked:
        return asked
    sv = o.serving
    if sv is None or sv.replicas is None or not sv.workload.load:
        return 1
    return sv.replicas


def hourly(o: Option[Any]) -> float | None:
    """What the option costs an hour where its cards are priced: its cards × their price, times
    the replicas a named load needs (one where none is named or none serves it); None: not
    priced."""
    if o.price is None or o.cpu:
        return None
    sv = o.serving
    copies = sv.replicas if sv is not None and sv.replicas and sv.workload.load else 1
    return copies * o.gpus * o.price


# Output tokens in a million, and seconds in an hour: $/Mtok = $/h ÷ (tok/s × 3600 ÷ 1e6).
MILLION = 1e6
HOUR = 3600.0


def per_million(o: Option[Any]) -> float | None:
    """What a million output tokens cost at the workload: the option's hourly cost over the
    output tokens its replicas give an hour at the load (with none named, at its capacity);
    None where it is not priced or serves nothing."""
    cost = hourly(o)
    sv = o.serving
    if cost is None or sv is None or sv.replicas is None or sv.output_tokens_per_s <= 0:
        return None
    return cost / (sv.output_tokens_per_s * HOUR / MILLION)


def cards_for_load(o: Option[Any]) -> float:
    """The cards the workload's load takes on this option: whole replicas of it for a named
    load, its own cards with none named; inf where it does not serve the workload."""
    sv = o.serving
    if sv is None or sv.replicas is None:
        return math.inf
    return float(sv.replicas * o.gpus if sv.workload.load else o.gpus)


def cost(o: Option[Any], market: Market) -> tuple[float, float]:
    """(the whole cards, or their price an hour, a named load takes; the share of cards, or of
    their price, a unit of load takes): the fewest cards (or the lowest cost) that serve the
    workload within its targets, then what it would cost at scale."""
    sv = o.serving
    if sv is None or sv.replicas is None:
        return math.inf, math.inf
    price = (o.price or 0.0) if market.priced else 1.0
    whole = cards_for_load(o) * price if sv.workload.load else 0.0
    return _sig(whole), _sig(sv.cards_per_load * price, NEAR)


def serve_key(o: Option[Any], market: Market, by: str = "serve") -> tuple[Any, ...]:
    """Best first by how the option serves the workload (`--rank serve`, the default).

    GPU before CPU; an option that serves the workload within its targets (on as many replicas
    as its load needs) before one that does not at any load; a what-if only where it serves on
    fewer cards than the checkpoint as stored does (on the same cards the checkpoint as shipped
    comes first); the fewest cards (or, where the fleet prices every class, the lowest cost) a
    named load takes; without prices, an option of one card on the smallest class of card that
    serves it, which leaves the big cards to the models that need them; then what a unit of load
    costs (cards, or their price, a request a second of capacity). Ties go to more headroom,
    then the faster single sequence, then the better precision, then free before busy.

    `by="throughput"` puts the most output tokens a second a card at the workload first,
    `by="latency"` the shortest request (its TTFT and its output's TPOTs), among those that serve
    it, then the same order.
    """
    sv = o.serving
    served = serves(o)
    # A what-if ranks before the checkpoint as stored only where it serves on fewer cards; what-ifs
    # that save nothing (or where nothing as stored serves) go fewest changes first.
    spent = cards_for_load(o) * ((o.price or 0.0) if market.priced else 1.0)
    saves = spent < market.stored_cards < math.inf
    whatif = bool(o.changes) and spent >= market.stored_cards
    changes = 0 if saves else o.changes
    # Without prices, a model one card serves goes on the smallest class of card that serves it
    # (issue 27 item 6: the big cards stay for the models that need them); wider options after,
    # by what a unit of load costs on them.
    single = not market.priced and served and o.gpus == 1
    cls = market.order.get(o.gpu_class, len(market.order)) if single else len(market.order) + 1
    whole, unit = cost(o, market)
    headroom = sv.headroom if sv else 0.0
    fast = o.speed.decode_tokens_per_s if o.speed else 0.0
    # Of those that do not serve it, the nearest first: the least over its targets.
    short = _sig(sv.shortfall) if sv and not served else 0.0
    key = (
        o.cpu, not served, short, whatif, whole, cls, changes, unit, -_sig(headroom, NEAR),
        -_sig(fast, NEAR), o.gpus, -quality(o), not o.free_now, -o.room,
    )  # fmt: skip
    if by == "throughput":
        per_gpu = sv.output_tokens_per_s_per_gpu if sv else 0.0
        return (o.cpu, not served, short, -_sig(per_gpu), *key[3:])
    if by == "latency":
        e2e = sv.e2e_s if sv and served else math.inf
        return (o.cpu, not served, short, _sig(e2e), *key[3:])
    return key


def rank(options: list[Option[Any]], by: str = "serve") -> list[Option[Any]]:
    if by in ("cards", "concurrency", "speed"):
        return sorted(options, key=lambda o: rank_key(o, by))
    market = Market.of(options)
    return sorted(options, key=lambda o: serve_key(o, market, by))
