"""The walk over a command line's words that every engine's reader shares (plan/engines/argv.py)."""

from __future__ import annotations

import pytest

from llmfit.plan.engines.argv import number, scan, whole

VALUED = {"--model": "model", "-c": "ctx"}
SWITCHES = {"--eager": "eager"}
LAUNCH_ONLY = {"--port", "--headless"}
LAUNCH_SWITCHES = {"--headless"}


def _scan(args: list[str], positional: bool = True):
    return scan(args, VALUED, SWITCHES, LAUNCH_ONLY, LAUNCH_SWITCHES, positional=positional)


def test_flags_by_the_engines_tables():
    w = _scan(["repo", "-c=4096", "--model", "m", "--eager", "--port", "80", "--headless",
               "--odd", "1", "--other", "--x=y"])  # fmt: skip
    assert w.got == {"ctx": "4096", "model": "m"}
    assert w.on == {"eager": True}
    # A launch-only flag takes its value with it, a launch-only switch does not.
    assert w.ignored == ["--odd 1", "--other", "--x=y"]
    assert w.positional == ["repo"]


def test_a_bare_word_without_positionals_is_read_as_an_unknown_flag():
    w = _scan(["repo", "more", "--model", "m"], positional=False)
    assert (w.got, w.ignored, w.positional) == ({"model": "m"}, ["repo more"], [])


def test_a_valued_flag_at_the_end_needs_its_value():
    with pytest.raises(ValueError, match="-c needs a value"):
        _scan(["-c"])


def test_numbers():
    assert whole("-n", "3") == 3
    assert whole("-n", "0", zero=True) == 0
    with pytest.raises(ValueError, match="must be positive"):
        whole("-n", "0")
    with pytest.raises(ValueError, match="must be 0 or more"):
        whole("-n", "-1", zero=True)
    with pytest.raises(ValueError, match="is not a whole number"):
        whole("-n", "1.5")
    assert number("--share", "0.9") == 0.9
    with pytest.raises(ValueError, match="'x' is not a number"):
        number("--share", "x")
