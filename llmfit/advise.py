"""The main job as a library call: a repository and a fleet in, a ranked plan out (no printing)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.artifact import Artifact
from llmfit.plan.engines.knobs import NamesRepos
from llmfit.plan.fleet import Fleet
from llmfit.plan.planner import PlanSettings, plan
from llmfit.plan.weights import estimated
from llmfit.sources.repo import load_repo, sizeless

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
    estimate: bool = True,
) -> Advice:
    """Read the repository and plan it on the fleet; `keep` narrows the artifacts planned (one
    file of a GGUF repository), and the repository's model and files are read all the same.
    A repository with a config and no weights' sizes is planned at the config's parameters
    unless `estimate` is off (`llmfit models` lists such repositories apart)."""
    repo = load_repo(repo_text, cache_dir, offline=offline, revision=revision, progress=progress)
    if keep is not None:
        kept = tuple(a for a in repo.artifacts if keep(a))
        if not kept:
            names = ", ".join(a.quant or a.name for a in repo.artifacts) or "none"
            raise UsageError(f"{repo.id} has no file the command names (it has: {names}).")
        repo = replace(repo, artifacts=kept)
    if repo.source == "path" and not settings.local_paths:
        # A local directory has no Hub tag to fetch it by: its own paths are the only names.
        settings = replace(settings, local_paths=True)
    settings = _with_extra_repos(settings, cache_dir, offline=offline, progress=progress)
    if not settings.context and not repo.model.max_context:
        raise UsageError(
            f"{repo.id}'s config states no trained context, so one must be chosen.",
            hint=f"llmfit {shlex.quote(repo_text)} --context 8192",
        )
    guess = None if repo.artifacts or not estimate else estimated(repo.model)
    if guess is not None:
        # A config-only repository: planned at the config's parameters, and said so.
        repo = replace(
            repo,
            artifacts=(guess,),
            warnings=tuple(w for w in repo.warnings if w != sizeless(repo.id)),
        )
    planned = plan(repo.model, repo.artifacts, fleet, settings)
    if guess is not None:
        note = (
            f"the weights are estimated from config.json: {guess.params:,} parameters at "
            f"{repo.model.dtype}, {guess.bytes:,} bytes; {repo.id} holds no checkpoint's "
            "sizes here (no model.safetensors.index.json, model.safetensors or GGUF file)"
        )
        planned = replace(planned, notes=(note, *planned.notes))
    if repo.source != "path" and (not planned.options or planned.options[0].what_if):
        # Only a what-if fits (or nothing): a quantised checkpoint already in the cache may be
        # the better next question.
        from llmfit.sources.cache import hub_cache_dir
        from llmfit.sources.siblings import quantised_siblings

        siblings = quantised_siblings(repo.id, cache_dir or hub_cache_dir())
        if siblings:
            note = (
                f"quantised versions of {repo.id} are in the local cache: {', '.join(siblings)} "
                "(plan one with: llmfit NAME)"
            )
            planned = replace(planned, notes=(*planned.notes, note))
        elif repo.source == "hub" and not offline:
            published = _published_quantisations(repo.id)
            if published:
                note = (
                    f"quantised versions of {repo.id} on the Hub (its model tree, most downloaded "
                    f"first): {', '.join(published)} (plan one with: llmfit NAME)"
                )
                planned = replace(planned, notes=(*planned.notes, note))
    return Advice(repo, fleet, planned)


def _published_quantisations(repo_id: str) -> tuple[str, ...]:
    """The Hub's quantisations of `repo_id`, as model cards declare them; nothing when the Hub
    does not say in time. A hint beside a plan, never a reason for the plan to fail."""
    from llmfit.errors import LlmfitError
    from llmfit.sources.listing import search_models
    from llmfit.sources.siblings import MAX_SHOWN

    try:
        found = search_models("", MAX_SHOWN, quantised_from=repo_id)
    except LlmfitError:
        return ()
    return tuple(r.repo_id for r in found)


def _with_extra_repos(
    settings: PlanSettings,
    cache_dir: Path | None,
    *,
    offline: bool | None,
    progress: Progress | None,
) -> PlanSettings:
    """Each engine's options with the other repositories they name read in (metadata only, as
    the plan's own): a speculative draft model's weights and cache, charged to every card."""
    for opts in settings.engine_options:
        if not isinstance(opts, NamesRepos):
            continue
        for repo_id in opts.extra_repos():
            other = load_repo(repo_id, cache_dir, offline=offline, progress=progress)
            opts = opts.with_repo(repo_id, other.model, other.artifacts)
        settings = settings.with_options(opts)
    return settings
