"""The command lines of an option, from its engine's launch, in the format asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmfit.plan.engines import engine
from llmfit.plan.launch import Command

if TYPE_CHECKING:  # an annotation only: the CLI reads FORMATS at start-up
    from llmfit.plan.options import Option

__all__ = ["FORMATS", "Command", "commands"]

# How an option's launch is printed: shell command lines, `docker run` lines, or Kubernetes YAML
# (render/deploy.py, imported only when asked for: it loads a YAML emitter).
FORMATS = ("shell", "docker", "k8s")


def commands(
    o: Option, model_ref: str, revision: str | None = None, ray: bool = False
) -> list[Command]:
    """The processes that run the option, role by role, as its engine spells them."""
    return engine(o.engine).commands(o, model_ref, revision, ray=ray)
