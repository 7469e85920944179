"""An engine's command line read as its own parser reads it.

vLLM and SGLang parse their flags with Python's argparse; the flags each defines (option strings,
how many values, choices, the type of value) are data here, dumped from the engines themselves
(fixtures/engines/, turned into `*_grammar.py` by fixtures/engines/write_grammar.py). An argparse
parser is built from that data, so a checked command is read by the same rules the engine applies:
the last of a flag given twice wins, a switch and its negation (`--enforce-eager
--no-enforce-eager`) leave the last one's value, a unique prefix of a long flag is that flag
(`--mem-frac 0.15`), `--flag=value` is `--flag value`, a choice outside its set and a flag the
engine does not define are refused. What each engine does before argparse sees the words (vLLM's
underscores and dotted JSON keys) its reader does first.

A refusal is a ValueError with argparse's own sentence, naming the flag.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

# One flag of a parser dump: (dest, option strings, kind, nargs, choices, type name).
Row = tuple[str, tuple[str, ...], str, Any, tuple[str, ...] | None, str | None]


class _Refused(Exception):
    """argparse's error, caught before it prints and exits."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        # --help or --version in a checked command: nothing to plan.
        raise _Refused(message or "the command asks for help, not a server")


@dataclass(frozen=True)
class Parsed:
    """What a command sets: each given flag's dest and its value, typed as the engine types it,
    and the positional words."""

    values: dict[str, Any]
    positional: dict[str, Any]

    def given(self, dest: str) -> bool:
        return dest in self.values


class Grammar:
    """A parser for one engine's flags: `rows` from its dump, `types` its type names → readers
    (a name with no reader reads the word as text), `positional` the names of its positionals,
    each optional (vLLM's model tag). `by_dest` gives a flag's reader where its type's name does
    not say it (vLLM's optional_type(json.loads) dumps as "_optional_type"); `hidden_negations`
    the spellings that turn a switch off which its parser accepts but its dump does not list."""

    def __init__(
        self,
        rows: Iterable[Row],
        types: Mapping[str, Callable[[str], Any]],
        positional: Sequence[str] = (),
        *,
        hidden_negations: Callable[[str], Sequence[str]] | None = None,
        by_dest: Mapping[str, Callable[[str], Any]] | None = None,
    ) -> None:
        self.rows = tuple(rows)
        self.flags: dict[str, str] = {}
        parser = _Parser(
            prog="", add_help=False, allow_abbrev=True, argument_default=argparse.SUPPRESS
        )
        for name in positional:
            parser.add_argument(name, nargs="?")
        for dest, flags, kind, nargs, choices, type_name in self.rows:
            for f in flags:
                self.flags[f] = dest
            if kind in ("switch", "bool-optional"):
                off = [f for f in flags if _negative(f, flags)]
                on = [f for f in flags if f not in off]
                if hidden_negations is not None and kind == "bool-optional":
                    off += [f for f in hidden_negations(on[0]) if f not in flags] if on else []
                if on:
                    parser.add_argument(*on, dest=dest, action="store_true")
                if off:
                    parser.add_argument(*off, dest=dest, action="store_false")
                continue
            read = (by_dest or {}).get(dest) or types.get(type_name or "", str)
            kw: dict[str, Any] = {"dest": dest, "type": _named(read, _long(flags))}
            if nargs is not None:
                kw["nargs"] = nargs
            if choices:
                kw["choices"] = [kw["type"](c) for c in choices]
            parser.add_argument(*flags, **kw)
        self._parser = parser

    def _near(self, sentence: str) -> str:
        """An unknown flag's refusal, with the engine's flag it is nearest to where one is near
        (issue 34: `--tensor-paralel-size` was refused without one)."""
        m = re.fullmatch(r"(--?[\w-]+)(?:=\S*)?(?: .*)?: not one of its flags\.", sentence, re.S)
        if m is None:
            return sentence
        import difflib

        close = difflib.get_close_matches(m.group(1), list(self.flags), n=1, cutoff=0.8)
        return f"{sentence[:-1]}; did you mean {close[0]}?" if close else sentence

    def parse(self, words: Sequence[str]) -> Parsed:
        """The command's flags as the engine reads them; ValueError with its sentence where it
        refuses them."""
        try:
            ns = self._parser.parse_args(list(words))
        except _Refused as e:
            raise ValueError(self._near(_sentence(str(e).strip()))) from None
        except _Huge as e:
            raise Beyond(f"{e}.") from None
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            # A type reader that raised something other than argparse's own error.
            raise ValueError(f"a value it cannot read ({e})") from None
        values = vars(ns)
        positional = {n: values.pop(n) for n in list(values) if n not in self.dests}
        return Parsed(values, positional)

    def resolve(self, flag: str) -> str | None:
        """The dest a flag as written sets: its exact spelling, or (as argparse's allow_abbrev
        reads a long flag) the one flag it is a unique prefix of; None for a word no flag of the
        engine's is."""
        if flag in self.flags:
            return self.flags[flag]
        if not flag.startswith("--"):
            return None
        matches = {d for f, d in self.flags.items() if f.startswith(flag)}
        return matches.pop() if len(matches) == 1 else None

    def mask(
        self,
        words: Sequence[str],
        secrets: Mapping[str, str],
        spell: Callable[[str], str] = lambda flag: flag,
    ) -> tuple[list[str], list[tuple[int, str]]]:
        """`words` with each credential's value (`secrets`: dest → the variable that holds it)
        replaced by "$VARIABLE", and where: a flag's value inline (`--api-key=K`) or the words
        after it up to the next flag (vLLM's --api-key takes several). `spell` is how the engine
        respells a flag's name before its parser reads it (vLLM's underscores)."""
        out: list[str] = []
        refs: list[tuple[int, str]] = []
        taking: str | None = None
        for w in words:
            name, eq, _ = w.partition("=")
            dest = self.resolve(spell(name)) if w.startswith("-") else None
            if taking is not None and not w.startswith("-"):
                refs.append((len(out), taking))
                out.append("$" + taking)
                if self._single(taking, secrets):
                    taking = None
                continue
            taking = None
            secret = secrets.get(dest) if dest is not None else None
            if secret is not None and eq:
                # --api-key=K: the flag, then the reference, as two words (the same to argparse).
                out.append(name)
                refs.append((len(out), secret))
                out.append("$" + secret)
                continue
            out.append(w)
            taking = secret
        return out, refs

    def masked(
        self,
        program: Sequence[str],
        words: Sequence[str],
        secrets: Mapping[str, str],
        spell: Callable[[str], str] = lambda flag: flag,
    ) -> tuple[tuple[str, ...], tuple[tuple[int, str], ...]]:
        """The whole command as it is to be launched (`program`, then `words` masked) and where
        its credentials are, counted from its first word."""
        out, refs = self.mask(words, secrets, spell)
        return (*program, *out), tuple((i + len(program), v) for i, v in refs)

    def _single(self, variable: str, secrets: Mapping[str, str]) -> bool:
        """Whether the flag whose value `variable` holds takes one word (not several)."""
        for dest, var in secrets.items():
            if var == variable:
                row = next((r for r in self.rows if r[0] == dest), None)
                return row is None or row[3] not in ("+", "*")
        return True

    @property
    def dests(self) -> set[str]:
        return {row[0] for row in self.rows}

    def dest(self, flag: str) -> str | None:
        """The dest an option string sets (exact spellings only)."""
        return self.flags.get(flag)

    def spelling(self, dest: str) -> str:
        """The flag a sentence names for a dest: its first long option string that is not a
        negation (0.34's --disable-extensible-kv-cache sorts before the flag it negates)."""
        for d, flags, *_ in self.rows:
            if d == dest:
                positive = [f for f in flags if not f.startswith(("--disable-", "--no-"))]
                return next((f for f in positive if f.startswith("--")), _long(flags))
        return "--" + dest.replace("_", "-")


