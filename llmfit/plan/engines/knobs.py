"""How an engine declares the settings it takes: one frozen dataclass an engine, each field a knob
that says its flag spellings, its help, its type and range, its default and what it changes.

From that declaration, and from nowhere else, come the CLI's engine flags (`llmfit --max-num-seqs
…`), the settings a plan carries (`PlanSettings.engine_options`), the tables `llmfit check` reads
an engine's command with, the flags a printed launch passes on, and the docs' flag table
(docs/engines.md). This is how vLLM itself declares its flags (its config dataclasses become `vllm
serve` options through EngineArgs.add_cli_args and get_kwargs), and how llm declares a model's
options (Model.Options): a knob added to an engine is one field, and every place that takes or
prints it follows.

This module names no engine and holds no engine's knobs; each engine's own declaration sits beside
its module (`*_options.py`), light enough for the CLI to import at start-up.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from llmfit.plan.artifact import Artifact
    from llmfit.plan.model import Model

# What a knob changes in a plan: what a card holds, how fast a layout runs. A knob that changes
# neither only shapes the launch (it is passed on as given).
MEMORY = "memory"
SPEED = "speed"

# The kinds of value a knob takes, as a command line spells them.
KINDS = ("int", "float", "switch", "bool", "text", "json", "choice")

_KNOB = "llmfit.knob"
# A number on a command line is a few digits; past this it is no count worth reading, and int() of
# a 5,000-digit word costs more than the whole plan.
MAX_DIGITS = 30


@dataclass(frozen=True)
class Knob:
    """One setting of an engine, as its command line and llmfit's both spell it."""

    # The engine's spellings, the one printed first ("--max-num-seqs"); none for a setting of
    # llmfit's own that no engine command carries (the engine release modelled).
    flags: tuple[str, ...]
    help: str
    kind: str = "int"
    # What it changes: MEMORY, SPEED, both or neither.
    changes: frozenset[str] = frozenset()
    # The range of a number, both ends allowed unless said open; None leaves that end free.
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    # The values a "choice" takes, or the only numbers an "int" takes (vLLM's LoRA ranks).
    choices: tuple[str, ...] = ()
    # llmfit's own spelling on its command line: "" for the engine's first long flag, None where
    # llmfit does not offer it (read from a checked command only).
    cli: str | None = ""
    # A "bool" knob's flags that turn it off, the one printed first ("--no-enable-prefix-caching",
    # "--disable-prefix-caching").
    negations: tuple[str, ...] = ()
    # Setting it on llmfit's command line turns this other knob on (`--max-loras 4` asks for LoRA
    # slots, so for --enable-lora too); a checked command is read as the engine reads it, without.
    implies: str | None = None
    # Its value is a credential: never printed, in YAML a Secret's reference.
    secret: bool = False
    # The value's name in help ("N", "JSON").
    metavar: str | None = None
    # How the engine reads the word (vLLM's human_readable_int: "8k"); None: as its kind says.
    parser: Callable[[str, str], Any] | None = None
    # Whether a launch passes it on as given; False where the engine's launch prints the plan's
    # own value in its place (llama.cpp's -ngl, which the plan chooses).
    passed: bool = True
    # A value it takes, for the docs' table and for the tests that plan with every knob set.
    example: str | None = None

    @property
    def flag(self) -> str:
        """The spelling a launch prints and a sentence names."""
        return self.flags[0] if self.flags else self.llmfit_flag or ""

    @property
    def llmfit_flag(self) -> str | None:
        if self.cli is None:
            return None
        if self.cli:
            return self.cli
        return next((f for f in self.flags if f.startswith("--")), None)

    @property
    def takes_value(self) -> bool:
        return self.kind not in ("switch", "bool")


def knob(
    default: Any,
    *flags: str,
    help: str,
    kind: str = "int",
    changes: Sequence[str] = (),
    low: float | None = None,
    high: float | None = None,
    open_low: bool = False,
    open_high: bool = False,
    choices: Sequence[str] = (),
    cli: str | None = "",
    negations: Sequence[str] = (),
    implies: str | None = None,
    secret: bool = False,
    metavar: str | None = None,
    parser: Callable[[str, str], Any] | None = None,
    passed: bool = True,
    example: str | None = None,
) -> Any:
    """A dataclass field that is a knob: `max_num_seqs: int | None = knob(None, "--max-num-seqs",
    help=…, low=1)`."""
    if kind not in KINDS:
        raise ValueError(f"unknown knob kind {kind!r}")
    declared = Knob(
        tuple(flags), help, kind, frozenset(changes), low, high, open_low, open_high,
        tuple(choices), cli, tuple(negations), implies, secret, metavar, parser, passed, example,
    )  # fmt: skip
    return field(default=default, metadata={_KNOB: declared})


@dataclass(frozen=True)
class Declared:
    """A knob of an options class: its field's name, the knob, and its default."""

    name: str
    knob: Knob
    default: Any


T = TypeVar("T")


def declared(cls: type) -> tuple[Declared, ...]:
    """The knobs of an options class, in the order they are declared (and printed)."""
    found = _declared.get(cls)
    if found is None:
        # Kept by class (its fields are fixed once it is defined): every option's launch words
        # ask again, a few hundred times a plan.
        found = _declared[cls] = tuple(
            Declared(f.name, k, f.default)
            for f in dataclasses.fields(cls)
            if isinstance(k := f.metadata.get(_KNOB), Knob)
        )
    return found


_declared: dict[type, tuple[Declared, ...]] = {}


@runtime_checkable
class NamesRepos(Protocol):
    """Options that name other repositories for the plan to read (a speculative draft model):
    the reader of the repositories reads them, and hands each back."""

    def extra_repos(self) -> tuple[str, ...]: ...

    def with_repo(
        self, repo_id: str, model: Model, artifacts: tuple[Artifact, ...]
    ) -> NamesRepos: ...


