"""The main job as a library call: a repository and a fleet in, a ranked plan out (no printing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.artifact import Artifact
from llmfit.plan.fleet import Fleet
from llmfit.plan.planner import PlanSettings, plan
from llmfit.sources.repo import load_repo

if TYPE_CHECKING:
    from llmfit.sources.hub import Progress

__all__ = ["Advice", "advise"]


def advise(
    repo_text: str,
    fleet: Fleet,
    settings: PlanSettings,
    cache_dir: Path | None = None,
    *,
    offline: bool | None = None,
    revision: str | None = None,
    progress: Progress | None = None,
    keep: Callable[[Artifact], bool] | None = None,
) -> Advice:
    """Read the repository and plan it on the fleet; `keep` narrows the artifacts planned (one
    file of a GGUF repository), and the repository's model and files are read all the same."""
    repo = load_repo(repo_text, cache_dir, offline=offline, revision=revision, progress=progress)
    if keep is not None:
        kept = tuple(a for a in repo.artifacts if keep(a))
        if not kept:
            names = ", ".join(a.quant or a.name for a in repo.artifacts) or "none"
            raise UsageError(f"{repo.id} has no file the command names (it has: {names}).")
        repo = replace(repo, artifacts=kept)
    if not settings.context and not repo.model.max_context:
        raise UsageError(
            f"{repo.id}'s config states no trained context, so one must be chosen.",
            hint=f"llmfit {repo_text} --context 8192",
        )
    return Advice(repo, fleet, plan(repo.model, repo.artifacts, fleet, settings))
