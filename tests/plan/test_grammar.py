"""Checked commands are read as the engines read them (issue 24): vLLM 0.34's FlexibleArgumentParser
and SGLang 0.5.23's argparse, from the flags each defines (fixtures/engines/*.json, dumped from the
engines' own parsers). Each case is what the engine's parser makes of the words, read from its
code (vllm/utils/argparse_utils.py, sglang/srt/server_args.py prepare_server_args)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.engines.write_grammar import module
from llmfit.plan.engines.sglang_command import read as read_sglang
from llmfit.plan.engines.sglang_options import SglangOptions
from llmfit.plan.engines.vllm_command import flexible
from llmfit.plan.engines.vllm_command import read as read_vllm
from llmfit.plan.engines.vllm_options import VllmOptions
from llmfit.plan.settings import PlanSettings

ENGINES = Path(__file__).resolve().parents[2] / "llmfit" / "plan" / "engines"


@pytest.mark.parametrize("key", ["vllm", "vllm_033", "sglang"])
def test_the_grammar_modules_are_the_engines_dumps(key):
    assert (ENGINES / f"{key}_grammar.py").read_text() == module(key)


def vllm(*words: str):
    return read_vllm(["vllm", "serve", "Qwen/Qwen3-8B", *words], PlanSettings())


def sglang(*words: str):
    return read_sglang(["sglang", "serve", "Qwen/Qwen3-8B", *words], PlanSettings())


def test_vllm_takes_underscores_and_equals_in_a_flag():
    r = vllm("--tensor_parallel_size=2", "--max_model_len", "8192")
    assert (r.settings.pins.tp, r.settings.context) == (2, 8192)


def test_vllm_keeps_the_last_of_a_switch_and_its_negation():
    r = vllm("-ep", "--disable-expert-parallel", "--enforce-eager", "--no-enforce-eager")
    assert r.settings.pins.ep is False
    assert r.settings.options(VllmOptions).enforce_eager is False
    # --no-enable-X is hidden from vLLM's help (and from the dump) but accepted.
    r = vllm("--enable-prefix-caching", "--no-enable-prefix-caching")
    assert r.settings.options(VllmOptions).enable_prefix_caching is False


def test_vllm_gathers_dotted_json_keys():
    r = vllm("--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens=2")
    o = r.settings.options(VllmOptions)
    assert json.loads(o.speculative_config or "") == {"method": "mtp", "num_speculative_tokens": 2}
    assert o.speculative is not None and o.speculative.num_speculative_tokens == 2


def test_vllm_rewrites_as_flexible_argument_parser_does():
    assert flexible(["--max_num_seqs=4", "-O3", "--model", "m", "--x.y_z", "1"]) == [
        "m", "--max-num-seqs=4", "--optimization-level", "3", "--x", '{"y_z": 1}',
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("words", "message"),
    [
        # A misspelt flag is refused, not planned as the default (issue 27, item 4).
        # ... with the flag it is nearest to (issue 34, item 7).
        (("--tensor-paralel-size", "8"),
         "--tensor-paralel-size 8: not one of its flags; did you mean --tensor-parallel-size?"),
        # vllm/config/lora.py takes these ranks only (argparse's words, from vLLM's choices).
        (("--enable-lora", "--max-lora-rank", "1000"),
         "--max-lora-rank invalid choice: 1000 (choose from 1, 128, 16, 256, 32, 320, 512, 64, "
         "8)."),
        (("--max-model-len", "1.5K"), "--max-model-len '1.5K' is not a token count."),
        (("--max-num-seqs", "16384", "--max-num-batched-tokens", "8192"),
         "max_num_batched_tokens (8192) must be greater than or equal to max_num_seqs (16384)."),
    ],
)  # fmt: skip
def test_vllm_refuses_what_vllm_refuses(words, message):
    with pytest.raises(ValueError) as e:
        vllm(*words)
    assert str(e.value).endswith(message), str(e.value)


def test_vllm_lists_the_flags_it_takes_but_llmfit_does_not_model():
    r = vllm("--seed", "4", "--port", "9000", "--served-model-name", "chat")
    assert r.ignored == ("--seed 4",)


def test_vllm_never_shows_a_secret():
    r = vllm("--api-key", "K1", "K2", "--hf_token=hf_abcdefghijkl", "--port", "9000")
    # vLLM's --api-key takes several keys; each is read from VLLM_API_KEY, which vLLM reads itself
    # when the flag is absent; the token from HF_TOKEN.
    assert r.argv == (
        "vllm", "serve", "Qwen/Qwen3-8B", "--api-key", "$VLLM_API_KEY", "$VLLM_API_KEY",
        "--hf_token", "$HF_TOKEN", "--port", "9000",
    )  # fmt: skip
    assert r.secrets == ((4, "VLLM_API_KEY"), (5, "VLLM_API_KEY"), (7, "HF_TOKEN"))
    assert r.ignored == ()


def test_sglang_masks_its_api_key_by_an_abbreviation_too():
    r = sglang("--api-k", "K", "--tp", "2")
    assert r.argv == (
        "sglang", "serve", "Qwen/Qwen3-8B", "--api-k", "$SGLANG_API_KEY", "--tp", "2",
    )  # fmt: skip
    assert r.secrets == ((4, "SGLANG_API_KEY"),)


def test_sglang_takes_a_unique_prefix_of_a_flag():
    r = sglang("--mem-frac", "0.15", "--tp", "2")
    assert r.settings.options(SglangOptions).mem_fraction_static == 0.15
    assert r.settings.pins.tp == 2


def test_sglang_refuses_an_ambiguous_prefix_and_an_unknown_flag():
    with pytest.raises(ValueError, match="ambiguous option: --max"):
        sglang("--max", "4")
    with pytest.raises(ValueError, match="--tensor-paralel-size 8: not one of its flags."):
        sglang("--tensor-paralel-size", "8")


def test_sglang_refuses_a_kv_dtype_outside_its_choices():
    with pytest.raises(ValueError, match="--kv-cache-dtype invalid choice: 'fp9'"):
        sglang("--kv-cache-dtype", "fp9")


def vllm_at(version: str, *words: str):
    settings = PlanSettings().with_options(VllmOptions(version=version))
    return read_vllm(["vllm", "serve", "Qwen/Qwen3-8B", *words], settings)


def test_vllm_0_34_takes_its_new_flags_and_0_33_refuses_them():
    # fixtures/engines/vllm-0.34.0-serve-args.json: --enable-extensible-kv-cache (and its
    # --disable- form), --max-num-inflight-kv-loads, --cache-aware-admission-window, new in 0.34.
    r = vllm_at("0.34", "--enable-extensible-kv-cache", "--max-num-inflight-kv-loads", "4",
                "--cache-aware-admission-window", "8")  # fmt: skip
    # The cache switch changes memory and is read; the other two are read and not modelled.
    assert r.settings.options(VllmOptions).enable_extensible_kv_cache is True
    assert r.ignored == ("--max-num-inflight-kv-loads 4", "--cache-aware-admission-window 8")
    with pytest.raises(ValueError) as e:
        vllm_at("0.33", "--enable-extensible-kv-cache")
    assert str(e.value) == (
        "vLLM 0.33 refuses it: --enable-extensible-kv-cache: not one of its flags."
    )


def test_vllm_0_34_refuses_the_quantization_it_removed_in_its_words():
    # vllm/model_executor/layers/quantization/__init__.py: fp_quant is gone from 0.34's
    # QuantizationMethods; ModelConfig._verify_quantization: "Unknown quantization method: …".
    with pytest.raises(ValueError) as e:
        vllm_at("0.34", "--quantization", "fp_quant")
    assert str(e.value).startswith(
        "vLLM 0.34 refuses it: Unknown quantization method: fp_quant. Must be one of ['awq', "
    )
    # 0.33 still takes it (and plans it as not modelled), and 0.34 takes its new w4afp8.
    assert "--quantization fp_quant" in vllm_at("0.33", "--quantization", "fp_quant").ignored
    assert "--quantization w4afp8" in vllm_at("0.34", "--quantization", "w4afp8").ignored


def test_a_0_34_command_without_a_share_leaves_it_to_vllm():
    # 0.34's --gpu-memory-utilization is optional_type(float): absent or "None", vLLM resolves it
    # (1.0 with the extensible KV cache), and the plan follows.
    assert vllm_at("0.34").settings.utilization_named is False
    assert vllm_at("0.34", "--gpu-memory-utilization", "None").settings.utilization_named is False
    named = vllm_at("0.34", "--gpu-memory-utilization", "0.8").settings
    assert (named.utilization_named, named.gpu_memory_utilization) == (True, 0.8)
