"""A repository, read: its model and the artifacts it offers, wherever it came from."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.errors import ConfigError, HubUnreachable, RepoNotFound, UsageError, WeightsError
from llmfit.plan.artifact import Artifact
from llmfit.plan.model import DTYPE_SHORT, Model
from llmfit.sources.cache import RepoRef, find_snapshot, parse_ref, require_snapshot
from llmfit.sources.config import load_config, model_from_config
from llmfit.sources.metacache import MetaCache
from llmfit.sources.safetensors import SafetensorsHeader, parse_header, read_header, read_index

if TYPE_CHECKING:
    from llmfit.sources.gguf import GgufHeader, RemoteHeaders
    from llmfit.sources.hub import Progress

# Headers of the named weight files, wherever they are kept; None when not all of them are at hand.
HeaderSource = Callable[[tuple[str, ...]], "list[SafetensorsHeader] | None"]

INDEX = "model.safetensors.index.json"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
SINGLE = "model.safetensors"


@dataclass(frozen=True)
class Repo:
    id: str
    revision: str | None
    commit: str | None
    source: str  # "cache", "hub" or "path"
    model: Model
    artifacts: tuple[Artifact, ...]
    warnings: tuple[str, ...] = ()


def load_repo(
    text: str,
    cache_dir: Path | None = None,
    *,
    offline: bool | None = None,
    revision: str | None = None,
    progress: Progress | None = None,
    meta: MetaCache | None = None,
) -> Repo:
    """Read a repository id or a local directory into a Repo.

    Offline (`offline=True` or HF_HUB_OFFLINE), a repository id is read from the Hugging Face cache
    and llmfit's metadata cache and nothing else. Online, its revision is resolved on the Hub (so a
    new commit is noticed) and what the caches lack is fetched, metadata only; if the Hub cannot be
    reached, a cached snapshot is used instead, with a warning.
    """
    from llmfit.sources import hub

    ref = parse_ref(text)
    if isinstance(ref, RepoRef):
        if revision:
            if ref.revision and ref.revision != revision:
                raise UsageError(
                    f"{text!r} names revision {ref.revision!r} but --revision says {revision!r}."
                )
            ref = RepoRef(ref.repo_id, revision)
        meta = meta or MetaCache()
        if hub.offline(offline):
            return _from_cache(ref, cache_dir, meta)
        if (
            ref.revision
            and _COMMIT.match(ref.revision)
            and meta.listing(ref.repo_id, ref.revision) is not None
            and find_snapshot(ref, cache_dir) is not None
        ):
            # A commit never changes: what was read of it once is all the Hub could say now, so
            # the Hub is asked only for headers not yet cached (none, after a complete run).
            listing = meta.listing(ref.repo_id, ref.revision)
            commit = ref.revision

            def pinned_headers(names: tuple[str, ...]) -> list[SafetensorsHeader]:
                return hub.safetensors_headers(
                    ref.repo_id, commit, names, sizes=listing, meta=meta, progress=progress
                )

            return _from_cache(
                ref,
                cache_dir,
                meta,
                headers=pinned_headers,
                gguf=_gguf_headers(ref.repo_id, commit, listing, meta, progress, online=True),
            )
        from llmfit.sources.revision import cached_unchanged

        # Issue 17: when the cached commit is still the revision's, one light request says so
        # and huggingface_hub is not imported; any other answer fetches as before.
        try:
            remote = cached_unchanged(ref, cache_dir, meta) or hub.fetch_repo(
                ref, cache_dir=cache_dir, meta=meta, progress=progress
            )
        except HubUnreachable as e:
            if find_snapshot(ref, cache_dir) is None:
                raise
            repo = _from_cache(ref, cache_dir, meta)
            note = f"{e.message[:1].upper()}{e.message[1:-1]}; planned from the local cache."
            return _replace(repo, warnings=(*repo.warnings, note))

        def remote_headers(names: tuple[str, ...]) -> list[SafetensorsHeader]:
            return hub.safetensors_headers(
                ref.repo_id,
                remote.commit,
                names,
                sizes=remote.files,
                meta=meta,
                progress=progress,
            )

        return _read_dir(
            remote.snapshot,
            ref.repo_id,
            ref.revision,
            remote.commit,
            "hub",
            headers=remote_headers,
            listing=remote.files,
            gguf=_gguf_headers(ref.repo_id, remote.commit, remote.files, meta, progress, True),
        )
    if revision:
        raise UsageError(f"--revision is for a repository id, not a directory ({ref}).")
    if not ref.is_dir():
        raise ConfigError(f"{ref}: no such directory.")
    return _read_dir(ref, str(ref), None, None, "path")


def _from_cache(
    ref: RepoRef,
    cache_dir: Path | None,
    meta: MetaCache,
    headers: HeaderSource | None = None,
    gguf: RemoteHeaders | None = None,
) -> Repo:
    """A repository from the Hugging Face cache, its headers from llmfit's cache where needed."""
    at = f"@{ref.revision}" if ref.revision else ""
    try:
        snap = require_snapshot(ref, cache_dir)
    except RepoNotFound as e:
        e.hint = f"llmfit {ref.repo_id}{at}  (online, once: it fetches metadata only), or: {e.hint}"
        raise
    # A GGUF-only repository (unsloth's, bartowski's) has no config.json: its files' headers say
    # what the model is, and _read_dir reads them (from disk, or from llmfit's cache).
    listing = meta.listing(ref.repo_id, snap.commit)
    gguf_only = not (snap.path / "config.json").is_file() and (
        any(snap.path.rglob("*.gguf")) or any(n.endswith(".gguf") for n in listing or {})
    )
    if not (snap.path / "config.json").is_file() and not gguf_only:
        raise RepoNotFound(
            f"{ref.repo_id}{at} is in the local Hugging Face cache without its config.json "
            f"(snapshot {snap.commit[:12]}).",
            hint=f"llmfit {ref.repo_id}{at}  (online, once: it fetches metadata only), or: "
            f"hf download {ref.repo_id} --include config.json '*.safetensors.index.json'"
            + (f" --revision {ref.revision}" if ref.revision else ""),
        )

    def cached_headers(names: tuple[str, ...]) -> list[SafetensorsHeader] | None:
        raws = [meta.header(ref.repo_id, snap.commit, n, "safetensors") for n in names]
        found = [
            parse_header(r, f"{ref.repo_id}/{n}")
            for n, r in zip(names, raws, strict=True)
            if r is not None
        ]
        return found if len(found) == len(names) else None

    return _read_dir(
        snap.path,
        ref.repo_id,
        ref.revision,
        snap.commit,
        "cache",
        headers=headers or cached_headers,
        listing=listing,
        gguf=gguf
        or _gguf_headers(ref.repo_id, snap.commit, listing or {}, meta, None, online=False),
    )


