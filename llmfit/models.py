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
from typing import TYPE_CHECKING, Any

from llmfit.advise import advise
from llmfit.errors import LlmfitError
from llmfit.plan.catalog import ModelResult, Models
from llmfit.plan.fleet import Fleet
from llmfit.plan.options import Market, Option, serve_key, serves
from llmfit.plan.settings import PlanSettings
from llmfit.sources.listing import Listed, cached_models, search_models

if TYPE_CHECKING:
    from llmfit.sources.hub import Progress

# Repositories read from the Hub at once: each reads its own headers eight at a time already.
WORKERS = 4
# Seconds a Hub search and the reading of all its repositories may take together: a Hub that
# trickles each answer just within the per-request deadline (60 s) held twenty repositories for
# five minutes. A repository not read by then is its own row, saying so.
SEARCH_DEADLINE = 120.0


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
    if search is not None:
        from llmfit.sources import session

        with session.overall_deadline(SEARCH_DEADLINE):
            return _list_models(
                fleet, settings, search=search, limit=limit, max_params=max_params,
                cache_dir=cache_dir, progress=progress, workers=workers,
            )  # fmt: skip
    return _list_models(
        fleet, settings, search=None, limit=limit, max_params=max_params, cache_dir=cache_dir,
        progress=progress, workers=workers,
    )  # fmt: skip


def _list_models(
    fleet: Fleet,
    settings: PlanSettings,
    *,
    search: str | None,
    limit: int,
    max_params: int | None,
    cache_dir: Path | None,
    progress: Progress | None,
    workers: int,
) -> Models:
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
                item.repo_id,
                fleet,
                settings,
                cache_dir,
                offline=offline,
                revision=item.revision,
                estimate=False,
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
    over = tuple(r.repo_id for r in results if max_params and (r.params or 0) > max_params)
    kept = [r for r in results if r.repo_id not in over]
    # With a workload named, a model fits only where its best option serves it within its
    # targets ("which models can serve 10 requests a second here?"); the others are listed with
    # those that do not fit.
    named = settings.workload.named
    kept = [replace(r, unserved=True) if named and r.fits and not serves(_best(r)) else r
            for r in kept]  # fmt: skip
    fitting = [r for r in kept if r.fits]
    if settings.rank in ("cards", "concurrency", "speed"):
        fits = sorted(fitting, key=lambda r: (order_key(_best(r), settings.rank), r.repo_id))
    else:
        # Whether every class is priced, and their order, are the fleet's, across the models;
        # whether a what-if saves cards is each model's own, against its checkpoint as stored
        # (across models, the fewest cards any stored checkpoint took put Llama-3.1-70B's fp8
        # on one card after DeepSeek-V3 on eight).
        market = Market.of([_best(r) for r in fitting])

        def key(r: ModelResult) -> tuple[Any, ...]:
            assert r.advice is not None
            own = Market.of(list(r.advice.plan.options)).stored_cards
            return serve_key(_best(r), replace(market, stored_cards=own), settings.rank)

        fits = sorted(fitting, key=lambda r: (key(r), r.repo_id))
    misses = [r for r in kept if r.advice is not None and r not in fits]
    failed = [r for r in kept if r.advice is None]
    return Models(fleet, source, (*fits, *misses, *failed), over, tuple(notes))


def order_key(o: Option, by: str = "cards") -> tuple:
    """Where a model's best option puts it in the listing, by what the user asked (`--rank`):
    the fewest cards and nodes (and the checkpoint as shipped before a what-if), then the most
    sequences held at once; `concurrency` puts those first, `speed` the fastest decode.

    Not the plan's rank_key: its precision rule (about eight bits beats sixteen or four) weighs
    one model's files against each other, and across models it put gpt-oss-20b (mxfp4, its own
    precision) under models that hold a fraction of its sequences."""
    key = (o.cpu, o.gpus, o.nodes, o.changes, -o.held, not o.free_now, -o.room)
    if by == "concurrency":
        return (o.cpu, -o.held, *key[1:])
    if by == "speed":
        return (o.speed is None, -(o.speed.decode_tokens_per_s if o.speed else 0.0), *key)
    return key


def _best(r: ModelResult) -> Option:
    assert r.advice is not None
    return r.advice.plan.options[0]
