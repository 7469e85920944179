"""Benchmark result files in each engine's exact format, for the calibration tests.

Each builder writes what the engine's own benchmark code writes (field names and order as
there), with the figures given:
- vLLM 0.34.0 `vllm bench serve --save-result` (vllm/benchmarks/serve.py: `main_async` builds
  `result_json` from date, endpoint_type, backend, label, model_id, tokenizer_id, num_prompts,
  request_rate ("inf" where infinite), burstiness, max_concurrency, then `benchmark`'s result
  (duration … rtfx, then `process_one_metric`'s mean/median/std/p99 of ttft, tpot, itl and
  e2el); without --save-detailed the per-request lists input_lens, output_lens, start_times,
  ttfts, itls, generated_texts and errors are deleted, latencies and queue_times kept);
- SGLang 0.5.23 `python -m sglang.bench_serving` (sglang/benchmark/serving.py `benchmark`: the
  `result` dict, appended as one JSON line to --output-file);
- llama.cpp `llama-bench -o json` (tools/llama-bench/llama-bench.cpp `json_printer`: a JSON array
  of one object a test, the test's fields then avg_ns, stddev_ns, avg_ts, stddev_ts, samples).
"""

from __future__ import annotations

import json
import math
from pathlib import Path


def vllm_result(
    path: Path,
    *,
    model: str,
    input_len: int,
    output_len: int,
    prompts: int,
    output_tps: float,
    tpot_s: float,
    ttft_s: float,
    concurrency: int | None = None,
    rate: float | None = None,
    failed: int = 0,
) -> Path:
    completed = prompts - failed
    duration = completed * output_len / output_tps
    doc = {
        "date": "20261206-054000",
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": prompts,
        "request_rate": rate if rate is not None else "inf",
        "burstiness": 1.0,
        "max_concurrency": concurrency,
        "duration": duration,
        "completed": completed,
        "failed": failed,
        "total_input_tokens": completed * input_len,
        "total_output_tokens": completed * output_len,
        "request_throughput": completed / duration,
        "request_goodput": None,
        "output_throughput": output_tps,
        "total_token_throughput": completed * (input_len + output_len) / duration,
        "latencies": [ttft_s + (output_len - 1) * tpot_s] * completed,
        "queue_times": [0.0] * completed,
        "max_output_tokens_per_s": output_tps * 1.1,
        "max_concurrent_requests": concurrency or prompts,
        "rtfx": 0.0,
        "mean_ttft_ms": ttft_s * 1e3,
        "median_ttft_ms": ttft_s * 1e3,
        "std_ttft_ms": 0.0,
        "p99_ttft_ms": ttft_s * 1e3,
        "mean_tpot_ms": tpot_s * 1e3,
        "median_tpot_ms": tpot_s * 1e3,
        "std_tpot_ms": 0.0,
        "p99_tpot_ms": tpot_s * 1e3,
        "mean_itl_ms": tpot_s * 1e3,
        "median_itl_ms": tpot_s * 1e3,
        "std_itl_ms": 0.0,
        "p99_itl_ms": tpot_s * 1e3,
        "mean_e2el_ms": (ttft_s + (output_len - 1) * tpot_s) * 1e3,
        "median_e2el_ms": (ttft_s + (output_len - 1) * tpot_s) * 1e3,
        "std_e2el_ms": 0.0,
        "p99_e2el_ms": (ttft_s + (output_len - 1) * tpot_s) * 1e3,
    }
    path.write_text(json.dumps(doc))
    return path


def sglang_result(
    path: Path,
    *,
    model: str | None,
    input_len: int,
    output_len: int,
    prompts: int,
    output_tps: float,
    tpot_s: float,
    ttft_s: float,
    concurrency: int | None = None,
    rate: float = math.inf,
) -> Path:
    duration = prompts * output_len / output_tps
    e2e = ttft_s + (output_len - 1) * tpot_s
    ms = {
        f"{stat}_{m}_ms": v * 1e3
        for m, v in (("e2e_latency", e2e), ("ttft", ttft_s), ("tpot", tpot_s), ("itl", tpot_s))
        for stat in ("mean", "median", "std", "p90", "p95", "p99")
    }
    doc = {
        "tag": None,
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": rate,
        "max_concurrency": concurrency,
        "sharegpt_output_len": None,
        "random_input_len": input_len,
        "random_output_len": output_len,
        "random_range_ratio": 1.0,
        "server_info": {"model_path": model} if model else None,
        "duration": duration,
        "completed": prompts,
        "total_input_tokens": prompts * input_len,
        "total_input_text_tokens": prompts * input_len,
        "total_input_vision_tokens": 0,
        "total_output_tokens": prompts * output_len,
        "total_output_tokens_retokenized": prompts * output_len,
        "request_throughput": prompts / duration,
        "input_throughput": prompts * input_len / duration,
        "output_throughput": output_tps,
        "total_throughput": prompts * (input_len + output_len) / duration,
        **{k: ms[k] for k in sorted(ms, key=lambda k: (k.split("_", 1)[1], k))},
        "concurrency": concurrency or prompts,
        "accept_length": None,
        "max_output_tokens_per_s": output_tps,
        "max_concurrent_requests": concurrency or prompts,
    }
    # json.dumps writes inf as Infinity, as Python's json (SGLang's writer) does.
    with path.open("a") as f:
        f.write(json.dumps(doc) + "\n")
    return path


def llama_bench_result(
    path: Path, *, model_file: str, prompt: int, gen: int, prompt_ts: float, gen_ts: float
) -> Path:
    def test(n_prompt: int, n_gen: int, ts: float) -> dict[str, object]:
        ns = int((n_prompt + n_gen) / ts * 1e9)
        return {
            "build_commit": "b7000", "build_number": 7000, "cpu_info": "AMD EPYC",
            "gpu_info": "NVIDIA GeForce RTX 4090", "backends": "CUDA",
            "model_filename": f"/models/{model_file}", "model_type": "llama 1B Q8_0",
            "model_size": 1000000, "model_n_params": 1000000, "n_batch": 2048, "n_ubatch": 512,
            "n_threads": 16, "cpu_mask": "0x0", "cpu_strict": False, "poll": 50,
            "type_k": "f16", "type_v": "f16", "n_gpu_layers": 99, "split_mode": "layer",
            "main_gpu": 0, "no_kv_offload": False, "flash_attn": True, "tensor_split": "0.00",
            "use_mmap": True, "embeddings": False, "n_prompt": n_prompt, "n_gen": n_gen,
            "n_depth": 0, "test_time": "2026-12-06T05:40:00Z", "avg_ns": ns, "stddev_ns": 0,
            "avg_ts": ts, "stddev_ts": 0.0, "samples_ns": [ns] * 5, "samples_ts": [ts] * 5,
        }  # fmt: skip

    path.write_text(json.dumps([test(prompt, 0, prompt_ts), test(0, gen, gen_ts)], indent=2))
    return path
