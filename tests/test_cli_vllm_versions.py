"""vLLM as it runs, release by release (issue 14), as the CLI shows it: --vllm-version, the flags
that change memory taken and passed on, and the JSON naming the release. The arithmetic of each
release is pinned by hand in tests/plan/test_vllm_memory.py."""

from __future__ import annotations

import json

import pytest

from llmfit.plan.engines.vllm import _verdicts


def best(run, *args: str) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)["options"][0]


def test_the_json_names_the_release_modelled(run):
    o = best(run, "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored")
    assert o["vllm_version"] == "0.34"
    o = best(run, "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored",
             "--vllm-version", "0.11")  # fmt: skip
    assert o["vllm_version"] == "0.11"


def test_an_unknown_release_is_one_sentence(run):
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--vllm-version", "0.5")
    assert code == 2
    assert err == "llmfit: vLLM 0.5 is not a version llmfit models: it knows vLLM 0.11 to 0.34.\n"


def test_flags_that_change_memory_are_passed_on(run):
    o = best(
        run, "deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--precision", "stored",
        "--max-num-seqs", "64", "--max-num-batched-tokens", "4096", "--enforce-eager",
        "--no-enable-prefix-caching", "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 1}',
    )  # fmt: skip
    argv = o["commands"][0]["argv"]
    # 0.34 resolves its own share (1.0 with the extensible KV cache): no --gpu-memory-utilization.
    assert "--gpu-memory-utilization" not in argv
    tail = argv[argv.index("--max-model-len") + 2 :]
    assert tail == [
        "--max-num-batched-tokens", "4096", "--max-num-seqs", "64", "--enforce-eager",
        "--no-enable-prefix-caching", "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 1}', "--trust-remote-code",
    ]  # fmt: skip


def test_the_api_server_count_is_passed_on(run):
    o = best(run, "Qwen/Qwen3-8B", "--fleet", "2xh100-80g", "--dp", "2", "--api-server-count",
             "1")  # fmt: skip
    argv = o["commands"][0]["argv"]
    assert argv[argv.index("--data-parallel-size") + 1] == "2"
    assert argv[-2:] == ["--api-server-count", "1"]


