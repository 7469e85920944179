"""Properties of reading and printing an engine's flags (issue 24): every combination of declared
knobs llmfit prints is read back by the engine's own grammar to the same values, and a switch
given with its negations in any order keeps the last one, as argparse does.

Brief in the default suite; `-m slow` runs them long (tests/fuzz/run_long.py --seconds 600)."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfit.plan.engines import engine, knobs, options_class
from llmfit.plan.engines.vllm_options import VllmOptions
from llmfit.plan.settings import PlanSettings

# Where each engine's knobs are planned (a model and fleet it fits with any of them).
CASES = {
    "vllm": ("Qwen/Qwen3-8B", "1xh100-80g"),
    "sglang": ("Qwen/Qwen3-8B", "1xh100-80g"),
    "llama.cpp": ("llmfit-fixtures/Tiny-Llama-GGUF", "1xrtx4090-24g"),
}


def _values(d: knobs.Declared) -> st.SearchStrategy[list[str]]:
    """llmfit's words for one knob: its flag and a value it takes, or nothing."""
    k = d.knob
    flag = k.llmfit_flag
    assert flag is not None
    if k.kind in ("switch", "bool"):
        on = st.just([flag])
        return st.one_of(on, st.just([k.negations[0]])) if k.negations else on
    if k.choices:
        return st.sampled_from(k.choices).map(lambda c: [flag, c])
    if k.kind == "int":
        low = int(k.low or 1) + (1 if k.open_low else 0)
        high = min(int(k.high or 1 << 20), 1 << 20)
        return st.integers(low, high).map(lambda n: [flag, str(n)])
    if k.kind == "float":
        return st.sampled_from(["0.5", "0.7", "0.85", "0.9"]).map(lambda x: [flag, x])
    assert k.example is not None
    return st.just([flag, k.example])


def _words(key: str) -> st.SearchStrategy[list[str]]:
    cls = options_class(key)
    passed = [
        d for d in knobs.declared(cls) if d.knob.flags and d.knob.llmfit_flag and d.knob.passed
    ]
    picks = st.lists(st.sampled_from(passed), unique_by=lambda d: d.name, max_size=len(passed))
    return picks.flatmap(lambda ds: st.tuples(*(_values(d) for d in ds))).map(
        lambda parts: [w for p in parts for w in p]
    )


@st.composite
def planned(draw: st.DrawFn) -> tuple[str, list[str]]:
    key = draw(st.sampled_from(sorted(CASES)))
    return key, draw(_words(key))


def _check_printed_reads_back(run, key: str, words: list[str]) -> None:
    import json

    repo, fleet = CASES[key]
    code, out, err = run(repo, "--fleet", fleet, "--engine", key, *words, "--json",
                         "--precision", "stored")  # fmt: skip
    if code == 2:
        # A combination the engine refuses (fewer batched tokens than sequences): said so.
        assert err.startswith("llmfit: "), err
        return
    assert code in (0, 1), err
    doc = json.loads(out)
    if not doc["options"]:
        return
    asked = doc["options"][0]
    serve = [c for c in asked["commands"] if c["role"] in ("all", "head")][0]
    argv = shlex.split(serve["shell"])
    e = engine(key)
    cls = options_class(key)
    from llmfit.plan.engines import split_env

    env, argv = split_env(argv)
    got = e.read_command(argv, PlanSettings(), env).settings.options(cls)
    for d in knobs.declared(cls):
        if not (d.knob.flags and d.knob.passed and d.knob.llmfit_flag):
            continue
        for i, w in enumerate(words):
            if w == d.knob.llmfit_flag:
                want = (
                    knobs.parse(d.knob, d.knob.flag, words[i + 1]) if d.knob.takes_value else True
                )
            elif w in d.knob.negations[:1]:
                want = False
            else:
                continue
            assert getattr(got, d.name) == want, (words, serve["shell"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=planned())
def test_every_combination_of_knobs_printed_reads_back(run, case):
    _check_printed_reads_back(run, *case)


@pytest.mark.slow
@settings(
    max_examples=4000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=planned())
def test_every_combination_of_knobs_printed_reads_back_long(run, case):
    _check_printed_reads_back(run, *case)


# vLLM's switches and every spelling that turns each off (its negations, and the --no- forms its
# parser accepts but hides from help).
SWITCHES = {
    "enforce_eager": (["--enforce-eager"], ["--no-enforce-eager"]),
    "enable_prefix_caching": (
        ["--enable-prefix-caching"],
        ["--no-enable-prefix-caching", "--disable-prefix-caching"],
    ),
}


@st.composite
def toggles(draw: st.DrawFn) -> tuple[str, list[str]]:
    name = draw(st.sampled_from(sorted(SWITCHES)))
    on, off = SWITCHES[name]
    words = draw(st.lists(st.sampled_from(on + off), min_size=1, max_size=8))
    return name, words


def _check_last_wins(name: str, words: list[str]) -> None:
    from llmfit.plan.engines.vllm_command import read

    on, _ = SWITCHES[name]
    got = read(["vllm", "serve", "m", *words], PlanSettings()).settings.options(VllmOptions)
    assert getattr(got, name) is (words[-1] in on), words


@settings(max_examples=200, deadline=None)
@given(case=toggles())
def test_a_switch_and_its_negations_keep_the_last(case):
    _check_last_wins(*case)


@pytest.mark.slow
@settings(max_examples=50_000, deadline=None)
@given(case=toggles())
def test_a_switch_and_its_negations_keep_the_last_long(case):
    _check_last_wins(*case)
