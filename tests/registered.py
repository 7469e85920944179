"""What the guards read of the engine registry (llmfit/plan/engines/__init__.py): each engine's own
modules and the words it is known by, and the toy engine (tests/plan/toy_engine.py) registered
for as long as a test needs it.

The contract test, the knob test, the names guard and the import contract take the engines from
here, so that an engine registered is an engine checked: its registry line is all they are told.
"""

from __future__ import annotations

import pkgutil
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib.util import find_spec

from llmfit.plan.engines import keys, register, registered, unregister

TOY = "toy"


@contextmanager
def toy_registered() -> Iterator[str]:
    """The toy engine in the real registry, listed last, for the length of the block."""
    from tests.plan import toy_engine

    if TOY in keys():
        yield TOY
        return
    register(TOY, toy_engine.LINE)
    try:
        yield TOY
    finally:
        unregister(TOY)


def with_toy() -> tuple[str, ...]:
    """The registered engines with the toy among them: what the contract covers."""
    with toy_registered():
        return keys()


def own_modules(key: str) -> tuple[str, ...]:
    """Engine `key`'s own modules: those of its module's package named like its module (`vllm`,
    `vllm_kv`, … for llmfit.plan.engines.vllm), and those its line names beside them."""
    line = registered(key)
    package, _, stem = line.module.rpartition(".")
    spec = find_spec(package)
    where = list(spec.submodule_search_locations or ()) if spec else []
    found = {
        f"{package}.{m.name}"
        for m in pkgutil.iter_modules(where)
        if m.name == stem or m.name.startswith(stem + "_")
    }
    return tuple(sorted(found | set(line.modules)))


def _word(text: str) -> str:
    """A name as a pattern that also finds it spelt with another separator, or none
    ("llama.cpp": llama_cpp, llama-cpp, llamacpp)."""
    parts = [re.escape(p) for p in re.split(r"[._\-]", text.lower()) if p]
    return r"[._\-]?".join(parts)


def words(key: str) -> tuple[str, ...]:
    """The words engine `key` is known by: its key, its title, its programs, its module's name and
    the names its line adds."""
    line = registered(key)
    stem = line.module.rpartition(".")[2]
    return tuple(dict.fromkeys([key, line.title, *line.programs, stem, *line.names]))


def names(engines: Iterable[str]) -> re.Pattern[str]:
    """A pattern that finds any of the engines' words (case aside)."""
    found = sorted({_word(w) for k in engines for w in words(k)}, key=lambda w: (-len(w), w))
    return re.compile("|".join(found), re.IGNORECASE)
