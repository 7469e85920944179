"""The Hugging Face Hub, online: a repository's metadata, never its weights.

Everything goes through huggingface_hub, so `HF_ENDPOINT`, `HF_TOKEN` and the stored login,
`HF_HOME`/`HF_HUB_CACHE` and its timeouts (`HF_HUB_ETAG_TIMEOUT`) mean what they mean to `hf`:

- the revision is resolved to a commit, and the file list read with sizes, by one
  `HfApi.model_info(files_metadata=True)` call;
- config.json and the safetensors index are fetched by `hf_hub_download` at that commit into the
  normal Hugging Face cache, so they are there offline afterwards (and cost nothing the next time);
- safetensors headers are read by HTTP range from the file's `hf_hub_url`, through
  huggingface_hub's own session and retries (`http_stream_backoff`, `build_hf_headers`,
  `hf_raise_for_status`): the 8-byte length, then exactly the header; many files in parallel,
  with a bound;
- GGUF headers are read by `read_growing`, a window that grows until a parser (a callback, such as
  `sources.gguf`'s) says it has all it needs, under a hard cap;
- what the Hugging Face cache has no place for (the listing, the headers) goes to llmfit's own
  `metacache`, keyed by commit.

Everything the Hub answers is untrusted: the commit it names and the file names it lists are
checked before they become paths, each answer is bounded in size and in time (`sources.session`),
and what is kept in a cache has parsed first. A file the Hugging Face cache already holds that does
not parse is discarded and fetched again, once.

huggingface_hub (and the thread pool) are imported inside the functions that go online: a plan from
the cache (offline) never pays for importing them.
"""

from __future__ import annotations

import os
import re
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from llmfit.errors import (
    BadInputError,
    CacheUnusable,
    GatedRepo,
    HubError,
    HubRepoNotFound,
    HubTimeout,
    HubUnreachable,
    LlmfitError,
    RevisionNotFound,
    Unauthorized,
    UsageError,
    WeightsError,
)
from llmfit.plan.launch import quote_exact
from llmfit.sources.cache import (
    COMMIT,
    RepoRef,
    check_hf_environment,
    file_name_problem,
    inside,
    is_repo_id,
    repo_folder,
    show,
)
from llmfit.sources.growing import (  # noqa: F401  (re-exported)
    GGUF_FIRST_WINDOW,
    GGUF_MAX_WINDOW,
    NeedMore,
    read_growing,
)
from llmfit.sources.metacache import MetaCache
from llmfit.sources.safetensors import MAX_HEADER, SafetensorsHeader, parse_header

T = TypeVar("T")

# Small JSON files fetched whole into the Hugging Face cache when the repository has them.
SMALL_FILES = ("config.json", "model.safetensors.index.json")
# Headers read at once. The Hub serves ranges from a CDN; eight in flight keep a 100-shard
# repository to about a dozen round trips without looking like a crawler.
MAX_WORKERS = 8
# A range read that fails on the way (5xx, 429, a dropped connection, a timeout) is tried again,
# twice, 0.25 s then 0.5 s later: one bad answer among a hundred shards must not end a plan.
RANGE_RETRIES = 2

_OFFLINE_VALUES = {"1", "ON", "YES", "TRUE"}


def offline(flag: bool | None = None) -> bool:
    """Whether this run may not touch the network: `--offline`, or HF_HUB_OFFLINE as hf reads it."""
    if flag:
        return True
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").upper() in _OFFLINE_VALUES:
            return True
    import sys

    constants = sys.modules.get("huggingface_hub.constants")
    return bool(constants is not None and constants.HF_HUB_OFFLINE)