def test_mtp_speculation_loads_the_layer_vllm_otherwise_skips(run):
    plain = best(run, "deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--precision",
                 "stored", "--tp", "8")  # fmt: skip
    mtp = best(run, "deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--precision", "stored",
               "--tp", "8", "--speculative-config", '{"method": "mtp"}')  # fmt: skip
    # The MTP layer's 15,424,414,441 B (tests/plan/test_vllm_plan.py), split as the target's
    # layers are, less its own embedding and head, which vLLM shares with the target
    # (tests/plan/test_vllm_memory.py): its 11,277,239,959 B of experts and 216,063,192 B of
    # attention and shared expert an eighth a card, its router, norms, q/kv-a and eh_proj
    # (224,395,130 B) whole, and its MLA's W_UK/W_UV, 512 × 16 heads × 256 × 2 B.
    share = -(-216_063_192 // 8) + 224_395_130 + -(-11_277_239_959 // 8) + 512 * 16 * 256 * 2
    assert 15_424_414_441 - 11_277_239_959 - 224_395_130 - 2 * 1_853_358_080 == 216_063_192
    assert mtp["per_card"]["weights"] - plain["per_card"]["weights"] == share == 1_665_252_328


def test_lora_slots_cost_their_memory(run):
    plain = best(run, "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored")
    lora = best(run, "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored",
                "--max-loras", "4", "--max-lora-rank", "16")  # fmt: skip
    assert lora["per_card"]["weights"] > plain["per_card"]["weights"]
    argv = lora["commands"][0]["argv"]
    at = argv.index("--enable-lora")
    assert argv[at : at + 5] == ["--enable-lora", "--max-loras", "4", "--max-lora-rank", "16"]


@pytest.mark.parametrize(
    "flag, value, sentence",
    [
        ("--speculative-config", "{", "--speculative-config '{' is not JSON"),
        ("--speculative-config", '{"method": "magic"}',
         "--speculative-config method 'magic' is not one of mtp, ngram, eagle"),
        ("--speculative-config", '{"method": "eagle"}',
         "--speculative-config method 'eagle' needs a \"model\" to load."),
        ("--limit-mm-per-prompt", '{"image": -1}',
         "--limit-mm-per-prompt 'image': -1 is not a count of 0 to 1024."),
    ],
)  # fmt: skip
def test_a_bad_vllm_flag_is_one_sentence(run, flag, value, sentence):
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", flag, value)
    assert code == 2
    assert err.startswith(f"llmfit: {sentence}")


def test_check_reads_the_same_flags(run):
    code, out, err = run(
        "check", "--fleet", "1xh100-80g", "--json", "--vllm-version", "0.20", "--", "vllm",
        "serve", "Qwen/Qwen3-8B", "--max-model-len", "16000", "--enable-lora", "--max-loras", "2",
        "--no-enable-prefix-caching",
    )  # fmt: skip
    assert code == 0, err
    (o,) = json.loads(out)["options"]
    assert o["vllm_version"] == "0.20"
    # The launch is the command checked, word for word (issue 24): vLLM's own default rank of 16
    # is what the plan sized, and is not added.
    assert o["commands"][0]["argv"] == [
        "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "16000", "--enable-lora",
        "--max-loras", "2", "--no-enable-prefix-caching",
    ]  # fmt: skip


def test_a_verdict_that_differs_from_the_newest_release_is_said():
    from llmfit.plan.engines.vllm_versions import VllmVersion

    assert _verdicts([], [], VllmVersion(11)) is None
    # An option the newest release fits and 0.11 does not (the list of one, as stand-ins).
    sentence = _verdicts([], [_stand_in()], VllmVersion(11))
    assert sentence == (
        "under vLLM 0.34 (the newest llmfit models) the verdict differs from vLLM 0.11's: "
        "1 layout more fit (plan with --vllm-version 0.34 to see them)"
    )


def _stand_in():
    from llmfit.plan.artifact import Artifact
    from llmfit.plan.layout import Card, Layout
    from llmfit.plan.options import Option, PerCard

    return Option(Artifact("x", "safetensors", 1), "vllm", Layout(), Card("h100-80g", 1),
                  PerCard(1, 0, 0), 2, None)  # fmt: skip


def _hub_repos() -> list[str]:
    from tests.conftest import HUB

    return sorted(
        p.name.removeprefix("models--").replace("--", "/", 1)
        for p in HUB.glob("models--*")
        if not p.name.startswith("models--llmfit-fixtures")
    )


@pytest.mark.parametrize("repo", _hub_repos())
def test_every_fixture_model_plans_under_0_34(run, repo):
    # Issue 32: `llmfit MODEL --vllm-version 0.34` works for every fixture model: a plan (0), or
    # nothing that fits (1) with the reason, never a usage error or a traceback; and no printed
    # command passes --gpu-memory-utilization, which 0.34 resolves itself.
    code, out, err = run(repo, "--fleet", "8xh200-141g", "--vllm-version", "0.34", "--json")
    assert code in (0, 1), err
    for option in json.loads(out)["options"]:
        for command in option["commands"]:
            assert "--gpu-memory-utilization" not in command["argv"]


def test_the_extensible_kv_cache_can_be_turned_off_and_only_from_0_34(run):
    # Qwen3-8B on one H100 at 32,768 tokens: 13.48 sequences with the cache measured after
    # warm-up (vLLM 0.34 works out 13.46: tests/plan/test_vllm_034.py), 12.4 without it, where
    # vLLM resolves its share to 0.92 (CacheConfig.resolved_gpu_memory_utilization) as 0.33 did.
    args = ("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--precision", "stored", "--context", "32k")
    assert best(run, *args)["concurrency"] == 13.48
    off = best(run, *args, "--no-enable-extensible-kv-cache")
    assert off["concurrency"] == 12.4
    argv = off["commands"][0]["argv"]
    assert "--no-enable-extensible-kv-cache" in argv and "--gpu-memory-utilization" not in argv
    code, _, err = run(*args, "--no-enable-extensible-kv-cache", "--vllm-version", "0.33")
    assert code == 2
    assert err == (
        "llmfit: --no-enable-extensible-kv-cache is a flag of vLLM 0.34 on, and vLLM 0.33 has "
        "none.\n"
    )
