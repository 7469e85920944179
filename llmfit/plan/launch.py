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
    # Words of argv that are a credential the user keeps in the environment: (index, variable).
    # The word itself is "$VARIABLE"; a shell expands it, and nothing llmfit prints holds the
    # credential (a checked command's --api-key, --hf-token).
    secrets: tuple[tuple[int, str], ...] = ()

    @property
    def shell(self) -> str:
        """The command for a POSIX shell: each value quoted, variables in front, a credential
        as a reference to the variable that holds it ("$VLLM_API_KEY")."""
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        refs = dict(self.secrets)
        words = " ".join(
            f'"${refs[i]}"' if i in refs else shlex.quote(w) for i, w in enumerate(self.argv)
        )
        return f"{prefix} {words}" if prefix else words


@dataclass(frozen=True)
class Given:
    """A command a user already has (`llmfit check -- …`), which its launch runs as given: the
    words, the environment set in front of them, and which words are credentials (each in place
    as "$VARIABLE", see Command.secrets)."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    secrets: tuple[tuple[int, str], ...] = ()
