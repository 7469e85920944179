"""The benchmark that checks a plan's serving figure: the engine's own load generator, at the
plan's workload, against the server the option's launch starts.

- vLLM: `vllm bench serve` (vllm/benchmarks/serve.py `add_cli_args`, with datasets.py
  `add_dataset_parser`): the random dataset at the workload's lengths (its
  --random-range-ratio defaults to 0: every prompt exactly --random-input-len tokens, every
  output --random-output-len with --ignore-eos), the load as --max-concurrency (requests in
  flight) or --request-rate (Poisson arrivals; `get_request` with burstiness 1), and
  --save-result --result-filename for the JSON `llmfit calibrate` reads.
- SGLang: `python -m sglang.bench_serving` (sglang/benchmark/serving.py `cli_main`): the same,
  but its random lengths are drawn from [len × --random-range-ratio, len]
  (datasets/common.py `compute_random_lens`), so the ratio is 1 for exact lengths; it ignores
  EOS unless --disable-ignore-eos, and appends its result as a JSON line to --output-file.
- llama.cpp: `llama-bench` measures one sequence, not a server under load: the prompt's
  prefill (-p) and the generation (-n) at the workload's lengths, -o json on stdout.

A burst (`--requests N`) is N prompts with no concurrency cap and no rate (both benchmarks send
them at once: request rate inf, their default). With no load named, the plan's figures are at
its capacity, so the benchmark runs at the capacity's requests in flight. Where the load needs
several replicas of the option, one launch is measured at its share.

The prompt count is enough for a steady state: ten times the requests in flight (the first and
last few requests of a closed loop run at a partial batch), at least MIN_PROMPTS.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from llmfit.plan.launch import Command
from llmfit.plan.options import Option

# The fewest prompts a benchmark runs: fewer make a mean of a few partial batches.
MIN_PROMPTS = 100
# Requests in flight a prompt count covers, over: ten rounds of the batch.
ROUNDS = 10
# The servers' own ports (plan/engines/vllm.py PORT, sglang.py PORT), on the head node.
VLLM_PORT, SGLANG_PORT = 8000, 30000


@dataclass(frozen=True)
class Bench:
    """The command that measures an option's serving figure, and what it measures."""

    command: Command
    # Where its result goes: a file it writes (vLLM, SGLang), or its stdout redirected to one
    # (llama-bench prints its JSON).
    result_file: str
    stdout: bool
    # The load one launch is measured at: requests in flight, a second, or sent at once (the
    # kind is the workload's; "concurrency" at a capacity; "single": one sequence, llama-bench).
    load_kind: str
    load: float
    prompts: int
    input_len: int
    output_len: int

    @property
    def line(self) -> str:
        """The command as one shell line (its words checked by the renderer)."""
        shell = self.command.shell
        return f"{shell} > {self.result_file}" if self.stdout else shell


def _slug(text: str) -> str:
    """A repository id as a piece of a file name: its / as --, anything else odd as -."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.replace("/", "--")).strip("-.") or "model"


def _number(x: float) -> str:
    """A load as its flag's value: 32, 2.5 (no float noise, no exponent)."""
    return f"{x:.6g}" if "e" not in f"{x:.6g}" else f"{x:.6f}".rstrip("0").rstrip(".")


def bench(o: Option[Any], repo_id: str) -> Bench | None:
    """The benchmark of the option's serving figure, or None where it has none (no speed known,
    or no load it serves)."""
    sv = o.serving
    if sv is None or sv.replicas is None:
        return None
    w = sv.workload
    spread = max(sv.replicas, 1)
    if w.requests is not None:
        kind, load = "requests", float(math.ceil(w.requests / spread))
        in_flight = load
    elif w.rate is not None and w.concurrency is None:
        kind, load = "rate", w.rate / spread
        in_flight = sv.concurrency / spread
    else:
        kind = "concurrency"
        if w.concurrency is not None:
            load = float(max(1, math.ceil(w.concurrency / spread - 1e-9)))
        else:
            # At a capacity: the count the plan prints ("serves up to 34 requests in flight" for
            # 34.2), not one more, which would measure past the targets it was sized within.
            load = float(max(1, round(sv.capacity_concurrency / spread)))
        in_flight = load
    if not math.isfinite(in_flight) or not math.isfinite(load) or load <= 0:
        return None
    prompts = int(load) if kind == "requests" else max(MIN_PROMPTS, ROUNDS * math.ceil(in_flight))
    tag = {"concurrency": "c", "rate": "r", "requests": "n"}[kind] + _number(load)
    name = f"llmfit-bench-{_slug(repo_id)}-{w.input_len}-{w.output_len}-{tag}"
    if o.engine == "vllm":
        argv = ["vllm", "bench", "serve", "--backend", "vllm", "--model", repo_id]
        argv += _random(w.input_len, w.output_len, prompts)
        argv += _load("--request-rate", kind, load)
        argv += ["--ignore-eos", "--port", str(VLLM_PORT)]
        argv += ["--save-result", "--result-filename", f"{name}.json"]
        cmd, out, stdout = Command("bench", tuple(argv)), f"{name}.json", False
    elif o.engine == "sglang":
        argv = ["python", "-m", "sglang.bench_serving", "--backend", "sglang", "--model", repo_id]
        argv += _random(w.input_len, w.output_len, prompts) + ["--random-range-ratio", "1"]
        argv += _load("--request-rate", kind, load)
        argv += ["--port", str(SGLANG_PORT), "--output-file", f"{name}.jsonl"]
        cmd, out, stdout = Command("bench", tuple(argv)), f"{name}.jsonl", False
    elif o.engine == "llama.cpp":
        model = getattr(o.launch, "model_path", None) or (
            o.artifact.files[0] if o.artifact.files else o.artifact.name
        )
        gpu_layers = getattr(o.launch, "gpu_layers", None)
        argv = ["llama-bench", "-m", model, "-p", str(w.input_len), "-n", str(w.output_len)]
        if gpu_layers is not None:
            argv += ["-ngl", str(gpu_layers)]
        argv += ["-fa", "1", "-o", "json"]
        name = f"llmfit-bench-{_slug(repo_id)}-{w.input_len}-{w.output_len}"
        cmd, out, stdout = Command("bench", tuple(argv)), f"{name}.json", True
        kind, load, prompts = "single", 1.0, 1
    else:
        return None
    return Bench(cmd, out, stdout, kind, load, prompts, w.input_len, w.output_len)


def _random(input_len: int, output_len: int, prompts: int) -> list[str]:
    return [
        "--dataset-name", "random", "--random-input-len", str(input_len),
        "--random-output-len", str(output_len), "--num-prompts", str(prompts),
    ]  # fmt: skip


def _load(rate_flag: str, kind: str, load: float) -> list[str]:
    """The load's flags: a cap on requests in flight, or a rate; none for a burst (every prompt
    at once: both benchmarks' default rate is inf, and no cap)."""
    if kind == "concurrency":
        return ["--max-concurrency", str(int(load))]
    if kind == "rate":
        return [rate_flag, _number(load)]
    return []
