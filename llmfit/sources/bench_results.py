"""The result files the engines' benchmarks write, read within bounds: what `llmfit calibrate`
takes from each run.

- vLLM `vllm bench serve --save-result` (vllm/benchmarks/serve.py `main_async`): one JSON
  object, `result_json`: "model_id", "num_prompts", "request_rate" (a number, or "inf"),
  "max_concurrency" (null: no cap), then `benchmark`'s result: "completed", "failed",
  "total_input_tokens", "total_output_tokens", "output_throughput" (tok/s), "mean_ttft_ms",
  "mean_tpot_ms", … (--append-result writes several, one a line).
- SGLang `bench_serving` (sglang/benchmark/serving.py `benchmark`): a JSON line appended to
  --output-file a run: "backend", "dataset_name", "request_rate" ("trace", a number or inf),
  "max_concurrency", "random_input_len", "random_output_len", "completed",
  "total_input_tokens", "total_output_tokens", "output_throughput", "mean_ttft_ms",
  "mean_tpot_ms", and "server_info" (the server's /server_info answer, whose "model_path" names
  the model; null where the server gave none).
- llama.cpp `llama-bench -o json` (tools/llama-bench/llama-bench.cpp `json_printer`): a JSON
  array, one object a test: "model_filename", "n_prompt", "n_gen", "avg_ts" (tokens a second),
  …; a prompt test (n_gen 0) and a generation test (n_prompt 0) make one run.

Each file is refused with one sentence (ResultError, exit 3) when it is not one of those: not
there, a device, too big, not JSON (a truncated file), a field of the wrong type, a number that
is not finite, requests that failed.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from llmfit.errors import BadInputError
from llmfit.sources.files import FileProblem, read_capped
from llmfit.sources.jsonfile import JsonProblem, parse

# A result is a few kilobytes; --save-detailed adds every request's tokens' times (a few MB for
# thousands of requests). More than this is not a result file.
MAX_BYTES = 64 << 20


class ResultError(BadInputError):
    """A benchmark's result file that cannot be read as one."""


@dataclass(frozen=True)
class Result:
    """One run, as its benchmark wrote it."""

    path: str
    engine: str  # the engine's key: "vllm", "sglang", "llama.cpp"
    # The repository (or a local copy's path) the server it measured named; None where the file
    # names none.
    model: str | None
    input_len: int
    output_len: int
    # "concurrency" (a cap on requests in flight), "rate" (Poisson arrivals), "requests" (all
    # at once), "single" (llama-bench: one sequence).
    kind: str
    load: float
    output_tokens_per_s: float
    tpot_s: float
    ttft_s: float | None
    # Where a result file holds several runs (--append-result, SGLang's appended lines): which.
    index: int = 0
    # The model file it loaded, where the benchmark names a file rather than a repository
    # (llama-bench's model_filename, its base name); None where it names none.
    model_file: str | None = None

    @property
    def name(self) -> str:
        return self.path if self.index == 0 else f"{self.path} (run {self.index + 1})"


def read_results(path: str) -> list[Result]:
    """Every run of a result file, or ResultError."""
    try:
        raw = read_capped(path, MAX_BYTES, "benchmark result")
    except FileProblem as e:
        raise ResultError(f"{path} {e.problem}.") from None
    except FileNotFoundError:
        raise ResultError(f"{path}: no such result file.") from None
    except OSError as e:
        raise ResultError(f"{path} cannot be read ({e.strerror or e}).") from None
    text = raw.strip()
    if not text:
        raise ResultError(f"{path} is empty: the benchmark wrote no result.")
    docs: list[Any]
    try:
        if text.startswith(b"["):
            docs = [parse(text, MAX_BYTES)]
        else:
            docs = [parse(line, MAX_BYTES) for line in text.splitlines() if line.strip()]
    except JsonProblem as e:
        raise ResultError(
            f"{path} {e.problem} (a result cut short, or not a benchmark's result file)."
        ) from None
    out = []
    for i, doc in enumerate(docs):
        out.append(_one(path, doc, i))
    return out


def _one(path: str, doc: Any, index: int) -> Result:
    where = path if index == 0 else f"{path} (run {index + 1})"
    if isinstance(doc, list):
        return _llama_bench(where, path, doc)
    if not isinstance(doc, dict):
        raise ResultError(f"{where} holds a JSON {type(doc).__name__}, not a benchmark's result.")
    if "model_id" in doc and "mean_tpot_ms" in doc:
        return _serving(where, path, doc, index, "vllm")
    if "backend" in doc and "random_input_len" in doc and "mean_tpot_ms" in doc:
        return _serving(where, path, doc, index, "sglang")
    raise ResultError(
        f"{where} is not a result of `vllm bench serve --save-result`, SGLang's bench_serving "
        "or `llama-bench -o json`: it has none of their fields (model_id, mean_tpot_ms, n_gen)."
    )


