"""The core outside plan/engines/, and render, name no engine (issue 23): an engine's facts (its
speed constants, its environment variables, its words, its special cases) live in its own module,
so that a new engine is a module and a registry line, and nothing else learns its name.

Comments and docstrings may cite an engine's code (they say why a rule is as it is); code may not
name one: no identifier, no string.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "llmfit"
NAMES = re.compile(r"vllm|sglang|llama[._-]?cpp|llama-server|rpc-server|trtllm", re.IGNORECASE)
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


def _named(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree) | _citations(tree)
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
        if text and NAMES.search(text):
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


def test_the_import_contract_covers_every_core_module():
    import tomllib

    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"] == "only plan/engines imports an engine's own modules"
    ]
    core = {f"llmfit.plan.{p.stem}" for p in (ROOT / "plan").glob("*.py") if p.stem != "__init__"}
    assert core <= set(contract["source_modules"])
    engines = {
        f"llmfit.plan.engines.{p.stem}"
        for p in ENGINES.glob("*.py")
        if p.stem.startswith(("vllm", "sglang", "llamacpp"))
    }
    # The fitted speed constants vLLM and SGLang share are theirs too.
    engines.add("llmfit.plan.engines.serving_speed")
    assert engines == set(contract["forbidden_modules"])
