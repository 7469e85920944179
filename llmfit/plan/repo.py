"""Repo: a repository, read: its model and the artifacts it offers, wherever it came from."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.artifact import Artifact
from llmfit.plan.model import Model


@dataclass(frozen=True)
class Repo:
    """A repository as read: where from, the model its config describes, its artifacts."""

    id: str
    revision: str | None
    commit: str | None
    source: str  # "cache", "hub" or "path"
    model: Model
    artifacts: tuple[Artifact, ...]
    warnings: tuple[str, ...] = ()
