"""llmfit's llama.cpp estimate against llama.cpp itself: opt-in, `pytest -m engine`.

Writes small GGUF files of real architectures (fixtures/engine_models.py: llama, qwen3, qwen3moe,
gemma3 with sliding windows, deepseek2 with MLA), loads each with llama.cpp on the CPU through
llama-cpp-python (the `validate` extra) at several context sizes, reads the buffer sizes llama.cpp
logs, and compares them with what llmfit predicts for the same file and settings (the planner's CPU
placement, 4 slots in one unified pool, flash attention on, the same n_ubatch):

- weights (`model buffer size`) and KV cache (`KV buffer size`) exactly, i.e. within llama.cpp's
  printed rounding of 0.005 MiB a buffer (gemma3's KV is two buffers, full and sliding);
- the compute buffer (`compute buffer size`) within 10 %.

The small models' compute buffers are their logits (a 32,000-token vocabulary against n_embd 256),
so wider ones (n_embd 2,048 to 4,096, written as sparse files: llama.cpp maps them and reads no
data) check the part of the compute buffer that the layers need. Skipped, with the reason, where
llama-cpp-python does not import.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fixtures.engine_models import MODELS, EngineModel, deepseek2, gemma3, llama, qwen3, qwen3moe
from fixtures.llamacpp_run import MIB, Settings, available, measure, predict

pytestmark = pytest.mark.engine

# (n_ctx, n_ubatch): three contexts at llama-server's ubatch, and one smaller ubatch, which is
# what the compute buffer scales with.
RUNS = [(512, 512), (2048, 512), (8192, 512), (2048, 256)]
WIDE: dict[str, Callable[[], EngineModel]] = {
    "llama-4096": lambda: llama(n=2, embd=4096, heads=32, kv=8, ff=14_336),
    "qwen3-2048": lambda: qwen3(n=2, embd=2048, heads=32, kv=8, ff=6144),
    "qwen3moe-2048": lambda: qwen3moe(n=2, embd=2048, ff_exp=768, experts=16),
    "gemma3-4096": lambda: gemma3(n=6, embd=4096, heads=16, kv=8, ff=16_384),
    "deepseek2-4096": lambda: deepseek2(embd=4096, ff=12_288),
}
WIDE_RUNS = [(512, 512), (2048, 512), (32_768, 512), (8192, 256)]
ALL = MODELS | WIDE
CASES = [(m, c, u) for m in MODELS for c, u in RUNS] + [
    (m, c, u) for m in WIDE for c, u in WIDE_RUNS
]

# Where a layer, not the logits, is the peak, llama.cpp's CPU graph allocator packs Qwen3's dense
# layer (q/k norms over heads of 128) less tightly than the llama layout the fit follows (see
# llmfit/plan/engines/llamacpp.py).
KNOWN_MISSES = {"qwen3-2048": "Qwen3's dense layer: the CPU fit under-counts it by 19-25 %"}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # Asked here, not at import, so that the default run (which deselects this suite) never
    # loads llama.cpp's library.
    why = available()
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("engine-models")
    return {name: make().write(d) for name, make in ALL.items()}


@pytest.fixture(scope="module")
def runs(files: dict[str, Path]):
    """Each case measured once, for both tests."""
    cache: dict[tuple[str, int, int], tuple] = {}

    def run(name: str, n_ctx: int, n_ubatch: int):
        key = (name, n_ctx, n_ubatch)
        if key not in cache:
            s = Settings(n_ctx=n_ctx, n_ubatch=n_ubatch)
            cache[key] = (measure(files[name], s), predict(files[name], s))
        return cache[key]

    return run


@pytest.mark.parametrize(("name", "n_ctx", "n_ubatch"), CASES)
def test_weights_and_kv_are_exact(runs, name: str, n_ctx: int, n_ubatch: int):
    got, want = runs(name, n_ctx, n_ubatch)
    where = f"{name} at -c {n_ctx} -ub {n_ubatch}"
    assert got.model > 0 and got.kv > 0, f"{where}: no buffers in\n{got.log}"
    assert abs(want.model / MIB - got.model) <= got.rounding("model"), (
        f"{where}: weights, llmfit {want.model / MIB:.3f} MiB, llama.cpp {got.model:.2f}"
    )
    assert abs(want.kv / MIB - got.kv) <= got.rounding("KV"), (
        f"{where}: KV, llmfit {want.kv / MIB:.3f} MiB, llama.cpp {got.kv:.2f}"
    )


@pytest.mark.parametrize(
    ("name", "n_ctx", "n_ubatch"),
    [
        pytest.param(*c, marks=pytest.mark.xfail(reason=KNOWN_MISSES[c[0]], strict=True))
        if c[0] in KNOWN_MISSES
        else c
        for c in CASES
    ],
)
def test_compute_buffer_within_ten_percent(runs, name: str, n_ctx: int, n_ubatch: int):
    got, want = runs(name, n_ctx, n_ubatch)
    assert got.compute > 0, f"{name}: no compute buffer in\n{got.log}"
    assert abs(want.compute / MIB - got.compute) <= 0.10 * got.compute, (
        f"{name} at -c {n_ctx} -ub {n_ubatch}: compute, llmfit {want.compute / MIB:.2f} MiB, "
        f"llama.cpp {got.compute:.2f}"
    )
