"""Command: one process to start, as an engine spells it, for render to print in any format.

And the one rule for showing a command's words: a word is quoted once, with `shlex.quote`, from
its exact characters, and a word that holds a character a terminal acts on or does not show as
itself (a control, a format or bidi character, a line separator, a lone surrogate standing for a
byte that is not UTF-8) is never changed to make it printable: render refuses to print such a
command (`unshowable`), and a hint on stderr writes it in the `$'…'` form that bash, zsh and ksh
read back to the exact bytes (`quote_exact`).
"""

from __future__ import annotations

import shlex
import unicodedata
from dataclasses import dataclass

from llmfit.plan.credentials import FROM_CALLER

# The platforms a disaggregated offer's launch is written for (`--format`; plan/engines/
# platform_launch.py writes them): named here, where the CLI reads them at start-up, so that a
# plan that writes none does not import what writes them.
PLATFORMS = ("llm-d", "kserve", "dynamo")

# Unicode's general categories whose characters a terminal acts on or shows as something other
# than themselves: controls (C0, DEL, C1: escape sequences start here), format characters (bidi
# embeddings, overrides and isolates, zero-width characters, the byte-order mark), surrogates (the
# bytes of a name that is not UTF-8, as Python's surrogateescape holds them), line and paragraph
# separators, and unassigned code points (which a later Unicode may make any of these).
UNSHOWN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Cn"})


def unshown(ch: str) -> bool:
    """Whether a terminal would not show `ch` as itself."""
    return unicodedata.category(ch) in UNSHOWN


def unshowable(word: str) -> tuple[int, str] | None:
    """The first character of `word` a terminal would not show as itself, and where; None when
    every character shows as itself."""
    for i, ch in enumerate(word):
        if unicodedata.category(ch) in UNSHOWN:
            return i, ch
    return None


def quote_exact(word: str) -> str:
    """`word` for a shell, to be read back to its exact bytes: `shlex.quote` when every character
    shows as itself, else the `$'…'` form with each byte that does not written as `\\ooo` (octal,
    three digits, so that no digit after it is read as part of it)."""
    if unshowable(word) is None:
        return shlex.quote(word)
    out = []
    for ch in word:
        if ch in "\\'":
            out.append("\\" + ch)
        elif unshown(ch):
            try:
                raw = ch.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:  # a surrogate that stands for no byte (a JSON escape)
                raw = ch.encode("utf-8", "surrogatepass")
            out.extend(f"\\{b:03o}" for b in raw)
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


@dataclass(frozen=True)
class Command:
    """One process of a launch: its words, the node it runs on, its environment."""

    # "all" on one node; "head" and "worker" across several; "replica" for one of several
    # independent servers on a node.
    role: str
    argv: tuple[str, ...]
    node: str | None = None
    # Environment the process needs (name, value), set in front of it; a credential's value is
    # FROM_CALLER: the process gets the variable of that name from its caller (or a Secret).
    env: tuple[tuple[str, str], ...] = ()
    # Words of argv that are a credential the user keeps in the environment: (index, variable).
    # The word itself is "$VARIABLE", after the literal `--flag=` where the flag was given inline
    # (`reference`); a shell expands it, and nothing llmfit prints holds the credential
    # (llmfit/plan/credentials.py). Only these words are references: a word of the user's that
    # merely reads "$VLLM_API_KEY" is passed on as those characters.
    secrets: tuple[tuple[int, str], ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        """Every word of the command line, the environment's `NAME=value` first (a credential's
        `NAME=$NAME`)."""
        return (*(f"{k}=${k}" if v == FROM_CALLER else f"{k}={v}" for k, v in self.env), *self.argv)

    def reference(self, i: int) -> tuple[str, str] | None:
        """Of a word that is a credential's: the literal text in front of it (`--api-key=`, or
        "") and the variable that holds it; None for any other word."""
        var = dict(self.secrets).get(i)
        if var is None:
            return None
        return self.argv[i][: len(self.argv[i]) - len(var) - 1], var

    @property
    def shell(self) -> str:
        """The command for a POSIX shell, as data: each word quoted once (`shlex.quote`) from its
        exact characters, variables in front (`NAME='value'`, which a shell reads as one
        assignment), a credential as a reference to the variable that holds it ("$VLLM_API_KEY").
        What may be printed to a terminal is render's to decide."""
        prefix = " ".join(
            f'{k}="${k}"' if v == FROM_CALLER else f"{k}={shlex.quote(v)}" for k, v in self.env
        )
        if self.secrets:
            words = " ".join(self._shell_word(i) for i in range(len(self.argv)))
        else:  # no credential among the words (the common case: a --json plan quotes thousands)
            words = " ".join(map(shlex.quote, self.argv))
        return f"{prefix} {words}" if prefix else words

    def _shell_word(self, i: int) -> str:
        ref = self.reference(i)
        if ref is None:
            return shlex.quote(self.argv[i])
        lead, var = ref
        # The literal text quoted, the variable expanded in double quotes: one word to a shell.
        return (shlex.quote(lead) if lead else "") + f'"${var}"'


@dataclass(frozen=True)
class Given:
    """A command a user already has (`llmfit check -- …`), which its launch runs as given: the
    words, the environment set in front of them, and which words are credentials (each in place
    as "$VARIABLE", see Command.secrets)."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    secrets: tuple[tuple[int, str], ...] = ()
