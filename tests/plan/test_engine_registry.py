"""The engine registry's own record of each engine's JSON fields agrees with the engines'."""

from __future__ import annotations

from llmfit.plan.engines import engine, field_names, keys


def test_each_engine_s_json_fields_are_the_ones_the_registry_names():
    assert keys() == ("vllm", "llama.cpp", "sglang")
    assert engine("vllm").fields == ("vllm_version",)
    assert engine("llama.cpp").fields == ("gpu_layers", "cpu_moe_layers", "host_bytes")
    assert engine("sglang").fields == ()
    assert field_names() == ("vllm_version", "gpu_layers", "cpu_moe_layers", "host_bytes")
