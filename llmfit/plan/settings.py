"""What a plan is asked for: the context, the share of a card, the precisions to offer, the
layouts a user pins and the load the layouts must carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an annotation only: the CLI reads this module's constants at start-up
    from llmfit.plan.layout import Layout

# The longest context llmfit plans for: 2^30 tokens is past any model's, and bounds the arithmetic
# (a KV pool of so many tokens a sequence) that a typo or a hostile number would send past sense.
MAX_CONTEXT = 1 << 30


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
class VllmOptions:
    """vLLM's own knobs that change memory, as a command line gives them; None: the default of
    the release modelled, for the card."""

    # The vLLM release to model ("0.33", "0.11"); None: the newest llmfit models.
    version: str | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    # --enforce-eager: no CUDA graphs, so none of their memory.
    enforce_eager: bool = False
    # --enable-prefix-caching / --no-enable-prefix-caching (None: the release's default).
    enable_prefix_caching: bool | None = None
    # --enable-lora --max-loras N --max-lora-rank R (0: no LoRA).
    max_loras: int = 0
    max_lora_rank: int = 0
    # --speculative-config, as given, and what it means for memory (a vllm_memory.Speculative),
    # with the draft model's repository where it names one (read beside the plan's own).
    speculative_config: str | None = None
    speculative: object = None
    draft_repo: str | None = None
    # --limit-mm-per-prompt as (modality, count) pairs; () keeps vLLM's default.
    limit_mm_per_prompt: tuple[tuple[str, int], ...] = ()

    @property
    def limit_mm_per_prompt_text(self) -> str | None:
        """The JSON --limit-mm-per-prompt takes, or None to leave vLLM's default."""
        if not self.limit_mm_per_prompt:
            return None
        inner = ", ".join(f'"{k}": {v}' for k, v in self.limit_mm_per_prompt)
        return "{" + inner + "}"


@dataclass(frozen=True)
class LlamaCppOptions:
    """llama-server's own knobs that change memory, as a command line gives them; None: the
    plan's choice (every value is then passed explicitly)."""

    n_gpu_layers: int | None = None
    # Slots (-np); None: the plan's 4, as llama-server's auto gives.
    parallel: int | None = None
    ubatch: int | None = None
    n_cpu_moe: int | None = None
    cache_type: str | None = None  # "f16" or "q8_0"
    tensor_split: tuple[float, ...] = ()
    rpc: tuple[str, ...] = ()
    flash_attn: bool = True


@dataclass(frozen=True)
class SglangOptions:
    """SGLang's own knobs that change memory, as a command line gives them; None: SGLang's default
    for the card and layout (every value the plan relies on is then passed explicitly)."""

    # --mem-fraction-static: the share of a card's free memory for weights and the KV pool.
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    # --max-total-tokens: a cap on the KV pool's tokens.
    max_total_tokens: int | None = None


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
    vllm: VllmOptions = field(default_factory=VllmOptions)
    llamacpp: LlamaCppOptions = field(default_factory=LlamaCppOptions)
    sglang: SglangOptions = field(default_factory=SglangOptions)


PRECISIONS = ("all", "stored", "fp8", "kv-fp8")

# What "best" can mean (`--rank`; options.rank_key orders by each).
RANKINGS = ("cards", "concurrency", "speed")
