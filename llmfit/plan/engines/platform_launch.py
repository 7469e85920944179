"""What the platforms that run disaggregated prefill and decode (`--format llm-d`, `kserve`,
`dynamo`) start of a disaggregated offer, engine by engine: each role's container (image,
command, arguments, environment, port), from the roles' own commands (disagg_launch.py), and
the platform's names for the engine where it has some (Dynamo's `backendFramework`, its worker
services' keys).

An engine says what each platform runs of its launch in its disaggregated launch module's
`PLATFORMS` (vllm_platforms.py, sglang_platforms.py): a function per platform that it runs, from
the role's command to the role's container. A platform it does not run is refused in one sentence
(`refusal`), never written as something else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from llmfit.errors import UsageError
from llmfit.plan.engines.disagg_launch import pair_commands
from llmfit.plan.launch import PLATFORMS as PLATFORMS  # the formats, as `--format` spells them

if TYPE_CHECKING:
    from llmfit.plan.launch import Command

# The role of an aggregated option's server (prefill and decode in one).
AGGREGATED = "aggregated"


@dataclass(frozen=True)
class RoleContainer:
    """One role's container on a platform: every pod of the role runs it."""

    role: str  # "prefill" or "decode", or AGGREGATED: one server that does both
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    # Environment as the role's command sets it (name, value), less what the platform sets.
    env: tuple[tuple[str, str], ...]
    # Variables whose value is the pod's own address (NIXL's side channel host): the pod's IP.
    pod_ip: tuple[str, ...] = ()
    # The port it serves HTTP on, where the platform's router calls it (None: it serves none).
    port: int | None = None


@dataclass(frozen=True)
class PlatformRun:
    """A disaggregated offer as a platform runs it: the two roles' containers, prefill first,
    and the platform's names for the engine."""

    platform: str
    # Prefill's and decode's; an aggregated option's one server's alone.
    roles: tuple[RoleContainer, ...]
    # Dynamo's name for the engine (`spec.backendFramework`) and its runtime image, which runs
    # the Frontend too; empty on the other platforms.
    backend: str = ""
    frontend_image: str = ""
    # Dynamo's keys for the roles' services (its own examples' names).
    services: tuple[str, ...] = ("prefill", "decode")


# An engine's platform launch: the role, its command (the role's first worker's, each worker on
# a host of its own) and the role's option, to the role's container; `PlatformRun` fields other
# than the roles come from `Platform`.
Container = Callable[[str, "Command", Any], RoleContainer]


@dataclass(frozen=True)
class Platform:
    """What an engine's launch module says it runs on a platform."""

    container: Container
    backend: str = ""
    frontend_image: str = ""
    services: tuple[str, str] = ("prefill", "decode")
    # Dynamo's key for an aggregated option's worker service (its own agg examples' name).
    aggregated_service: str = "worker"


# Per engine: the platforms it runs, or, for one it does not, the sentence that says why.
Platforms = Mapping[str, "Platform | str"]


def _table(engine: Any) -> Platforms:
    pairs = engine.layouts.pairs
    if pairs is None or not pairs.launch:
        return {}
    module, _, _ = pairs.launch.partition(":")
    table: Platforms = getattr(import_module(module), "PLATFORMS", {})
    return table


def refusal(engine: Any, platform: str) -> str | None:
    """Why `platform` runs none of the engine's launches; None where it runs them."""
    found = _table(engine).get(platform)
    if isinstance(found, Platform):
        return None
    return found or f"--format {platform} has no launch of {engine.name}'s servers."


def platform_run(
    engine: Any, offer: Any, repo_id: str, revision: str | None, platform: str
) -> PlatformRun:
    """The offer's roles as `platform` runs them (`refusal` is None for it)."""
    found = _table(engine)[platform]
    assert isinstance(found, Platform), found
    cmds = pair_commands(engine, offer, repo_id, revision, apart=True)
    if any(c.secrets for c in cmds):
        raise UsageError("a disaggregated launch holds no credential word.")
    first = {c.role: c for c in reversed(cmds)}
    prefill = found.container("prefill", first["prefill"], offer.prefill)
    decode = found.container("decode", first["decode"], offer.decode)
    return PlatformRun(platform, (prefill, decode), found.backend, found.frontend_image,
                       found.services)  # fmt: skip


def aggregated_run(engine: Any, o: Any, command: Command, platform: str) -> PlatformRun:
    """An aggregated option's one server (its single command) as `platform` runs it
    (`refusal` is None for it)."""
    found = _table(engine)[platform]
    assert isinstance(found, Platform), found
    if command.secrets:
        raise UsageError(
            f"--format {platform} writes no credential, and the command holds one; --format k8s "
            "reads it from a Secret."
        )
    rc = found.container(AGGREGATED, command, o)
    return PlatformRun(platform, (rc,), found.backend, found.frontend_image,
                       (found.aggregated_service,))  # fmt: skip


def without(argv: tuple[str, ...], flags: frozenset[str]) -> tuple[str, ...]:
    """`argv` less each of `flags` and its value (`--flag value` or `--flag=value`)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in flags:
            i += 2
            continue
        if word.split("=", 1)[0] in flags and "=" in word:
            i += 1
            continue
        out.append(word)
        i += 1
    return tuple(out)
