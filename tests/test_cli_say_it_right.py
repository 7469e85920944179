"""Say it right (issue 16): the first run, commands that paste and run, a default context that
does not push users to quantise, and quantised siblings named."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLE_FLEET

FLEET = str(EXAMPLE_FLEET)
WAYS_OUT = (
    "no --fleet was given, no ./fleet.toml or $LLMFIT_FLEET is there, and this machine has no GPU "
    "llmfit can see: plan for your fleet with --fleet FILE (docs/fleet.md) or an inline fleet "
    "like --fleet 8xh100-80g"
)


def no_gpu_machine(monkeypatch, tmp_path):
    """A machine with no fleet file, no $LLMFIT_FLEET and no nvidia-smi: the first run."""
    from llmfit.plan.fleet import GIB, Fleet, PoolNode
    from llmfit.sources import machine

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLMFIT_FLEET", raising=False)
    monkeypatch.setattr(
        machine,
        "read_machine",
        lambda: Fleet((PoolNode("here", (), "", 64 * GIB, 64 * GIB),), source="this machine"),
    )


def test_the_first_run_says_what_it_did_and_the_two_ways_out(run, monkeypatch, tmp_path):
    no_gpu_machine(monkeypatch, tmp_path)
    code, out, _ = run("Qwen/Qwen3-8B")
    assert code == 1
    assert "fleet: this machine · 1 node · 0 GPUs" in out
    assert " ".join(out.split()).endswith(" ".join(WAYS_OUT.split()))


def test_commands_with_nothing_to_run_say_why_on_stderr(run, monkeypatch, tmp_path):
    no_gpu_machine(monkeypatch, tmp_path)
    code, out, err = run("Qwen/Qwen3-8B", "--commands")
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "llmfit: nothing to run: safetensors: the fleet has no GPU that vLLM could use",
        f"llmfit: {WAYS_OUT}",
    ]


def test_custom_code_gets_trust_remote_code(run):
    from llmfit.sources.repo import load_repo
    from tests.conftest import HUB

    # Kimi-K2's and DeepSeek-V3's configs name code of their own (auto_map); Qwen3's does not.
    assert load_repo("moonshotai/Kimi-K2-Instruct", HUB, offline=True).model.custom_code
    assert not load_repo("Qwen/Qwen3-8B", HUB, offline=True).model.custom_code
    code, out, err = run("deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--commands",
                         "--context", "8k")  # fmt: skip
    assert code == 0, err
    assert out.rstrip().splitlines()[-2].endswith("--trust-remote-code")


def test_a_context_past_the_trained_one_puts_vllms_variable_in_front(run):
    # Past Llama 3.1's 131,072, which its card documents no way beyond (Qwen3's documented YaRN
    # needs no variable: tests/test_cli_act_on_it.py).
    model = "meta-llama/Llama-3.1-8B-Instruct"
    code, out, err = run(model, "--vllm-version", "0.33",
                         "--fleet", "1xh200-141g", "--context", "262144",
                         "--precision", "stored", "--commands")  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[:-1] == [
        f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve {model} --tensor-parallel-size 1 "
        "--max-model-len 262144 --gpu-memory-utilization 0.90"
    ]
    code, out, _ = run(model, "--vllm-version", "0.33",
                       "--fleet", "1xh200-141g", "--context", "262144",
                       "--precision", "stored", "--json")  # fmt: skip
    cmd = json.loads(out)["options"][0]["commands"][0]
    assert cmd["env"] == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}


def test_the_checkpoint_as_shipped_at_a_shorter_context_is_an_option(run):
    code, out, err = run("meta-llama/Llama-3.1-8B-Instruct", "--vllm-version", "0.33", "--fleet",
                         "1xrtx4090-24g", "--context", "trained", "--json")  # fmt: skip
    assert code == 0, err
    opts = json.loads(out)["options"]
    # At the trained 131,072 tokens only the fp8 weights-and-cache what-if fits an RTX 4090; the
    # bf16 checkpoint at the longest context it holds there (47,008 tokens: 0.90 of the card less
    # its weights and vLLM's own, in blocks of 16 × 128 KiB a token) is offered beside it, and
    # ranks first: one change (the context) against two.
    assert [(o["what_if"], o["max_context"]) for o in opts] == [
        ("shorter context", 47_008), ("fp8 weights and KV cache", 131_072),
    ]  # fmt: skip
    assert "--max-model-len" in opts[0]["commands"][0]["argv"]
    argv = opts[0]["commands"][0]["argv"]
    assert argv[argv.index("--max-model-len") + 1] == "47008"
    assert opts[0]["describe"] == (
        "1 × rtx4090-24g, bf16 (as shipped, at 47,008 tokens: the shorter context it holds), "
        "21.3 GiB a card (0.0 free)"
    )


def test_quantised_siblings_in_the_cache_are_named(run):
    # The fewest cards (--rank cards) are the fp8 what-if's: its siblings are named.
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", FLEET, "--json", "--rank", "cards")
    assert code == 0
    assert (
        "quantised versions of Qwen/Qwen3-235B-A22B are in the local cache: "
        "Qwen/Qwen3-235B-A22B-FP8, nvidia/Qwen3-235B-A22B-NVFP4 (plan one with: llmfit NAME)"
    ) in json.loads(out)["notes"]
    # Where the checkpoint as shipped is the best, no sibling is named.
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", FLEET, "--json")
    assert not [n for n in json.loads(out)["notes"] if "quantised versions" in n]


def test_the_note_on_a_context_past_the_trained_one_names_each_planned_engines_switch(run):
    # Llama-3.1-8B-Instruct's config: 131,072 tokens, and no documented way past them.
    model = "meta-llama/Llama-3.1-8B-Instruct"
    code, out, err = run(model, "--fleet", "1xh200-141g", "--context", "262144",
                         "--engine", "sglang", "--engine", "vllm", "--json")  # fmt: skip
    assert code == 0, err
    assert (
        "a context of 262,144 is past the 131,072 the model was trained for; the commands set "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 and SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, without "
        "which the engine refuses it; answers past it may degrade"
    ) in json.loads(out)["notes"]
    code, out, err = run(model, "--fleet", "1xh200-141g", "--context", "262144",
                         "--engine", "sglang", "--commands", "--precision", "stored")  # fmt: skip
    assert code == 0, err
    assert out.startswith("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 sglang serve --model-path ")
