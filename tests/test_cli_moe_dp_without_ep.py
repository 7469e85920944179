"""A MoE's data-parallel ranks without expert parallelism: vLLM's `--data-parallel-size N` with no
`--enable-expert-parallel`, SGLang's `--enable-dp-attention` with no `--ep-size`. Both engines run
it (vLLM: fused_moe/config.py FusedMoEParallelConfig.make flattens dp × tp into the MoE's tensor
parallelism; SGLang: moe_tp_size = tp_size // ep_size): every expert cut over all tp × dp cards,
the same bytes a card as with expert parallelism, its quantisation blocks split tp × dp ways.
`llmfit check` of such a command said "does not fit" (exit 1)."""

from __future__ import annotations

import shlex

from llmfit.plan.engines.serving import experts_refusal
from llmfit.plan.layout import Layout
from llmfit.plan.model import Shape
from llmfit.sources.repo import load_repo
from tests.conftest import HUB


def shape(repo: str) -> Shape:
    return Shape.of(load_repo(repo, HUB).model)


def test_the_experts_blocks_are_split_over_every_card_of_the_ranks():
    qwen = shape("Qwen/Qwen3-235B-A22B-FP8")
    # moe_intermediate_size 1536 over tp 4 × dp 2 = 8 cards: 192, not a multiple of
    # weight_block_size[0] = 128 (vLLM's Fp8MoEMethod.create_weights, word for word).
    assert experts_refusal(qwen, Layout(tp=4, dp=2)) == (
        "The output_size of gate's and up's weight = 192 is not divisible by "
        "weight quantization block_n = 128."
    )
    # Over 2 × 2 cards: 384 = 3 × 128.
    assert experts_refusal(qwen, Layout(tp=2, dp=2)) is None
    # With expert parallelism each expert stays whole on its card.
    assert experts_refusal(qwen, Layout(tp=4, dp=2, ep=True)) is None
    # One rank: the width's own rule (vllm.width_refusal) says it, not this one.
    assert experts_refusal(qwen, Layout(tp=8)) is None
    # A dense layer's blocks are cut over tp alone: Qwen3-32B-FP8's MLP (25,600 / 16 = 1,600,
    # not a multiple of 128) is no routed expert's rule.
    assert experts_refusal(shape("Qwen/Qwen3-32B-FP8"), Layout(tp=8, dp=2)) is None


def test_vllm_data_parallel_ranks_of_a_moe_without_expert_parallelism_fit(run):
    argv = ["check", "--fleet", "2xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B",
            "--data-parallel-size", "2"]  # fmt: skip
    code, out, err = run(*argv)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == "fits: 2 cards of h100-80g, on 1 node that could run it, free now"
    assert lines[2] == "Option 1: 2 × h100-80g (dp2), bf16, 36.9 GiB a card (42.3 free)"
    # Routed experts: 48 layers × 128 experts × 3 × 2,048 × 768 × 2 B = 57,982,058,496 B over
    # the 2 cards: 28,991,029,248 B, 27.00 GiB, as with expert parallelism.
    assert "of it: routed experts 27.00 GiB," in out
    code, with_ep, err = run(*argv, "--enable-expert-parallel")
    assert code == 0, err
    assert "Option 1: 2 × h100-80g (dp2+ep), bf16, 36.9 GiB a card (42.3 free)" in with_ep
    need = [line for line in out.splitlines() if line.strip().startswith("need")]
    assert need == [line for line in with_ep.splitlines() if line.strip().startswith("need")]
    assert need == ["    need          36.9 GiB of 79.2 a card"]


def test_a_plan_asked_for_no_expert_parallelism_prints_none(run):
    code, out, err = run("Qwen/Qwen3-30B-A3B", "--fleet", "2xh100-80g", "--dp", "2", "--no-ep",
                         "--commands")  # fmt: skip
    assert code == 0, err
    serve = [shlex.split(line) for line in out.splitlines() if line.startswith("vllm serve")]
    assert serve == [
        ["vllm", "serve", "Qwen/Qwen3-30B-A3B", "--tensor-parallel-size", "1",
         "--data-parallel-size", "2", "--max-model-len", "40960"]
    ]  # fmt: skip


def test_sglang_dp_attention_without_ep_size_is_planned_as_it_runs(run):
    # --tp 8 --dp 8 --enable-dp-attention, no --ep-size: the experts over all 8 cards by tensor
    # parallelism (moe_tp_size 8), labelled without "+ep".
    code, out, err = run("check", "--fleet", "8xh200-141g", "--", "sglang", "serve",
                         "--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--dp", "8",
                         "--enable-dp-attention")  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[2] == (
        "Option 1: 8 × h200-141g (dp8), fp8, 136.3 GiB a card (3.6 free)"
    )
    code, out, err = run("deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--engine",
                         "sglang", "--dp", "8", "--no-ep", "--commands")  # fmt: skip
    assert code == 0, err
    serve = [shlex.split(line) for line in out.splitlines() if line.startswith("sglang serve")]
    assert len(serve) == 1
    assert serve[0][:8] == ["sglang", "serve", "--model-path", "deepseek-ai/DeepSeek-V3",
                            "--tp-size", "8", "--attn-dp-size", "8"]  # fmt: skip
    assert "--ep-size" not in serve[0]
