"""An SGLang launch read back into a plan (`llmfit check -- sglang serve …` and
`llmfit check -- python -m sglang.launch_server …`)."""

from __future__ import annotations

import json

import pytest

from llmfit.plan.engines import for_argv
from llmfit.plan.engines.sglang_command import read
from llmfit.plan.engines.sglang_options import SglangOptions
from llmfit.plan.settings import Pins, PlanSettings

H100 = 85_045_477_376
PRE = 644_245_094


def test_both_launchers_are_sglangs():
    assert for_argv(["sglang", "serve", "--model-path", "x"]).key == "sglang"
    assert for_argv(["python3", "-m", "sglang.launch_server", "--model-path", "x"]).key == "sglang"
    assert for_argv(["/opt/venv/bin/sglang", "serve", "x"]).key == "sglang"


def test_a_launch_server_line_with_its_memory_flags():
    r = read(
        [
            "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
            "--tp-size", "2", "--mem-fraction-static", "0.85", "--kv-cache-dtype", "fp8_e4m3",
            "--context-length", "32Ki", "--max-running-requests", "64", "--port", "8000",
            "--trust-remote-code", "--enable-torch-compile", "--schedule-policy", "lpm",
        ],
        PlanSettings(),
    )  # fmt: skip
    assert r.repo == "Qwen/Qwen3-8B"
    s = r.settings
    assert (s.engines, s.every_layout, s.precision) == (("sglang",), True, "stored")
    assert s.pins == Pins(tp=2, pp=1, dp=1, ep=False)
    # SGLang's human_readable_int: 32Ki is 32,768 (an IEC suffix; 32k would be 32,000).
    assert (s.context, s.kv_cache_dtype) == (32_768, "fp8")
    assert s.options(SglangOptions) == SglangOptions(
        mem_fraction_static=0.85, max_running_requests=64
    )
    assert r.ignored == ("--enable-torch-compile", "--schedule-policy lpm")


def test_data_parallel_attention_in_both_spellings():
    new = read(
        ["sglang", "serve", "--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8",
         "--attn-dp-size", "8", "--ep-size", "8", "--context-length", "32k"],
        PlanSettings(),
    )  # fmt: skip
    assert new.settings.pins == Pins(tp=1, pp=1, dp=8, ep=True)
    assert new.settings.context == 32_000
    old = read(
        ["sglang", "serve", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--dp", "8",
         "--enable-dp-attention"],
        PlanSettings(),
    )  # fmt: skip
    assert old.repo == "deepseek-ai/DeepSeek-V3"
    # Without --ep-size the experts are cut by tensor parallelism over the whole group (SGLang's
    # moe_tp_size = tp_size // ep_size = 8), planned as such: no expert parallelism.
    assert old.settings.pins == Pins(tp=1, pp=1, dp=8, ep=False)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sglang", "serve"], "the SGLang command names no model"),
        (["sglang", "launch", "x"], "starts `sglang serve --model-path REPO`"),
        (["sglang", "serve", "x", "--kv-cache-dtype", "nvfp4"], "--kv-cache-dtype 'nvfp4'"),
        (["sglang", "serve", "x", "--mem-fraction-static", "1.2"], "between 0 and 1"),
        (
            ["sglang", "serve", "x", "--tp-size", "two"],
            "--tensor-parallel-size/--tp-size 'two' is not a whole number",
        ),
        (["sglang", "serve", "x", "--context-length", "1.5Ki"], "not a token count"),
        (["sglang", "serve", "x", "--tp-size", "8", "--attn-dp-size", "3"], "divisible"),
    ],
)
def test_what_is_wrong_with_a_command_is_said(argv, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read(argv, PlanSettings())


def test_check_an_sglang_command_end_to_end(run):
    code, out, err = run(
        "check", "--fleet", "2xh100-80g", "--json", "--", "python", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-8B", "--tp-size", "2", "--mem-fraction-static", "0.85",
        "--context-length", "8192",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    (o,) = doc["options"]
    assert (o["engine"], o["tp"], o["gpus"]) == ("sglang", 2, 2)
    # 0.85 of the free memory, int(0.85 × (85,045,477,376 − 644,245,094)) = 71,741,047,439 B,
    # less the card's 8,212,005,888 B of weights (test_sglang_plan: half the checkpoint, the
    # norms whole, the fp32 rotary cache), in tokens of 36 layers × 4 KV heads × 256 × 2 B =
    # 73,728 B: 63,529,041,551 // 73,728 = 861,667 tokens, 105.18 sequences of 8,192.
    assert o["per_card"]["weights"] == 8_212_005_888
    assert o["per_card"]["kv_cache"] == 8192 * 73_728
    assert o["concurrency"] == round(861_667 / 8192, 2) == 105.18
    # The launch is the command checked, word for word, launcher and all.
    assert o["commands"][0]["argv"] == [
        "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp-size", "2",
        "--mem-fraction-static", "0.85", "--context-length", "8192",
    ]  # fmt: skip
    code, text, err = run(
        "check", "--fleet", "2xh100-80g", "--", "sglang", "serve", "--model-path",
        "Qwen/Qwen3-8B", "--tp", "2", "--mem-fraction-static", "0.85", "--context-length", "8192",
        "--enable-torch-compile",
    )  # fmt: skip
    assert code == 0, err
    assert "KV pool: 861,667 tokens" in text
    assert "not modelled (read, and changing nothing in the plan): --enable-torch-compile" in text


def test_a_check_that_does_not_fit_says_what_it_would_need(run):
    code, out, err = run(
        "check", "--fleet", "1xh100-80g", "--", "sglang", "serve", "--model-path",
        "meta-llama/Meta-Llama-3.1-70B", "--context-length", "8192",
    )  # fmt: skip
    assert code == 1
    assert "does not fit:" in out and "1 × h100-80g: needs" in out
