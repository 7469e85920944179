"""A repository, read: its model and the artifacts it offers, wherever it came from."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.errors import (
    BadInputError,
    CacheDamaged,
    CacheUnusable,
    ConfigError,
    HubUnreachable,
    LlmfitError,
    RepoNotFound,
    UsageError,
    WeightsError,
)
from llmfit.plan.artifact import Artifact
from llmfit.plan.launch import quote_exact
from llmfit.plan.model import DTYPE_SHORT, Model
from llmfit.plan.repo import Repo
from llmfit.sources.cache import (
    COMMIT,
    IN_CACHE,
    RepoRef,
    check_revision,
    file_name_problem,
    find_snapshot,
    inside,
    parse_ref,
    require_snapshot,
    show,
)
from llmfit.sources.config import load_config, model_from_config
from llmfit.sources.metacache import MetaCache
from llmfit.sources.safetensors import SafetensorsHeader, parse_header, read_header, read_index

if TYPE_CHECKING:
    from llmfit.sources.gguf import GgufHeader, RemoteHeaders
    from llmfit.sources.hub import Progress

# Headers of the named weight files, wherever they are kept; None when not all of them are at hand.
HeaderSource = Callable[[tuple[str, ...]], "list[SafetensorsHeader] | None"]

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
# GGUF files sit at a repository's top or a folder or two down (unsloth's Q8_0/…-00001-of-00003);
# the walk that finds them stops here, and at this many entries, so that `llmfit /` or a tree
# nested a thousand deep costs a bounded look, not the whole disk.
MAX_WALK_DEPTH = 4
MAX_WALK_ENTRIES = 10_000


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

    ref = parse_ref(text, cache_dir, similar=None if hub.offline(offline) else hub.suggest)
    if revision:
        check_revision(revision, f"--revision {show(revision)}")
    if isinstance(ref, RepoRef):
        if revision:
            if ref.revision and ref.revision != revision:
                raise UsageError(
                    f"{show(text)} names revision {show(ref.revision)} but --revision says "
                    f"{show(revision)}."
                )
            ref = RepoRef(ref.repo_id, revision)
        meta = meta or MetaCache()
        if hub.offline(offline):
            return _from_cache(ref, cache_dir, meta)
        if (
            ref.revision
            and COMMIT.fullmatch(ref.revision)
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
        try:
            remote = hub.fetch_repo(ref, cache_dir=cache_dir, meta=meta, progress=progress)
        except HubUnreachable as e:
            if find_snapshot(ref, cache_dir) is None:
                # Not cached: --offline cannot help, so the hint says what can instead.
                e.hint = _not_cached_hint(e.hint, ref)
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
    try:
        is_dir = ref.is_dir()
    except OSError as e:  # a name too long, a folder that may not be listed
        raise ConfigError(f"{ref}: cannot be read ({e.strerror or e}).") from None
    if not is_dir:
        raise ConfigError(f"{ref}: no such directory.")
    return _read_dir(ref, str(ref), None, None, "path")


def fetch_hint(arg: str) -> str:
    """How to fetch a repository's metadata once with the network, from an offline run: the
    variable that keeps it offline set to 0 in front (issue 34: "online" told no one how), or,
    offline by --offline alone, the command without it."""
    unset = [
        f"{var}=0 "
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
        if os.environ.get(var, "").upper() in ("1", "ON", "YES", "TRUE")
    ]
    return f"{''.join(unset)}llmfit {arg}  (with the network, once: it fetches metadata only)"


def _from_cache(
    ref: RepoRef,
    cache_dir: Path | None,
    meta: MetaCache,
    headers: HeaderSource | None = None,
    gguf: RemoteHeaders | None = None,
) -> Repo:
    """A repository from the Hugging Face cache, its headers from llmfit's cache where needed."""
    at = f"@{ref.revision}" if ref.revision else ""
    # The argument as a printed command takes it: a revision may hold what a shell acts on.
    arg = quote_exact(ref.repo_id + at)
    try:
        snap = require_snapshot(ref, cache_dir)
    except RepoNotFound as e:
        if not (e.hint or "").endswith(IN_CACHE):  # else the cached one meant is the next step
            e.hint = f"{fetch_hint(arg)}, or: {e.hint}"
        raise
    # A GGUF-only repository (unsloth's, bartowski's) has no config.json: its files' headers say
    # what the model is, and _read_dir reads them (from disk, or from llmfit's cache).
    listing = meta.listing(ref.repo_id, snap.commit)
    has_config = _usable(snap.path / "config.json", snap.path.parent.parent, ref.repo_id, "cache")
    gguf_only = not has_config and (
        bool(_local_ggufs(snap.path)) or any(n.endswith(".gguf") for n in listing or {})
    )
    if not has_config and not gguf_only:
        raise RepoNotFound(
            f"{ref.repo_id}{at} is in the local Hugging Face cache without its config.json "
            f"(snapshot {snap.commit[:12]}).",
            hint=f"{fetch_hint(arg)}, or: "
            f"hf download {ref.repo_id} --include config.json '*.safetensors.index.json'"
            + (f" --revision {quote_exact(ref.revision)}" if ref.revision else ""),
        )

    def cached_headers(names: tuple[str, ...]) -> list[SafetensorsHeader] | None:
        found = []
        for name in names:
            raw = meta.header(ref.repo_id, snap.commit, name, "safetensors")
            if raw is None:
                return None
            try:
                found.append(parse_header(raw, f"{ref.repo_id}/{name}"))
            except WeightsError:
                # Bytes that do not parse were not the Hub's answer (llmfit keeps only what
                # parsed): discarded, so the next online run reads the header again.
                meta.discard_header(ref.repo_id, snap.commit, name, "safetensors")
                return None
        return found

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
    boundary = _boundary(root, source)
    has_config = _usable(cfg_path, boundary, repo_id, source)
    ggufs = _gguf_files(root, boundary, repo_id, source, listing, gguf)
    if not has_config:
        if ggufs and ggufs.first_headers:
            # A GGUF-only repository (most of unsloth's and bartowski's): its files' own headers
            # say what the model is.
            from llmfit.sources.gguf import model_from_gguf

            model = model_from_gguf(ggufs.first_headers)
            return Repo(repo_id, revision, commit, source, model, ggufs.artifacts, ggufs.warnings)
        raise ConfigError(
            f"{repo_id} has no config.json"
            + (f" in the cached snapshot {commit[:12]}." if commit else f" ({root}).")
        )
    # ModelOpt checkpoints describe their quantisation in hf_quant_config.json instead.
    quant_path = root / "hf_quant_config.json"
    hf_quant = load_config(quant_path) if _usable(quant_path, boundary, repo_id, source) else None
    model = model_from_config(load_config(cfg_path), cfg_path, hf_quant)
    disagreements: list[str] = []
    usable = _Usable(boundary, repo_id, source)
    art, params, expert_params = _safetensors_artifact(
        root, model, headers, listing, disagreements, usable
    )
    if params and not model.params:
        model = _with_params(model, params, expert_params)
    artifacts = ((art,) if art else ()) + (ggufs.artifacts if ggufs else ())
    warnings = (ggufs.warnings if ggufs else ()) + tuple(disagreements)
    if not artifacts:
        warnings += (sizeless(repo_id),)
    return Repo(repo_id, revision, commit, source, model, artifacts, warnings)


