"""`llmfit models`, the reverse question, as a library call: which models fit this fleet?

The repositories are those in the local Hugging Face cache (planned from the cache alone), or
those the Hub's search finds, most downloaded first (planned from their metadata, several at
once). Each is planned as `llmfit REPO` would plan it; one that cannot be read is a result that
says why, never the end of the listing. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.advise import advise
from llmfit.errors import LlmfitError
from llmfit.plan.catalog import ModelResult, Models
from llmfit.plan.fleet import Fleet
from llmfit.plan.options import Market, Option, rank_key, serve_key, serves
from llmfit.plan.settings import PlanSettings
from llmfit.sources.listing import Listed, cached_models, search_models

if TYPE_CHECKING:
    from llmfit.sources.hub import Progress

# Repositories read from the Hub at once: each reads its own headers eight at a time already.
WORKERS = 4


def list_models(
    fleet: Fleet,
    settings: PlanSettings,
    *,
    search: str | None = None,
    limit: int = 20,
    max_params: int | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    workers: int = WORKERS,
) -> Models:
    """Plan every cached model (or every one the Hub's search finds) on the fleet."""
    notes: tuple[str, ...] = ()
    if search is not None:
        listed = search_models(search, limit)
        source, offline = f"Hub search: {search}", False
    else:
        from llmfit.sources.cache import hub_cache_dir

        cache = cached_models(cache_dir)
        listed, notes, offline = cache.repos, cache.problems, True
        source = f"cache: {cache_dir or hub_cache_dir()}"

    def one(item: Listed) -> ModelResult:
        try:
            advice = advise(
                item.repo_id, fleet, settings, cache_dir, offline=offline, revision=item.revision
            )
        except LlmfitError as e:
            return ModelResult(item.repo_id, item.revision, error=e.message, hint=e.hint)
        return ModelResult(item.repo_id, item.revision, advice=advice)

    done: Callable[[], None] = progress.advance if progress is not None else lambda: None
    if progress is not None:
        progress.begin("planning models", len(listed))

    def counted(item: Listed) -> ModelResult:
        result = one(item)
        done()
        return result

    if offline or workers <= 1:
        results = [counted(item) for item in listed]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llmfit-models") as pool:
            results = list(pool.map(counted, listed))
    over = tuple(
        r.repo_id
        for r in results
        if max_params and r.advice and (r.advice.repo.model.params or 0) > max_params
    )
    kept = [r for r in results if r.repo_id not in over]
    # With a workload named, a model fits only where its best option serves it within its
    # targets ("which models can serve 10 requests a second here?"); the others are listed with
    # those that do not fit.
    named = settings.workload.named
    kept = [replace(r, unserved=True) if named and r.fits and not serves(_best(r)) else r
            for r in kept]  # fmt: skip
    fitting = [r for r in kept if r.fits]
    if settings.rank in ("cards", "concurrency", "speed"):
        fits = sorted(fitting, key=lambda r: (rank_key(_best(r), settings.rank), r.repo_id))
    else:
        market = Market.of([_best(r) for r in fitting])
        fits = sorted(fitting, key=lambda r: (serve_key(_best(r), market, settings.rank),
                                              r.repo_id))  # fmt: skip
    misses = [r for r in kept if r.advice is not None and r not in fits]
    failed = [r for r in kept if r.advice is None]
    return Models(fleet, source, (*fits, *misses, *failed), over, tuple(notes))


def _best(r: ModelResult) -> Option:
    assert r.advice is not None
    return r.advice.plan.options[0]
