"""Advice: the main job's answer, a repository planned on a fleet, for the renderers."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.fleet import Fleet
from llmfit.plan.planner import Plan
from llmfit.plan.repo import Repo


@dataclass(frozen=True)
class Advice:
    """A plan with the repository and the fleet it was made for: what every renderer is given."""

    repo: Repo
    fleet: Fleet
    plan: Plan
