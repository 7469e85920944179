"""llama.cpp's knobs, declared once (plan/engines/knobs.py): the flags of `llama-server` that change
what a card or the host holds. llmfit's own command line, the reader of a checked `llama-server`
line and the printed launch all follow this declaration.

Spellings are llama.cpp's (common/arg.cpp, tools/server/README.md; ENGINES.md f). The placement
flags (-ngl, --n-cpu-moe, --tensor-split, --rpc, the cache types) are printed from the plan's own
placement, not passed on as given: a knob a user sets there fixes the placement the plan sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmfit.plan.engines.knobs import MEMORY, SPEED, knob

# Every layer and the output layer on the cards, whatever the model's count.
ALL_LAYERS = 1 << 30
CACHE_TYPES = ("f16", "q8_0")


def gpu_layers(flag: str, value: str) -> int | None:
    """-ngl: a count, or every layer ("all", 999, -1), or llama.cpp's own choice ("auto")."""
    text = value.strip()
    if text in ("all", "999", "-1"):
        return ALL_LAYERS
    if text == "auto":
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise ValueError(f"{flag} {value!r} is not a whole number.")
    return int(text)


def shares(flag: str, value: str) -> str:
    """--tensor-split: the cards' shares, numbers separated by commas."""
    try:
        split = tuple(float(x) for x in value.split(","))
    except ValueError:
        raise ValueError(f"{flag} {value!r} is not numbers.") from None
    if any(not 0 <= x < 1e9 for x in split) or not any(split):
        raise ValueError(f"{flag} {value!r} must be shares of the cards.")
    return value


@dataclass(frozen=True)
class LlamaCppOptions:
    """llama-server's own knobs; None: the plan's choice (every value is then passed explicitly)."""

    n_gpu_layers: int | None = knob(
        None, "--n-gpu-layers", "-ngl", "--gpu-layers", parser=gpu_layers, passed=False,
        changes=(MEMORY, SPEED), metavar="N",
        help="layers on the cards (all, or a count; the rest in RAM).",
        example="2",
    )  # fmt: skip
    # Slots (-np); None: the plan's 4, as llama-server's auto gives.
    parallel: int | None = knob(
        None, "--parallel", "-np", low=1, high=4096, changes=(MEMORY, SPEED),
        help="slots, each with its share of --ctx-size (passed on).",
        example="2",
    )  # fmt: skip
    ubatch: int | None = knob(
        None, "--ubatch-size", "-ub", low=1, high=1 << 20, changes=(MEMORY, SPEED),
        help="the physical batch, which sizes the compute buffer (passed on).",
        example="256",
    )  # fmt: skip
    batch: int | None = knob(
        None, "--batch-size", "-b", low=1, high=1 << 24,
        help="the logical batch (passed on; the plan prices the physical one, --ubatch-size).",
        example="1024",
    )  # fmt: skip
    n_cpu_moe: int | None = knob(
        None, "--n-cpu-moe", "-ncmoe", low=0, high=1 << 30, passed=False, changes=(MEMORY, SPEED),
        help="layers whose MoE experts stay in RAM.",
        example="4",
    )  # fmt: skip
    cpu_moe: bool = knob(
        False, "--cpu-moe", "-cmoe", kind="switch", cli=None, passed=False, changes=(MEMORY,),
        help="every layer's MoE experts in RAM.",
    )  # fmt: skip
    cache_type_k: str | None = knob(
        None, "--cache-type-k", "-ctk", kind="choice", choices=CACHE_TYPES, cli=None,
        passed=False, changes=(MEMORY,), help="the K cache's type.",
        example="q8_0",
    )  # fmt: skip
    cache_type_v: str | None = knob(
        None, "--cache-type-v", "-ctv", kind="choice", choices=CACHE_TYPES, cli=None,
        passed=False, changes=(MEMORY,), help="the V cache's type.",
        example="q8_0",
    )  # fmt: skip
    tensor_split: str | None = knob(
        None, "--tensor-split", "-ts", kind="text", parser=shares, cli=None, passed=False,
        changes=(MEMORY,), help="the cards' shares of the layers.",
        example="1,1",
    )  # fmt: skip
    rpc: str | None = knob(
        None, "--rpc", kind="text", cli=None, passed=False, changes=(MEMORY, SPEED),
        help="rpc-server hosts that hold layers too.",
        example="10.0.0.2:50052",
    )  # fmt: skip
    flash_attn: str | None = knob(
        None, "--flash-attn", "-fa", kind="choice", choices=("on", "off", "auto"), cli=None,
        passed=False, help="flash attention (planned on; off is noted as not planned).",
        example="on",
    )  # fmt: skip

    def checked(self) -> LlamaCppOptions:
        k, v = self.cache_type_k or "f16", self.cache_type_v or "f16"
        if k != v:
            raise ValueError(
                "llmfit plans --cache-type-k and --cache-type-v both f16 or both q8_0; "
                f"this command gives {k} and {v}."
            )
        if self.cpu_moe:
            return replace(self, n_cpu_moe=ALL_LAYERS)
        return self

    @property
    def cache_type(self) -> str | None:
        """The cache type both -ctk and -ctv give ("f16" or "q8_0"), None where neither is set."""
        return self.cache_type_k or self.cache_type_v

    @property
    def split(self) -> tuple[float, ...]:
        return tuple(float(x) for x in self.tensor_split.split(",")) if self.tensor_split else ()

    @property
    def rpc_hosts(self) -> tuple[str, ...]:
        return tuple(h for h in (self.rpc or "").split(",") if h)
