"""The registry names each engine's own JSON fields (so that a document can carry them all
without importing every engine); each engine's `values` gives exactly those."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmfit.advise import advise
from llmfit.plan.engines import engine, field_names, fields, keys
from llmfit.plan.planner import PlanSettings
from llmfit.sources.fleet import resolve_fleet


@pytest.fixture(autouse=True)
def _cache(hub: Path) -> None:
    """Plans here are of the bundled cache, offline."""


def test_the_registry_names_each_engine_s_json_fields():
    assert keys() == ("vllm", "llama.cpp", "sglang")
    assert fields("vllm") == ("vllm_version",)
    assert fields("llama.cpp") == ("gpu_layers", "cpu_moe_layers", "host_bytes")
    assert fields("sglang") == ()
    assert field_names() == ("vllm_version", "gpu_layers", "cpu_moe_layers", "host_bytes")


@pytest.mark.parametrize(
    ("repo", "key"),
    [
        ("Qwen/Qwen3-8B", "vllm"),
        ("llmfit-fixtures/Tiny-Llama-GGUF", "llama.cpp"),
        ("Qwen/Qwen3-8B", "sglang"),
    ],
)
def test_each_engine_s_values_are_the_fields_its_registry_line_names(repo, key):
    settings = PlanSettings(engines=(key,), precision="stored")
    options = advise(repo, resolve_fleet("8xh100-80g"), settings, offline=True).plan.options
    assert options and {o.engine for o in options} == {key}
    for o in options:
        assert tuple(engine(key).values(o)) == fields(key)
