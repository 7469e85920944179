"""The core outside plan/engines/, and render, name no engine (issue 23): an engine's facts (its
speed constants, its environment variables, its words, its special cases) live in its own module,
so that a new engine is a module and a registry line, and nothing else learns its name.

Comments and docstrings may cite an engine's code (they say why a rule is as it is); code may not
name one: no identifier, no string. The names looked for, and the modules the import contract
keeps the core from, are the registry's (tests/registered.py): every engine registered, the toy
one included, is guarded with nothing here naming it (issue 35).
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import grimp
import pytest

from llmfit.plan.engines import keys
from tests.registered import names as engine_names
from tests.registered import own_modules, toy_registered, with_toy

ROOT = Path(__file__).resolve().parent.parent / "llmfit"
# Where engines may be named: their own modules, and the registry that lists them.
ENGINES = ROOT / "plan" / "engines"


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _citations(tree: ast.AST) -> set[int]:
    """Strings that say where a number comes from (a card row's `notes=` or `source=`)."""
    return {
        id(k.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for k in node.keywords
        if k.arg in ("notes", "source") and isinstance(k.value, ast.Constant)
    }


@pytest.fixture(autouse=True)
def _toy() -> Iterator[None]:
    """Every guard here runs with the toy engine registered, and so guards it too."""
    with toy_registered():
        yield


def _named(
    path: Path,
    root: Path = ROOT,
    names: re.Pattern[str] | None = None,
    also: Callable[[ast.AST], set[int]] | None = None,
) -> list[str]:
    names = names or engine_names(keys())
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree) | _citations(tree) | (also(tree) if also else set())
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.alias):
            text = node.name
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            text = node.name
        if text and names.search(text):
            found.append(f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')}: {text[:60]!r}")
    return found


CORE = sorted(
    p
    for p in [*(ROOT / "plan").rglob("*.py"), *(ROOT / "render").rglob("*.py")]
    if ENGINES not in p.parents
)


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_names_no_engine(path):
    assert _named(path) == []


# The CLI and the commands it runs (issue 35): an engine's decisions are its own (its knobs, its
# registry line, its module), so a new engine needs no edit here. Words for the user (a flag's
# help, an error's hint) may give an engine's command as an example.
CLI = sorted(
    [*(ROOT / "cli").rglob("*.py"), *(ROOT / n for n in ("advise.py", "check.py", "models.py"))]
)


def _words(tree: ast.AST) -> set[int]:
    """The strings of a call's `help=` or `hint=` (however they are joined)."""
    return {
        id(c)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for k in node.keywords
        if k.arg in ("help", "hint")
        for c in ast.walk(k.value)
        if isinstance(c, ast.Constant)
    }


@pytest.mark.parametrize("path", CLI, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_cli_names_no_engine(path):
    assert _named(path, also=_words) == []


def test_the_cli_check_finds_a_decision_and_not_an_example(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        'OPT = click.option("--command", help="The launch (" + "vllm serve …)")\n'
        'ERR = UsageError("no command", hint="llmfit check -- vllm serve Qwen/Qwen3-8B")\n'
        'if r.engine == "llama.cpp":\n    pass\n'
    )
    found = _named(probe, root=tmp_path, also=_words)
    assert [line.split(": ", 1)[1] for line in found] == ["'llama.cpp'"]


def test_the_check_finds_a_name_in_code_and_not_in_a_citation(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Sized as vLLM does it."""\n'
        "# vLLM's own rule\n"
        'KEY = "vllm"\n'
        'ROW = Row(notes="as vLLM prints it")\n'
        "def vllm_only(): ...\n"
    )
    assert sorted(line.split(": ", 1)[1] for line in _named(probe, root=tmp_path)) == [
        "'vllm'",
        "'vllm_only'",
    ]


def test_the_names_looked_for_are_the_registry_s():
    # The toy engine's words come from its line alone: its key, title, program and module.
    assert engine_names(["toy"]).pattern == r"toy[._\-]?engine|toy[._\-]?serve|toy"
    found = engine_names(["llama.cpp"])
    assert all(found.search(w) for w in ("llama_cpp", "LlamaCpp", "llama-server", "rpc-server"))
    # Every registered engine is looked for (a fourth is found with no edit here).
    assert {k for k in with_toy() if engine_names([k]).search(k)} == set(with_toy())


def test_a_core_module_naming_the_toy_engine_is_found(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('BACKEND = "toy-serve"\n')
    assert [line.split(": ", 1)[1] for line in _named(probe, root=tmp_path)] == ["'toy-serve'"]


# -- the import contract ----------------------------------------------------------------------

CONTRACT = "only plan/engines imports an engine's own modules"


def _contract() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT]
    return contract


def _forbidden(engines: tuple[str, ...]) -> list[str]:
    return sorted({m for k in engines for m in own_modules(k) if m.startswith("llmfit.")})


def test_the_import_contract_covers_every_core_module():
    contract = _contract()
    core = {f"llmfit.plan.{p.stem}" for p in (ROOT / "plan").glob("*.py") if p.stem != "__init__"}
    assert core <= set(contract["source_modules"])


def test_the_import_contract_forbids_exactly_the_registered_engines_modules():
    """pyproject.toml's list is the registry's: an engine registered in the package adds its
    modules there (the message gives the list to paste), one removed takes them away."""
    want = _forbidden(keys())
    assert sorted(_contract()["forbidden_modules"]) == want, f"forbidden_modules = {want!r}"


def _crossings(graph: grimp.ImportGraph, core: list[str], engines: tuple[str, ...]) -> list[str]:
    """Each chain of imports by which a core module reaches an engine's own module, as
    lint-imports' forbidden contract looks for them (indirect chains too)."""
    out = []
    for source in core:
        for target in sorted({m for k in engines for m in own_modules(k)}):
            if source not in graph.modules or target not in graph.modules:
                continue
            for chain in graph.find_shortest_chains(source, target, as_packages=True):
                out.append(" -> ".join(chain))
    return out


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # The package and the tests: a registered engine may live in either (the toy is a test's).
    return grimp.build_graph("llmfit", "tests", cache_dir=None)


def test_no_core_module_imports_a_registered_engine_s_own(graph):
    # The toy engine's module is among those looked for, registered a moment ago and named in no
    # configuration file.
    assert "tests.plan.toy_engine" in own_modules("toy")
    assert _crossings(graph, _contract()["source_modules"], keys()) == []


def test_a_core_module_importing_the_toy_engine_is_found(graph):
    graph.add_import(importer="llmfit.plan.planner", imported="tests.plan.toy_engine")
    try:
        found = _crossings(graph, ["llmfit.plan.planner"], keys())
    finally:
        graph.remove_import(importer="llmfit.plan.planner", imported="tests.plan.toy_engine")
    # The planted import, and the chains it opens through the toy to the shared serving code's
    # engines (the toy builds on plan/engines/serving.py, which reads vLLM's weight rules).
    assert "llmfit.plan.planner -> tests.plan.toy_engine" in found
    assert all(chain.startswith("llmfit.plan.planner -> tests.plan.toy_engine") for chain in found)
