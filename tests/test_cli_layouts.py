"""Layouts that serve (issue 13): every sensible layout of the cards, the one a user pins, and a
command a user already has; numbers worked out by hand from the fixture configs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLE_FLEET

FLEET = str(EXAMPLE_FLEET)
# 0.90 of what CUDA reports for an H100 80GB and an H200, rounded up as vLLM's
# requested_memory is (math.ceil in gpu_worker).
H200_HAVE = -(-(143_771 - 454) * (1 << 20) * 9 // 10)


def options(run, *args: str) -> list[dict]:
    # At vLLM 0.33, the release these layouts were worked by hand against (H200_HAVE's 0.90).
    code, out, err = run(*args, "--vllm-version", "0.33", "--json")
    assert code == 0, err
    return json.loads(out)["options"]


def test_405b_on_four_h100_nodes_offers_tp8_by_pp2_with_the_fullest_stage_checked(run):
    opts = options(
        run, "meta-llama/Meta-Llama-3.1-405B", "--fleet", "4x8xh100-80g@ib0",
        "--context", "8192", "--precision", "stored", "--all",
    )  # fmt: skip
    # Llama-3.1-405B (fixtures/src): hidden 16,384, vocabulary 128,256, 126 layers, untied head.
    # The bf16 checkpoint is 811,706,777,600 B (2 B a parameter). The embedding is 128,256 ×
    # 16,384 × 2 B = 4,202,692,608; the output layer the head and the final norm, 4,202,725,376;
    # the rest, 803,301,359,616, is 126 alike layers of 6,375,407,616 B.
    embed, output, layer = 4_202_692_608, 4_202_725_376, 6_375_407_616
    assert embed + output + 126 * layer == 811_706_777_600
    tp8 = next(o for o in opts if (o["tp"], o["pp"]) == (8, 2))
    assert (tp8["nodes"], tp8["gpus_per_node"], tp8["dp"], tp8["replicas"]) == (2, 8, 1, 1)

    # Two stages of 63 layers (get_pp_indices: 126 / 2); the second also holds the output layer,
    # and is the fuller. Each card holds an eighth of its layers' matrices and of the head, and
    # whole what vLLM does not split: each layer's two norms (2 × 16,384 × 2 B), the final norm
    # (32,768 B) and the rotary cache (131,072 positions × 128 × 2 B).
    def card(layers: int, tp: int) -> int:
        return (layers * (layer - 65_536) // tp + layers * 65_536 + 32_768
                + (output - 32_768) // tp + 131_072 * 128 * 2)  # fmt: skip

    assert tp8["per_card"]["weights"] == card(63, 8) == 50_768_871_424
    # Its cache: one of the 8 KV heads a card, 63 layers × 256 × 2 B × 8,192 tokens.
    assert tp8["per_card"]["kv_cache"] == 63 * 256 * 2 * 8192
    # The narrowest: three nodes of four cards, 42 layers a stage; the last stage's card holds
    # the head's quarter besides: a gigabyte more than an average over the stages says.
    tp4 = next(o for o in opts if (o["tp"], o["pp"]) == (4, 3))
    assert tp4["per_card"]["weights"] == card(42, 4) == 68_028_104_704
    assert tp4["per_card"]["weights"] - 811_706_777_600 // 12 == 385_873_238
    # Sixteen cards hold about five times the sequences of twelve (the later stages also keep
    # 0.5 GiB of received activations, 8,192 tokens × 16,384 × 2 × 2 B: tests/plan/
    # test_vllm_memory.py).
    assert (tp4["concurrency"], tp8["concurrency"]) == (17.07, 87.85)


def test_deepseek_v3_on_eight_h200_offers_data_parallel_attention_with_expert_parallelism(run):
    opts = options(
        run, "deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--precision", "stored", "--all"
    )
    dp8 = next(o for o in opts if (o["tp"], o["dp"]) == (1, 8))
    tp8 = next(o for o in opts if (o["tp"], o["dp"]) == (8, 1))
    assert dp8["ep"] and tp8["ep"] and dp8["replicas"] == 1
    # Both shard the routed experts over the eight cards; a data-parallel rank keeps whole what
    # tensor parallelism would split eight ways: the attention and dense layers, the embedding
    # and head, and MLA's decompressed W_UK/W_UV (vllm_memory.rank_weights names each part,
    # tests/plan/test_vllm_memory.py works DeepSeek-V3's out by hand). Here, the difference:
    # layers 14,237,095,956 → 1,779,636,996 (an eighth, rounded up a layer); embedding
    # 129,280 × 7,168 × 2 B → an eighth; head likewise, beside its 14,336 B norm; W_UK/W_UV
    # 61 × 512 × 128 heads × 256 × 2 B → an eighth.
    split = (
        (14_237_095_956 - 1_779_636_996)
        + (1_853_358_080 - 1_853_358_080 // 8) * 2
        + (2_046_820_352 - 2_046_820_352 // 8)
    )
    assert 61 * 512 * 128 * 256 * 2 == 2_046_820_352
    assert dp8["per_card"]["weights"] - tp8["per_card"]["weights"] == split == 17_491_803_408
    # Both keep the whole MLA latent of each token on every card: 61 × 576 × 2 B × 163,840.
    assert dp8["per_card"]["kv_cache"] == tp8["per_card"]["kv_cache"] == 61 * 1152 * 163_840
    # But each of the eight ranks holds its own sequences, where tensor parallelism copies one
    # cache to all eight. A block of 16 tokens costs 16 × 61 × 1,152 B = 1,124,352 B; a
    # sequence of 163,840 tokens takes 10,240 of them. The KV budget is what is counted on less
    # the weights and the rest, of which the MoE: block FP8 on Hopper with expert parallelism
    # runs FlashInfer's CUTLASS kernel (issue 32), whose workspace keeps 7,168 × 2 B for every
    # token the experts see, and under data parallelism they see all 8 ranks' 8,192 (the
    # all-gather): 0.875 GiB a rank, against 0.109 for TP's 8,192; FlashInfer's own scratch
    # (tests/plan/test_vllm_still_off.py) is a transient of the profile run, in the overhead.
    assert 8 * 8_192 * 7_168 * 2 == 0.875 * 2**30 and 8_192 * 7_168 * 2 == 0.109375 * 2**30
    block, per_seq = 16 * 61 * 1152, 163_840 // 16
    for o, ranks in ((dp8, 8), (tp8, 1)):
        budget = H200_HAVE - o["per_card"]["weights"] - o["per_card"]["overhead"]
        assert o["concurrency"] == round(budget // block / per_seq * ranks, 2)
    assert (dp8["concurrency"], tp8["concurrency"]) == (9.13, 4.01)


def test_deepseek_v3_explain_shows_the_data_parallel_arithmetic(run):
    code, out, _ = run(
        "deepseek-ai/DeepSeek-V3",
        "--vllm-version",
        "0.33",
        "--fleet",
        "8xh200-141g",
        "--precision",
        "stored",
        "--explain",
        "--rank",
        "cards",
    )
    assert code == 0
    out = " ".join(out.split())  # each part one line, wrapped to the terminal: read unwrapped
    # Four ranks of TP 2 hold the most: their experts gather four ranks' batches, 32,768 tokens:
    # FlashInfer's workspace of 32,768 × 7,168 × 2 B and its per-call scratch (issue 32).
    assert "Option 1: 8 × h200-141g (tp2×dp4+ep), fp8" in out
    assert (
        "the attention and dense weights over the 2 cards of a rank, the routed experts over all 8"
        in out
    )
    assert (
        "MoE workspace 0.44 GiB (the experts' buffers for 32,768 tokens, every rank's batch " in out
    )
    assert "of it FlashInfer's MoE scratch 7.75 GiB, freed after each call" in out
    assert "11.09 sequences of 163,840 tokens at once over 4 ranks" in out
    assert "each of the 4 data-parallel ranks keeps its own KV cache" in out


def test_qwen3_8b_on_one_h100_node_offers_eight_replicas(run):
    opts = options(run, "Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--precision", "stored",
                   "--rank", "cards")  # fmt: skip
    assert [(o["tp"], o["dp"], o["gpus"]) for o in opts] == [
        (1, 1, 1), (2, 1, 2), (4, 1, 4), (8, 1, 8), (1, 8, 8),
    ]  # fmt: skip
    dp8 = opts[-1]
    assert (dp8["replicas"], dp8["cards_per_replica"], dp8["label"]) == (
        8, 1, "8 × h100-80g (dp8)",
    )  # fmt: skip
    # Eight copies, each the one-card layout's: eight times its sequences (9.641 a card).
    assert dp8["per_card"] == opts[0]["per_card"]
    assert (opts[0]["concurrency"], dp8["concurrency"]) == (9.64, 77.13)
    assert dp8["commands"][0]["argv"] == [
        "vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "1",
        "--data-parallel-size", "8", "--max-model-len", "40960", "--gpu-memory-utilization", "0.90",
    ]  # fmt: skip


def test_pins_give_exactly_the_pinned_layout(run):
    opts = options(run, "Qwen/Qwen3-8B", "--fleet", "2xh100-80g", "--tp", "2")
    assert opts and all((o["tp"], o["pp"], o["dp"]) == (2, 1, 1) for o in opts)
    assert {o["what_if"] for o in opts} == {None, "fp8 weights", "fp8 KV cache",
                                            "fp8 weights and KV cache"}  # fmt: skip


def test_a_pinned_layout_that_does_not_fit_says_what_it_needs_and_holds(run):
    code, out, _ = run(
        "meta-llama/Meta-Llama-3.1-70B", "--vllm-version", "0.33",
        "--fleet", "8xh100-80g", "--tp", "1", "--pp", "1",
        "--dp", "1", "--precision", "stored", "--context", "8192",
    )  # fmt: skip
    assert code == 1
    # 141,107,412,992 B of bf16 on one card, and the rest, and 8,192 tokens of 80 layers × 8
    # heads × 256 × 2 B.
    assert "safetensors: nothing fits; closest is 1 × h100-80g, needing 135.7 GiB of 71.3" in out


def test_concurrency_past_what_a_layout_holds_queues_rather_than_refusing_it(run):
    # --concurrency names requests in flight of the workload; more than a layout's pool holds
    # wait for a place, as the engines queue them (plan/load.py `admits`): no layout is refused
    # for holding fewer, only one that cannot hold one request whole. 16 requests of the whole
    # 32k context each (32,767 + 1 tokens): one L40S holds 6.13 sequences of 32,768 tokens, and
    # is kept; the fewest cards that hold the context rank first: one H200.
    opts = options(
        run, "meta-llama/Llama-3.1-8B-Instruct", "--fleet", FLEET, "--precision", "stored",
        "--concurrency", "16", "--context", "32k", "--input-len", "32767", "--output-len", "1",
        "--rank", "cards",
    )  # fmt: skip
    l40s = [o for o in opts if o["gpu_class"] == "l40s-48g" and o["gpus"] == 1]
    assert len(l40s) == 1 and l40s[0]["concurrency"] < 16
    assert (opts[0]["gpu_class"], opts[0]["gpus"]) == ("h200-141g", 1)
    # The 1 × H200 holds 27.36 sequences: 16 in flight fit, and 16 a replica of 1.67 requests
    # within the targets need 10 (ceil(16 / 1.67)), carrying 1.6 each (plan/load.py
    # `_fewest_in_flight`). With one output token no request decodes: an arrival waits for no
    # decode step in flight (plan/load.py `_step_wait`).
    assert opts[0]["serving"]["capacity_concurrency"] == 1.67
    assert opts[0]["serving"]["replicas"] == 10


def test_rank_concurrency_puts_the_most_sequences_first(run):
    opts = options(
        run, "Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--precision", "stored",
        "--rank", "concurrency",
    )  # fmt: skip
    held = [o["concurrency"] for o in opts]
    assert held == sorted(held, reverse=True)


def test_check_plans_exactly_the_command_and_agrees_with_the_plan(run):
    pinned = options(
        run, "Qwen/Qwen3-8B", "--fleet", "2xh100-80g", "--tp", "2", "--precision", "stored",
        "--context", "8192",
    )  # fmt: skip
    code, out, err = run(
        "check", "--vllm-version", "0.33", "--fleet", "2xh100-80g", "--json", "--", "vllm",
        "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2", "--max-model-len", "8192",
    )  # fmt: skip
    assert code == 0, err
    (checked,) = json.loads(out)["options"]
    for key in ("per_card", "concurrency", "max_context", "tp", "pp", "dp", "gpus"):
        assert checked[key] == pinned[0][key]
    code, out, _ = run(
        "check", "--fleet", "2xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B",
        "-tp", "2", "--max-model-len", "8192", "--port", "9000", "--seed", "4",
    )  # fmt: skip
    assert code == 0
    assert "fits: 2 cards of h100-80g, on 1 node that could run it, free now" in out
    assert "not modelled (read, and changing nothing in the plan): --seed 4" in out


def test_check_says_when_the_command_does_not_fit(run):
    code, out, _ = run(
        "check", "--vllm-version", "0.33",
        "--fleet", "1xh100-80g", "--", "vllm", "serve", "meta-llama/Meta-Llama-3.1-70B",
        "--max-model-len", "8192",
    )  # fmt: skip
    assert code == 1
    assert "does not fit:" in out
    assert "  1 × h100-80g: needs 135.7 GiB of 71.3 a card" in out


def test_check_refuses_eight_lora_slots_on_qwen3_30b_on_one_h100(run):
    # Issue 26: with --enable-lora every MoE layer takes adapters for all 128 experts: 1.58 GiB
    # a slot of rank 16 (tests/plan/test_vllm_memory.py works it out), 12.67 GiB for 8, which
    # the card's share does not hold beside the 56.87 GiB checkpoint; without LoRA it starts.
    code, out, _ = run(
        "check", "--vllm-version", "0.33",
        "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B",
        "--enable-lora", "--max-loras", "8", "--max-model-len", "32768",
    )  # fmt: skip
    assert code == 1 and "does not fit:" in out
    code, out, _ = run(
        "check", "--vllm-version", "0.33",
        "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B",
        "--max-model-len", "32768",
    )  # fmt: skip
    assert code == 0 and out.splitlines()[1].startswith("fits:")


@pytest.mark.parametrize(
    "argv, sentence",
    [
        (("python", "x.py"), "'python' is not a command llmfit can check"),
        (("vllm", "bench"), "the command to check: a vLLM command to check starts `vllm serve"),
        (("vllm", "serve", "Qwen/Qwen3-8B", "-tp", "two"),
         "the command to check: vLLM 0.34 refuses it: --tensor-parallel-size/-tp 'two' is not a "
         "whole number."),
        (("llama-server", "-c", "4096"),
         "the command to check: the llama-server command names no model"),
    ],
)  # fmt: skip
def test_check_refuses_a_command_it_cannot_read_in_one_sentence(run, argv, sentence):
    code, _, err = run("check", "--fleet", "1xh100-80g", "--", *argv)
    assert code == 2
    assert err.startswith(f"llmfit: {sentence}")


def test_check_a_llama_server_command_by_its_hub_tag(run):
    code, out, err = run(
        "check", "--fleet", "1xrtx4090-24g", "--json", "--", "llama-server", "-hf",
        "llmfit-fixtures/Tiny-Llama-GGUF:Q6_K", "-c", "4096", "-ngl", "99",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    (o,) = doc["options"]
    assert (o["artifact"], o["engine"], o["gpu_layers"]) == ("Tiny-Llama-Q6_K.gguf", "llama.cpp", 5)


def test_gpt_oss_20b_pinned_at_tp2_and_its_vllm_serve_line_agree(run):
    # The issue's own example: gpt-oss-20b (13,761,264,768 B of mxfp4 experts and bf16 rest) at
    # tensor parallel 2 on two H100s, asked as pins and as the vllm serve line a user has.
    opts = options(run, "openai/gpt-oss-20b", "--fleet", "2xh100-80g", "--tp", "2")
    assert opts and all((o["tp"], o["pp"], o["dp"], o["gpus"]) == (2, 1, 1, 2) for o in opts)
    pinned = next(
        o
        for o in options(
            run,
            "openai/gpt-oss-20b",
            "--fleet",
            "2xh100-80g",
            "--tp",
            "2",
            "--context",
            "8192",
            "--precision",
            "stored",
        )  # fmt: skip
    )
    code, out, err = run(
        "check", "--fleet", "2xh100-80g", "--json", "--", "vllm", "serve", "openai/gpt-oss-20b",
        "--tensor-parallel-size", "2", "--max-model-len", "8192",
    )  # fmt: skip
    assert code == 0, err
    (checked,) = json.loads(out)["options"]
    for key in ("max_context", "tp", "gpus"):
        assert checked[key] == pinned[key], key
    # The command asked for no expert parallelism, and the check plans it as given. Its experts
    # are split over both ranks either way, but not alike (issue 26): without expert
    # parallelism each rank holds all 32 experts at half their 2,880-wide intermediate size,
    # which the mxfp4 kernel on Hopper pads per partition, 1,440 → 1,472 (32 × (3 × 3,072 ×
    # 1,472 × 17/32 + (2 × 1,472 + 3,072) × 2) = 231,006,208 B a layer) where 16 whole experts
    # need none (225,890,304 B); and its MoE workspace, at the sizes the kernel pads to (hidden
    # 3,072), is 8,192 tokens × 4 experts × (max(1,472, 3,072) + max(2,944, 3,072)) × 2 B where
    # whole experts take (max(2,880, 3,072) + 5,760).
    assert (pinned["ep"], checked["ep"]) == (True, False)
    weights = checked["per_card"]["weights"] - pinned["per_card"]["weights"]
    assert weights == 24 * (231_006_208 - 225_890_304) == 122_781_696
    overhead = pinned["per_card"]["overhead"] - checked["per_card"]["overhead"]
    assert overhead == 8_192 * 4 * (8_832 - 6_144) * 2 == 176_160_768


def test_sglang_says_nodes_without_a_fabric_cannot_be_joined(run):
    # Llama 3.1 70B bf16 (141 GB) holds no single H100; two one-card nodes with no fabric cannot
    # be one replica, for SGLang as for vLLM.
    code, out, _ = run("meta-llama/Meta-Llama-3.1-70B", "--fleet", "2x1xh100", "--engine",
                       "sglang", "--precision", "stored", "--json")  # fmt: skip
    assert code == 1
    assert {
        "engine": "sglang",
        "where": "2 nodes × 1 h100-80g",
        "reason": "these nodes have no fabric, so a replica cannot span them",
    }.items() <= next(r for r in json.loads(out)["rejected"] if "fabric" in r["reason"]).items()
