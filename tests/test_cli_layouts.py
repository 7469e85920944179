"""Layouts that serve (issue 13): every sensible layout of the cards, the one a user pins, and a
command a user already has; numbers worked out by hand from the fixture configs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLE_FLEET

FLEET = str(EXAMPLE_FLEET)
H100_HAVE = int(85_045_477_376 * 0.9)  # 0.90 of what CUDA reports for an H100 80GB
H200_HAVE = int((143_771 - 454) * (1 << 20) * 0.9)


def options(run, *args: str) -> list[dict]:
    code, out, err = run(*args, "--json")
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
    # and is the fuller: (63 × 6,375,407,616 + 4,202,725,376) / 8 cards.
    assert tp8["per_card"]["weights"] == (63 * layer + output) // 8 == 50_731_675_648
    # Its cache: one of the 8 KV heads a card, 63 layers × 256 × 2 B × 8,192 tokens.
    assert tp8["per_card"]["kv_cache"] == 63 * 256 * 2 * 8192
    # The narrowest: three nodes of four cards, 42 layers a stage; the last stage's card holds
    # (42 × 6,375,407,616 + 4,202,725,376) / 4, the embedding's or the head's gigabyte more
    # than an average over the stages says.
    tp4 = next(o for o in opts if (o["tp"], o["pp"]) == (4, 3))
    assert tp4["per_card"]["weights"] == (42 * layer + output) // 4 == 67_992_461_312
    assert tp4["per_card"]["weights"] - 811_706_777_600 // 12 == 350_229_846
    # Sixteen cards hold fifty times the sequences of twelve.
    assert (tp4["concurrency"], tp8["concurrency"]) == (1.32, 67.08)


def test_deepseek_v3_on_eight_h200_offers_data_parallel_attention_with_expert_parallelism(run):
    opts = options(
        run, "deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--precision", "stored"
    )
    dp8 = next(o for o in opts if (o["tp"], o["dp"]) == (1, 8))
    tp8 = next(o for o in opts if (o["tp"], o["dp"]) == (8, 1))
    assert dp8["ep"] and tp8["ep"] and dp8["replicas"] == 1
    # DeepSeek-V3's config: hidden 7,168, vocabulary 129,280, 61 layers, the first 3 dense
    # (intermediate 18,432), then 58 MoE (256 routed experts of 2,048, one shared, a router);
    # MLA attention: 128 heads, q_lora 1,536, kv_lora 512, rope 64, nope 128, v 128.
    attention = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert attention == 187_105_280
    dense = attention + 3 * 7168 * 18_432
    experts = 256 * 3 * 7168 * 2048
    moe = attention + experts + 7168 * 256 + 3 * 7168 * 2048
    params = 3 * dense + 58 * moe
    assert params == 669_172_039_680
    # The embedding and head stay bf16; the checkpoint's other bytes go to the layers by their
    # parameters, and a MoE layer's routed experts are their share of it.
    embed, output = 129_280 * 7168 * 2, (7168 + 129_280 * 7168) * 2
    rest = 688_586_727_753 - embed - output
    expert_bytes = 58 * (rest * moe // params) * experts // moe
    non_expert = 688_586_727_753 - expert_bytes
    # A data-parallel rank keeps the attention, the dense layers, the embedding and the head
    # whole, and an eighth of the routed experts; tensor parallel 8 keeps an eighth of it all.
    assert abs(dp8["per_card"]["weights"] - (non_expert + -(-expert_bytes // 8))) <= 61
    assert tp8["per_card"]["weights"] == -(-688_586_727_753 // 8)
    # Both keep the whole MLA latent of each token on every card: 61 × 576 × 2 B × 163,840.
    assert dp8["per_card"]["kv_cache"] == tp8["per_card"]["kv_cache"] == 61 * 1152 * 163_840
    # But each of the eight ranks holds its own sequences: the room left on every card counts,
    # where tensor parallelism copies one cache to all eight.
    per_seq = 61 * 1152 * 163_840
    for o, ranks in ((dp8, 8), (tp8, 1)):
        room = H200_HAVE - o["per_card"]["weights"] - o["per_card"]["overhead"]
        assert o["concurrency"] == round(room / per_seq * ranks, 2)
    assert (dp8["concurrency"], tp8["concurrency"]) == (18.25, 3.58)


def test_deepseek_v3_explain_shows_the_data_parallel_arithmetic(run):
    code, out, _ = run(
        "deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--precision", "stored", "--explain"
    )
    assert code == 0
    assert "Option 1: 8 × h200-141g (dp8+ep), fp8" in out
    assert (
        "the attention and dense weights over the 1 card of a rank, the routed experts over all 8"
        in out
    )
    assert "18.25 sequences of 163,840 tokens at once over 8 ranks" in out
    assert "each of the 8 data-parallel ranks keeps its own KV cache" in out


def test_qwen3_8b_on_one_h100_node_offers_eight_replicas(run):
    opts = options(run, "Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--precision", "stored")
    assert [(o["tp"], o["dp"], o["gpus"]) for o in opts] == [
        (1, 1, 1), (2, 1, 2), (4, 1, 4), (8, 1, 8), (1, 8, 8),
    ]  # fmt: skip
    dp8 = opts[-1]
    assert (dp8["replicas"], dp8["cards_per_replica"], dp8["label"]) == (
        8, 1, "8 × h100-80g (dp8)",
    )  # fmt: skip
    # Eight copies, each the one-card layout's: eight times its sequences (8.8325 a card).
    assert dp8["per_card"] == opts[0]["per_card"]
    assert (opts[0]["concurrency"], dp8["concurrency"]) == (8.83, 70.66)
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
        "meta-llama/Meta-Llama-3.1-70B", "--fleet", "8xh100-80g", "--tp", "1", "--pp", "1",
        "--dp", "1", "--precision", "stored", "--context", "8192",
    )  # fmt: skip
    assert code == 1
    # 141,107,412,992 B of bf16 on one card, the activation of 8,192 tokens and 8,192 tokens of
    # 80 layers × 8 heads × 256 × 2 B.
    assert "safetensors: nothing fits; closest is 1 × h100-80g, needing 139.5 GiB of 71.3" in out


def test_concurrency_keeps_only_layouts_that_hold_that_many(run):
    opts = options(
        run, "meta-llama/Llama-3.1-8B-Instruct", "--fleet", FLEET, "--precision", "stored",
        "--concurrency", "16", "--context", "32k",
    )  # fmt: skip
    assert opts and all(o["concurrency"] >= 16 for o in opts)
    # One L40S card (40.1 GiB counted on) holds 43,023,237,120 − 16,060,522,496 − 2,076,049,408
    # B of cache, 5.8 sequences of 32,768 × 131,072 B: too few; two hold enough.
    assert not [o for o in opts if o["gpu_class"] == "l40s-48g" and o["gpus"] == 1]
    # The fewest cards that hold 16 rank first: one H200.
    assert (opts[0]["gpu_class"], opts[0]["gpus"]) == ("h200-141g", 1)


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
        "check", "--fleet", "2xh100-80g", "--json", "--", "vllm", "serve", "Qwen/Qwen3-8B",
        "--tensor-parallel-size", "2", "--max-model-len", "8192",
    )  # fmt: skip
    assert code == 0, err
    (checked,) = json.loads(out)["options"]
    for key in ("per_card", "concurrency", "max_context", "tp", "pp", "dp", "gpus"):
        assert checked[key] == pinned[0][key]
    code, out, _ = run(
        "check", "--fleet", "2xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B",
        "-tp", "2", "--max-model-len", "8192", "--port", "9000", "--swap-space", "4",
    )  # fmt: skip
    assert code == 0
    assert "fits: 2 cards of h100-80g, on 1 node that could run it, free now" in out
    assert "not modelled (read, and changing nothing in the plan): --swap-space 4" in out


def test_check_says_when_the_command_does_not_fit(run):
    code, out, _ = run(
        "check", "--fleet", "1xh100-80g", "--", "vllm", "serve", "meta-llama/Meta-Llama-3.1-70B",
        "--max-model-len", "8192",
    )  # fmt: skip
    assert code == 1
    assert "does not fit:" in out
    assert "  1 × h100-80g: needs 139.5 GiB of 71.3 a card" in out


@pytest.mark.parametrize(
    "argv, sentence",
    [
        (("python", "x.py"), "'python' is not a command llmfit can check"),
        (("vllm", "bench"), "the command to check: a vLLM command to check starts `vllm serve"),
        (("vllm", "serve", "Qwen/Qwen3-8B", "-tp", "two"),
         "the command to check: --tensor-parallel-size 'two' is not a whole number."),
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