def _number(where: str, doc: dict[str, Any], key: str, *, positive: bool = True) -> float:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        shown = "missing" if key not in doc else f"{v!r}"[:40]
        raise ResultError(f"{where}: {key} is {shown}, not a number.")
    x = float(v)
    if not math.isfinite(x):
        raise ResultError(f"{where}: {key} is {v}, not a finite number.")
    if positive and x <= 0:
        raise ResultError(f"{where}: {key} is {v:g}, which must be positive.")
    if x > 1e15:
        raise ResultError(f"{where}: {key} is {v:g}, past any benchmark's figure.")
    return x


def _serving(where: str, path: str, doc: dict[str, Any], index: int, engine: str) -> Result:
    completed = _number(where, doc, "completed")
    failed = doc.get("failed", 0)
    if failed:
        n = _number(where, doc, "failed")
        raise ResultError(
            f"{where}: {n:,.0f} of its {completed + n:,.0f} requests failed, so its figures are "
            "not the server's at that load."
        )
    input_len = _number(where, doc, "total_input_tokens") / completed
    output_len = _number(where, doc, "total_output_tokens") / completed
    if output_len < 1 or input_len < 1:
        raise ResultError(f"{where}: its requests average under one token in or out.")
    model = _model(where, doc, engine)
    cap = doc.get("max_concurrency")
    rate = doc.get("request_rate")
    prompts = doc.get("num_prompts", completed)
    if cap is not None:
        c = _number(where, doc, "max_concurrency")
        if isinstance(prompts, (int, float)) and not isinstance(prompts, bool) and prompts <= c:
            kind, load = "requests", completed  # as many prompts as the cap: one wave
        else:
            kind, load = "concurrency", c
    elif rate in ("inf", None) or (isinstance(rate, float) and math.isinf(rate)):
        kind, load = "requests", completed
    elif rate == "trace":
        raise ResultError(f"{where}: a run at a trace's timestamps has no load llmfit models.")
    else:
        kind, load = "rate", _number(where, doc, "request_rate")
    ttft = doc.get("mean_ttft_ms")
    return Result(
        path=path,
        engine=engine,
        model=model,
        input_len=max(1, round(input_len)),
        output_len=max(1, round(output_len)),
        kind=kind,
        load=load,
        output_tokens_per_s=_number(where, doc, "output_throughput"),
        tpot_s=_number(where, doc, "mean_tpot_ms") / 1e3,
        ttft_s=_number(where, doc, "mean_ttft_ms") / 1e3 if ttft is not None else None,
        index=index,
    )


def _model(where: str, doc: dict[str, Any], engine: str) -> str | None:
    if engine == "vllm":
        v = doc.get("model_id")
    else:
        info = doc.get("server_info")
        v = info.get("model_path") if isinstance(info, dict) else None
        if v is None:
            return None
    if not isinstance(v, str) or not v.strip() or len(v) > 500:
        raise ResultError(f"{where}: the model it names, {str(v)[:60]!r}, is not a model's name.")
    return v.strip()


def _llama_bench(where: str, path: str, tests: list[Any]) -> Result:
    """A prompt test and a generation test of llama-bench (one of each)."""
    prompt: dict[str, Any] | None = None
    gen: dict[str, Any] | None = None
    for t in tests:
        if not isinstance(t, dict) or "avg_ts" not in t:
            raise ResultError(f"{where} is not llama-bench's JSON: an entry has no avg_ts.")
        n_prompt = _number(where, t, "n_prompt", positive=False)
        n_gen = _number(where, t, "n_gen", positive=False)
        if n_gen == 0 and n_prompt > 0:
            prompt = t
        elif n_prompt == 0 and n_gen > 0:
            gen = t
    if prompt is None or gen is None:
        raise ResultError(
            f"{where}: llama-bench's result needs a prompt test (-p) and a generation test "
            "(-n); it has " + ("neither" if prompt is None and gen is None else "only one") + "."
        )
    name = gen.get("model_filename")
    model_file = os.path.basename(name) if isinstance(name, str) and name else None
    prompt_len = _number(where, prompt, "n_prompt")
    gen_ts = _number(where, gen, "avg_ts")
    return Result(
        path=path,
        engine="llama.cpp",
        model=None,
        model_file=model_file,
        input_len=int(prompt_len),
        output_len=int(_number(where, gen, "n_gen")),
        kind="single",
        load=1.0,
        output_tokens_per_s=gen_ts,
        tpot_s=1.0 / gen_ts,
        ttft_s=prompt_len / _number(where, prompt, "avg_ts"),
    )
