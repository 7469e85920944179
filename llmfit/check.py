"""`llmfit check`: a command line a user already has, planned exactly as it stands (no printing).

The engine that the command starts reads its own flags back (plan/engines/*_command.py) into the
repository, the settings and the exact layout; the plan then sizes that layout, and only that
layout, on the fleet's cards.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.advise import advise
from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.artifact import Artifact
from llmfit.plan.engines import Request, for_argv
from llmfit.plan.fleet import Fleet
from llmfit.plan.settings import MAX_CONTEXT, PlanSettings, VllmOptions, Workload

if TYPE_CHECKING:
    from llmfit.sources.hub import Progress

# llama-server's -hf picks this quant when the tag names none (common/arg.cpp).
LLAMACPP_DEFAULT_QUANT = "Q4_K_M"


@dataclass(frozen=True)
class Checked:
    argv: tuple[str, ...]
    request: Request
    advice: Advice

    @property
    def fits(self) -> bool:
        return bool(self.advice.plan.options)


def check(
    argv: Sequence[str],
    fleet: Fleet,
    *,
    offline: bool | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    vllm_version: str | None = None,
    workload: Workload | None = None,
) -> Checked:
    engine = for_argv(argv)
    if engine is None:
        first = argv[0] if argv else ""
        raise UsageError(
            f"{first!r} is not a command llmfit can check: give one that starts "
            "`vllm serve REPO …`, `sglang serve --model-path REPO …` (or `python -m "
            "sglang.launch_server …`) or `llama-server -m FILE …`/`llama-server -hf REPO:QUANT …`.",
            hint="llmfit check --fleet 2xh100-80g -- vllm serve openai/gpt-oss-20b "
            "--tensor-parallel-size 2",
        )
    defaults = PlanSettings(vllm=VllmOptions(version=vllm_version), workload=workload or Workload())
    try:
        request = engine.read_command(argv, defaults)
    except ValueError as e:
        raise UsageError(f"the command to check: {e}") from None
    context = request.settings.context
    if context is not None and context > MAX_CONTEXT:
        raise UsageError(
            f"the command to check: its context of {context:,} tokens is more than the "
            f"{MAX_CONTEXT:,} llmfit plans for."
        )
    repo = request.repo
    keep = None
    if request.path:
        file = Path(request.path).expanduser()
        if not file.is_file():
            raise UsageError(f"the command's model file {request.path!r} is not here.")
        repo = str(file.parent.resolve())
        target = os.path.realpath(file)

        def keep(a: Artifact) -> bool:
            return a.path is not None and os.path.realpath(a.path) == target

    elif engine.key == "llama.cpp":
        quant = (request.quant or LLAMACPP_DEFAULT_QUANT).upper()

        def keep(a: Artifact) -> bool:
            return (a.quant or "").upper() == quant

    advice = advise(
        repo, fleet, request.settings, cache_dir, offline=offline, progress=progress, keep=keep
    )
    return Checked(tuple(argv), request, advice)
