"""SGLang's Triton split-KV decode priced by its grid (speed.SplitDecode): measured in
benchmarks/accuracy_load.py --split-decode, not shipped (no engine's constants set a block's
rate). The shape is GLM-4.7-Flash's on one B200: 20 query heads on one MLA latent, two head
blocks of 16 (ceil(20 / min(16, 20))), each reading the whole latent, 47 layers of 576 bf16
values a token (54,144 bytes), 148 SMs, at most 8 splits."""

from __future__ import annotations

import pytest

from llmfit.plan.speed import (
    Constants,
    SpeedInputs,
    SplitDecode,
    Stage,
    pair_pricer,
    round_pair,
    round_total,
    split_decode_seconds,
    step,
    step_total,
    total_pricer,
)

GLM_FLASH_B200 = SplitDecode(heads=2, reads=2.0, max_splits=8, units=148)
CACHE = 47 * 576 * 2  # 54,144 bytes of latent a token, every layer
RATE = 5e9  # a block's bytes a second


def test_one_sequence_runs_sixteen_blocks_on_a_card_of_148() -> None:
    # int(148 × log2(4400 / 64)) = int(148 × 6.1033) = 903 blocks wanted; 903 / (1 × 2) → 452
    # splits, capped at 8: 1 × 2 × 8 = 16 blocks, each reading 4400 / 8 tokens of both head
    # blocks' latents: 54,144 × 2 × 4,400 / (16 × 5e9) = 5.95584 ms.
    got = split_decode_seconds(GLM_FLASH_B200, RATE, CACHE, 1, 4400)
    assert got == pytest.approx(476_467_200 / 80e9, rel=1e-12)
    assert got == pytest.approx(5.95584e-3, rel=1e-9)


def test_sixty_four_sequences_fill_the_card() -> None:
    # 903 / (64 × 2) → 8 splits: 1,024 blocks, 148 at a time: every SM streams at the rate.
    # 54,144 × 2 × 64 × 4,400 / (148 × 5e9) = 30,493,900,800 / 7.4e11 s.
    got = split_decode_seconds(GLM_FLASH_B200, RATE, CACHE, 64, 4400)
    assert got == pytest.approx(30_493_900_800 / 7.4e11, rel=1e-12)


def test_nothing_to_read_and_an_unbounded_batch() -> None:
    assert split_decode_seconds(GLM_FLASH_B200, RATE, CACHE, 0, 4400) == 0.0
    assert split_decode_seconds(GLM_FLASH_B200, 0.0, CACHE, 1, 4400) == 0.0
    assert split_decode_seconds(GLM_FLASH_B200, RATE, CACHE, float("inf"), 4400) == float("inf")


def _inputs(rate: float) -> SpeedInputs:
    k = Constants(
        weight_efficiency=0.85, kv_efficiency=0.85, layer_s=0.0, step_s=0.0, sequence_s=0.0,
        hop_s=0.0, prefill_efficiency=0.5, quant_prefill_efficiency=0.5, ttft_s=0.0,
        prefill_chunk=8192, decode_pipelined=True, split_kv_rate=rate,
    )  # fmt: skip
    stage = Stage(layers=47, dense_bytes=6e9, kv_bytes_per_token=CACHE)
    return SpeedInputs(constants=k, stages=(stage,), memory_bandwidth=8e12, flops=2.25e15,
                       split_decode=GLM_FLASH_B200)  # fmt: skip


def test_a_step_reads_the_cache_at_the_slower_of_the_grid_and_the_bandwidth() -> None:
    # At the bandwidth share: 54,144 × 4,400 / (8e12 × 0.85) = 35.03 µs; the grid's 5.96 ms is
    # longer, and is the step's KV read. Without a block's rate, the bandwidth's.
    grid = step(_inputs(RATE), 1, 4400).summed.kv
    assert grid == pytest.approx(5.95584e-3, rel=1e-9)
    plain = step(_inputs(0.0), 1, 4400).summed.kv
    assert plain == pytest.approx(CACHE * 4400 / 6.8e12, rel=1e-12)
    # A grid faster than the bandwidth (blocks at 1 TB/s) leaves the bandwidth's read.
    assert step(_inputs(1e12), 64, 4400).summed.kv == pytest.approx(
        CACHE * 64 * 4400 / 6.8e12, rel=1e-12
    )


def test_every_way_of_pricing_a_round_agrees() -> None:
    inp = _inputs(RATE)
    alone = step(inp, 16, 2000).total
    assert step_total(inp, 16, 2000) == pytest.approx(alone, rel=1e-12)
    assert round_total(inp, 16, 2000) == pytest.approx(alone, rel=1e-12)
    with_chunk = round_total(inp, 16, 2000, 512, 256)
    assert round_pair(inp, 16, 2000, 512, 256) == (alone, with_chunk)
    assert pair_pricer(inp)(16, 2000, 512, 256) == (alone, with_chunk)
    assert total_pricer(inp)(16, 2000, 512, 256) == with_chunk