def _replace(repo: Repo, **changes: object) -> Repo:
    from dataclasses import replace

    return replace(repo, **changes)  # type: ignore[arg-type]


def _read_dir(
    root: Path,
    repo_id: str,
    revision: str | None,
    commit: str | None,
    source: str,
    *,
    headers: HeaderSource | None = None,
    listing: dict[str, int | None] | None = None,
    gguf: RemoteHeaders | None = None,
) -> Repo:
    cfg_path = root / "config.json"
    if cfg_path.is_symlink() and not cfg_path.exists():
        # The Hugging Face cache links each snapshot file to a blob; a blob deleted by hand (or a
        # cache copied without its blobs) leaves the link pointing nowhere.
        raise ConfigError(
            f"{repo_id}: config.json links to {os.readlink(cfg_path)}, which is not there: the "
            "cache is damaged.",
            hint=f"hf download {repo_id} config.json --force-download",
        )
    ggufs = _gguf_files(root, listing, gguf)
    if not cfg_path.is_file():
        if ggufs and ggufs.first_header is not None:
            # A GGUF-only repository (most of unsloth's and bartowski's): its files' own headers
            # say what the model is.
            from llmfit.sources.gguf import model_from_gguf

            model = model_from_gguf(ggufs.first_header)
            return Repo(repo_id, revision, commit, source, model, ggufs.artifacts, ggufs.warnings)
        raise ConfigError(
            f"{repo_id} has no config.json"
            + (f" in the cached snapshot {commit[:12]}." if commit else f" ({root}).")
        )
    # ModelOpt checkpoints describe their quantisation in hf_quant_config.json instead.
    quant_path = root / "hf_quant_config.json"
    hf_quant = load_config(quant_path) if quant_path.is_file() else None
    model = model_from_config(load_config(cfg_path), cfg_path, hf_quant)
    disagreements: list[str] = []
    art, params, expert_params = _safetensors_artifact(root, model, headers, listing, disagreements)
    if params and not model.params:
        model = _with_params(model, params, expert_params)
    artifacts = ((art,) if art else ()) + (ggufs.artifacts if ggufs else ())
    warnings = (ggufs.warnings if ggufs else ()) + tuple(disagreements)
    if not artifacts:
        missing = (
            f"{repo_id} holds no {INDEX}, {SINGLE} or GGUF file here, so its weights cannot be "
            "sized: only its model is read."
        )
        warnings += (missing,)
    return Repo(repo_id, revision, commit, source, model, artifacts, warnings)


def _gguf_files(
    root: Path,
    listing: dict[str, int | None] | None = None,
    remote: RemoteHeaders | None = None,
):
    """The GGUF artifacts under root and, with `remote`, those the listing names; None when there
    are none (and gguf is not imported)."""
    listed = remote is not None and any(n.endswith(".gguf") for n in listing or {})
    if not listed and not any(root.rglob("*.gguf")):
        return None
    from llmfit.sources.gguf import gguf_artifacts

    return gguf_artifacts(root, listing=listing, remote=remote)