def _long(flags: Sequence[str]) -> str:
    return next((f for f in flags if f.startswith("--")), flags[0])


def _named(read: Callable[[str], Any], flag: str) -> Callable[[str], Any]:
    """`read`, its refusal of a number past MOST naming `flag` (argparse keeps the type's name
    for its own messages: the wrapper takes it too)."""

    def typed(text: str) -> Any:
        try:
            return read(text)
        except _Huge as e:
            raise _Huge(f"{flag} {e}") from None

    typed.__name__ = getattr(read, "__name__", "value")
    return typed


def _sentence(message: str) -> str:
    """argparse's message as one sentence that starts with the flag, by every spelling it has:
    "argument --x/-y: 'two' is not a whole number" → "--x/-y 'two' is not a whole number.";
    "unrecognized arguments: --z" →
    "--z is not one of its flags."."""
    m = re.fullmatch(r"argument ([^:]+): (.*)", message, re.S)
    if m:
        return f"{m.group(1)} {m.group(2).rstrip('.')}."
    m = re.fullmatch(r"unrecognized arguments: (.*)", message, re.S)
    if m:
        return f"{m.group(1)}: not one of its flags."
    return message.rstrip(".") + "."


# The most any engine count is taken to be (llmfit's bound, not an engine's: a count past it is
# no count of tokens, sequences or cards, and int() of a 5,000-digit word is not cheap).
MOST = 1 << 50


class Beyond(ValueError):
    """A number past MOST: llmfit's refusal, not the engine's."""


class _Huge(Exception):
    # Raised inside argparse (which turns a type's ValueError into its own message) and carried
    # out of it as Beyond, with the flag.
    pass


def whole(text: str) -> int:
    """An int as argparse's int() reads one, refused in a sentence; past MOST, refused as no
    count at all."""
    digits = text.strip().lstrip("+-")
    if len(digits) > 20:
        raise _Huge(f"{text[:24]!r}… is past {MOST:,}, no count an engine takes")
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n > MOST:
        raise _Huge(f"{text!r} is past {MOST:,}, no count an engine takes")
    return n


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _negative(flag: str, flags: Sequence[str]) -> bool:
    """Whether `flag` turns its switch off: `--no-x` beside `--x`, or `--disable-x` beside
    `--enable-x`."""
    if flag.startswith("--no-") and "--" + flag.removeprefix("--no-") in flags:
        return True
    return flag.startswith("--disable-") and "--enable-" + flag.removeprefix("--disable-") in flags


def positive(flag: str, n: int) -> int:
    """A count the engine reads as given but no layout can have at 0 or below."""
    if n <= 0:
        raise ValueError(f"{flag} {n} must be positive.")
    return n


def said(flag: str, value: Any) -> str:
    """A flag as it was given, for the list of those read but not modelled."""
    if value is True:
        return flag
    if value is False:
        return "--no-" + flag[2:]
    if isinstance(value, list):
        return " ".join([flag, *map(str, value)])
    if isinstance(value, dict):
        return f"{flag} {json.dumps(value)}"
    return f"{flag} {value}"
