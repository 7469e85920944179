"""Catalog results: models planned on one fleet (`llmfit models`), for the renderers."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.advice import Advice
from llmfit.plan.fleet import Fleet
from llmfit.plan.model import DTYPE_BYTES
from llmfit.plan.repo import Repo


@dataclass(frozen=True)
class ModelResult:
    """One repository: its plan, or why it could not be planned."""

    repo_id: str
    revision: str | None = None
    advice: Advice | None = None
    error: str | None = None
    hint: str | None = None
    # It fits, but its best option does not serve the named workload within its targets.
    unserved: bool = False

    @property
    def fits(self) -> bool:
        return self.advice is not None and bool(self.advice.plan.options) and not self.unserved

    @property
    def params(self) -> int | None:
        """The model's parameters, as `counted_params` counts them; None when nothing says."""
        return counted_params(self.advice.repo) if self.advice is not None else None

    @property
    def past_trained(self) -> int | None:
        """The context the model was trained for, where the plan is for a longer one (the
        listing marks it); None where it is not."""
        if self.advice is None:
            return None
        trained = self.advice.repo.model.max_context
        return trained if trained and self.advice.plan.context > trained else None


def counted_params(repo: Repo) -> int | None:
    """A repository's parameters, from the best source at hand: the count of its tensors'
    shapes (the safetensors headers, a GGUF header), else its unquantised checkpoint's size over
    its dtype's width (the index's total_size: Qwen3-8B's 16,381,470,720 bytes of bf16 are
    8,190,735,360 parameters, the Hub's own count), else the matrices its config describes
    (ModelShapes' ParamSplit: norms and biases left out, a few parts in a million); None when
    none says. For `llmfit models`' count and filter only: the plan's `params` stays what the
    tensors were counted to, so that no estimate reaches a bits-per-weight or the JSON."""
    m = repo.model
    if m.params:
        return m.params
    for a in repo.artifacts:
        if a.params:
            return a.params
        width = DTYPE_BYTES.get(m.dtype or "")
        if a.format == "safetensors" and not m.quantization and width and width >= 2:
            return int(a.bytes // width)
    split = m.param_split
    if split is not None:
        return split.embed + split.output + sum(split.layers)
    return None


@dataclass(frozen=True)
class Models:
    """`llmfit models`: the repositories planned on one fleet, each a result."""

    fleet: Fleet
    # Where the repositories came from: "cache: <dir>" or "Hub search: <query>".
    source: str
    # Those that fit, best first; then those that do not; then those that could not be read.
    results: tuple[ModelResult, ...]
    # Repositories left out for having more parameters than asked (--max-params).
    over_params: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
