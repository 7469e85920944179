"""The fast reader of fleet TOML: for every file it takes, exactly what tomllib gives (types too);
every other file, and every file tomllib refuses, it leaves to tomllib."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfit.sources.fleet import _fast_toml, parse_fleet
from tests.conftest import ROOT

# What the fast reader takes, and beside it what it must leave to tomllib (or what tomllib refuses).
GOOD_HEADERS = ["[[node]]", "[[pool]]", "[[node.devices]]", "[[ node . devices ]]",
                "[[pool.devices]]", "  [[node.devices]]", "[[node]] # c"]  # fmt: skip
BAD_HEADERS = ["[node]", "[[nodes]]", "[[no de]]", "[[node.devices.x]]", "[['node']]", "[[node]]x"]
GOOD_KEYS = ["name", "gpu", "gpus", "ram_gb", "devices", "a-b", "1", "x_y"]
BAD_KEYS = ["'q'", "a.b", "é", ""]
GOOD_SEPS = [" = ", "=", "\t=\t", "  ="]
GOOD_VALUES = [
    "0", "8", "-1", "+3", "1_000", "-0", "99999999999999999999999", "1.5", "1e3", "1E-2",
    "+1.0", "-0.0", "1_0.5", '"x"', "'x'", '"tab\there"', '"é"', '""', "''", "true", "false",
    '"h100-80g"', '"#not a comment"', "'a#b'", "'a\\b'",
]  # fmt: skip
BAD_VALUES = [
    "1__0", "01", "1.", ".5", "1e", "inf", "nan", "+inf", "0x10", "1_", '"a\\"b"', '"ctrl\x01"',
    "'it''s'", '"""x"""', '"open', "True", "[1]", "{a = 1}", "1979-05-27", "9" * 5000,
]  # fmt: skip
GOOD_TAILS = ["", " # note", "#c", "\t", " #\té"]
BAD_TAILS = [" # \x01", " x", " # \x7f"]
GOOD_BLANKS = ["", "   ", "# comment", "\t# c"]


def lines(headers, keys, seps, values, tails, blanks):
    return st.one_of(
        st.sampled_from(headers),
        st.builds(
            lambda k, s, v, t: f"{k}{s}{v}{t}",
            st.sampled_from(keys),
            st.sampled_from(seps),
            st.sampled_from(values),
            st.sampled_from(tails),
        ),  # fmt: skip
        st.sampled_from(blanks),
    )


GOOD = lines(GOOD_HEADERS, GOOD_KEYS, GOOD_SEPS, GOOD_VALUES, GOOD_TAILS, GOOD_BLANKS)
ANY = lines(GOOD_HEADERS + BAD_HEADERS, GOOD_KEYS + BAD_KEYS, [*GOOD_SEPS, " == "],
            GOOD_VALUES + BAD_VALUES, GOOD_TAILS + BAD_TAILS,
            [*GOOD_BLANKS, "\r", "a = 1\r"])  # fmt: skip


@st.composite
def toml_texts(draw) -> str:
    """Mostly lines the fast reader takes (so that it does take whole files), some with one line
    it must not, and some files of any lines; with LF or CRLF."""
    body = draw(st.lists(GOOD, max_size=14))
    if draw(st.integers(0, 3)):  # a key outside a table is tomllib's: most files open a table
        body.insert(0, draw(st.sampled_from(["[[node]]", "[[pool]]"])))
    odd = draw(st.integers(0, 2))
    if odd == 1:
        body.insert(draw(st.integers(0, len(body))), draw(ANY))
    elif odd == 2:
        body = draw(st.lists(ANY, max_size=8))
    newline = draw(st.sampled_from(["\n", "\n", "\n", "\r\n"]))
    return newline.join(body) + (newline if draw(st.booleans()) else "")


def typed(value: object) -> object:
    """The value with each scalar's type beside it: 1, 1.0 and True are equal, not the same."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def reference(text: str) -> object:
    try:
        return typed(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return "refused"


def check(text: str) -> None:
    fast = _fast_toml(text)
    if fast is not None:
        assert typed(fast) == reference(text)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(toml_texts())
def test_the_fast_reader_agrees_with_tomllib_or_leaves_the_file_to_it(text):
    check(text)


@pytest.mark.slow
@settings(max_examples=100_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(toml_texts())
def test_the_fast_reader_agrees_with_tomllib_long(text):
    check(text)


def fleet_file(n: int) -> str:
    out = []
    for i in range(n):
        out.append(f'[[node]]\nname = "n{i}"  # a comment\nram_gb = {2048 + i % 3}.5\n')
        if i % 2:
            out.append(f"gpu = 'h100-80g'\ngpus = 8\nfree_gpus = {i % 9}\nfabric = \"ib{i % 4}\"\n")
        else:
            out.append('  [[node.devices]]\n  gpu = "a100-80g-mig-3g.40gb"\n  gpus = 4\n\n')
    return "".join(out)


def test_the_fleets_people_and_imports_write_take_the_fast_path():
    texts = [(ROOT / "examples" / n).read_text() for n in
             ("fleet.toml", "fleet-4-nodes.toml", "fleet-200-nodes.toml")]  # fmt: skip
    texts.append(fleet_file(50))
    for text in texts:
        fast = _fast_toml(text)
        assert fast is not None and typed(fast) == typed(tomllib.loads(text))


def test_a_file_left_to_tomllib_reads_the_same():
    """An escaped name sends the file to tomllib; the fleet is the one the fast path would give."""
    text = fleet_file(6)
    slow = text.replace('name = "n3"', 'name = "n\\u0033x"')
    assert _fast_toml(slow) is None
    a, b = parse_fleet(text, "f.toml"), parse_fleet(slow, "f.toml")
    assert [n.kinds for n in a.nodes] == [n.kinds for n in b.nodes]
    assert b.nodes[3].id == "n3x"
