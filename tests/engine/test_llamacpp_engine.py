"""llmfit's llama.cpp estimate against llama.cpp itself: opt-in, `pytest -m engine`.

Writes small GGUF files of real architectures (fixtures/engine_models.py: llama, qwen3, qwen3moe,
gemma3 with sliding windows, deepseek2 with MLA), loads each with llama.cpp on the CPU through
llama-cpp-python (the `validate` extra) at several context sizes, reads the buffer sizes llama.cpp
logs, and compares them with what llmfit predicts for the same file and settings (the planner's CPU
placement, 4 slots in one unified pool, flash attention on, the same n_ubatch):

- weights (`model buffer size`) and KV cache (`KV buffer size`) exactly, i.e. within llama.cpp's
  printed rounding of 0.005 MiB a buffer (gemma3's KV is two buffers, full and sliding);
- the compute buffer (`compute buffer size`) within 10 %.

Skipped, with the reason, where llama-cpp-python does not import.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.engine_models import MODELS
from fixtures.llamacpp_run import MIB, Settings, available, measure, predict

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(available() is not None, reason=str(available())),
]

# (n_ctx, n_ubatch): three contexts at llama-server's ubatch, and one smaller ubatch, which is
# what the compute buffer scales with.
RUNS = [(512, 512), (2048, 512), (8192, 512), (2048, 256)]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("engine-models")
    return {name: make().write(d) for name, make in MODELS.items()}


@pytest.mark.parametrize(("n_ctx", "n_ubatch"), RUNS)
@pytest.mark.parametrize("name", list(MODELS))
def test_llmfit_matches_llama_cpp(files: dict[str, Path], name: str, n_ctx: int, n_ubatch: int):
    s = Settings(n_ctx=n_ctx, n_ubatch=n_ubatch)
    got = measure(files[name], s)
    want = predict(files[name], s)
    where = f"{name} at -c {n_ctx} -ub {n_ubatch}"
    assert got.model > 0 and got.kv > 0 and got.compute > 0, f"{where}: no buffers in\n{got.log}"
    assert abs(want.model / MIB - got.model) <= got.rounding("model"), (
        f"{where}: weights, llmfit {want.model / MIB:.3f} MiB, llama.cpp {got.model:.2f}"
    )
    assert abs(want.kv / MIB - got.kv) <= got.rounding("KV"), (
        f"{where}: KV, llmfit {want.kv / MIB:.3f} MiB, llama.cpp {got.kv:.2f}"
    )
    assert abs(want.compute / MIB - got.compute) <= 0.10 * got.compute, (
        f"{where}: compute, llmfit {want.compute / MIB:.2f} MiB, llama.cpp {got.compute:.2f}"
    )