class Progress(Protocol):
    """What reading remote metadata reports as it goes (the CLI draws it; tests ignore it)."""

    def begin(self, label: str, total: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def end(self) -> None: ...


class _NoProgress:
    def begin(self, label: str, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def end(self) -> None:
        pass


@dataclass(frozen=True)
class RemoteRepo:
    """A repository at a commit, as the Hub lists it; its small files are in `snapshot`."""

    repo_id: str
    revision: str | None
    commit: str
    files: dict[str, int | None]  # path → size in bytes (None when the Hub gave none)
    snapshot: Path  # the Hugging Face cache's snapshot folder for the commit


def quiet_huggingface_hub() -> None:
    """No progress bars or retry warnings from huggingface_hub on stderr: llmfit draws its own
    progress, and a failure ends in one sentence of llmfit's (LLMFIT_DEBUG=1 keeps them).

    It changes huggingface_hub's settings for the whole process, so the CLI calls it, not the
    library functions here."""
    check_hf_environment()  # huggingface_hub reads its timeouts with int() as it is imported
    if os.environ.get("LLMFIT_DEBUG"):
        return
    # Read by huggingface_hub as it is imported, so that a run that asks it nothing (the cache is
    # current) does not import it for this (issue 17); if it is imported already, it is told.
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_HUB_VERBOSITY"] = "error"
    import sys

    if "huggingface_hub.constants" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars, logging

        disable_progress_bars()
        logging.set_verbosity_error()


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def shown_endpoint() -> str:
    """The endpoint as a message may show it: no user:password@, no query."""
    url = endpoint()
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "the HF_ENDPOINT address"
    return f"{parts.scheme}://{host}{port}{parts.path}".rstrip("/")


# What a token may hold: printable ASCII without spaces (an HTTP header carries it).
_TOKEN = re.compile(r"[!-~]+", re.ASCII)


def _ready() -> None:
    """Refuse, in one sentence each, the settings huggingface_hub would fail on with a traceback,
    and send its requests through llmfit's bounded client. Called before anything goes online."""
    check_hf_environment()
    url = endpoint()
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:
        ok = False
    if not ok:
        raise UsageError(
            f"HF_ENDPOINT is not an http(s) address of a Hub ({shown_endpoint()}).",
            hint="unset HF_ENDPOINT  (the Hub at https://huggingface.co)",
        )
    from huggingface_hub import get_token

    token = get_token()
    if token is not None and not _TOKEN.fullmatch(token):
        where = "HF_TOKEN" if os.environ.get("HF_TOKEN") else "The stored Hugging Face token"
        raise UsageError(
            f"{where} holds a character no token has (a space, a control character or one "
            "outside ASCII); it is neither sent nor shown.",
            hint="hf auth login  (or set HF_TOKEN to a token from huggingface.co/settings/tokens)",
        )
    from llmfit.sources import session

    session.install()


def fetch_repo(
    ref: RepoRef,
    *,
    cache_dir: Path | None = None,
    meta: MetaCache | None = None,
    progress: Progress | None = None,
) -> RemoteRepo:
    """Resolve a repository's revision on the Hub, list its files, cache its small JSON files."""
    from llmfit.sources.cache import hub_cache_dir

    meta = meta or MetaCache()
    progress = progress or _NoProgress()
    cache = cache_dir or hub_cache_dir()
    _ready()
    try:
        return _fetch_repo(ref, cache, meta, progress)
    except HubRepoNotFound as e:
        from huggingface_hub import get_token

        names = similar_repos(ref.repo_id)
        if names:
            e.hint = "did you mean " + ", ".join(names) + "?"
        elif get_token() is None:
            e.hint = "if it is private, log in first: hf auth login"
        raise
    finally:
        progress.end()


def _fetch_repo(ref: RepoRef, cache: Path, meta: MetaCache, progress: Progress) -> RemoteRepo:
    from huggingface_hub import HfApi, constants

    with translate_errors(ref):
        progress.begin(f"{ref.repo_id}: resolving", 1)
        try:
            info = HfApi(endpoint=endpoint()).model_info(
                ref.repo_id,
                revision=ref.revision,
                files_metadata=True,
                timeout=constants.HF_HUB_ETAG_TIMEOUT,
            )
            commit, files = _described(ref, info.sha, info.siblings)
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError):
            # What huggingface_hub raises reading an answer that is not the JSON object it
            # expects: a web page (a captive portal, a proxy's error), a list, a truncated body.
            raise HubError(
                f"the Hub ({shown_endpoint()}) did not describe {ref.repo_id} as the Hub does "
                "(its answer is not a repository's description).",
                hint="check HF_ENDPOINT and any proxy",
            ) from None
        progress.advance()
        meta.put_listing(ref.repo_id, commit, files)
        wanted = [f for f in SMALL_FILES if f in files]
        progress.begin(f"{ref.repo_id}: config", len(wanted))
        for name in wanted:
            _small_file(ref, commit, name, files[name], cache)
            progress.advance()
    folder = repo_folder(cache, ref.repo_id)
    _write_ref(folder, ref.revision or "main", commit)
    snapshot = folder / "snapshots" / commit
    try:
        snapshot.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _unwritable(cache, e, ref) from None
    return RemoteRepo(ref.repo_id, ref.revision, commit, files, snapshot)


def _described(
    ref: RepoRef, sha: object, siblings: Iterable[Any] | None
) -> tuple[str, dict[str, int | None]]:
    """The commit and the file list the Hub gave, checked: the commit becomes a folder name and
    each file name a path, so neither may be anything but what a repository can have."""
    if not isinstance(sha, str) or not COMMIT.fullmatch(sha):
        raise HubError(
            f"the Hub ({shown_endpoint()}) named {show(sha)} as the commit of {ref.repo_id}, "
            "which is not a commit hash.",
            hint="check HF_ENDPOINT and any proxy",
        )
    files: dict[str, int | None] = {}
    for s in siblings or []:
        why = file_name_problem(s.rfilename)
        if why is not None:
            raise HubError(
                f"the Hub ({shown_endpoint()}) listed a file {show(s.rfilename)} in "
                f"{ref.repo_id}, which no repository can hold: {why}.",
                hint="check HF_ENDPOINT and any proxy",
            )
        size = s.size
        ok = isinstance(size, int) and not isinstance(size, bool) and 0 <= size < 1 << 63
        files[s.rfilename] = size if ok else None
    return sha, files


def _small_file(ref: RepoRef, commit: str, name: str, size: int | None, cache: Path) -> None:
    """Download config.json or the index into the Hugging Face cache, bounded, and keep it there
    only if it parses: a bad copy already there (another tool's, a proxy's page) is discarded and
    fetched again, once; a bad answer is discarded, so the next run asks again."""
    from huggingface_hub import constants, hf_hub_download

    from llmfit.sources import session
    from llmfit.sources.config import MAX_CONFIG, config_from_bytes
    from llmfit.sources.safetensors import MAX_INDEX, index_from_bytes

    cap, check = (
        (MAX_CONFIG, config_from_bytes) if name == "config.json" else (MAX_INDEX, index_from_bytes)
    )
    where = f"{ref.repo_id}/{name}"
    if size is not None and size > cap:
        # The listing said how large it is: a 300 MB config.json is not downloaded at all.
        raise BadInputError(
            f"{where} is {size:,} bytes, more than the {cap:,} llmfit reads of such a file; it "
            "is not downloaded."
        )
    for force in (False, True):
        try:
            with session.limit(cap):
                path = Path(
                    hf_hub_download(
                        ref.repo_id,
                        name,
                        revision=commit,
                        cache_dir=cache,
                        endpoint=endpoint(),
                        etag_timeout=constants.HF_HUB_ETAG_TIMEOUT,
                        force_download=force,
                    )
                )
        except session.AnswerTooLarge:
            raise BadInputError(
                f"{where} is more than {cap:,} bytes, the most llmfit reads of such a file."
            ) from None
        except OSError as e:
            if not _is_local(e):
                raise
            raise _unwritable(cache, e, ref) from None
        try:
            with path.open("rb") as f:
                check(f.read(cap + 1), where)
            return
        except (LlmfitError, OSError):
            _discard_download(path, repo_folder(cache, ref.repo_id))
            if force:
                raise


def _is_local(e: OSError) -> bool:
    """Whether an OSError from a download is the disk's (permissions, space, a name too long)
    rather than the network's, which huggingface_hub raises as OSError subclasses too."""
    return e.errno is not None and not isinstance(e, (ConnectionError, TimeoutError))


def _unwritable(cache: Path, e: OSError, ref: RepoRef) -> CacheUnusable:
    return CacheUnusable(
        f"cannot write the Hugging Face cache at {cache} ({e.strerror or e}).",
        hint=f"set HF_HUB_CACHE to a folder you can write, or: {offline_hint(ref)}",
    )


def _discard_download(path: Path, folder: Path) -> None:
    """Remove a downloaded file that did not parse: its link in the snapshot and the blob."""
    try:
        blob = Path(os.path.realpath(path))
        path.unlink(missing_ok=True)
        if inside(blob, folder):
            blob.unlink(missing_ok=True)
    except OSError:
        pass


def suggest(name: str) -> list[str]:
    """The Hub's three nearest repositories to a bare name, as a refused reference's suggestions
    (sources/cache.py `parse_ref`); its failures are the caller's to swallow."""
    _ready()
    return similar_repos(name, limit=3)


def similar_repos(repo_id: str, limit: int = 5) -> list[str]:
    """Repositories the Hub's search offers for a name that was not found; [] if it offers none.

    A direct GET of the search endpoint, because `HfApi.list_models` takes no timeout and a
    suggestion must not hang an error message. Any failure here just means no suggestion.
    """
    from huggingface_hub import constants
    from huggingface_hub.utils import build_hf_headers, get_session

    from llmfit.sources import session

    name = repo_id.split("/")[-1]
    try:
        with session.limit(1 << 20):
            r = get_session().get(
                f"{endpoint()}/api/models",
                params={"search": name, "limit": limit},
                headers=build_hf_headers(),
                timeout=constants.HF_HUB_ETAG_TIMEOUT,
            )
        if r.status_code != 200:
            return []
        found = [m.get("id") for m in r.json() if isinstance(m, dict)]
    except Exception:
        return []
    # The names are the Hub's words, printed in a hint: only what could be a repository id.
    from llmfit.sources.cache import near_spelling

    # Only the name typed, spelt nearly the same: a search offers other models too (issue 34:
    # Qwen/Qwen3-14B was answered with Qwen/Qwen3-8B).
    return [
        f
        for f in found
        if isinstance(f, str) and is_repo_id(f) and f != repo_id and near_spelling(repo_id, f)
    ][:limit]


def _write_ref(folder: Path, revision: str, commit: str) -> None:
    """Point `refs/<revision>` at the commit, as huggingface_hub does after a download by branch.

    The files were fetched by commit (so that all of them are of the one commit model_info named),
    and hf_hub_download writes no ref for a commit; an offline run by branch needs it.
    """
    if revision == commit:
        return
    ref_file = folder / "refs" / revision
    try:
        if ref_file.is_file() and ref_file.read_text(encoding="utf-8").strip() == commit:
            return
        ref_file.parent.mkdir(parents=True, exist_ok=True)
        # The revision was checked to be a ref name; a link planted in refs/ is not followed.
        if not inside(ref_file.parent, folder / "refs"):
            return
        tmp = ref_file.with_name(f".{ref_file.name}.{os.getpid()}.tmp")
        tmp.write_text(commit, encoding="utf-8")
        os.replace(tmp, ref_file)
    except OSError:
        pass


# -- safetensors headers ------------------------------------------------------------------------


def safetensors_headers(
    repo_id: str,
    commit: str,
    names: Iterable[str],
    *,
    sizes: dict[str, int | None] | None = None,
    meta: MetaCache | None = None,
    progress: Progress | None = None,
    workers: int = MAX_WORKERS,
) -> list[SafetensorsHeader]:
    """The headers of these safetensors files at a commit: from llmfit's cache, else by range."""
    meta = meta or MetaCache()
    progress = progress or _NoProgress()
    names = list(names)
    for name in names:
        # The index's weight_map is the repository's word; the listing is the Hub's. A shard the
        # listing lacks (or a name like ../x) is not read, nor used as a cache path.
        if sizes is not None and name not in sizes:
            raise WeightsError(
                f"{repo_id}: the safetensors index names {show(name)}, which the repository does "
                "not have."
            )
        why = file_name_problem(name)
        if why is not None:
            raise WeightsError(f"{repo_id}: the safetensors index names {show(name)}: {why}.")
    parsed: dict[str, SafetensorsHeader] = {}
    missing = []
    for name in names:
        cached = meta.header(repo_id, commit, name, "safetensors")
        if cached is not None:
            try:
                parsed[name] = parse_header(cached, f"{repo_id}/{name}")
                continue
            except WeightsError:
                # llmfit keeps only bytes that parsed; these did not (a disk error, an older
                # version's entry): discarded and read again.
                meta.discard_header(repo_id, commit, name, "safetensors")
        missing.append(name)
    if missing:
        from concurrent.futures import ThreadPoolExecutor

        ref = RepoRef(repo_id, commit)
        _ready()
        progress.begin(f"{repo_id}: headers", len(missing))

        def fetch(name: str) -> tuple[str, SafetensorsHeader]:
            size = (sizes or {}).get(name)
            data = read_safetensors_header(repo_id, commit, name, size)
            header = parse_header(data, f"{repo_id}/{name}")
            # Cached only once it parsed: a bad answer is said, and asked again next time.
            meta.put_header(repo_id, commit, name, "safetensors", data)
            progress.advance()
            return name, header

        with translate_errors(ref), ThreadPoolExecutor(min(workers, len(missing))) as pool:
            parsed.update(pool.map(fetch, missing))
        progress.end()
    return [parsed[n] for n in names]


def read_safetensors_header(repo_id: str, commit: str, name: str, size: int | None) -> bytes:
    """One file's header JSON, read by range: the 8-byte length, then exactly that many bytes."""
    where = f"{repo_id}/{name}"
    head = read_range(repo_id, commit, name, 0, 8)
    if len(head) < 8:
        raise WeightsError(f"{where}: too short to be a safetensors file ({len(head)} bytes).")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER or (size is not None and n > size - 8):
        room = f"the file holds {size - 8} after the length and " if size is not None else ""
        raise WeightsError(
            f"{where}: the safetensors header claims {n} bytes, but {room}"
            f"the format allows at most {MAX_HEADER}."
        )
    raw = read_range(repo_id, commit, name, 8, 8 + n)
    if len(raw) < n:
        raise WeightsError(f"{where}: the header is cut short ({len(raw)} of {n} bytes).")
    return raw


def read_range(repo_id: str, commit: str, name: str, start: int, stop: int) -> bytes:
    """Bytes [start, stop) of a file at a commit, by one HTTP range request.

    Through huggingface_hub's session and retry policy (`http_stream_backoff`), with its headers
    (`build_hf_headers`: the token, if any, and its user agent). Never more than asked for: the
    body is streamed and the connection dropped at `stop`, so a server that ignores `Range` and
    starts sending the whole file (gigabytes of weights) costs `stop` bytes, not the file.
    """
    import httpx2
    from huggingface_hub import constants, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_stream_backoff

    from llmfit.sources import session

    if stop <= start:
        return b""
    url = hf_hub_url(repo_id, name, revision=commit, endpoint=endpoint())
    headers = build_hf_headers()
    headers["Range"] = f"bytes={start}-{stop - 1}"
    headers["Accept-Encoding"] = "identity"
    where = f"{repo_id}/{name}"
    # http_stream_backoff retries what fails as the answer opens; a body that fails half-way is
    # tried again here (its retry loop would catch the error at its `yield` and fail itself).
    for attempt in range(RANGE_RETRIES + 1):
        failed: Exception | None = None
        with (
            session.limit(stop + (1 << 20)),
            http_stream_backoff(
                "GET",
                url,
                headers=headers,
                timeout=constants.HF_HUB_ETAG_TIMEOUT,
                max_retries=RANGE_RETRIES,
                base_wait_time=0.25,
                max_wait_time=1,
            ) as response,
        ):
            if response.status_code == 416:
                return b""  # the file ends before `start`
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            if response.headers.get("content-type", "").lower().startswith("text/html"):
                raise HubError(
                    f"the Hub ({shown_endpoint()}) answered a web page for {where}, not the file.",
                    hint="check HF_ENDPOINT and any proxy",
                )
            if response.status_code == 206:
                _check_range(response.headers.get("content-range"), start, stop, where)
            try:
                return _body(response, 0 if response.status_code == 206 else start, stop - start)
            except (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError) as e:
                failed = e
        if attempt == RANGE_RETRIES:
            raise failed
        time.sleep(0.25 * 2**attempt)
    raise AssertionError("unreachable")


def _body(response, skip: int, want: int) -> bytes:
    """`want` bytes of a streamed answer after the first `skip` (a 200 answer sends from byte 0),
    and not one chunk more."""
    chunks: list[bytes] = []
    got = 0
    for chunk in response.iter_bytes():
        if skip:
            cut = min(skip, len(chunk))
            chunk, skip = chunk[cut:], skip - cut
        chunks.append(chunk[: want - got])
        got += len(chunks[-1])
        if got >= want:
            break
    return b"".join(chunks)


_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)", re.ASCII)


