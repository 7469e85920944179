"""clean(): outside text printed as data: one line, nothing a terminal acts on, bounded."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfit.render.safe import LIMIT, clean


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # Whole sequences go, not only their ESC: no "[31m" is left on the screen.
        ("a\x1b[31mred\x1b[0m b", "ared b"),
        ("a\x9b31mb", "ab"),  # the 8-bit CSI
        ("a\x1b[?1049hb", "ab"),  # the alternate screen
        ("a\x1b]0;owned\x07b", "ab"),  # a window title (OSC, ended by BEL)
        ("a\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\z", "alinkz"),  # a hyperlink (ended by ST)
        ("a\x9d0;title\x9cb", "ab"),  # the 8-bit OSC and ST
        ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
        ("a\x1bcb", "ab"),  # RIS: reset the terminal
        ("a\x1b(0b", "ab"),  # a character set designation
        # An unterminated string loses its introducer only, so the sentence after it survives.
        ("x \x1b]0;no end, then llmfit's words", "x 0;no end, then llmfit's words"),
        # A newline cannot forge a line of llmfit's own.
        ("model\nllmfit: all is well", "model llmfit: all is well"),
        ("a\r\n\tb\x0b\x0cc", "a b c"),
        ("a\u2028b\u2029c\x85d", "a b c d"),
        # Bidi controls reorder what follows on screen; zero-width ones hide.
        ("file\u202egpj.exe", "filegpj.exe"),
        ("a\u2066b\u2069c\u200fd\u061ce", "abcde"),
        ("a\u200bb\ufeffc", "abc"),
        ("bell\x07 bs\x08 nul\x00 del\x7f c1\x80\x9f", "bell bs nul del c1"),
        # An undecodable file name's lone surrogates cannot even be encoded for a terminal.
        ("name-\udcff.json", "name-\ufffd.json"),
        # Rich markup is left as text: it is printed as text, never parsed.
        ("[bold red]x[/]", "[bold red]x[/]"),
        ("Qwen/Qwen3-8B × 2 · 94 layers", "Qwen/Qwen3-8B × 2 · 94 layers"),
    ],
)
def test_what_a_terminal_would_act_on_is_taken_out(text, shown):
    assert clean(text) == shown


def test_the_length_is_bounded_and_the_end_survives():
    long = "llmfit: " + "x" * 5000 + ": cannot be read (File name too long)."
    assert clean(long) == long[:499] + "…" + long[-500:]
    assert len(clean(long)) == LIMIT
    assert clean("abcdefgh", 5) == "ab…gh"
    assert clean("abcd", 4) == "abcd"


def _unsafe(c: str) -> bool:
    cat = unicodedata.category(c)
    return cat in ("Cc", "Cs", "Zl", "Zp") or (cat == "Cf" and c in BIDI_AND_HIDDEN)


BIDI_AND_HIDDEN = set("\u061c\u200b\u200c\u200d\u200e\u200f\ufeff") | {
    chr(c) for c in [*range(0x202A, 0x202F), *range(0x2060, 0x206A)]
}
# Escapes, controls and line breaks mixed into ordinary text, as a hostile string would be.
hostile_text = st.lists(
    st.sampled_from(["\x1b", "[", "]", "\x9b", "\x9d", "\x07", "\x9c", "\\", "\n", "\r", "\t"])
    | st.sampled_from(sorted(BIDI_AND_HIDDEN) + ["\u2028", "\u2029", "\x85", "\x00", "\x7f"])
    | st.text(max_size=5),
    max_size=40,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(hostile_text | st.text(), st.integers(1, 200))
def test_no_control_character_survives_anything(text, limit):
    out = clean(text, limit)
    assert not any(_unsafe(c) for c in out)
    assert len(out) <= limit
    assert clean(out, limit) == out  # cleaning what is clean changes nothing
