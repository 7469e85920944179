"""vLLM 0.34: the KV cache sized after warm-up, worked by hand from the 0.34.0 wheel.

vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes gives the cache
min(requested − resident, free − margin) − transient, where requested is the card × the share
(1.0 by default with the extensible cache: vllm/config/cache.py
CacheConfig.resolved_gpu_memory_utilization), free is what the card has after the CUDA context
(512 MiB, llmfit's CUDA_CONTEXT) and what stays resident (weights, buffers, CUDA graphs), the
margin max(1 GiB, 0.75 × the transient peak) and the transient the warm-up's peak.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmfit.plan.engines.vllm_memory import (
    CUDA_CONTEXT,
    GIB,
    Rank,
    Settings,
    estimate,
    measured_kv_bytes,
    mla_context_pass,
)
from llmfit.plan.engines.vllm_versions import VllmVersion
from llmfit.plan.layout import Card
from llmfit.sources.config import load_config, model_from_config
from tests.plan.test_vllm_memory import H100, H200, run

V = VllmVersion.parse
CONFIGS = Path(__file__).resolve().parents[2] / "fixtures" / "calibration" / "configs"
QWEN3_8B_BYTES = 16_381_470_720  # the bf16 checkpoint test_vllm_memory's Qwen3-8B cases use


def config_model(name: str):
    path = CONFIGS / f"{name}.json"
    return model_from_config(load_config(path), path)


def test_the_measured_budget_by_hand():
    # An H100 (85,045,477,376 B) at the default share 1.0, 20 GiB resident and a transient peak
    # of 1 GiB: the margin is the 1 GiB floor (0.75 GiB < 1 GiB), so the cache gets
    # 85,045,477,376 − 512 MiB − 20 GiB − 1 GiB − 1 GiB.
    resident, transient = 20 * GIB, GIB
    got = measured_kv_bytes(H100, H100.total_bytes, resident, transient)
    assert got == 85_045_477_376 - CUDA_CONTEXT - 22 * GIB == 60_886_286_336
    # At --gpu-memory-utilization 0.90 the share binds: 0.9 × the card − resident − transient.
    share = -(-H100.total_bytes * 9 // 10)
    assert measured_kv_bytes(H100, share, resident, transient) == share - 21 * GIB
    # A large transient peak sets the margin: 4 GiB peak, 3 GiB margin.
    assert measured_kv_bytes(H100, H100.total_bytes, resident, 4 * GIB) == (
        85_045_477_376 - CUDA_CONTEXT - 27 * GIB
    )
    # ROCm's floor is 3 GiB (KV_CACHE_MARGIN_FLOOR_BYTES).
    mi300 = Card("mi300x-192g", 205_822_885_888)
    assert measured_kv_bytes(mi300, mi300.total_bytes, resident, transient) == (
        205_822_885_888 - CUDA_CONTEXT - 24 * GIB
    )


def test_qwen3_8b_on_an_h100_holds_more_without_the_old_share():
    # Issue 32: vLLM 0.34 holds 13.46 sequences of 32,768 tokens at its default share and 12.05
    # with --gpu-memory-utilization 0.90 (the extensible cache then keeps the 10 % out).
    default = run("Qwen/Qwen3-8B", QWEN3_8B_BYTES, version="0.34", max_model_len=32_768,
                  gpu_memory_utilization=None)  # fmt: skip
    capped = run("Qwen/Qwen3-8B", QWEN3_8B_BYTES, version="0.34", max_model_len=32_768)
    assert default.gpu_memory_utilization == 1.0
    assert default.max_concurrency == pytest.approx(13.46, rel=0.01)
    assert capped.max_concurrency == pytest.approx(12.05, rel=0.01)
    # 64-token blocks (CacheConfig.DEFAULT_BLOCK_SIZE), 512 a sequence of 32,768.
    assert default.layout is not None and default.layout.block_size == 64
    assert default.layout.blocks_per_request == 512
    # 0.33 keeps its own: 0.92 and 16-token blocks.
    old = run("Qwen/Qwen3-8B", QWEN3_8B_BYTES, version="0.33", max_model_len=32_768,
              gpu_memory_utilization=None)  # fmt: skip
    assert old.gpu_memory_utilization == 0.92
    assert old.layout is not None and old.layout.block_size == 16


def test_qwen3_5_35b_a3b_on_an_h200():
    # Issue 32's hand-worked figure from the 0.34 wheel: 83.3 sequences of 32,768 tokens on one
    # H200 at vLLM's defaults (its SSM state in float32, 64.4 MB a sequence). The checkpoint is
    # its 35,951,822,704 parameters (the fixture's meta.json) at 2 B.
    m = config_model("Qwen--Qwen3.5-35B-A3B")
    r = estimate(m, 35_951_822_704 * 2, Rank(), H200, Settings(version=V("0.34"),
                 max_model_len=32_768))  # fmt: skip
    assert r.max_concurrency == pytest.approx(83.3, rel=0.05)


def test_glm_4_7_flash_on_an_h100():
    # Issue 32: 11.6 sequences of 32,768 tokens on one H100 (vLLM 0.34, MLA, its MTP layer not
    # loaded). The sizing warm-up's MLA pass up-projects min(max(8 × 32,768, 4 × 1,024 × 64),
    # 65,536) = 65,536 tokens: their 576-element latents and 20 heads × (192 + 256) of K and V,
    # in 2 B: 65,536 × (576 + 8,960) × 2 = 1,249,902,592 B.
    m = config_model("zai-org--GLM-4.7-Flash")
    s = Settings(version=V("0.34"), max_model_len=32_768)
    r = estimate(m, 31_221_488_576 * 2, Rank(), H100, s)
    assert r.max_concurrency == pytest.approx(11.6, rel=0.05)
    from llmfit.plan.engines.vllm_inputs import Context

    ctx = Context(V("0.34"), m, H100, Rank(), s, 32_768, 8_192, 1_024, True, 0)
    assert mla_context_pass(ctx) == 65_536 * (576 + 20 * 448) * 2 == 1_249_902_592


def test_the_extensible_cache_can_be_turned_off():
    # --no-enable-extensible-kv-cache: the profile-run budget of 0.33 at 0.92, 64-token blocks.
    off = run("Qwen/Qwen3-8B", QWEN3_8B_BYTES, version="0.34", max_model_len=32_768,
              gpu_memory_utilization=None, enable_extensible_kv_cache=False)  # fmt: skip
    old = run("Qwen/Qwen3-8B", QWEN3_8B_BYTES, version="0.33", max_model_len=32_768,
              gpu_memory_utilization=None)  # fmt: skip
    assert off.gpu_memory_utilization == 0.92
    assert off.kv_budget == old.kv_budget
