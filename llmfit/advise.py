"""The main job as a library call: a repository and a fleet in, a ranked plan out (no printing)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.errors import UsageError
from llmfit.plan.fleet import Fleet
from llmfit.plan.planner import Plan, PlanSettings, plan
from llmfit.sources.repo import Repo, load_repo

if TYPE_CHECKING:
    from llmfit.sources.hub import Progress


@dataclass(frozen=True)
class Advice:
    repo: Repo
    fleet: Fleet
    plan: Plan


def advise(
    repo_text: str,
    fleet: Fleet,
    settings: PlanSettings,
    cache_dir: Path | None = None,
    *,
    offline: bool | None = None,
    revision: str | None = None,
    progress: Progress | None = None,
) -> Advice:
    repo = load_repo(repo_text, cache_dir, offline=offline, revision=revision, progress=progress)
    if not settings.context and not repo.model.max_context:
        raise UsageError(
            f"{repo.id}'s config states no trained context, so one must be chosen.",
            hint=f"llmfit {shlex.quote(repo_text)} --context 8192",
        )
    return Advice(repo, fleet, plan(repo.model, repo.artifacts, fleet, settings))
