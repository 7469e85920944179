"""Which repositories there are to plan: those in the local Hugging Face cache, or those the Hub's
search finds (`llmfit models`).

Both go through huggingface_hub: `scan_cache_dir` reads the cache as `hf cache scan` does, and
`HfApi.list_models` asks the Hub's search, most downloaded first. `list_models` takes no timeout
and its session has none, so it runs in a daemon thread that is given up after
HF_HUB_ETAG_TIMEOUT seconds, as a metadata request of `hf` would be.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from llmfit.errors import HubTimeout, HubUnreachable, LlmfitError
from llmfit.sources.cache import RepoRef, hub_cache_dir
from llmfit.sources.hub import hub_error


@dataclass(frozen=True)
class Listed:
    """A repository to plan, at the revision to plan it at (None: its default branch)."""

    repo_id: str
    revision: str | None = None


@dataclass(frozen=True)
class CacheListing:
    repos: tuple[Listed, ...]
    # Folders of the cache that could not be read, each a sentence (huggingface_hub's warnings).
    problems: tuple[str, ...] = ()


def cached_models(cache_dir: Path | None = None) -> CacheListing:
    """The model repositories in the local Hugging Face cache, by id.

    A repository whose `main` is not cached (downloaded by commit or tag only) is planned at its
    most recently used snapshot.
    """
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    cache = cache_dir or hub_cache_dir()
    try:
        info = scan_cache_dir(cache)
    except CacheNotFound:
        return CacheListing(())
    repos = []
    for r in sorted(info.repos, key=lambda r: r.repo_id):
        if r.repo_type != "model":
            continue
        revisions = sorted(r.revisions, key=lambda v: v.last_modified, reverse=True)
        if any("main" in v.refs for v in revisions) or not revisions:
            repos.append(Listed(r.repo_id))
        else:
            repos.append(Listed(r.repo_id, revisions[0].commit_hash))
    problems = tuple(str(w).splitlines()[0] for w in info.warnings)
    return CacheListing(tuple(repos), problems)


def search_models(
    query: str, limit: int, timeout: float | None = None, *, quantised_from: str | None = None
) -> tuple[Listed, ...]:
    """The Hub's model repositories matching `query`, most downloaded first, at most `limit`;
    with `quantised_from`, instead those whose model card names it as the model they quantise
    (the Hub's model tree: `base_model:quantized:REPO`)."""
    from huggingface_hub import HfApi, constants

    from llmfit.sources.cache import is_repo_id
    from llmfit.sources.hub import _ready, shown_endpoint

    _ready()  # the bounded client, and the settings checked, before anything goes online
    wait = timeout if timeout is not None else constants.HF_HUB_ETAG_TIMEOUT
    found: list[str] = []
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            tree = f"base_model:quantized:{quantised_from}" if quantised_from else None
            listed = HfApi().list_models(
                filter=tree, search=None if tree else query, sort="downloads", limit=limit
            )
            for m in listed:
                found.append(m.id)
        except BaseException as e:  # handed to the caller's thread
            failed.append(e)

    worker = threading.Thread(target=ask, name="llmfit-hub-search", daemon=True)
    worker.start()
    worker.join(wait)
    if worker.is_alive():
        raise HubTimeout(
            f"the Hub ({shown_endpoint()}) did not answer the search for {query!r} within "
            f"{wait:g} s.",
            hint="raise HF_HUB_ETAG_TIMEOUT, or list what is cached: llmfit models",
        )
    if failed:
        err = hub_error(failed[0], RepoRef(f"search {query!r}"))
        if isinstance(err, LlmfitError):
            raise err from None
        if isinstance(failed[0], Exception):
            raise HubUnreachable(
                f"the Hub's search ({shown_endpoint()}) failed: {type(failed[0]).__name__}."
            ) from None
        raise failed[0]
    # Only names a repository can have: a Hub's answer is outside text, and each name becomes a
    # path in the cache and a request.
    return tuple(Listed(r) for r in found[:limit] if isinstance(r, str) and is_repo_id(r))
