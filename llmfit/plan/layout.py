"""Layout and Card: how a model is laid on the cards, and the card it stands on."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan import cards
from llmfit.plan.fleet import is_mig


@dataclass(frozen=True)
class Card:
    """One card (or MIG instance) as the plan counts it: its class and the total its driver
    reports, which an engine's share of the card is a share of."""

    gpu_class: str
    total_bytes: int
    # The fleet file's figures for it, where it gives them (PoolKind.override).
    override: cards.CardSpec | None = None

    @property
    def mig(self) -> bool:
        return is_mig(self.gpu_class)

    @property
    def spec(self) -> cards.CardSpec | None:
        """The card's speed figures: the fleet file's, else the card table's (PoolKind.spec)."""
        return self.override or cards.spec(self.gpu_class)


@dataclass(frozen=True)
class Layout:
    """Tensor × pipeline × data parallel, on `nodes` nodes, with expert parallelism or not.

    vLLM: `tp` cards split every layer, `pp` stages each take a run of layers, `dp` ranks each
    run a copy of the attention (and, for a dense model, of everything). llama.cpp's layer split
    across k cards is pipelined, so it is tp 1 × pp k; its independent servers are dp.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: bool = False
    nodes: int = 1
    # Independent copies of the model: a dense model's data-parallel ranks each hold one; a MoE's
    # ranks share one set of experts between them (sharded over tp × dp), so they are one copy.
    replicas: int = 1

    @property
    def cards(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def cards_per_node(self) -> int:
        return self.cards // max(self.nodes, 1)

    @property
    def cards_per_replica(self) -> int:
        return self.cards // max(self.replicas, 1)

    def short(self) -> str:
        """The layout in the one grammar every label uses: each parallel size above 1, tensor ×
        pipeline × data ("tp8", "tp4×pp2", "dp8", "pp4"), then "+ep" where expert parallelism
        spreads the experts, which it does over tp × dp ranks (a pipeline stage's experts stay on
        its own cards: "pp11" on one card a stage spreads nothing); "" for one card."""
        parts = [f"{n}{v}" for n, v in (("tp", self.tp), ("pp", self.pp), ("dp", self.dp)) if v > 1]
        if not parts:
            return ""
        return "×".join(parts) + ("+ep" if self.ep and self.tp * self.dp > 1 else "")

    def label(self) -> str:
        """ " (tp4×pp2)": the short form in parentheses, as it follows where a layout runs; ""
        for one card."""
        short = self.short()
        return f" ({short})" if short else ""


# The dimensions of a layout that may span several nodes.
ACROSS = ("pipeline", "data")


@dataclass(frozen=True)
class LayoutSpace:
    """The layout dimensions an engine can launch: what its commands can say, and so what the
    planner may offer it. A layout outside it is never offered, whatever its memory says: an
    engine that cannot spell data-parallel ranks would print a one-card command for an
    eight-card plan.

    `across_nodes` names the dimensions a replica may spread over the nodes of a fabric:
    "pipeline" (stages on several nodes) and "data" (a MoE's data-parallel ranks on several
    nodes, sharing one set of experts). Independent copies are never one launch over nodes.
    """

    tensor: bool = False
    pipeline: bool = False
    # Data-parallel ranks on one node: a MoE's ranks sharing the experts, or whole copies.
    data: bool = False
    experts: bool = False
    # Whole copies of the model side by side (a dense model's data-parallel ranks, or
    # independent servers).
    replicas: bool = False
    across_nodes: frozenset[str] = frozenset()
    # Whether it runs on a host's CPU alone, with no card.
    cpu: bool = False
    # The prefill/decode pairs it launches disaggregated (PairRules); None: it launches none.
    pairs: PairRules | None = None

    def refusal(self, layout: Layout) -> str | None:
        """Why the engine cannot launch `layout`, in a few words; None where it can."""
        if layout.tp > 1 and not self.tensor:
            return "it does not split layers over cards (tensor parallelism)"
        if layout.pp > 1 and not self.pipeline:
            return "it does not split the layers into stages (pipeline parallelism)"
        if layout.dp > 1 and not self.data:
            return "it runs no data-parallel ranks"
        if layout.ep and not self.experts:
            return "it has no expert parallelism"
        if layout.replicas > 1 and not self.replicas:
            return "it runs no copies side by side"
        if layout.nodes > 1:
            if layout.replicas > 1:
                return "independent copies are separate launches, not one over several nodes"
            spans = {"pipeline" if layout.pp > 1 else "", "data" if layout.dp > 1 else ""} - {""}
            if not spans or not spans <= self.across_nodes:
                return "it does not span nodes this way"
        return None


@dataclass(frozen=True)
class PairKind:
    """What of a model the pair rules look at: its KV heads, and the kinds of its layers."""

    kv_heads: int
    mla: bool  # an MLA latent (whole on every tensor-parallel rank)
    # State-space or linear-attention layers beside attention (a fixed state a sequence).
    hybrid: bool = False


@dataclass(frozen=True)
class PairRules:
    """The prefill and decode layouts an engine launches as one disaggregated deployment, in the
    version modelled. Both sides run the same engine version, checkpoint, KV-cache dtype and
    speculative config by construction (the plan pairs two options of one engine, artifact and
    what-if, and prints one version for both); these are the layout rules besides."""

    # What moves the KV, as the engine names it ("NixlConnector"; "mooncake, nixl").
    transport: str
    # Whether the two sides' tensor-parallel sizes may differ (each a multiple of the other).
    unequal_tp: bool
    # A non-MLA model whose prefill replicates its KV heads (fewer heads than its TP) may not
    # have a wider prefill than decode.
    no_wider_replicated_prefill: bool = False
    # A hybrid model (state-space or linear-attention layers) may not run pipeline stages.
    hybrid_no_pp: bool = False
    # Decode may not run pipeline stages (`decode_pp_one`), or may only where prefill runs the
    # same number (`decode_pp_matches`).
    decode_pp_one: bool = False
    decode_pp_matches: bool = False
    # Tokens of its KV pool the decode side keeps free for each request it holds, beside the
    # request's own (SGLang's --num-reserved-decode-tokens): it admits fewer requests at once
    # than the pool holds at their tokens alone (plan/disagg.py `decode_admits`).
    decode_reserve: int = 0
    # Where the rules are in the engine's code.
    source: str = ""
    # "module:function" that turns the two options' serve lines into the roles' launch (each
    # worker's line, and the router's): plan/engines/disagg_launch.py `Roles`.
    launch: str = ""
    # "module:function" that reads a command's own role in a pair, as `llmfit check` is given
    # one: why it cannot be the prefill or decode side; plan/engines/disagg_launch.py `Role`.
    role: str = ""

    def refusal(self, prefill: Layout, decode: Layout, kind: PairKind) -> str | None:
        """Why the engine cannot launch this prefill layout with this decode one, in a few
        words; None where it can."""
        p, d = prefill.tp, decode.tp
        if p != d:
            if not self.unequal_tp:
                return f"its prefill and decode tensor-parallel sizes must be equal ({p} and {d})"
            if max(p, d) % min(p, d):
                return (
                    f"its prefill and decode tensor-parallel sizes ({p} and {d}) must each "
                    "divide the other"
                )
            if (self.no_wider_replicated_prefill and not kind.mla and not kind.hybrid
                    and p > d and kind.kv_heads < p):  # fmt: skip
                return (
                    f"a prefill of TP {p} replicates the model's {kind.kv_heads} KV heads and "
                    f"may not feed a narrower decode of TP {d}"
                )
        if kind.hybrid and self.hybrid_no_pp and max(prefill.pp, decode.pp) > 1:
            return "a hybrid model's pools run no pipeline stages"
        if decode.pp > 1 and self.decode_pp_one:
            return "its decode side runs no pipeline stages"
        if decode.pp > 1 and self.decode_pp_matches and decode.pp != prefill.pp:
            return (
                f"its decode pipeline stages must be 1 or the prefill's ({decode.pp} and "
                f"{prefill.pp})"
            )
        return None
