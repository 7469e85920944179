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
place) and concurrent runs can only write the same bytes. A damaged entry reads as missing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
KINDS = ("safetensors", "gguf")


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
        if not _COMMIT.match(commit):
            raise ValueError(f"not a commit hash: {commit!r}")
        return self.root / ("models--" + repo_id.replace("/", "--")) / commit

    def _header_path(self, repo_id: str, commit: str, kind: str, filename: str) -> Path:
        if kind not in KINDS:
            raise ValueError(f"unknown header kind {kind!r}")
        parts = filename.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"not a repository file name: {filename!r}")
        return self._commit_dir(repo_id, commit).joinpath(kind, *parts[:-1], parts[-1] + ".header")

    # -- listings ---------------------------------------------------------------------------

    def listing(self, repo_id: str, commit: str) -> dict[str, int | None] | None:
        """The repository's files at a commit and their sizes; None when not cached."""
        path = self._commit_dir(repo_id, commit) / "listing.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            files = data["files"]
            if not isinstance(files, dict):
                return None
            return {str(k): (v if isinstance(v, int) else None) for k, v in files.items()}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put_listing(self, repo_id: str, commit: str, files: dict[str, int | None]) -> None:
        body = json.dumps({"repo": repo_id, "commit": commit, "files": files}, sort_keys=True)
        _write_atomic(self._commit_dir(repo_id, commit) / "listing.json", body.encode())

    # -- headers ----------------------------------------------------------------------------

    def header(self, repo_id: str, commit: str, filename: str, kind: str) -> bytes | None:
        """The header bytes of one file at a commit; None when not cached (or not a file name a
        repository can hold, like ../x, which a malformed index could name)."""
        try:
            return self._header_path(repo_id, commit, kind, filename).read_bytes()
        except (OSError, ValueError):
            return None

    def put_header(self, repo_id: str, commit: str, filename: str, kind: str, raw: bytes) -> None:
        _write_atomic(self._header_path(repo_id, commit, kind, filename), raw)


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