def _check_range(header: str | None, start: int, stop: int, where: str) -> None:
    """A 206 answer must say it holds the bytes asked for, from `start`: bytes from elsewhere in
    the file read as a header would size the weights wrong, or not parse for a reason not theirs."""
    m = _CONTENT_RANGE.fullmatch((header or "").strip())
    if m is None or int(m[1]) != start or int(m[2]) < int(m[1]) or int(m[2]) > stop - 1:
        got = show(header) if header else "no Content-Range"
        raise HubError(
            f"the Hub ({shown_endpoint()}) answered {got} for {where} when asked for bytes "
            f"{start}-{stop - 1}.",
            hint="check HF_ENDPOINT and any proxy",
        )


# -- GGUF headers -------------------------------------------------------------------------------


def gguf_header(
    repo_id: str,
    commit: str,
    name: str,
    parse: Callable[[bytes], T | NeedMore],
    *,
    size: int | None = None,
    meta: MetaCache | None = None,
) -> T:
    """A GGUF file's header parsed by `parse`, from llmfit's cache or by a growing range read.

    The bytes the parser accepted are cached (not the parse), so a better parser later reads the
    same bytes offline.
    """
    meta = meta or MetaCache()
    cached = meta.header(repo_id, commit, name, "gguf")
    if cached is not None:
        try:
            result = parse(cached)
        except WeightsError:
            # llmfit keeps only bytes that parsed: these are discarded and read again.
            meta.discard_header(repo_id, commit, name, "gguf")
            result = NeedMore()
        if not isinstance(result, NeedMore):
            return result
    _ready()
    with translate_errors(RepoRef(repo_id, commit)):
        result, held = read_growing(
            lambda a, b: read_range(repo_id, commit, name, a, b),
            parse,
            size=size,
            where=f"{repo_id}/{name}",
        )
    meta.put_header(repo_id, commit, name, "gguf", held)
    assert not isinstance(result, NeedMore)  # read_growing returns only a finished parse
    return result


