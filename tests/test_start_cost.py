"""What every run pays before it plans: the modules it imports and the classes it defines
(issue 31: a cached plan's --json had come to cost 1.4 × what it did, README "Speed")."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys

import llmfit
from tests.conftest import ROOT, around_the_entry_point, modules_a_json_plan_imports


def test_every_dataclass_has_its_own_docstring():
    """Python 3.11 writes a docstring for a dataclass that has none, from inspect.signature of
    the class: about 0.5 ms a class at every start (6 ms of a cached --json plan had gone so, on
    12 classes). Such a docstring reads "Name(field: type, ...)", which is how one is found."""
    undocumented = []
    for info in pkgutil.walk_packages(llmfit.__path__, "llmfit."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and dataclasses.is_dataclass(obj)
                and obj.__module__ == module.__name__
                and (obj.__doc__ or "").startswith(f"{obj.__name__}(")
            ):
                undocumented.append(f"{module.__name__}.{name}")
    assert undocumented == [], "give each a docstring saying what it holds"


def test_a_json_plan_imports_nothing_only_a_mistake_or_another_format_needs():
    """difflib (a name's nearest match), decimal (SGLang's flags and shares) and the platforms'
    launches (`--format llm-d`, …) cost 1 to 2 ms each to import; a safetensors plan on the
    example fleet, written as JSON, needs none of them."""
    names = {"difflib", "decimal", "llmfit.plan.engines.platform_launch"}
    assert names & modules_a_json_plan_imports("Qwen/Qwen3-235B-A22B") == set()


def test_the_data_files_reader_imports_tomllib_only_to_parse():
    """tomllib, with the datetime and string modules and the regular expressions it compiles, is
    about 6 ms to import: the command keeps the data files' parses (llmfit/data_cache.py) and
    reads its fleet without it (sources/fleet.py's fast reader), so it is imported only where a
    text is parsed."""
    code = "import sys, llmfit.plan.package_data; print('tomllib' in sys.modules)"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert r.stdout.strip() == "False"


def test_only_the_commands_entry_point_paces_the_collector():
    """The `llmfit` command collects its youngest generation every 50,000 allocations (none in a
    cached plan, where Python's 700 made 55 collections) with what its start loaded frozen out
    of every collection; a program importing llmfit's CLI keeps Python's own pace (700)."""
    out = around_the_entry_point(
        "import gc, llmfit.cli; before = (gc.get_threshold()[0], gc.get_freeze_count() > 0)",
        "print(before, (gc.get_threshold()[0], gc.get_freeze_count() > 0))",
    )
    assert out[-1] == "(700, False) (50000, True)"
