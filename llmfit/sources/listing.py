"""Which repositories there are to plan: those in the local Hugging Face cache, or those the Hub's
search finds (`llmfit models`).

The cache is read here, as huggingface_hub lays it out (`models--Org--Name/refs`,
`snapshots/<commit>`), and not with `scan_cache_dir`: that reads every ref file whole and as
UTF-8 (a FIFO planted as `refs/main` hangs it, one ref that is not UTF-8 ends the whole listing
with a UnicodeDecodeError), takes a folder `models----tmp--x` for the repository `/tmp/x` (which
llmfit would then plan as a directory outside the cache), and fails outright on a cache that is a
file, a FIFO or a symlink loop. Here a folder name becomes a repository only if it is one's, each
folder's trouble is that repository's row, and the cache is a folder or one sentence.

`HfApi.list_models` asks the Hub's search, most downloaded first. It takes no timeout and its
session has none, so it runs in a daemon thread that is given up after HF_HUB_ETAG_TIMEOUT
seconds, as a metadata request of `hf` would be.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from llmfit.errors import CacheUnusable, HubTimeout, HubUnreachable, LlmfitError
from llmfit.sources.cache import COMMIT, RepoRef, hub_cache_dir, is_repo_id, show
from llmfit.sources.hub import hub_error


@dataclass(frozen=True)
class Listed:
    """A repository to plan, at the revision to plan it at (None: its default branch)."""

    repo_id: str
    revision: str | None = None


@dataclass(frozen=True)
class CacheListing:
    """The model repositories of a Hugging Face cache, and its folders that could not be read."""

    repos: tuple[Listed, ...]
    # Folders of the cache that could not be read, each a sentence (huggingface_hub's warnings).
    problems: tuple[str, ...] = ()


# A cache of more folders than this is not listed further (a shared cache of thousands of models
# is read in milliseconds; a directory of millions is not a cache).
MAX_ENTRIES = 20_000


def cached_models(cache_dir: Path | None = None) -> CacheListing:
    """The model repositories in the local Hugging Face cache, by id.

    A repository whose `main` is not cached (downloaded by commit or tag only) is planned at its
    most recently used snapshot. A folder that is no repository's is a problem, never a path.
    """
    cache = cache_dir or hub_cache_dir()
    try:
        mode = os.stat(cache).st_mode
    except FileNotFoundError:
        return CacheListing(())
    except OSError as e:  # a symlink loop, a name too long, no permission
        raise CacheUnusable(
            f"the Hugging Face cache {cache} cannot be read ({e.strerror or e})."
        ) from None
    if not stat.S_ISDIR(mode):
        raise CacheUnusable(
            f"the Hugging Face cache {cache} is not a folder (a file, a FIFO or a device).",
            hint="set HF_HUB_CACHE to the folder hf download writes to",
        )
    repos: list[Listed] = []
    problems: list[str] = []
    try:
        with os.scandir(cache) as entries:
            names = [e.name for _, e in zip(range(MAX_ENTRIES + 1), entries, strict=False)]
    except OSError as e:
        raise CacheUnusable(
            f"the Hugging Face cache {cache} cannot be read ({e.strerror or e})."
        ) from None
    if len(names) > MAX_ENTRIES:
        problems.append(f"{cache} holds more than {MAX_ENTRIES:,} entries: the rest are not read.")
        names = names[:MAX_ENTRIES]
    for name in sorted(names):
        if not name.startswith("models--"):
            continue  # datasets--, spaces--, .locks: not models
        repo_id = name[len("models--") :].replace("--", "/")
        if not is_repo_id(repo_id):
            problems.append(
                f"{show(name, 120)} in {cache} is named as no repository is (a repository id "
                "like Org/Name), so it is not planned."
            )
            continue
        folder = cache / name
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                problems.append(f"{folder} is not a folder, so it is not planned.")
                continue
            main = os.path.lexists(folder / "refs" / "main")
            newest = None if main else _newest_snapshot(folder / "snapshots")
        except OSError as e:
            problems.append(f"{folder} cannot be read ({e.strerror or e}), so it is not planned.")
            continue
        repos.append(Listed(repo_id, newest))
    return CacheListing(tuple(repos), tuple(problems))


def _newest_snapshot(snapshots: Path) -> str | None:
    """The commit of the most recently changed snapshot; None when there is none."""
    if not snapshots.is_dir():
        return None
    found = []
    with os.scandir(snapshots) as entries:
        for _, e in zip(range(MAX_ENTRIES), entries, strict=False):
            if COMMIT.fullmatch(e.name) and e.is_dir(follow_symlinks=False):
                found.append((e.stat(follow_symlinks=False).st_mtime, e.name))
    return max(found)[1] if found else None


def unresolved(url: str, wait: float = 2.0) -> str | None:
    """The host of `url` where its name does not resolve (the resolver says so within `wait`
    seconds); None where it resolves, is an address, or the resolver does not answer."""
    import socket
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if not host:
        return None
    failed: list[bool] = []

    def resolve() -> None:
        try:
            socket.getaddrinfo(host, None)
        except socket.gaierror as e:
            failed.append(e.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", -5)))
        except OSError:
            pass

    t = threading.Thread(target=resolve, name="llmfit-resolve", daemon=True)
    t.start()
    t.join(wait)
    return host if failed and failed[0] else None


def search_models(
    query: str, limit: int, timeout: float | None = None, *, quantised_from: str | None = None
) -> tuple[Listed, ...]:
    """The Hub's model repositories matching `query`, most downloaded first, at most `limit`;
    with `quantised_from`, instead those whose model card names it as the model they quantise
    (the Hub's model tree: `base_model:quantized:REPO`)."""
    from huggingface_hub import HfApi, constants

    from llmfit.sources import session
    from llmfit.sources.hub import _ready, endpoint, shown_endpoint

    _ready()  # the bounded client, and the settings checked, before anything goes online
    wait = timeout if timeout is not None else constants.HF_HUB_ETAG_TIMEOUT
    left = session.overall_left()
    if left is not None:
        wait = max(0.0, min(wait, left))
    found: list[str] = []
    failed: list[BaseException] = []

    def ask() -> None:
        # A thread's number is reused once it ends: what an earlier thread of this number was
        # answered is not this search's.
        session.forget("/api/models")
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
    # What this search's own thread was answered: a search abandoned earlier may still be
    # retrying a server error in its thread.
    status = session.last_status("/api/models", worker.ident)
    if worker.ident is not None:
        session.forget("/api/models", worker.ident)
    if worker.is_alive() and status is not None and status >= 500:
        # huggingface_hub retries a server error until the search's time is up: the Hub failed,
        # it was not slow (the documented code for a Hub failure, not a timeout's).
        raise HubUnreachable(
            f"the Hub ({shown_endpoint()}) answered {status} to the search for {query!r}.",
            hint="try again later, or list what is cached: llmfit models",
        )
    if worker.is_alive():
        host = unresolved(endpoint())
        if host is not None:
            # A name that does not resolve is not a slow Hub (issue 34: huggingface_hub tries
            # again until the time is up, and the sentence blamed the time).
            raise HubUnreachable(
                f"cannot reach the Hub at {shown_endpoint()}: the name {host!r} does not resolve.",
                hint="check HF_ENDPOINT and the network, or list what is cached: llmfit models",
            )
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
    # Each repository once, in the Hub's order: an answer that repeats one (30 times) lists it
    # once.
    unique = dict.fromkeys(r for r in found if isinstance(r, str) and is_repo_id(r))
    return tuple(Listed(r) for r in list(unique)[:limit])
