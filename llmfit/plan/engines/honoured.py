"""One rule for a setting the engine a plan runs does not take (issue 35): it is refused, in one
sentence that names the flag and the engine, never dropped without a word.

A setting is llmfit's own flag that some engines take (`--gpu-memory-utilization`, which vLLM
and llama.cpp read and SGLang does not: its share is its own `--mem-fraction-static`), or an
engine's knob (`--max-num-seqs` is vLLM's). Each registry line says which of llmfit's flags its
engine takes (`Registered.honours`), its knobs are its own, and the engines a plan runs are
those named with `--engine`, else the defaults. Named, every engine named must take each setting
given (a plan of SGLang beside vLLM would print SGLang's options without the setting, in the same
table); unnamed, one of the defaults must, since which of them runs the model is the
repository's files' to say (a GGUF one runs on llama.cpp, safetensors on vLLM), and once the
files are read, one of the engines that ran them must (a GGUF repository's plan is llama.cpp's
alone, and takes none of vLLM's settings).

The disaggregated pins (`--disagg on`, `--prefill-tp`, `--decode-tp`, `--xpyd`) are settings
too: taken by the engines that launch prefill and decode workers apart (whose layout space has
pair rules), refused for the others with what they lack.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llmfit.plan.engines import default_keys, keys, registered

# llmfit's settings that only an engine which launches disaggregated prefill and decode takes.
DISAGG_SETTINGS = ("--disagg on", "--prefill-tp", "--decode-tp", "--xpyd")
# What an engine that does not take one of these lacks, after its name in the refusal.
_LACKS = {flag: "launches no disaggregated prefill and decode" for flag in DISAGG_SETTINGS}


def titles(engine_keys: Iterable[str]) -> str:
    """Engines' titles for a sentence: "vLLM", "vLLM and llama.cpp", "vLLM, llama.cpp and Toy"."""
    names = [registered(k).title for k in engine_keys]
    if len(names) < 2:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def takers(flag: str) -> tuple[str, ...]:
    """The engines whose registry line says they take llmfit's `flag`, in registry order."""
    return tuple(k for k in keys() if flag in registered(k).honours)


def own_instead(key: str, flag: str) -> str | None:
    """Engine `key`'s own flag for what llmfit's `flag` sets elsewhere, where it has one."""
    return next((own for given, own in registered(key).instead if given == flag), None)


@dataclass(frozen=True)
class Unhonoured:
    """A setting given that an engine the plan runs does not take."""

    flag: str
    # The engines that take it, and those of the plan that do not.
    takers: tuple[str, ...]
    deaf: tuple[str, ...]
    # Whether the plan runs the engines named, or the defaults.
    named: bool
    # The first deaf engine's own flag for the same thing, where it has one.
    instead: str | None = None
    # Whether the deaf engines are those that ran the repository's files (none named).
    ran: bool = False

    def sentence(self) -> str:
        owner = (
            f"{titles(self.takers)}'s setting"
            if len(self.takers) == 1
            else f"a setting of {titles(self.takers)}"
        )
        one = len(self.deaf) == 1
        if self.named:
            runs = "which this plan runs"
        elif self.ran:
            runs = f"which {'runs' if one else 'run'} this repository's files"
        else:
            runs = "the engines planned when none is named"
        verb = "does" if one else "do"
        text = f"{self.flag} is {owner}, and {titles(self.deaf)}, {runs}, {verb} not honour it"
        if self.instead:
            text += f": {titles(self.deaf[:1])}'s own is {self.instead}"
        elif self.flag in _LACKS:
            text += f": {titles(self.deaf)} {_LACKS[self.flag]}"
        return text + "."


def unhonoured(
    given: Sequence[tuple[str, tuple[str, ...]]],
    named: Sequence[str],
    ran: Sequence[str] = (),
) -> Unhonoured | None:
    """The first setting of `given` ((flag, the engines that take it), in command-line order)
    that the plan's engines do not all take (`named`: the engines named; none: the defaults, or
    `ran`, the engines that ran the repository's files once they are read, one of which must
    take it); None when every one is taken."""
    running = tuple(named) or tuple(ran) or default_keys()
    for flag, take in given:
        if named:
            deaf = tuple(k for k in running if k not in take)
        else:
            deaf = () if any(k in take for k in running) else running
        if deaf:
            return Unhonoured(
                flag, take, deaf, bool(named), own_instead(deaf[0], flag), bool(ran) and not named
            )
    return None
