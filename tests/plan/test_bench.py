"""The benchmark a plan prints reads back, with the benchmark's own flags, as the workload it
checks: each line parsed with a grammar of the benchmark's parser dumped from the wheel
(fixtures/engines/dump_bench_args.py: vLLM 0.33.0 and 0.34.0's `vllm bench serve`, SGLang
0.5.23's `bench_serving`), and its lengths, load and prompt count compared with the plan's."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest

from llmfit.plan.engines.grammar import Grammar, Parsed

ENGINES = Path(__file__).resolve().parents[2] / "fixtures" / "engines"
TYPES = {"int": int, "float": float, "str": str}


def grammar(name: str) -> Grammar:
    dump = json.loads((ENGINES / name).read_text())
    rows = [
        (o["dest"], tuple(o["flags"]), o["kind"], o["nargs"],
         tuple(o["choices"]) if o["choices"] else None, o["type"])
        for o in dump["options"]
    ]  # fmt: skip
    return Grammar(rows, TYPES)


VLLM = {v: grammar(f"vllm-{v}-bench-args.json") for v in ("0.33.0", "0.34.0")}
SGLANG = grammar("sglang-0.5.23-bench-args.json")


def bench_of(run, args: list[str]) -> dict:
    r = run(*["Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--json", *args])
    doc = json.loads(r[1])
    return doc["options"][0]


def parsed(doc: dict, g: Grammar, skip: int) -> Parsed:
    """The benchmark's argv past its program words, as the benchmark's parser reads it; and its
    shell line is the same words."""
    argv = doc["benchmark"]["argv"]
    assert shlex.split(doc["benchmark"]["shell"]) == argv
    return g.parse(argv[skip:])


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_vllm_bench_at_a_concurrency(run, version):
    o = bench_of(run, ["--engine", "vllm", "--concurrency", "64"])
    p = parsed(o, VLLM[version], 3).values
    assert o["benchmark"]["argv"][:3] == ["vllm", "bench", "serve"]
    # The chat workload's 2,048 in / 512 out; one replica holds 64 in flight (serving.replicas
    # 1), ten rounds of 64 are 640 prompts.
    assert o["serving"]["replicas"] == 1
    assert p["dataset_name"] == "random"
    assert (p["random_input_len"], p["random_output_len"]) == (2048, 512)
    assert p["max_concurrency"] == 64 and p["num_prompts"] == 640
    assert "request_rate" not in p  # its default, inf: the cap alone sets the load
    assert p["ignore_eos"] is True and p["save_result"] is True
    assert p["result_filename"] == o["benchmark"]["result_file"]
    assert p["result_filename"] == "llmfit-bench-Qwen--Qwen3-8B-2048-512-c64.json"
    assert p["model"] == "Qwen/Qwen3-8B" and p["port"] == 8000


def test_vllm_bench_at_a_rate_is_one_launch_share(run):
    o = bench_of(run, ["--engine", "vllm", "--rate", "30"])
    p = parsed(o, VLLM["0.34.0"], 3).values
    replicas = o["serving"]["replicas"]
    # One launch is measured at its share of the rate: 30 / replicas a second.
    assert math.isclose(p["request_rate"], 30 / replicas, rel_tol=1e-5)
    assert "max_concurrency" not in p
    in_flight = o["serving"]["concurrency"] / replicas
    assert p["num_prompts"] == max(100, 10 * math.ceil(in_flight))


def test_vllm_bench_of_a_burst_has_no_cap_and_no_rate(run):
    o = bench_of(run, ["--engine", "vllm", "--requests", "50"])
    p = parsed(o, VLLM["0.34.0"], 3).values
    assert o["serving"]["replicas"] == 1
    # All 50 at once: no --max-concurrency, the default rate (inf), exactly 50 prompts.
    assert p["num_prompts"] == 50
    assert "max_concurrency" not in p and "request_rate" not in p
    assert o["benchmark"]["load"] == "requests"


def test_vllm_bench_at_the_capacity_when_no_load_is_named(run):
    o = bench_of(run, ["--engine", "vllm"])
    p = parsed(o, VLLM["0.34.0"], 3).values
    # The count the plan prints for its capacity ("serves up to 179 requests in flight" for
    # 179.41), not one more, which would measure past the targets it was sized within.
    assert p["max_concurrency"] == round(o["serving"]["capacity_concurrency"])


def test_sglang_bench_parses_with_its_own_parser(run):
    o = bench_of(run, ["--engine", "sglang", "--concurrency", "64", "--input-len", "1000",
                           "--output-len", "200"])  # fmt: skip
    argv = o["benchmark"]["argv"]
    assert argv[:3] == ["python", "-m", "sglang.bench_serving"]
    p = SGLANG.parse(argv[3:]).values
    assert p["backend"] == "sglang" and p["dataset_name"] == "random"
    assert (p["random_input_len"], p["random_output_len"]) == (1000, 200)
    # Exact lengths: SGLang draws from [len × ratio, len] (datasets/common.py).
    assert p["random_range_ratio"] == 1.0
    assert p["max_concurrency"] == 64 and p["num_prompts"] == 640
    # It ignores EOS by default (--disable-ignore-eos turns it off): not given.
    assert "disable_ignore_eos" not in p
    assert p["output_file"] == "llmfit-bench-Qwen--Qwen3-8B-1000-200-c64.jsonl"
    assert p["port"] == 30000


def test_the_grammar_refuses_a_flag_the_benchmark_lacks():
    # A flag of `vllm serve`, not of `vllm bench serve`: the parse-back is not a rubber stamp.
    with pytest.raises(ValueError):
        VLLM["0.34.0"].parse(["--tensor-parallel-size", "2"])
    # SGLang's benchmark has no --ignore-eos (it is its default).
    with pytest.raises(ValueError):
        SGLANG.parse(["--ignore-eos"])


def test_llama_bench_at_the_workload_lengths(run):
    r = run(*["llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "1xrtx4090-24g", "--json",
                 "--input-len", "1000", "--output-len", "200"])  # fmt: skip
    b = json.loads(r[1])["options"][0]["benchmark"]
    argv = b["argv"]
    assert argv[0] == "llama-bench"
    # llama-bench's -p and -n: one prompt of the workload's length, then its generation.
    assert argv[argv.index("-p") + 1] == "1000" and argv[argv.index("-n") + 1] == "200"
    assert argv[argv.index("-o") + 1] == "json" and b["stdout"] is True
    assert b["shell"].endswith(" > " + b["result_file"])


def test_commands_print_the_benchmark_commented(run):
    r = run(*["Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--engine", "vllm",
                 "--concurrency", "64", "--commands"])  # fmt: skip
    last = r[1].strip().splitlines()[-1]
    assert last.startswith("# measure it: vllm bench serve ")
    assert "--max-concurrency 64" in last
