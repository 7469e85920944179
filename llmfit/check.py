"""`llmfit check`: a command line a user already has, planned exactly as it stands (no printing).

The engine that the command starts reads its own flags back (plan/engines/*_command.py) into the
repository, the settings and the exact layout; the plan then sizes that layout, and only that
layout, on the fleet's cards.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.advise import advise
from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.artifact import Artifact
from llmfit.plan.engines import Request, for_argv, keys, registered, split_env
from llmfit.plan.fleet import Fleet
from llmfit.plan.launch import Given
from llmfit.plan.settings import MAX_CONTEXT, PlanSettings, Workload

if TYPE_CHECKING:
    from llmfit.sources.hub import Progress


@dataclass(frozen=True)
class Checked:
    argv: tuple[str, ...]
    request: Request
    advice: Advice

    @property
    def fits(self) -> bool:
        return bool(self.advice.plan.options)

    @property
    def serves(self) -> bool | None:
        """Whether one server of the command serves the named load within its targets; None
        where no load is named, the command does not fit, or its speed is not known."""
        if not self.fits:
            return None
        sv = self.advice.plan.options[0].serving
        if sv is None or not sv.workload.load:
            return None
        return sv.meets and sv.replicas == 1


def check(
    argv: Sequence[str],
    fleet: Fleet,
    *,
    offline: bool | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    options: tuple[object, ...] = (),
    workload: Workload | None = None,
) -> Checked:
    """Plan the command `argv` exactly; `options` are engine settings of llmfit's own that no
    command carries (`--vllm-version`: the release the command runs on)."""
    env, words = split_env(argv)
    engine = for_argv(words)
    if engine is None:
        first = words[0] if words else ""
        usages = [registered(k).usage for k in keys() if registered(k).usage]
        ways = ", ".join(usages[:-1]) + (" or " if len(usages) > 1 else "") + usages[-1]
        raise UsageError(
            f"{first!r} is not a command llmfit can check: give one that starts {ways}.",
            hint="llmfit check --fleet 2xh100-80g -- vllm serve openai/gpt-oss-20b "
            "--tensor-parallel-size 2",
        )
    defaults = PlanSettings(engine_options=options, workload=workload or Workload())
    try:
        request = engine.read_command(words, defaults, env)
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

    elif request.quant:
        quant = request.quant.upper()

        def keep(a: Artifact) -> bool:
            return (a.quant or "").upper() == quant

    given = Given(request.argv or tuple(words), tuple(env.items()), request.secrets)
    settings = replace(request.settings, given=given)
    advice = advise(repo, fleet, settings, cache_dir, offline=offline, progress=progress, keep=keep)
    plan = advice.plan
    if request.on_cards and any(o.cpu for o in plan.options):
        # A command that puts layers on the cards is answered on the cards: where they do not
        # hold them, it does not fit (issue 34: `-ngl 40` was answered "fits: no cards of a
        # CPU"), whatever the CPU alone could do.
        plan = replace(plan, options=tuple(o for o in plan.options if not o.cpu))
        advice = replace(advice, plan=plan)
    # What is shown of the command is what is launched: its credentials as "$VARIABLE".
    shown = (*(f"{k}={v}" for k, v in env.items()), *given.argv)
    return Checked(shown, request, advice)
