"""llmfit's own cache of what the Hugging Face cache does not hold: file listings and headers.

The Hugging Face cache keeps whole files (config.json, the safetensors index); a planner needs,
beside them, the repository's file list with sizes and the first bytes of each weight file
(safetensors and GGUF headers), which huggingface_hub has no place for. They are kept here, keyed
by repository, commit and file, so a repository planned once online is planned again offline with
the same numbers, and a new commit (a new key) is noticed online:

    <root>/models--Org--Name/<commit>/listing.json          {"files": {path: size or null}}
    <root>/models--Org--Name/<commit>/<kind>/<path>.header  raw header bytes (safetensors, gguf)

The root is `$LLMFIT_CACHE`, else `$XDG_CACHE_HOME/llmfit`, else `~/.cache/llmfit`. Entries never
change once written (a commit's files do not), so writes are atomic (a temporary file renamed into
place) and concurrent runs can only write the same bytes. What is written has been parsed first
(the callers parse, then put), so one bad answer is never kept; an entry that is damaged anyway (a
disk error, an older llmfit, a hand edit) reads as missing, and a caller that finds an entry it
cannot parse discards it and fetches it again. Every path is checked to stay under the root, and
no entry is read past the size its kind can have.
"""

from __future__ import annotations

import os
from pathlib import Path

from llmfit.sources.cache import COMMIT, file_name_problem, inside, is_repo_id
from llmfit.sources.jsonfile import JsonProblem, parse

# The most bytes an entry of each kind can hold: a safetensors header is capped by its format at
# 100 MB, and llmfit reads at most 64 MB of a GGUF header; a listing of a million files is ~50 MB.
KINDS = {"safetensors": 100_000_000, "gguf": 64 << 20}
MAX_LISTING = 64 << 20


def cache_root() -> Path:
    if os.environ.get("LLMFIT_CACHE"):
        return Path(os.environ["LLMFIT_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "llmfit"
    return Path.home() / ".cache" / "llmfit"


class MetaCache:
    """Listings and headers of repositories at commits, on disk under `root`."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_root()

    def _commit_dir(self, repo_id: str, commit: str) -> Path:
        if not COMMIT.fullmatch(commit):
            raise ValueError(f"not a commit hash: {commit!r}")
        if not is_repo_id(repo_id):
            raise ValueError(f"not a repository id: {repo_id!r}")
        return self.root / ("models--" + repo_id.replace("/", "--")) / commit

    def _header_path(self, repo_id: str, commit: str, kind: str, filename: str) -> Path:
        if kind not in KINDS:
            raise ValueError(f"unknown header kind {kind!r}")
        if file_name_problem(filename) is not None:
            raise ValueError(f"not a repository file name: {filename!r}")
        parts = filename.split("/")
        return self._commit_dir(repo_id, commit).joinpath(kind, *parts[:-1], parts[-1] + ".header")

    def _read(self, path: Path, limit: int) -> bytes | None:
        """An entry's bytes; None when it is not there, not readable, too large for its kind, or
        reached through a link that leads out of the cache."""
        try:
            if not inside(path, self.root):
                return None
            with path.open("rb") as f:
                raw = f.read(limit + 1)
        except OSError:
            return None
        if len(raw) > limit:
            self._discard(path)
            return None
        return raw

    def _discard(self, path: Path) -> None:
        """Remove a damaged entry, so that the next online run fetches it again."""
        try:
            if inside(path.parent, self.root):
                path.unlink(missing_ok=True)
        except OSError:
            pass

    # -- listings ---------------------------------------------------------------------------

    def listing(self, repo_id: str, commit: str) -> dict[str, int | None] | None:
        """The repository's files at a commit and their sizes; None when not cached."""
        path = self._commit_dir(repo_id, commit) / "listing.json"
        raw = self._read(path, MAX_LISTING)
        if raw is None:
            return None
        try:
            files = parse(raw, MAX_LISTING)["files"]
        except (JsonProblem, KeyError, TypeError):
            files = None
        if not isinstance(files, dict) or any(file_name_problem(k) for k in files):
            self._discard(path)
            return None
        return {k: _size(v) for k, v in files.items()}

    def put_listing(self, repo_id: str, commit: str, files: dict[str, int | None]) -> None:
        import json

        body = json.dumps({"repo": repo_id, "commit": commit, "files": files}, sort_keys=True)
        self._write(self._commit_dir(repo_id, commit) / "listing.json", body.encode())

    # -- headers ----------------------------------------------------------------------------

    def header(self, repo_id: str, commit: str, filename: str, kind: str) -> bytes | None:
        """The header bytes of one file at a commit; None when not cached (or not a file name a
        repository can hold, like ../x, which a malformed index could name)."""
        try:
            path = self._header_path(repo_id, commit, kind, filename)
        except ValueError:
            return None
        return self._read(path, KINDS[kind])

    def put_header(self, repo_id: str, commit: str, filename: str, kind: str, raw: bytes) -> None:
        """Keep a header's bytes: call it only with bytes that parsed."""
        path = self._header_path(repo_id, commit, kind, filename)
        if len(raw) <= KINDS[kind]:
            self._write(path, raw)

    def discard_header(self, repo_id: str, commit: str, filename: str, kind: str) -> None:
        """Forget a cached header that did not parse: it is fetched again, not trusted forever."""
        try:
            self._discard(self._header_path(repo_id, commit, kind, filename))
        except ValueError:
            pass

    def _write(self, path: Path, data: bytes) -> None:
        # A link planted under the root could lead a write anywhere: the target's folder must
        # resolve inside the root, as the root resolves, before anything is written.
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return
        if inside(path.parent, self.root):
            _write_atomic(path, data)


def _size(v: object) -> int | None:
    """A listed size: a byte count, or None where the entry gives none that could be one."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63 else None


def _write_atomic(path: Path, data: bytes) -> None:
    """Write a file so that a reader sees all of it or none of it. Failing to cache is not fatal."""
    import tempfile  # 4 ms to import; only runs that fetch something write

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        # A read-only or full disk costs the next run a refetch, not this run its answer.
        pass
