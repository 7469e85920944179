"""Text from outside (configs, the Hub, fleet files, flags, file names) made safe to print.

Anything a repository, a Hub, a fleet file or an argument says can hold bytes a terminal acts on:
an escape sequence that recolours, retitles or rewrites the screen, a newline that forges an
`llmfit:` line of its own, a bidi override that shows text in an order other than the bytes'. It
is printed as data: one line, no control characters, bounded in length. The result is plain text,
never markup: print it with `markup=False` or as a `rich.text.Text`.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence

# Whole escape sequences go, not only their ESC (which would leave "[31m" on the screen):
# ECMA-48's control strings (OSC, DCS, SOS, PM, APC, up to their terminator; one with none loses
# only its introducer, so that it cannot swallow the rest of llmfit's sentence), its control
# sequences (CSI, in the 7-bit and the 8-bit form), and the two- and three-byte escapes (ESC,
# intermediates, a final byte).
_SEQUENCES = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
# What separates lines or words, shown as one space: C0's line and tab characters, NEL, and
# Unicode's line and paragraph separators.
_BREAKS = re.compile(r"[\t\n\v\f\r\x85\u2028\u2029]+")
# Every other C0 and C1 control and DEL; the bidi embeddings, overrides, isolates and marks (which
# reorder what follows them on the screen); zero-width characters and the byte-order mark.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
# The lone surrogates an undecodable file name becomes: a UTF-8 terminal cannot even be sent them.
_SURROGATES = re.compile("[\ud800-\udfff]")

# Long enough for a sentence naming a path and a value; a config's megabyte-long key is cut.
LIMIT = 1000


def clean(text: str, limit: int = LIMIT) -> str:
    """`text` as one printable line of at most `limit` characters (an ellipsis marks where its
    middle was cut)."""
    text = _SEQUENCES.sub("", str(text))
    text = _BREAKS.sub(" ", text)
    text = _INVISIBLE.sub("", text)
    text = _SURROGATES.sub("\ufffd", text)
    if len(text) > limit:
        # Cut in the middle: a sentence's end says what is wrong ("…: cannot be read (File name
        # too long).") and must survive a long value inside it.
        head = (limit - 1) // 2
        text = text[:head] + "…" + text[len(text) - (limit - 1 - head) :]
    return text


def clean_lines(text: str, limit: int = 100_000) -> str:
    """Each line of `text` cleaned as `clean` cleans one, its line breaks kept: for output made of
    several lines (a launch as YAML, a summary) any of which may quote outside text."""
    return "\n".join(clean(line, limit) for line in text.split("\n"))


# What a terminal acts on or shows out of order that json.dumps leaves raw with ensure_ascii=False
# (it escapes C0 controls only): DEL and C1 controls (the 8-bit CSI), bidi controls, zero-width
# characters, line and paragraph separators, and lone surrogates (an undecodable name, which
# stdout could not even encode).
_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")


def safe_dumps(value: object) -> str:
    """JSON as llmfit prints it. Names, notes and revisions come from repositories and fleet
    files: what a terminal acts on is written as \\u escapes, so that a script still reads every
    string exactly as it was (cleaning them would change the data), the terminal is sent nothing
    it acts on, and everything else (×, a name in any script) stays readable, as
    ensure_ascii=True would not leave it."""
    # No float that is not finite is ever written: Python would write Infinity or NaN, which
    # no JSON reader takes. One reaching here is a bug (the figures are made finite, or null,
    # where they are worked out): refused, an internal error, never half-valid JSON.
    try:
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError as e:
        raise RuntimeError(f"a figure that is not finite reached the JSON ({e})") from None
    if _UNSAFE.search(text) is None:  # the common case, found in a third of sub's time
        return text
    return _UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def shown(word: str) -> str:
    """Outside text as a sentence names it: as it is when every character shows as itself,
    else quoted with each one that does not escaped (Python's repr escapes controls, format
    characters and surrogates), so that the sentence names the very bytes."""
    from llmfit.plan.launch import unshowable

    return clean(word if unshowable(word) is None else repr(word), 200)


def _shown_word(word: str) -> str:
    """A word as a refusal quotes it: in ASCII, every other character escaped (`ascii()`), so
    that the sentence names its exact characters on any console, an ASCII one too."""
    return clean(ascii(word), 120)


def _kind(ch: str) -> str:
    import unicodedata

    names = {"Cc": "a control character", "Cf": "a format character (bidi or zero-width)",
             "Cs": "a byte that is not UTF-8", "Zl": "a line separator",
             "Zp": "a paragraph separator", "Cn": "an unassigned character"}  # fmt: skip
    return names.get(unicodedata.category(ch), "a character")


def check_words(words: Sequence[str], encoding: str | None = None) -> None:
    """Refuse (UnprintableCommand) words that cannot be printed exactly: one holding a character
    a terminal would act on or not show as itself, or one `encoding` cannot write. Such a word is
    never cleaned: a command printed changed runs something else."""
    from llmfit.errors import UnprintableCommand
    from llmfit.plan.launch import unshowable

    for word in words:
        found = unshowable(word)
        if found is not None:
            i, ch = found
            raise UnprintableCommand(
                f"the command is not printed: its word {_shown_word(word)} holds "
                f"{_kind(ch)} (U+{ord(ch):04X}, at {i:,}), which a terminal would act on or "
                "hide, and a command printed any other way would name something else.",
                hint="rename the file or folder, or read the exact words from --json",
            )
        if encoding:
            try:
                word.encode(encoding)
            except (UnicodeEncodeError, LookupError):
                raise UnprintableCommand(
                    f"the command is not printed: its word {_shown_word(word)} cannot be "
                    f"written in this output's encoding ({encoding}), and a command printed any "
                    "other way would name something else.",
                    hint="set PYTHONIOENCODING=utf-8, or read the exact words from --json",
                ) from None


def shell_line(words: Sequence[str], encoding: str | None = None) -> str:
    """Words as one line for a POSIX shell, each quoted once (`shlex.quote`) from its exact
    characters, after `check_words` has found every one printable."""
    check_words(words, encoding)
    return " ".join(shlex.quote(w) for w in words)


def output_encoding() -> str | None:
    """The encoding stdout writes in (None when it is not known): a command's word it cannot
    write is refused, not replaced (render/safe.py)."""
    import sys

    return getattr(sys.stdout, "encoding", None)
