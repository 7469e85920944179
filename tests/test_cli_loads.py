"""Loads people run, requests longer than the context, and bounds on every search (issues 31 and
33), run end to end on the bundled fixture cache (Qwen3-8B: 36 layers, 40,960 tokens trained).
"""

from __future__ import annotations

import json
import math
import signal
from collections.abc import Iterator

import pytest

from llmfit.errors import EXIT_USAGE


def strict(text: str) -> object:
    """JSON as a strict reader takes it: Infinity and NaN are not JSON."""

    def refuse(name: str) -> object:
        raise AssertionError(f"{name} in the JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def deadline() -> Iterator[None]:
    """Fails a run that takes more than 60 s (a search that does not end), rather than hang."""

    def late(signum: int, frame: object) -> None:
        raise AssertionError("the run did not end within 60 s")

    old = signal.signal(signal.SIGALRM, late)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_requests_longer_than_the_models_trained_context_are_refused(run):
    # 2,048 + 50,000 tokens on a model trained for 40,960, no --context given: vLLM refuses a
    # request past --max-model-len 40,960, so nothing "serves up to 14 requests in flight".
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--input-len", "2k", "--output-len", "50000"
    )
    assert code == EXIT_USAGE and out == ""
    assert err == (
        "llmfit: the workload's requests (2,048 prompt and 50,000 generated tokens) are longer "
        "than the model's trained context of 40,960 tokens: give a longer --context, or shorter "
        "--input-len and --output-len.\n"
    )


def test_requests_as_long_as_the_context_are_refused_with_or_without_context(run):
    # 40k in + 40k out (81,920 tokens) on the 40,960-token model: refused alike either way.
    load = ("--input-len", "40k", "--output-len", "40k")
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", *load)
    assert code == EXIT_USAGE
    assert "(40,960 prompt and 40,960 generated tokens) are longer than the model's" in err
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", *load, "--context", "40960")
    assert code == EXIT_USAGE
    assert "are longer than --context 40,960: give a longer --context" in err


def test_a_checked_commands_context_refuses_a_longer_request(run):
    code, _, err = run(
        "check", "--fleet", "1xh100-80g", "--input-len", "2k", "--output-len", "40k", "--",
        "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32768",
    )  # fmt: skip
    assert code == EXIT_USAGE
    assert err == (
        "llmfit: the workload's requests (2,048 prompt and 40,960 generated tokens) are longer "
        "than the command's context of 32,768 tokens: give a command with a longer context, or "
        "shorter --input-len and --output-len.\n"
    )


def test_a_default_workload_cut_to_the_context_says_so(run):
    # The default chat load (2,048 + 512) at --context 2,048: cut in proportion, 512 × 2,048 //
    # 2,560 = 409 generated and 2,048 − 409 = 1,639 prompt tokens, and said.
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--context", "2k", "--json")
    assert code == 0
    w = strict(out)["workload"]  # type: ignore[index]
    assert (w["input_len"], w["output_len"]) == (1639, 409)
    assert w["cut_from"] == {"input_len": 2048, "output_len": 512}
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--context", "2k")
    assert "requests of 1,639 in / 409 out (cut from 2k in / 512 out to fit the context)" in (
        " ".join(out.split())
    )


def test_a_burst_is_asked_with_requests_and_said_as_one(run):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--requests", "1000", "--json")
    assert code == 0
    doc = strict(out)
    w = doc["workload"]  # type: ignore[index]
    assert (w["load"], w["requests"], w["concurrency"], w["rate"]) == ("requests", 1000, None, None)
    for o in doc["options"]:  # type: ignore[index]
        sv = o["serving"]
        if sv and sv["replicas"] is not None:
            assert sv["makespan_s"] > 0 and sv["concurrency"] == 1000
            # Output tokens a second over the run: 1,000 × 512 over its makespan.
            assert sv["output_tokens_per_s"] == pytest.approx(512_000 / sv["makespan_s"], 1e-3)
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--requests", "5", "--rate", "2")
    assert code == EXIT_USAGE
    assert "--rate and --requests each name the load" in err


def test_a_concurrency_past_what_a_pool_holds_is_queued_not_refused(run):
    # 1,000 in flight: no layout is refused for holding fewer (a pool holds them in turn).
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--concurrency", "1000",
                       "--json", "--all")  # fmt: skip
    assert code == 0
    doc = strict(out)
    assert not [r for r in doc["rejected"] if "requests of" in r["reason"]]  # type: ignore[index]
    assert len(doc["options"]) == 40  # type: ignore[index,arg-type]


@pytest.mark.parametrize("rate", ["8.64", "69", "500", "1e9"])
def test_an_option_counted_as_serving_a_rate_serves_it(run, rate):
    # `--rate 69 --option 5` once said "need 1 replica of it: 0 output tok/s, TTFT never": the
    # point at the load was the unstable fixed point. Every option counted as serving the load
    # now has a rate, finite figures, and the load's requests a second.
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--rate", rate, "--all",
                       "--json")  # fmt: skip
    assert code in (0, 1)
    for o in strict(out)["options"]:  # type: ignore[index]
        sv = o["serving"]
        if sv and sv["replicas"] is not None:
            assert sv["output_tokens_per_s"] > 0 and sv["ttft_s"] > 0 and sv["tpot_s"] > 0
            assert sv["rate"] == pytest.approx(float(rate), rel=1e-3)


@pytest.mark.parametrize("value", ["1e-320", "5e-324", "1e9"])
def test_a_concurrency_of_any_positive_size_ends(run, deadline, value):
    # The capacity search's bracket once stopped shrinking once subnormal: it ran forever.
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--concurrency", value, "--json")
    assert code in (0, 1)
    for o in strict(out)["options"]:  # type: ignore[index]
        sv = o["serving"]
        if sv and sv["replicas"] is not None:
            assert math.isfinite(sv["ttft_s"]) and sv["tpot_s"] > 0


@pytest.mark.parametrize(
    ("flag", "value", "sentence"),
    [
        # A time may carry its unit (issue 34): the sentence says the bounds in the flag's own.
        ("--tpot", "5e-324", "Invalid value for '--tpot': '5e-324' is not a time between 0.001 "
         "and 1e+06 ms."),
        ("--min-speed", "5e-324", "Invalid value for '--min-speed': 5e-324 is not in the range "
         "0.001<=x<=1000000.0."),
        ("--ttft", "5e-324", "Invalid value for '--ttft': '5e-324' is not a time between 1e-06 "
         "and 1e+06 s."),
        ("--requests", "0", "Invalid value for '--requests': 0 is not in the range "
         "1<=x<=1000000000."),
    ],
)  # fmt: skip
def test_a_target_that_is_no_time_is_refused(run, flag, value, sentence):
    # --tpot 5e-324 was ZeroDivisionError (exit 10); --min-speed 5e-324 --json printed Infinity.
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", flag, value, "--json")
    assert code == EXIT_USAGE
    assert strict(out) == {"schema": 1, "error": {"exit": 2, "message": sentence}}


def test_the_json_writer_refuses_a_figure_that_is_not_finite():
    from llmfit.render.safe import safe_dumps

    assert safe_dumps({"a": 1.5}) == '{\n  "a": 1.5\n}'
    with pytest.raises(RuntimeError, match="a figure that is not finite reached the JSON"):
        safe_dumps({"a": math.inf})
