"""Which grouped-GEMM kernel an engine runs a MoE's routed experts with at its default flags, and
that kernel's measured curve.

The rules are data: llmfit/data/moe_kernels.toml, read from vLLM 0.34.0's MoE kernel oracles
(model_executor/layers/fused_moe/oracle/*.py) and SGLang 0.5.23's runner selection (its model
overrides and quant methods), each rule with the file and function it follows. A rule names a
kernel family and the dtypes of aiconfigurator's tables that measured it
(llmfit/data/kernel_curves.json "moe_kernels", benchmarks/derive_kernel_curves.py): the experts
are priced by that kernel's curve, not by the fastest kernel measured for the dtype, for the
engines the file's `engines` names (vLLM, as shipped); where no table measured the kernel that
runs, by the fastest kernel measured for the dtype (plan/engines/serving.py expert_pricing).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from llmfit.plan import curves, package_data
from llmfit.plan.curves import KernelCurves

DATA_FILE = "data/moe_kernels.toml"

# What a checkpoint's routed experts are stored as (the rules' `checkpoints`), and the dtype of
# the tables that measured a kernel on such weights where a rule names none.
CHECKPOINTS: dict[str, tuple[str, ...]] = {
    "bf16": ("bf16",),
    "fp8": ("fp8_block",),
    "mxfp4": ("mxfp4",),
    "int4": ("w4a16",),
    "int4_zp": ("w4a16",),
    "nvfp4": ("fp4",),
}


@dataclass(frozen=True)
class Rule:
    """One rule of moe_kernels.toml: the kernel an engine runs for these checkpoints and cards."""

    engine: str
    checkpoints: tuple[str, ...]
    kernel: str
    source: str
    dtypes: tuple[str, ...] = ()  # the tables' dtypes, in order; the checkpoint's where empty
    architectures: tuple[str, ...] = ()  # any where empty
    models: tuple[str, ...] = ()  # config architectures; any where empty
    expert_parallel: bool | None = None  # either where None

    def matches(self, engine: str, arch: str, checkpoint: str, model: str | None, ep: bool) -> bool:
        return (
            engine == self.engine
            and checkpoint in self.checkpoints
            and (not self.architectures or arch in self.architectures)
            and (not self.models or model in self.models)
            and (self.expert_parallel is None or ep == self.expert_parallel)
        )


def checkpoint(quantization: str | None, four_bit: bool, fp8: bool) -> str:
    """The experts' storage as the rules name it: fp8 where the plan computes in it (the
    checkpoints' fp8 MoE releases are block-scaled), an MXFP4 or NVFP4 checkpoint by its
    quantisation method, other 4-bit weights INT4 (AWQ's with zero points), else 16-bit."""
    q = (quantization or "").lower()
    if fp8:
        return "fp8"
    if "mxfp4" in q:
        return "mxfp4"
    if "nvfp4" in q or "modelopt_fp4" in q:
        return "nvfp4"
    if four_bit:
        return "int4_zp" if "awq" in q else "int4"
    return "bf16"


@cache
def rules() -> tuple[Rule, ...]:
    doc = package_data.read_toml(DATA_FILE)
    out = []
    for i, r in enumerate(doc.get("rule", [])):
        try:
            rule = Rule(
                engine=str(r["engine"]),
                checkpoints=tuple(str(c) for c in r["checkpoints"]),
                kernel=str(r["kernel"]),
                source=str(r["source"]),
                dtypes=tuple(str(d) for d in r.get("dtypes", ())),
                architectures=tuple(str(a) for a in r.get("architectures", ())),
                models=tuple(str(m) for m in r.get("models", ())),
                expert_parallel=r.get("expert_parallel"),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"{DATA_FILE}: rule {i + 1} lacks or misstates {e}") from None
        if unknown := set(rule.checkpoints) - set(CHECKPOINTS):
            raise ValueError(f"{DATA_FILE}: rule {i + 1} names checkpoints {sorted(unknown)}")
        out.append(rule)
    return tuple(out)


@cache
def engines() -> frozenset[str]:
    """The engines whose plans price the experts by these rules (the file's `engines`); the
    others' by the fastest kernel measured for the weights' dtype."""
    got = package_data.read_toml(DATA_FILE).get("engines", [])
    if not isinstance(got, list):
        raise ValueError(f"{DATA_FILE}: engines is not a list")
    return frozenset(str(e) for e in got)


def rule_for(engine: str, arch: str, checkpoint: str, model: str | None, ep: bool) -> Rule | None:
    """The first rule for this engine, card architecture, checkpoint, model and expert
    parallelism; None where none says (the fitted shares price the experts)."""
    return next((r for r in rules() if r.matches(engine, arch, checkpoint, model, ep)), None)


@cache
def _priced(
    card_key: str, arch: str, engine: str, kernel: str, dtypes: tuple[str, ...], key: str
) -> KernelCurves | None:
    """The card's curves under `engine` with its grouped-GEMM curves replaced by the curve of
    `kernel` at the first of `dtypes` measured, under the dtype `key` the step model reads it
    by (plan/speed.py: "fp8_block" for fp8, else the weights' dtype); None where no table
    covers the card or measured that kernel on it (the shares price the experts). The kernel's
    experts are priced whole, as the shipped model prices every grouped GEMM."""
    kc = curves.curves_for(card_key, arch, engine)
    curve = kc.moe_kernel(kernel, dtypes) if kc.measured else None
    if curve is None:
        return None
    return replace(kc, moes={key: curve}, moes_sliced={})


def expert_curves(
    engine: str,
    card_key: str,
    arch: str,
    checkpoint: str,
    model: str | None,
    ep: bool,
    key: str,
) -> KernelCurves | None:
    """The card's measured curves under `engine`, its experts by the kernel the engine runs;
    None where no rule names one, no table covers the card or none measured that kernel."""
    rule = rule_for(engine, arch, checkpoint, model, ep)
    if rule is None:
        return None
    dtypes = rule.dtypes or CHECKPOINTS[checkpoint]
    return _priced(card_key, arch, engine, rule.kernel, dtypes, key)
