"""Reading an engine's command line back (`llmfit check -- …`): the walk over its words that every
engine's reader makes, and the numbers they parse alike.

The engines differ in their flags, not in how a command line is split into them: each flag table
(which flags take a value, which are switches, which only shape a launch) stays with its engine's
reader, as do the rules that are an engine's own (vLLM's and SGLang's token suffixes, the range of
a memory share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from llmfit.plan.credentials import Vault, base_for, secret_name


@dataclass
class Words:
    """A command line's words, sorted by what the engine's flag tables make of them."""

    # A valued flag's key (from the table) → its value, the last one given winning.
    got: dict[str, str] = field(default_factory=dict)
    # The keys of the switches given → the value each sets (a negation sets False), the last
    # one given winning, as argparse keeps.
    on: dict[str, bool] = field(default_factory=dict)
    # Flags llmfit does not model, each with the value that followed it, as given.
    ignored: list[str] = field(default_factory=list)
    # Words that are no flag's (a model named in front).
    positional: list[str] = field(default_factory=list)


def scan(
    args: Sequence[str],
    valued: Mapping[str, str],
    switches: Mapping[str, str | tuple[str, bool]],
    launch_only: Set[str],
    launch_switches: Set[str],
    *,
    positional: bool = True,
) -> Words:
    """The words after the program, by the engine's tables: `--flag value` and `--flag=value`
    for a valued flag; launch-only flags passed over with their value; any other flag kept as
    ignored, with the word after it where that is not a flag (it takes a value, as far as can be
    told without the engine's parser).

    `positional=False` is for an engine that names its model by a flag only (llama-server): a
    bare word is then read as an unknown flag would be, not set aside as the model.
    """
    out = Words()
    i = 0
    while i < len(args):
        a = args[i]
        flag, eq, inline = a.partition("=")
        if positional and (not a.startswith("-") or a == "-"):
            out.positional.append(a)
            i += 1
            continue
        if flag in valued:
            if eq:
                value = inline
            elif i + 1 < len(args):
                value = args[i + 1]
                i += 1
            else:
                raise ValueError(f"{flag} needs a value.")
            out.got[valued[flag]] = value
        elif flag in switches:
            key = switches[flag]
            if isinstance(key, str):
                out.on[key] = True
            else:
                out.on[key[0]] = key[1]
        elif flag in launch_only:
            if not eq and flag not in launch_switches and i + 1 < len(args):
                i += 1
        elif not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.ignored.append(f"{flag} {args[i + 1]}")
            i += 1
        else:
            out.ignored.append(a)
        i += 1
    return out


# No count an engine flag gives (tokens, sequences, ranks, bytes) is past this; a number past it
# is refused before the plan computes with it (10**40 prefill tokens overflowed a C size).
MOST = 1 << 50


def whole(flag: str, value: str, *, zero: bool = False) -> int:
    """A flag's whole number: positive, or (`zero`) 0 or more, and at most MOST."""
    if len(value) > 20:  # before int(): a 5,000-digit number costs no conversion
        raise ValueError(f"{flag} {value[:24]!r}… is past {MOST:,}, no count an engine takes.")
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{flag} {value!r} is not a whole number.") from None
    if n < 0 or (n == 0 and not zero):
        raise ValueError(f"{flag} {value!r} must be {'0 or more' if zero else 'positive'}.")
    if n > MOST:
        raise ValueError(f"{flag} {value!r} is past {MOST:,}, no count an engine takes.")
    return n


def number(flag: str, value: str) -> float:
    """A flag's number, as the engine's float() reads it; its range is the engine's to check."""
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{flag} {value!r} is not a number.") from None


def mask(
    program: Sequence[str],
    words: Sequence[str],
    vault: Vault,
    named: Mapping[str, str],
    prefix: str,
) -> tuple[tuple[str, ...], tuple[tuple[int, str], ...]]:
    """The whole command as it is to be launched (`program`, then `words`) with each credential's
    value (llmfit/plan/credentials.py) in place as "$VARIABLE", and where (index, variable), for
    an engine whose flags take one word each: the value of a flag whose name says it is one
    (`named`: exact spellings → the variable the engine reads it from; any other such flag's from
    `prefix` and its name), inline (`--api-key=K`) or the word after it, and any word that holds
    one inside it."""
    out: list[str] = list(program)
    refs: list[tuple[int, str]] = []
    taking: str | None = None
    last: str | None = None

    def put(lead: str, value: str, base: str) -> None:
        var = vault.variable(value, base)
        refs.append((len(out), var))
        out.append(f"{lead}${var}")

    for w in words:
        if taking is not None:
            put("", w, taking)
            taking = None
            continue
        name, eq, value = w.partition("=")
        flag = w.startswith("-") and w != "-"
        if flag and (name in named or secret_name(name)):
            base = named.get(name) or base_for(prefix, name)
            if eq and value:
                put(name + "=", value, base)
            else:
                out.append(w)
                taking = None if eq else base
            last = name
            continue
        if flag and eq and vault.holds(value):
            put(name + "=", value, "HF_TOKEN" if value in vault.known else base_for(prefix, name))
        elif not flag and vault.holds(w):
            put("", w, "HF_TOKEN" if w in vault.known else base_for(prefix, last))
        else:
            out.append(w)
        if flag:
            last = name
    return tuple(out), tuple(refs)
