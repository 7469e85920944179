"""The command lines of an option, from its engine's launch, in the format asked for.

A printed command is its argv words quoted once from their exact characters (Command.shell); a
word that cannot be printed exactly is refused (render/safe.py `check_words`), never cleaned:
the line a user pastes or pipes to `sh` runs the planned program with the planned words, or is
not printed at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmfit.plan.engines import engine
from llmfit.plan.launch import PLATFORMS, Command
from llmfit.render.safe import check_words

if TYPE_CHECKING:  # an annotation only: the CLI reads FORMATS at start-up
    from llmfit.plan.advice import Advice
    from llmfit.plan.options import Option

__all__ = [
    "CONTAINER_FORMATS",
    "FORMATS",
    "Command",
    "bench_line",
    "command_text",
    "commands",
    "scale_line",
]

# How an option's launch is printed: shell command lines, `docker run` lines, or Kubernetes YAML
# (render/deploy.py, built on this module's commands; render/launch.py picks between them); and,
# of a disaggregated option, the specs of the platforms that run prefill and decode
# (render/platforms.py: llm-d's modelservice values, KServe's LLMInferenceService, Dynamo's
# DynamoGraphDeployment).
CONTAINER_FORMATS = ("shell", "docker", "k8s")
FORMATS = (*CONTAINER_FORMATS, *PLATFORMS)


def commands(
    o: Option, model_ref: str, revision: str | None = None, ray: bool = False
) -> list[Command]:
    """The processes that run the option, role by role, as its engine spells them."""
    return engine(o.engine).commands(o, model_ref, revision, ray=ray)


def command_text(cmd: Command, encoding: str | None = None) -> str:
    """The command as one shell line, every word exact, or UnprintableCommand."""
    check_words(cmd.words, encoding)
    return cmd.shell


def scale_line(o: Option) -> str | None:
    """The comment over a launch of several copies: how many, and the load each carries."""
    n = o.launched
    if n <= 1:
        return None
    sv = o.serving
    where = engine(o.engine).where(o)
    if sv is None or not sv.workload.load or sv.replicas is None:
        return f"{n} replicas of {where}, as --replicas asked"
    w = sv.workload
    if w.concurrency is not None:
        each = f"{w.concurrency / n:.3g} requests in flight"
        load = f"{w.concurrency:g} requests in flight"
    elif w.requests is not None:
        # --requests N: a burst sent at once, split over the copies as a load balancer would
        each = f"{w.requests / n:.3g} of them"
        load = f"{w.requests:,} requests sent at once"
    else:
        each = f"{(w.rate or 0.0) / n:.3g} requests a second"
        load = f"{w.rate:g} requests a second"
    need = "" if n == sv.replicas else f" (the plan sized {sv.replicas} for it: --replicas {n})"
    short = (
        f"; the fleet's cards run only {o.fleet_replicas}"
        if not o.cpu and n > o.fleet_replicas
        else ""
    )
    return f"{n} replicas of {where} for {load}{need}: each carries {each}{short}"


def bench_line(advice: Advice, o: Option, encoding: str | None = None) -> str | None:
    """The benchmark that checks the option's serving figure, as a commented shell line (plan/
    bench.py); None where the option has no serving figure to check."""
    from llmfit.plan.engines.bench import bench

    b = bench(o, advice.repo.id)
    if b is None:
        return None
    check_words(b.command.words, encoding)
    return f"# measure it: {b.line}"