def sizeless(repo_id: str) -> str:
    """The note on a repository that holds its config and no weights' sizes."""
    return (
        f"{repo_id} holds no {INDEX}, {SINGLE} or GGUF file here, so its weights cannot be "
        "sized: only its model is read."
    )


def _boundary(root: Path, source: str) -> Path:
    """What a repository's files may lead into: its own directory, or, for a snapshot of the
    Hugging Face cache (whose files link to ../../blobs), the repository's folder there."""
    if source in ("cache", "hub") or Path(os.path.realpath(root)).parent.name == "snapshots":
        return root.parent.parent
    return root


def _usable(path: Path, boundary: Path, repo_id: str, source: str) -> bool:
    """Whether `path` is a file of the repository to read: False when it is not there.

    A link to a blob that is gone is a damaged cache, said as such (not read as "no such file",
    which would plan without it); a link that leads out of the repository (a cloned repository
    can hold one to ~/.cache/huggingface/token) is refused before anything is read of it.
    """
    try:
        if path.is_symlink() and not path.exists():
            # The Hugging Face cache links each snapshot file to a blob; a blob deleted by hand
            # (or a cache copied without its blobs) leaves the link pointing nowhere.
            hint = None
            if source != "path":
                name = path.relative_to(boundary / "snapshots").as_posix().split("/", 1)[1]
                hint = f"hf download {repo_id} {quote_exact(name)} --force-download"
            raise CacheDamaged(
                f"{repo_id}: {path.name} links to {os.readlink(path)}, which is not there: the "
                "cache is damaged.",
                hint=hint,
            )
        if not path.is_file():
            return False
    except OSError as e:
        cls: type[LlmfitError] = CacheUnusable if source != "path" else ConfigError
        raise cls(f"{path}: cannot be read ({e.strerror or e}).") from None
    if not inside(path, boundary):
        damaged: type[LlmfitError] = CacheDamaged if source != "path" else BadInputError
        raise damaged(
            f"{path} leads to {os.path.realpath(path)}, outside {boundary}: llmfit reads only the "
            "repository's own files."
        )
    return True


