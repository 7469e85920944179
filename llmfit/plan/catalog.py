"""Catalog results: models planned on one fleet (`llmfit models`), for the renderers."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.advice import Advice
from llmfit.plan.fleet import Fleet


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


@dataclass(frozen=True)
class Models:
    fleet: Fleet
    # Where the repositories came from: "cache: <dir>" or "Hub search: <query>".
    source: str
    # Those that fit, best first; then those that do not; then those that could not be read.
    results: tuple[ModelResult, ...]
    # Repositories left out for having more parameters than asked (--max-params).
    over_params: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