def gguf_headers(
    repo_id: str,
    commit: str,
    names: Iterable[str],
    parse: Callable[[bytes], T | NeedMore] | None = None,
    *,
    parse_for: Callable[[str], Callable[[bytes], T | NeedMore]] | None = None,
    sizes: dict[str, int | None] | None = None,
    meta: MetaCache | None = None,
    progress: Progress | None = None,
    workers: int = MAX_WORKERS,
) -> list[T]:
    """The headers of several GGUF files (a repository's quantisations), read in parallel.

    Each is parsed by `parse`, or by `parse_for(name)` when the parser needs to know the file
    (its name for messages, its size for the truncation check)."""
    meta = meta or MetaCache()
    progress = progress or _NoProgress()
    names = list(names)
    progress.begin(f"{repo_id}: GGUF headers", len(names))

    def one(name: str) -> T:
        p = parse_for(name) if parse_for is not None else parse
        assert p is not None, "gguf_headers needs parse or parse_for"
        result = gguf_header(repo_id, commit, name, p, size=(sizes or {}).get(name), meta=meta)
        progress.advance()
        return result

    from concurrent.futures import ThreadPoolExecutor

    try:
        with ThreadPoolExecutor(max(1, min(workers, len(names)))) as pool:
            return list(pool.map(one, names))
    finally:
        progress.end()