@dataclass(frozen=True)
class _Usable:
    """`_usable` with the repository's boundary bound, for the weights' files."""

    boundary: Path
    repo_id: str
    source: str

    def __call__(self, path: Path) -> bool:
        return _usable(path, self.boundary, self.repo_id, self.source)


def _local_ggufs(root: Path) -> list[str]:
    """The *.gguf files under root (relative paths), found by a walk bounded in depth and in
    entries, through no hidden folder and no linked folder."""
    found: list[str] = []
    seen = 0
    deeper = False
    stack: list[tuple[str, int]] = [(str(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_WALK_ENTRIES:
                        raise ConfigError(
                            f"{root} holds more than {MAX_WALK_ENTRIES:,} files and folders "
                            f"within {MAX_WALK_DEPTH} levels: it is not a model repository's "
                            "directory."
                        )
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if depth + 1 < MAX_WALK_DEPTH:
                            stack.append((entry.path, depth + 1))
                        else:
                            deeper = True
                    elif entry.name.endswith(".gguf"):
                        found.append(os.path.relpath(entry.path, root))
        except OSError as e:
            if folder == str(root):
                raise ConfigError(f"{root}: cannot be read ({e.strerror or e}).") from None
    if found and deeper:
        # The GGUF reader walks the whole tree: one nested past any repository's is refused here.
        raise ConfigError(
            f"{root} nests folders more than {MAX_WALK_DEPTH} deep: it is not a model "
            "repository's directory."
        )
    return sorted(found)


def _gguf_files(
    root: Path,
    boundary: Path,
    repo_id: str,
    source: str,
    listing: dict[str, int | None] | None = None,
    remote: RemoteHeaders | None = None,
):
    """The GGUF artifacts under root and, with `remote`, those the listing names; None when there
    are none (and gguf is not imported)."""
    listed = remote is not None and any(n.endswith(".gguf") for n in listing or {})
    local = _local_ggufs(root)
    for rel in local:
        _usable(root / rel, boundary, repo_id, source)
    if not listed and not local:
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
        names = [n for n in names if file_name_problem(n) is None]

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
            try:
                parsed = parse_for(name)(raw) if raw is not None else None
            except WeightsError:
                # Not bytes llmfit kept from the Hub (it keeps only what parsed): discarded, and
                # read as not cached.
                meta.discard_header(repo_id, commit, name, "gguf")
                continue
            if parsed is not None and not isinstance(parsed, NeedMore):
                out[name] = parsed
        return out

    return get


def _with_params(model: Model, params: int, expert_params: int) -> Model:
    """The counted parameters, and for a MoE those one token uses: every tensor but the routed
    experts', plus experts_active of every `experts` of those (each expert is the same size)."""
    from dataclasses import replace

    active = None
    if model.experts and model.experts > 1 and model.experts_active and expert_params:
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
    usable: Callable[[Path], bool] = Path.is_file,
) -> tuple[Artifact | None, int | None, int]:
    """The original weights: bytes from the headers where they are at hand, else the index's.

    Headers are read from the files when they are here, else from `source` (llmfit's metadata
    cache, or the Hub by range). Parameters are counted from the headers when every shard's is at
    hand; otherwise the count stays unknown rather than guessed.
    """
    index_path = root / INDEX
    if usable(index_path):
        index = read_index(index_path)
        headers = _headers(root, index.shards, source, usable)
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
    if usable(single) or remote_single:
        found = _headers(root, (SINGLE,), source, usable)
        if found is None:
            return None, None, 0
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
    root: Path,
    shards: tuple[str, ...],
    source: HeaderSource | None = None,
    usable: Callable[[Path], bool] = Path.is_file,
) -> list[SafetensorsHeader] | None:
    if not shards:
        return None
    if all([usable(root / s) for s in shards]):
        return [read_header(root / s) for s in shards]
    return source(shards) if source is not None else None


def _not_cached_hint(hint: str | None, ref: RepoRef) -> str:
    """The hint of a Hub that could not be asked, for a repository not in the cache: its own
    advice (try again later, a longer timeout) kept, its `--offline` (which would find nothing)
    replaced by the way to have the metadata from a machine that reaches the Hub."""
    from llmfit.sources import hub

    offline = hub.offline_hint(ref)
    kept = (hint or "").replace(f", or: {offline}", "").replace(offline, "").strip(" ,;")
    revision = f" --revision {quote_exact(ref.revision)}" if ref.revision else ""
    fetch = (
        f"where the Hub can be reached: hf download {quote_exact(ref.repo_id)}{revision} "
        "--include config.json '*.safetensors.index.json', then copy the cache here"
    )
    return (
        f"{kept}, or {fetch}"
        if kept
        else f"check the network, HF_ENDPOINT and any proxy, or {fetch}"
    )