def _gguf_headers(
    repo_id: str,
    commit: str,
    listing: dict[str, int | None] | None,
    meta: MetaCache,
    progress: Progress | None,
    online: bool,
) -> RemoteHeaders:
    """The headers of a repository's GGUF files by name: from llmfit's cache, and online by a
    growing range read of what it lacks (hub.gguf_headers caches the bytes read)."""
    sizes = dict(listing or {})

    def get(names: list[str]) -> dict[str, GgufHeader]:
        from llmfit.sources import hub
        from llmfit.sources.gguf import parse_gguf
        from llmfit.sources.growing import NeedMore

        # A name the listing holds that could not be a file's (../x) is neither asked for nor
        # used as a cache path.
        names = [n for n in names if not any(p in ("", ".", "..") for p in n.split("/"))]

        def parse_for(name: str):
            where, size = f"{repo_id}/{name}", sizes.get(name)
            return lambda raw: parse_gguf(raw, where, size=size)

        if online:
            found = hub.gguf_headers(
                repo_id, commit, names, parse_for=parse_for, sizes=sizes, meta=meta,
                progress=progress,
            )  # fmt: skip
            return dict(zip(names, found, strict=True))
        out = {}
        for name in names:
            raw = meta.header(repo_id, commit, name, "gguf")
            parsed = parse_for(name)(raw) if raw is not None else None
            if parsed is not None and not isinstance(parsed, NeedMore):
                out[name] = parsed
        return out

    return get


def _with_params(model: Model, params: int, expert_params: int) -> Model:
    """The counted parameters, and for a MoE those one token uses: every tensor but the routed
    experts', plus experts_active of every `experts` of those (each expert is the same size)."""
    from dataclasses import replace

    active = None
    if model.is_moe and model.experts_active and expert_params:
        unused = expert_params * (model.experts - model.experts_active) // model.experts
        active = params - unused
    return replace(model, params=params, active_params=active)


def _quant_name(model: Model) -> str | None:
    if model.quantization:
        return model.quantization
    return DTYPE_SHORT.get(model.dtype or "")


def _safetensors_artifact(
    root: Path,
    model: Model,
    source: HeaderSource | None = None,
    listing: dict[str, int | None] | None = None,
    disagreements: list[str] | None = None,
) -> tuple[Artifact | None, int | None, int]:
    """The original weights: bytes from the headers where they are at hand, else the index's.

    Headers are read from the files when they are here, else from `source` (llmfit's metadata
    cache, or the Hub by range). Parameters are counted from the headers when every shard's is at
    hand; otherwise the count stays unknown rather than guessed.
    """
    index_path = root / INDEX
    if index_path.is_file():
        index = read_index(index_path)
        headers = _headers(root, index.shards, source)
        expert_params = 0
        if headers is not None:
            data = sum(h.data_bytes for h in headers)
            params = sum(h.params for h in headers)
            expert_params = sum(h.expert_params for h in headers)
            if (
                index.total_size is not None
                and index.total_size != data
                and disagreements is not None
            ):
                # Some published indexes carry a stale or wrong total_size; the headers are what
                # the engine will load, so they win, and the user is told.
                disagreements.append(
                    f"{INDEX} says metadata.total_size is {index.total_size:,} bytes, but the "
                    f"shards' headers hold {data:,}: the headers are used."
                )
        else:
            if index.total_size is None:
                raise WeightsError(
                    f"{index_path} gives no metadata.total_size and its shards are not at hand, "
                    "so the weights cannot be sized."
                )
            data, params = index.total_size, None
        art = Artifact(
            name="safetensors",
            format="safetensors",
            bytes=data,
            shards=index.shard_count,
            quant=_quant_name(model),
            params=params,
            path=str(root),
        )
        return art, params, expert_params
    single = root / SINGLE
    remote_single = listing is not None and SINGLE in listing and source is not None
    if single.is_file() or remote_single:
        found = _headers(root, (SINGLE,), source)
        if found is None:
            return None, None
        h = found[0]
        art = Artifact(
            name="safetensors",
            format="safetensors",
            bytes=h.data_bytes,
            shards=1,
            quant=_quant_name(model),
            params=h.params,
            path=str(root),
        )
        return art, h.params, h.expert_params
    return None, None, 0


def _headers(
    root: Path, shards: tuple[str, ...], source: HeaderSource | None = None
) -> list[SafetensorsHeader] | None:
    if not shards:
        return None
    if all((root / s).is_file() for s in shards):
        return [read_header(root / s) for s in shards]
    return source(shards) if source is not None else None
