"""A command's role in a disaggregated pair, read by its engine (PairRules.role), not by
`llmfit check`: the sentences are the engines' own rules (vLLM's --kv-transfer-config kv_role,
vllm/config/kv_transfer.py KVTransferConfig; SGLang's --disaggregation-mode), and an engine that
declares pairs must say how its commands name their role (issue 35: the CLI names no engine)."""

from __future__ import annotations

from importlib import import_module

import pytest

from llmfit.plan.engines import engine, keys
from llmfit.plan.engines.disagg_launch import role_refusal, value

NIXL = '{"kv_connector":"NixlConnector","kv_role":"%s"}'


def test_a_flag_s_value_is_its_last_in_either_spelling():
    # argparse keeps the last of a repeated flag, `--flag value` and `--flag=value` alike.
    words = ["vllm", "serve", "m", "--port", "1", "--port=2", "--x", "3"]
    assert value(words, "--port") == "2"
    assert value(words, "--missing") is None
    assert value(["--port"], "--port") is None  # a flag at the end has no value


@pytest.mark.parametrize(
    ("words", "side", "said"),
    [
        ([], "prefill", "the prefill command has no --kv-transfer-config, so vLLM serves it whole"),
        (["--kv-transfer-config", "{"], "decode",
         "the decode command's --kv-transfer-config is not JSON"),
        (["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'],
         "prefill",
         "the prefill command's kv_connector is not NixlConnector, the one llmfit plans"),
        (["--kv-transfer-config", NIXL % "kv_consumer"], "prefill",
         "the prefill command's role is 'kv_consumer', not kv_producer or kv_both"),
        (["--kv-transfer-config=" + NIXL % "kv_producer"], "decode",
         "the decode command's role is 'kv_producer', not kv_consumer or kv_both"),
        (["--kv-transfer-config", NIXL % "kv_both"], "prefill", None),
        (["--kv-transfer-config", NIXL % "kv_consumer"], "decode", None),
    ],
)  # fmt: skip
def test_vllm_reads_its_role_from_the_kv_transfer_config(words, side, said):
    assert role_refusal(engine("vllm"), ["vllm", "serve", "Qwen/Qwen3-8B", *words], side) == said


@pytest.mark.parametrize(
    ("words", "side", "said"),
    [
        ([], "prefill",
         "the prefill command has no --disaggregation-mode, so SGLang serves it whole"),
        (["--disaggregation-mode", "null"], "decode",
         "the decode command has no --disaggregation-mode, so SGLang serves it whole"),
        (["--disaggregation-mode", "decode"], "prefill",
         "the prefill command's role is 'decode', not prefill"),
        (["--disaggregation-mode=prefill"], "prefill", None),
    ],
)  # fmt: skip
def test_sglang_reads_its_role_from_the_disaggregation_mode(words, side, said):
    argv = ["sglang", "serve", "--model-path", "Qwen/Qwen3-8B", *words]
    assert role_refusal(engine("sglang"), argv, side) == said


def test_an_engine_with_no_pairs_launches_none():
    assert (
        role_refusal(engine("llama.cpp"), ["llama-server"], "prefill")
        == "llama.cpp launches no disaggregated prefill and decode"
    )


@pytest.mark.parametrize("key", keys())
def test_every_engine_that_pairs_reads_its_commands_role(key):
    # The registry's engines, whichever they are: one that launches pairs names its reader.
    pairs = engine(key).layouts.pairs
    if pairs is None:
        return
    module, _, name = pairs.role.partition(":")
    assert callable(getattr(import_module(module), name))
