"""Where the workers of a disaggregated unit run, for the engines' role launches
(vllm_disagg.py, sglang_disagg.py): each worker's host, cards and port, and the router's.

A unit that fits one node (its KV over the node's own link) runs there, each worker on its own
cards (CUDA_VISIBLE_DEVICES), prefill workers first; a wider one puts each worker on a node of
its own, named for its role ("prefill-1", "decode-2": the address each worker is reached at,
which the user's hosts or a Kubernetes Service answers to).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmfit.plan.launch import Command

# The ports the workers listen on: prefill workers from 8100, decode workers from 8200, so that
# workers sharing a node do not collide; the router on the engines' usual 8000.
PREFILL_PORT = 8100
DECODE_PORT = 8200
ROUTER_PORT = 8000


@dataclass(frozen=True)
class Worker:
    """One prefill or decode server of a disaggregated launch, where it runs and its port."""

    role: str  # "prefill" or "decode"
    index: int  # from 1 within its role
    host: str  # "localhost" on a one-node unit, else its role's name ("prefill-1")
    devices: str | None  # CUDA_VISIBLE_DEVICES on a one-node unit ("0,1"); None: the node's
    port: int

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def workers(offer: Any, apart: bool = False) -> list[Worker]:
    """The unit's workers, prefill first, placed as the module says; `apart`: each on a host of
    its own whatever the link (a Kubernetes pod is one, with its own address)."""
    unit = offer.result.unit
    one_node = offer.result.transfer.link.kind == "node" and not apart
    out: list[Worker] = []
    card = 0
    for role, count, cards, base in (
        ("prefill", unit.prefill_workers, unit.prefill_cards, PREFILL_PORT),
        ("decode", unit.decode_workers, unit.decode_cards, DECODE_PORT),
    ):
        for i in range(1, count + 1):
            devices = None
            if one_node:
                devices = ",".join(str(c) for c in range(card, card + cards))
                card += cards
            host = "localhost" if one_node else f"{role}-{i}"
            out.append(Worker(role, i, host, devices, base + i - 1))
    return out


def with_value(argv: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    """`argv` with `flag` set to `value`: in place where the serve line already gives it (an
    engine's `--port 30000`), else added at the end."""
    words = list(argv)
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            words[i + 1] = value
            return tuple(words)
        if word.startswith(flag + "="):
            words[i] = f"{flag}={value}"
            return tuple(words)
    return (*words, flag, value)


def value(words: Sequence[str], flag: str) -> str | None:
    """The last value a command gives `flag` (`--flag value` or `--flag=value`), as argparse
    keeps the last; None where it gives none."""
    found = None
    for i, w in enumerate(words):
        if w == flag and i + 1 < len(words):
            found = words[i + 1]
        elif w.startswith(flag + "="):
            found = w[len(flag) + 1 :]
    return found


# An engine's reading of a command's role in a pair: its words and the side it is given as
# ("prefill" or "decode"), to why it cannot be that side (None where it can).
Role = Callable[[Sequence[str], str], "str | None"]


def role_refusal(engine: Any, words: Sequence[str], side: str) -> str | None:
    """Why a command of `engine` cannot be the `side` of a disaggregated pair, as the engine reads
    its role from its own flags (PairRules.role); None where it can."""
    rules = engine.layouts.pairs
    if rules is None or not rules.role:
        return f"{engine.name} launches no disaggregated prefill and decode"
    module, _, name = rules.role.partition(":")
    said: Role = getattr(import_module(module), name)
    return said(words, side)


# An engine's role launch: the prefill option's serve line, the decode option's, the offer and
# its workers, to every role's command (each worker's, then the router's).
Roles = Callable[["Command", "Command", Any, list[Worker]], list["Command"]]


def pair_commands(
    engine: Any, offer: Any, repo_id: str, revision: str | None, apart: bool = False
) -> list[Command]:
    """The launch of a disaggregated offer by its engine: each role's command line (`apart`:
    each worker on a host of its own, `workers`)."""
    rules = engine.layouts.pairs
    module, _, name = rules.launch.partition(":")
    roles: Roles = getattr(import_module(module), name)
    prefill = engine.commands(offer.prefill, repo_id, revision)[0]
    decode = engine.commands(offer.decode, repo_id, revision)[0]
    return roles(prefill, decode, offer, workers(offer, apart))


def router_package(engine: Any) -> str:
    """The PyPI package (pinned) of the router an engine's disaggregated launch writes: what a
    container that runs it installs (`ROUTER_PACKAGE` of the engine's launch module)."""
    module, _, _ = engine.layouts.pairs.launch.partition(":")
    return str(import_module(module).ROUTER_PACKAGE)
