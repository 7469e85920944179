"""Command: one process to start, as an engine spells it, for render to print in any format."""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    # "all" on one node; "head" and "worker" across several; "replica" for one of several
    # independent servers on a node.
    role: str
    argv: tuple[str, ...]
    node: str | None = None
    # Environment the process needs (name, value), set in front of it.
    env: tuple[tuple[str, str], ...] = ()

    @property
    def shell(self) -> str:
        """The command for a POSIX shell: each value quoted, variables in front."""
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        return f"{prefix} {shlex.join(self.argv)}" if prefix else shlex.join(self.argv)
