"""Property tests for issue 12's classes: names that would be paths, JSON of any depth and bytes,
and a Hub that fails in any way at any request; each run briefly here, far longer under `-m slow`.

The Hub property is the strongest: whatever fault a run meets, it ends in one sentence and a
documented exit code, and the next run, with the Hub healthy again, gives the same answer as if
the fault had never happened (nothing bad was kept in any cache).
"""

from __future__ import annotations

import os
import posixpath

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfit.sources import session
from llmfit.sources.cache import file_name_problem, revision_problem
from llmfit.sources.jsonfile import MAX_DEPTH, JsonProblem, parse
from tests.conftest import EXAMPLE_FLEET
from tests.hubserver import MODES

BRIEF = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=50_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces of paths as an attacker would put them together.
path_pieces = st.lists(
    st.sampled_from(
        [".", "..", "/", "//", "\\", "a", "b.lock", "~", "@{", "@", "-", ":", " ", "\x00", "\x1b",
         "\u202e", "é", "refs", "main", "x" * 300, "%2e%2e", ".git"]
    ),
    max_size=8,
).map("".join)  # fmt: skip


def check_revision(text: str) -> None:
    if revision_problem(text) is not None:
        return
    # A revision taken is one path under refs/, however it is joined.
    joined = posixpath.normpath(posixpath.join("/cache/refs", text))
    assert joined.startswith("/cache/refs/"), text
    assert text.isprintable() and len(text.encode()) <= 255


def check_file_name(text: str) -> None:
    if file_name_problem(text) is not None:
        return
    joined = posixpath.normpath(posixpath.join("/repo", text))
    assert joined.startswith("/repo/") and joined == "/repo/" + text, text


@BRIEF
@given(path_pieces | st.text(max_size=30))
def test_a_revision_taken_stays_under_refs(text):
    check_revision(text)


@BRIEF
@given(path_pieces | st.text(max_size=30))
def test_a_file_name_taken_stays_in_the_repository(text):
    check_file_name(text)


def check_json(raw: bytes) -> None:
    try:
        parse(raw, 1 << 20)
    except JsonProblem as e:
        assert "\n" not in e.problem


nested = (
    st.integers(0, 3 * MAX_DEPTH)
    .flatmap(lambda d: st.tuples(st.just(d), st.sampled_from([b'{"a":', b"["])))
    .map(lambda t: t[1] * t[0] + b"1" + (b"}" if t[1] == b'{"a":' else b"]") * t[0])
)


@BRIEF
@given(st.binary(max_size=256) | nested | st.integers(0, 200_000).map(lambda n: b"[" * n))
def test_json_of_any_bytes_and_any_depth(raw):
    check_json(raw)


# -- the Hub, failing anywhere --------------------------------------------------------------------

FLEET = str(EXAMPLE_FLEET)
WHERE = ["/api/models/", "config.json", "model.safetensors.index.json", "model-00001", "-of-"]
# A fault mode, where it strikes, and when: every matching request, only the first (what a retry
# or a second run must get past), or every one after the first (a failure half-way through).
faults = st.tuples(
    st.sampled_from([m for m in MODES if m != "slow"]),
    st.sampled_from(WHERE),
    st.sampled_from(["always", "once", "after-first"]),
)
# What the value-carrying modes put in the answer.
answers = st.fixed_dictionaries(
    {
        "wrong_json": st.sampled_from([[], "x", 0, None, {}, {"sha": "a" * 40}, {"siblings": [1]}])
        | st.recursive(st.none() | st.integers() | st.text(max_size=4), st.lists, max_leaves=5),
        "bad_commit": st.sampled_from(["../../x", "a" * 41, "", "A" * 40]) | st.text(max_size=45),
        "trickle_seconds": st.sampled_from([0.005, 0.02, 0.04]),
        "bomb_encoding": st.sampled_from(["gzip", "deflate", "br"]),
    }
)
EXIT = {2, 3, 4, 5, 6, 7, 8, 9}
HUB_BRIEF = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HUB_LONG = settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def quick(monkeypatch, hubserver):
    from huggingface_hub import constants, file_download

    monkeypatch.setattr(session, "DEADLINE", 0.5)
    monkeypatch.setattr(session, "MAX_ANSWER", 4 << 20)
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 2)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 2)
    # huggingface_hub waits a second between its five tries of a download that broke off.
    monkeypatch.setattr(file_download.time, "sleep", lambda s: None)
    hubserver.trickle_seconds = 0.02
    hubserver.bomb_bytes = 32 << 20
    return hubserver


def check_fault(
    run_online, hubserver, fault: tuple[str, str, str], answer: dict, baseline: list[str]
) -> None:
    mode, where, when = fault
    seen = [0]

    def strikes(path: str) -> bool:
        if where not in path:
            return False
        seen[0] += 1
        return when == "always" or (seen[0] == 1) == (when == "once")

    for key, value in answer.items():
        setattr(hubserver, key, value)
    hubserver.mode, hubserver.fail_on = mode, strikes
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "8k")
    lines = err.splitlines()
    if code != 0:
        assert code in EXIT, err
        assert out == "" and 1 <= len(lines) <= 2, err
        assert lines[0].startswith("llmfit: ") and "internal error" not in err, err
        assert len(lines) == 1 or lines[1].startswith("hint: "), err
    # Healthy again: the same answer as a run that never met the fault.
    hubserver.mode, hubserver.fail_on = None, ""
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    assert out.splitlines()[-3:] == baseline


@pytest.fixture
def baseline(run_online, quick) -> list[str]:
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    # Start every example from nothing cached: the faults then meet the first download too.
    return out.splitlines()[-3:]


def _forget(tmp_path) -> None:
    import shutil

    shutil.rmtree(tmp_path / "hf-cache", ignore_errors=True)
    shutil.rmtree(os.environ["LLMFIT_CACHE"], ignore_errors=True)


@HUB_BRIEF
@given(faults, answers, st.booleans())
def test_any_fault_anywhere_is_one_sentence_and_leaves_nothing_bad(
    run_online, quick, baseline, tmp_path, fault, answer, cold
):
    if cold:
        _forget(tmp_path)
    check_fault(run_online, quick, fault, answer, baseline)


@pytest.mark.slow
@HUB_LONG
@given(faults, answers, st.booleans())
def test_any_fault_anywhere_is_one_sentence_and_leaves_nothing_bad_long(
    run_online, quick, baseline, tmp_path, fault, answer, cold
):
    if cold:
        _forget(tmp_path)
    check_fault(run_online, quick, fault, answer, baseline)


@pytest.mark.slow
@LONG
@given(path_pieces | st.text(max_size=60))
def test_a_revision_taken_stays_under_refs_long(text):
    check_revision(text)


@pytest.mark.slow
@LONG
@given(path_pieces | st.text(max_size=60))
def test_a_file_name_taken_stays_in_the_repository_long(text):
    check_file_name(text)


@pytest.mark.slow
@LONG
@given(st.binary(max_size=4096) | nested | st.integers(0, 500_000).map(lambda n: b"[" * n))
def test_json_of_any_bytes_and_any_depth_long(raw):
    check_json(raw)
