"""vLLM's --kv-cache-memory-bytes: the KV cache's bytes on each card, reserved as given after the
profile run (v1/worker/gpu_worker.py determine_available_memory), --gpu-memory-utilization
ignored and the extensible cache off (config/cache.py CacheConfig). `llmfit check` had read it
and said it changed nothing: a pool three times the one the command sets."""

from __future__ import annotations

import shlex

# Qwen3-8B's KV: 36 layers × 8 KV heads × 128 × (K, V) × 2 B = 147,456 B a token; vLLM 0.34's
# blocks of 64 tokens: 9,437,184 B a block.
CHECK = ["check", "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B",
         "--kv-cache-memory-bytes"]  # fmt: skip


def test_the_pool_is_the_bytes_the_command_reserves(run):
    code, out, err = run(*CHECK, "20000000000")
    assert code == 0, err
    said = " ".join(out.split())  # the sentences, whatever the width wraps them at
    # 20,000,000,000 // 9,437,184 = 2,119 blocks (19,997,192,896 B, 18.62 GiB), 135,616 tokens:
    # 3.31 sequences of the 40,960-token context.
    assert (
        "KV pool: 135,616 tokens · longest sequence 40,960 · 3.31 sequences of 40,960 at once"
        in (said)
    )
    assert (
        "KV cache 18.6 GiB ███████······················· the pool of 135,616 tokens "
        "--kv-cache-memory-bytes sets: 2,119 blocks of 64 tokens × 9,437,184 B a block"
    ) in said
    assert "--kv-cache-memory-bytes 20,000,000,000 (as given)" in said
    assert "not modelled" not in said


def test_a_pool_the_card_cannot_hold_beside_the_weights_does_not_fit(run):
    # 70G is 70 GiB, 75,161,927,680 B: 7,964 blocks, 75,157,733,376 B (70.00 GiB), beside the
    # weights (15.3 GiB), the profile run's peak (1.0), graphs (0.1) and runtime (0.7): 87.0 GiB
    # of the card's 79.2. No shorter context shrinks the pool, so none is offered.
    code, out, err = run(*CHECK, "70G")
    assert code == 1, err
    assert out.splitlines()[1:] == [
        "does not fit:",
        "  1 × h100-80g: needs 87.0 GiB of 79.2 a card",
    ]


def test_a_plan_passes_the_bytes_on_and_no_share(run):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--kv-cache-memory-bytes",
                         "20G", "--commands")  # fmt: skip
    assert code == 0, err
    serve = [shlex.split(line) for line in out.splitlines() if line.startswith("vllm serve")]
    assert serve == [
        ["vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "1", "--max-model-len",
         "40960", "--kv-cache-memory-bytes", "21474836480"]
    ]  # fmt: skip


def test_a_byte_count_out_of_range_says_the_range_in_whole_numbers(run):
    code, out, err = run(*CHECK, "10")
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: the command to check: --kv-cache-memory-bytes 10 is not from 1,048,576 to "
        "1,125,899,906,842,624.\n"
    )
    code, out, err = run(*CHECK, "20x")
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: the command to check: vLLM 0.34 refuses it: --kv-cache-memory-bytes '20x' is "
        "not a byte count.\n"
    )


def test_the_blocks_the_command_overrides_are_the_pool(run):
    # --num-gpu-blocks-override 1000 (v1/core/kv_cache_planning.py may_override_num_blocks):
    # 1,000 blocks of 64 tokens, 64,000 tokens, 9,437,184,000 B (8.79 GiB) on the card.
    argv = ["check", "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B",
            "--num-gpu-blocks-override"]  # fmt: skip
    code, out, err = run(*argv, "1000")
    assert code == 0, err
    said = " ".join(out.split())
    assert "KV pool: 64,000 tokens · longest sequence 40,960 · 1.56 sequences of 40,960" in said
    assert (
        "KV cache 8.8 GiB ███··························· the pool of 64,000 tokens "
        "--num-gpu-blocks-override sets: 1,000 blocks of 64 tokens × 9,437,184 B a block"
    ) in said
    assert "--num-gpu-blocks-override 1,000 (as given)" in said
    # 10,000 blocks: 94,371,840,000 B (87.89 GiB) beside 17.0 GiB of the rest.
    code, out, err = run(*argv, "10000")
    assert code == 1, err
    assert out.splitlines()[1:] == [
        "does not fit:",
        "  1 × h100-80g: needs 104.9 GiB of 79.2 a card",
    ]