# -- reading a value -------------------------------------------------------------------------------


def _number_text(flag: str, text: str) -> str:
    t = text.strip()
    if len(t.lstrip("+-").split(".")[0]) > MAX_DIGITS:
        raise ValueError(f"{flag} {text[:40]!r}… is longer than any count it takes.")
    return t


def parse(k: Knob, flag: str, text: str) -> Any:
    """A command line's word for the knob, read as the engine reads it; raises ValueError with
    the sentence that names the flag and what is wrong."""
    if k.parser is not None:
        return check(k, flag, k.parser(flag, text))
    if k.kind == "int":
        t = _number_text(flag, text)
        if not re.fullmatch(r"[+-]?\d+", t):
            raise ValueError(f"{flag} {text!r} is not a whole number.")
        return check(k, flag, int(t))
    if k.kind == "float":
        t = _number_text(flag, text)
        try:
            v = float(t)
        except ValueError:
            raise ValueError(f"{flag} {text!r} is not a number.") from None
        return check(k, flag, v)
    if k.kind == "choice":
        return check(k, flag, text)
    if k.kind in ("text", "json"):
        return check(k, flag, text)
    raise ValueError(f"{flag} takes no value.")


def check(k: Knob, flag: str, value: Any) -> Any:
    """`value` if the knob takes it, else ValueError with the sentence that says why."""
    if value is None:
        return None
    if k.kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{flag} {value!r} is not a number.")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{flag} {value} is not a finite number.")
        below = k.low is not None and (value <= k.low if k.open_low else value < k.low)
        above = k.high is not None and (value >= k.high if k.open_high else value > k.high)
        if below or above:
            raise ValueError(f"{flag} {_num(value)} is not {_range(k)}.")
        if k.kind == "int" and k.choices and str(value) not in k.choices:
            raise ValueError(f"{flag} {value} is not one of {', '.join(k.choices)}.")
    elif k.kind == "choice" and value not in k.choices:
        raise ValueError(f"{flag} {value!r} is not one of {', '.join(k.choices)}.")
    elif k.kind in ("switch", "bool") and not isinstance(value, bool):
        raise ValueError(f"{flag} takes no value.")
    return value


def _num(x: float) -> str:
    """A bound or a value as a sentence says it: a whole number whole, with its thousands marked
    ("1,048,576", not "1.04858e+06"), any other as short as it reads ("0.92")."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e18 else f"{x:g}"


def _range(k: Knob) -> str:
    """ "from 1 to 512", "between 0 and 1", "at least 1", "above 0": the range a knob takes."""
    lo, hi = k.low, k.high
    if lo is not None and hi is not None:
        if k.open_low or k.open_high:
            return f"between {_num(lo)} and {_num(hi)}"
        return f"from {_num(lo)} to {_num(hi)}"
    if lo is not None:
        return f"above {_num(lo)}" if k.open_low else f"at least {_num(lo)}"
    if hi is None:
        return "any number"
    return f"below {_num(hi)}" if k.open_high else f"at most {_num(hi)}"


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """An options instance of `cls` from field → value (None and absent keep the default),
    each value checked against its knob, then by the class's own `checked()` where it has one
    (the rules between knobs, and what a value derives)."""
    knobs = {d.name: d for d in declared(cls)}
    given: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        d = knobs.get(name)
        if d is None:
            raise ValueError(f"{cls.__name__} has no knob {name!r}")
        given[name] = check(d.knob, d.knob.flag, value)
    made = cls(**given)
    checked = getattr(made, "checked", None)
    return checked() if callable(checked) else made


# -- printing a value ------------------------------------------------------------------------------


def words(d: Declared, value: Any) -> list[str]:
    """The launch's words for one knob at `value` ([] where it is the default or llmfit's own)."""
    k = d.knob
    if not k.flags or not k.passed or value is None or value == d.default:
        return []
    if k.kind == "switch":
        return [k.flags[0]] if value else []
    if k.kind == "bool":
        if value:
            return [k.flags[0]]
        return [k.negations[0]] if k.negations else []
    if isinstance(value, float):
        return [k.flags[0], f"{value:g}"]
    return [k.flags[0], str(value)]


def argv(options: object) -> list[str]:
    """The words a launch passes on for every knob set away from its default, in declared order."""
    out: list[str] = []
    for d in declared(type(options)):
        out += words(d, getattr(options, d.name))
    return out


# -- reading a command -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tables:
    """The flags of an engine's command that set knobs: valued flag → knob name; switch → (knob
    name, the value it sets)."""

    valued: dict[str, str]
    switches: dict[str, tuple[str, bool]]


def tables(cls: type) -> Tables:
    valued: dict[str, str] = {}
    switches: dict[str, tuple[str, bool]] = {}
    for d in declared(cls):
        for f in d.knob.flags:
            if d.knob.takes_value:
                valued[f] = d.name
            else:
                switches[f] = (d.name, True)
        for f in d.knob.negations:
            switches[f] = (d.name, False)
    return Tables(valued, switches)


def read(cls: type, got: Mapping[str, str], on: Mapping[str, bool]) -> dict[str, Any]:
    """Field → value from a command's words, as `tables(cls)` sorted them: `got` the valued
    knobs' texts, `on` the switches' values (the last given winning, as argparse keeps)."""
    knobs = {d.name: d for d in declared(cls)}
    out: dict[str, Any] = {}
    for name, text in got.items():
        d = knobs[name]
        out[name] = parse(d.knob, d.knob.flag, text)
    out.update(on)
    return out
