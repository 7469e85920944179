"""What a plan is asked for: the context, the share of a card, the precisions to offer, the
layouts a user pins and the load the layouts must serve."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from llmfit.errors import UsageError

if TYPE_CHECKING:  # an annotation only: the CLI reads this module's constants at start-up
    from llmfit.plan.calibration import Pool
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
class Workload:
    """The load a deployment must serve: requests of `input_len` prompt tokens and `output_len`
    generated ones, `concurrency` of them in flight (a closed loop, as `bench serve
    --max-concurrency` runs) or `rate` a second (Poisson arrivals), each within its targets:
    the time to its first token (`ttft_s`) and the time a token after it (`tpot_s`). Targets are
    on the mean, as llmfit estimates a steady state's means; None: no target.

    With neither a concurrency nor a rate, no load is named: a layout is judged at its capacity
    (the most it serves within the targets) and ranked by what a unit of load costs on it.
    """

    # The preset it started from ("chat", "rag", "code", "summarise"), for saying so.
    name: str = "chat"
    input_len: int = 2048
    output_len: int = 512
    concurrency: float | None = None
    rate: float | None = None
    # Prompts sent at once with no cap (`bench serve` without --max-concurrency): served in
    # waves as a replica admits them, reported as the run's means (plan/load.py `burst`).
    requests: int | None = None
    ttft_s: float | None = 2.0
    tpot_s: float | None = 0.050
    # Whether the user named any of it (a flag or a preset); else it is the default, said so.
    named: bool = False
    # A default workload cut to fit the context (`within`): its prompt and output before.
    cut_from: tuple[int, int] | None = None

    @property
    def tokens(self) -> int:
        """The longest a request grows: its prompt and every token it generates."""
        return self.input_len + self.output_len

    @property
    def load(self) -> float | None:
        """The load named, in its own unit (requests in flight, a second, or sent at once);
        None: none."""
        if self.concurrency is not None:
            return self.concurrency
        if self.requests is not None:
            return float(self.requests)
        return self.rate

    @property
    def load_kind(self) -> str | None:
        """Which load was asked: "concurrency", "rate", "requests", or None."""
        if self.concurrency is not None:
            return "concurrency"
        if self.requests is not None:
            return "requests"
        return "rate" if self.rate is not None else None

    def within(self, context: int, source: str = "--context") -> Workload:
        """The workload at a context no longer than `context`, the one place a workload meets
        the context (the planner's): a default one cut to fit (prompt and output in
        proportion, `cut_from` keeping what it was), a named one refused, in one sentence
        naming both numbers (an engine refuses a request longer than its --max-model-len).
        `source` says where the context came from: "--context", "model" (the model's trained
        context) or "command" (a checked command's own)."""
        if self.tokens <= context:
            return self
        if self.named:
            where = {
                "--context": f"--context {context:,}",
                "model": f"the model's trained context of {context:,} tokens",
                "command": f"the command's context of {context:,} tokens",
            }.get(source, f"the context of {context:,} tokens")
            fix = (
                "a command with a longer context, or shorter --input-len and --output-len"
                if source == "command"
                else "a longer --context, or shorter --input-len and --output-len"
            )
            raise UsageError(
                f"the workload's requests ({self.input_len:,} prompt and {self.output_len:,} "
                f"generated tokens) are longer than {where}: give {fix}."
            )
        out = max(1, self.output_len * context // self.tokens)
        return replace(
            self,
            input_len=max(1, context - out),
            output_len=out,
            cut_from=self.cut_from or (self.input_len, self.output_len),
        )


# Named workloads (`--workload NAME`): the request shapes and targets of common services. A
# chat turn carries its conversation (2k) and answers in a paragraph or two; RAG puts retrieved
# passages in the prompt (8k); code completion and agents read a file or a repository's slice
# and write a function; summarising reads a long document and writes a page. TTFT targets grow
# with the prompt; TPOT targets are 50 ms (20 tokens a second, faster than anyone reads) and
# 30 ms for code, whose answers are read by tools and waited on.
WORKLOADS: dict[str, Workload] = {
    "chat": Workload("chat", 2048, 512, ttft_s=2.0, tpot_s=0.050),
    "rag": Workload("rag", 8192, 512, ttft_s=4.0, tpot_s=0.050),
    "code": Workload("code", 4096, 1024, ttft_s=2.0, tpot_s=0.030),
    "summarise": Workload("summarise", 16384, 1024, ttft_s=10.0, tpot_s=0.050),
}


# The context a desktop plans at where none is asked: a fleet of consumer cards only (one person's
# machine) is planned at this many tokens, not the trained context (131,072 for Llama 3, which
# put 49 of a 70B's layers in RAM at 2.4 tok/s where 16k keeps them on the card: issue 34), and
# the plan says so and how to ask for more (--context).
DESKTOP_CONTEXT = 16_384


@dataclass(frozen=True)
class Disagg:
    """Disaggregated prefill and decode (`--disagg`, plan/disagg.py): "auto" lists such an option
    only where it serves more a card than the aggregated ones on the same cards, within the same
    targets; "on" lists the best of each pair of card classes whether or not; "off" none. The
    pins narrow it: the prefill workers' and the decode workers' TP, and the workers of a unit
    (--xpyd 2:1)."""

    mode: str = "auto"
    prefill_tp: int | None = None
    decode_tp: int | None = None
    xpyd: tuple[int, int] | None = None

    @property
    def pinned(self) -> bool:
        return self.prefill_tp is not None or self.decode_tp is not None or self.xpyd is not None


@dataclass(frozen=True)
class PlanSettings:
    """What the planner was asked, beyond the model and the fleet: the context, the memory shares,
    the workload, the pins and each engine's options."""

    # The token pool planned for; None plans the model's trained context.
    context: int | None = None
    gpu_memory_utilization: float = 0.90
    # Whether the user named the share (--gpu-memory-utilization): where they did not, a vLLM
    # release that resolves its own (0.34 on: 1.0 with the extensible KV cache) plans with that
    # and its command leaves the flag out. None: named when it is not the default above.
    utilization_given: bool | None = None
    # The share of a host's RAM one replica may be planned to use: the system keeps the rest.
    host_share: float = 0.85
    # "auto" keeps the model's own dtype for the cache (or the one its checkpoint was calibrated
    # for); else "bfloat16" or "fp8".
    kv_cache_dtype: str = "auto"
    # Which precisions to offer: "all" (as stored, and the what-ifs an engine flag makes of a
    # 16-bit checkpoint), "stored", "fp8" (weights quantised on load) or "kv-fp8" (an fp8 cache).
    precision: str = "all"
    pins: Pins = field(default_factory=Pins)
    # The load the layouts must serve (`--input-len`, `--concurrency`, `--rate`, `--ttft`, …).
    workload: Workload = field(default_factory=Workload)
    # What "best" means (RANKINGS; options.rank_key orders by each).
    rank: str = "serve"
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
    # The fleet's calibration (`llmfit calibrate`, plan/calibration.py): each pool's scales on
    # the serving model's step times; empty: the model's own figures.
    calibration: tuple[Pool, ...] = ()
    # Copies of the chosen option its launch starts (--replicas); None: as many as the named
    # load needs.
    replicas: int | None = None
    # Plan a fleet of consumer cards at DESKTOP_CONTEXT where no context is given (the CLI's
    # `llmfit REPO` and `llmfit models` ask for it; a library caller plans the trained context).
    desktop: bool = False
    # The most an option may cost an hour (--budget, in the fleet's prices' currency); None: any.
    budget: float | None = None
    # Disaggregated prefill and decode: whether to list it, and its pins.
    disagg: Disagg = field(default_factory=Disagg)

    @property
    def utilization_named(self) -> bool:
        """Whether --gpu-memory-utilization was set (see utilization_given)."""
        if self.utilization_given is not None:
            return self.utilization_given
        return self.gpu_memory_utilization != 0.90

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

# What "best" can mean (`--rank`; options.rank_key orders by each): the fewest cards (or the
# lowest cost) that serve the workload within its targets; the fewest cards that hold the
# context; the most sequences held; the fastest single sequence; the most output tokens a
# second a card at the workload; the shortest request at the workload.
RANKINGS = ("serve", "cards", "concurrency", "speed", "throughput", "latency")
