"""What a plan is asked for: the context, the share of a card, the precisions to offer, the
layouts a user pins and the load the layouts must carry."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # an annotation only: the CLI reads this module's constants at start-up
    from llmfit.plan.launch import Given
    from llmfit.plan.layout import Layout

# The longest context llmfit plans for: 2^30 tokens is past any model's, and bounds the arithmetic
# (a KV pool of so many tokens a sequence) that a typo or a hostile number would send past sense.
MAX_CONTEXT = 1 << 30

T = TypeVar("T")


@dataclass(frozen=True)
class Pins:
    """The parallel sizes a user fixed (`--tp`, `--pp`, `--dp`, `--ep/--no-ep`, `--gpus`);
    None leaves a size free."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: bool | None = None
    # Cards in the layout (tp × pp × dp).
    gpus: int | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.tp, self.pp, self.dp, self.ep, self.gpus))

    def allows(self, layout: Layout) -> bool:
        return (
            (self.tp is None or layout.tp == self.tp)
            and (self.pp is None or layout.pp == self.pp)
            and (self.dp is None or layout.dp == self.dp)
            and (self.ep is None or layout.ep == self.ep)
            and (self.gpus is None or layout.cards == self.gpus)
        )

    def describe(self) -> str:
        """ "--tp 2 --pp 1": the pins as the flags that set them."""
        out = []
        for flag, v in (("--tp", self.tp), ("--pp", self.pp), ("--dp", self.dp)):
            if v is not None:
                out.append(f"{flag} {v}")
        if self.ep is not None:
            out.append("--ep" if self.ep else "--no-ep")
        if self.gpus is not None:
            out.append(f"--gpus {self.gpus}")
        return " ".join(out)


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
    pins: Pins = field(default_factory=Pins)
    # Sequences of `context` tokens a layout must hold at once (`--concurrency`); None: one.
    concurrency: float | None = None
    # What "best" means: "cards" (the fewest) or "concurrency" (the most sequences held).
    rank: str = "cards"
    # The engines to plan for, by key; empty: every engine that can run the artifact and is
    # planned by default (plan/engines: SGLang only when named).
    engines: tuple[str, ...] = ()
    # Every layout considered, not only those no other beats (`--all`).
    every_layout: bool = False
    # Commands name model files by this machine's paths (llama-server -m) rather than by the
    # Hub's tag (-hf REPO:QUANT): for a repository in a local directory, or where asked.
    local_paths: bool = False
    # Each engine's own knobs, one instance of its declared options class (plan/engines/knobs.py)
    # where any was set; an engine not here runs at its defaults.
    engine_options: tuple[object, ...] = ()
    # The command being checked (`llmfit check`): its launch runs these words as given, adding only
    # what places it on its nodes.
    given: Given | None = None

    def options(self, cls: type[T]) -> T:
        """The engine options of class `cls` this plan was asked for (its defaults if none)."""
        for o in self.engine_options:
            if type(o) is cls:
                return o
        return cls()

    def with_options(self, *options: object) -> PlanSettings:
        """These settings with `options` in place of any of the same class."""
        kinds = {type(o) for o in options}
        kept = tuple(o for o in self.engine_options if type(o) not in kinds)
        return replace(self, engine_options=kept + tuple(options))


PRECISIONS = ("all", "stored", "fp8", "kv-fp8")

# What "best" can mean (`--rank`; options.rank_key orders by each).
RANKINGS = ("cards", "concurrency", "speed")