# -- errors -------------------------------------------------------------------------------------


@contextmanager
def translate_errors(ref: RepoRef) -> Iterator[None]:
    """Turn what huggingface_hub and httpx raise into the llmfit error a user can act on.

    No message of theirs is passed on (they can hold URLs with signed parameters); no token is ever
    in ours. Anything that is not a Hub or network failure goes through untouched.
    """
    try:
        yield
    except LlmfitError:
        raise
    except Exception as exc:
        err = hub_error(exc, ref)
        if err is None:
            raise
        raise err from None


def _ref_text(ref: RepoRef) -> str:
    """The repository as an argument of a printed command: quoted, since a revision may hold
    characters a shell acts on ($, ;, backquotes)."""
    return quote_exact(ref.repo_id + (f"@{ref.revision}" if ref.revision else ""))


def offline_hint(ref: RepoRef) -> str:
    return f"llmfit {_ref_text(ref)} --offline  (plans from what is cached)"


def hub_error(exc: BaseException, ref: RepoRef) -> LlmfitError | None:
    """The llmfit error for an exception raised while asking the Hub; None if it is not one."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        FileMetadataError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    from llmfit.sources import session

    url = shown_endpoint()
    repo = ref.repo_id
    offline = offline_hint(ref)
    # hf_hub_download wraps a failed HEAD in LocalEntryNotFoundError: the cause is what happened.
    if isinstance(exc, LocalEntryNotFoundError) and exc.__cause__ is not None:
        return hub_error(exc.__cause__, ref)
    if isinstance(exc, OfflineModeIsEnabled):
        return HubUnreachable(
            f"{repo} is needed from the Hub, but huggingface_hub is in offline mode.",
            hint="unset HF_HUB_OFFLINE, or: " + offline,
        )
    # GatedRepoError before RepositoryNotFoundError: it is a subclass of it.
    if isinstance(exc, GatedRepoError):
        return GatedRepo(
            f"{repo} is gated: accept its licence at {url}/{repo}, then log in with that account.",
            hint="hf auth login",
        )
    if isinstance(exc, RepositoryNotFoundError):
        return HubRepoNotFound(
            f"{repo} is not a repository on the Hub ({url}), or it is private and your token "
            "cannot see it.",
        )
    if isinstance(exc, RevisionNotFoundError):
        return RevisionNotFound(
            f"{repo} has no branch, tag or commit {show(ref.revision)}.",
            hint=f"llmfit {repo}  (its default branch)",
        )
    if isinstance(exc, session.AnswerTooSlow) and exc.overall:
        return HubTimeout(
            f"the Hub ({url}) did not answer for {repo} within the {exc.seconds:g} s llmfit "
            "gives a search and its repositories.",
            hint="search for fewer (--limit N), or try again later",
        )
    if isinstance(exc, session.AnswerTooSlow):
        return HubTimeout(
            f"the Hub ({url}) did not finish answering within {exc.seconds:g} s.",
            hint="try again later, or: " + offline,
        )
    if isinstance(exc, session.AnswerTooLarge):
        return HubError(
            f"the Hub ({url}) answered with more than {exc.limit:,} bytes for {repo}, more than "
            "llmfit reads of any answer.",
            hint="check HF_ENDPOINT and any proxy",
        )
    if isinstance(exc, session.CredentialsElsewhere):
        return HubError(
            f"the Hub ({url}) pointed llmfit elsewhere for {repo}: {exc.why}, so it was not asked.",
            hint="check HF_ENDPOINT and any proxy",
        )
    if isinstance(exc, session.AnswerRefused):
        return HubError(
            f"the Hub ({url}) sent an answer llmfit cannot read for {repo}: {exc.why}.",
            hint="check HF_ENDPOINT and any proxy",
        )
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
        if status == 401:
            return Unauthorized(
                f"the Hub ({url}) refused your token (401 Unauthorized): it is invalid or expired.",
                hint="hf auth login  (or set HF_TOKEN to a valid token)",
            )
        if status == 403:
            return Unauthorized(
                f"your token may not read {repo} (403 Forbidden).",
                hint="hf auth login  (with a token that can read the repository)",
            )
        return HubUnreachable(
            f"the Hub ({url}) answered {status} {exc.response.reason_phrase} for {repo}.",
            hint="try again later, or: " + offline,
        )
    if isinstance(exc, httpx2.TimeoutException):
        return HubTimeout(
            f"the Hub ({url}) did not answer within {constants.HF_HUB_ETAG_TIMEOUT:g} s.",
            hint="raise HF_HUB_ETAG_TIMEOUT, or: " + offline,
        )
    if isinstance(exc, httpx2.RemoteProtocolError):
        return HubUnreachable(
            f"the Hub ({url}) closed the connection before it had answered in full.",
            hint="try again, or: " + offline,
        )
    if isinstance(exc, httpx2.TooManyRedirects):
        return HubUnreachable(
            f"the Hub ({url}) kept redirecting the request for {repo} (a loop?).",
            hint="check HF_ENDPOINT and any proxy",
        )
    if isinstance(exc, httpx2.DecodingError):
        return HubError(
            f"the Hub ({url}) sent an answer llmfit cannot decode for {repo}.",
            hint="check HF_ENDPOINT and any proxy",
        )
    if isinstance(exc, (httpx2.TransportError, ConnectionError, httpx2.InvalidURL)):
        return HubUnreachable(f"cannot reach the Hub at {url}.", hint=offline)
    if isinstance(exc, OSError) and exc.errno is None and "Consistency check" in str(exc):
        # huggingface_hub's word for a download whose body ended short of its stated size.
        return HubUnreachable(
            f"the Hub ({url}) sent a file of {repo} cut short.",
            hint="try again, or: " + offline,
        )
    if isinstance(exc, FileMetadataError):
        return HubError(
            f"the server at {url} does not answer as the Hub does (no commit or ETag); check "
            "HF_ENDPOINT and any proxy.",
        )
    return None
