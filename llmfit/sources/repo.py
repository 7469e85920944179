"""A repository, read: its model and the artifacts it offers, wherever it came from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmfit.errors import ConfigError, WeightsError
from llmfit.plan.artifact import Artifact
from llmfit.plan.model import DTYPE_SHORT, Model
from llmfit.sources.cache import RepoRef, parse_ref, require_snapshot
from llmfit.sources.config import load_config, model_from_config
from llmfit.sources.safetensors import SafetensorsHeader, read_header, read_index

INDEX = "model.safetensors.index.json"
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


def load_repo(text: str, cache_dir: Path | None = None) -> Repo:
    """Read a repository id (from the cache) or a local directory into a Repo."""
    ref = parse_ref(text)
    if isinstance(ref, RepoRef):
        snap = require_snapshot(ref, cache_dir)
        return _read_dir(snap.path, ref.repo_id, ref.revision, snap.commit, "cache")
    if not ref.is_dir():
        raise ConfigError(f"{ref}: no such directory.")
    return _read_dir(ref, str(ref), None, None, "path")


def _read_dir(
    root: Path, repo_id: str, revision: str | None, commit: str | None, source: str
) -> Repo:
    cfg_path = root / "config.json"
    ggufs = _gguf_files(root)
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
    art, params, expert_params = _safetensors_artifact(root, model)
    if params and not model.params:
        model = _with_params(model, params, expert_params)
    artifacts = ((art,) if art else ()) + (ggufs.artifacts if ggufs else ())
    warnings = ggufs.warnings if ggufs else ()
    if not artifacts:
        missing = (
            f"{repo_id} holds no {INDEX}, {SINGLE} or GGUF file here, so its weights cannot be "
            "sized: only its model is read."
        )
        warnings += (missing,)
    return Repo(repo_id, revision, commit, source, model, artifacts, warnings)


def _gguf_files(root: Path):
    """The GGUF artifacts under root, or None when it has no `*.gguf` (gguf is not imported)."""
    if not any(root.rglob("*.gguf")):
        return None
    from llmfit.sources.gguf import gguf_artifacts

    return gguf_artifacts(root)


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


def _safetensors_artifact(root: Path, model: Model) -> tuple[Artifact | None, int | None, int]:
    """The original weights: bytes from the headers where the files are here, else the index's.

    Parameters are counted from the headers when every shard is at hand; a repository cached for
    planning usually holds only the index, and then the count stays unknown rather than guessed.
    """
    index_path = root / INDEX
    if index_path.is_file():
        index = read_index(index_path)
        headers = _headers(root, index.shards)
        expert_params = 0
        if headers is not None:
            data = sum(h.data_bytes for h in headers)
            params = sum(h.params for h in headers)
            expert_params = sum(h.expert_params for h in headers)
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
    if single.is_file():
        h = read_header(single)
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


def _headers(root: Path, shards: tuple[str, ...]) -> list[SafetensorsHeader] | None:
    if not shards or not all((root / s).is_file() for s in shards):
        return None
    return [read_header(root / s) for s in shards]
