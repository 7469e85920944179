"""Find a repository in the local Hugging Face cache, laid out as huggingface_hub lays it out.

`<cache>/models--Org--Name/refs/<revision>` holds a commit hash, and
`<cache>/models--Org--Name/snapshots/<commit>/` the files of that commit. The cache directory is
huggingface_hub's own (`HF_HUB_CACHE`, else `HF_HOME/hub`), read from `huggingface_hub.constants`,
so llmfit and `hf download` always agree on where it is. The lookup mirrors
`huggingface_hub.try_to_load_from_cache`, which is not called directly because importing it costs
a plan 0.18 s, as much as the rest of the run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from llmfit.errors import RepoNotFound, UsageError

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class RepoRef:
    """`org/name`, optionally at a revision (branch, tag or commit)."""

    repo_id: str
    revision: str | None = None


def parse_ref(text: str) -> RepoRef | Path:
    """A repository id (`org/name[@revision]`) or a local directory."""
    if text.startswith(("/", "./", "../", "~")) or os.path.isdir(text):
        return Path(text).expanduser()
    repo, _, revision = text.partition("@")
    if not _REPO_ID.match(repo) or (_ and not revision):
        raise UsageError(
            f"{text!r} is neither a directory nor a repository id like Qwen/Qwen3-8B[@revision]."
        )
    return RepoRef(repo, revision or None)


def hub_cache_dir() -> Path:
    """huggingface_hub's cache directory, honouring HF_HUB_CACHE and HF_HOME as it does."""
    # The environment is read here, not only through constants (which read it once, at import), so
    # that a variable set after start-up is honoured as huggingface_hub would at its next start.
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


@dataclass(frozen=True)
class Snapshot:
    path: Path
    commit: str


def find_snapshot(ref: RepoRef, cache_dir: Path | None = None) -> Snapshot | None:
    """The cached snapshot of a repository at a revision; None when the cache lacks it."""
    cache = cache_dir or hub_cache_dir()
    folder = cache / ("models--" + ref.repo_id.replace("/", "--"))
    revision = ref.revision or "main"
    ref_file = folder / "refs" / revision
    if ref_file.is_file():
        commit = ref_file.read_text(encoding="utf-8").strip()
    elif _COMMIT.match(revision):
        commit = revision
    else:
        return None
    snap = folder / "snapshots" / commit
    return Snapshot(snap, commit) if snap.is_dir() else None


def require_snapshot(ref: RepoRef, cache_dir: Path | None = None) -> Snapshot:
    snap = find_snapshot(ref, cache_dir)
    if snap is not None:
        return snap
    cache = cache_dir or hub_cache_dir()
    at = f" at revision {ref.revision}" if ref.revision else ""
    raise RepoNotFound(
        f"{ref.repo_id}{at} is not in the local Hugging Face cache ({cache}).",
        hint=(
            f"hf download {ref.repo_id} --include config.json '*.safetensors.index.json'"
            + (f" --revision {ref.revision}" if ref.revision else "")
        ),
    )
