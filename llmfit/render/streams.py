"""What the CLI does with its output streams before any answer, without rich: the width to draw
to, a quiet end for a reader that went away, and ASCII fallbacks for a console that cannot show
what llmfit writes. Kept apart from console.py so that a `--json` run never imports rich."""

from __future__ import annotations

import os

# The width a line is drawn to when nothing says otherwise: piped with no COLUMNS and no terminal
# to ask (a pager reading `llmfit … | less` then shows lines as drawn, not wrapped again).
FALLBACK = 80
# Widths past sense (a mistyped COLUMNS) are not taken; nor, below the narrowest a table is drawn.
NARROWEST, WIDEST = 20, 1000


def quiet_exit() -> None:
    """Stop without another word: stdout is pointed at /dev/null first, so that the interpreter's
    last flush does not complain of the broken pipe on stderr."""
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise SystemExit(0)


def rich_environ() -> dict[str, str]:
    """The environment a rich Console is to read: COLUMNS and LINES only where they are ASCII
    digits. rich reads them with `str.isdigit()` and `int()`, and "²" (or "①") passes the one
    and fails the other: every command was an internal error (issue 33)."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("COLUMNS", "LINES") or (v.isascii() and v.isdigit() and len(v) <= 6)
    }


def output_width() -> int:
    """How wide to draw: COLUMNS where it is set (as rich and most tools read it), else the width
    of the terminal the output is headed for (stdout's, or, piped, the terminal stderr or stdin
    is on: `llmfit … | less` runs in one), else 80."""
    columns = os.environ.get("COLUMNS", "")
    # ASCII digits only: "²".isdigit() is true, and int() refuses it (issue 33).
    if columns.isascii() and columns.isdigit() and NARROWEST <= int(columns[:6]) <= WIDEST:
        return int(columns)
    for fd in (1, 2, 0):
        try:
            width = os.get_terminal_size(fd).columns
        except (OSError, ValueError):
            continue
        if NARROWEST <= width <= WIDEST:
            return width
    return FALLBACK


# What llmfit prints that an ASCII or Latin-1 console cannot show, and what it shows instead: the
# text stays readable and its bars keep their width (one character for one).
ASCII_FALLBACKS = {
    "·": ".", "×": "x", "…": "...", "→": "->", "←": "<-", "²": "2", "█": "#", "░": "-",
    "▏": "|", "—": "-", "–": "-", "−": "-", "≤": "<=", "≥": ">=", "≈": "~", "‘": "'", "’": "'",
    "“": '"', "”": '"', "\u00a0": " ",
}  # fmt: skip
FALLBACK_ERRORS = "llmfit-fallback"
# The ASCII codec under another name: click takes a stream whose codec is named "ascii" for a
# misconfigured one and writes UTF-8 to it behind our back; under this name it writes through
# the stream, fallbacks and all.
ASCII_CODEC = "llmfit-ascii"


def _fallback(e: UnicodeError) -> tuple[str, int]:
    if not isinstance(e, UnicodeEncodeError):
        raise e
    text = e.object[e.start : e.end]
    return "".join(ASCII_FALLBACKS.get(ch, "?") for ch in text), e.end


def _codec(name: str):  # type: ignore[no-untyped-def]
    import codecs

    if name.replace("_", "-") != ASCII_CODEC:
        return None
    ascii_info = codecs.lookup("ascii")
    return codecs.CodecInfo(
        ascii_info.encode, ascii_info.decode, name=ASCII_CODEC,
        incrementalencoder=ascii_info.incrementalencoder,
        incrementaldecoder=ascii_info.incrementaldecoder,
        streamwriter=ascii_info.streamwriter, streamreader=ascii_info.streamreader,
    )  # fmt: skip


_registered = False


def encoding_safe_streams() -> None:
    """Make stdout and stderr write what their encoding cannot hold as ASCII fallbacks (`·` as
    `.`, `×` as `x`, `…` as `...`, a bar's `█` as `#`) instead of raising UnicodeEncodeError
    (PYTHONIOENCODING=ascii or latin-1, a C locale). Only prose and tables are written so: a
    command's word the encoding cannot hold is refused before it is printed (render/safe.py)."""
    import codecs
    import sys

    global _registered
    if not _registered:
        codecs.register_error(FALLBACK_ERRORS, _fallback)
        codecs.register(_codec)
        _registered = True
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if not encoding or not hasattr(stream, "reconfigure"):
            continue
        try:
            "·×…█░".encode(encoding)
            continue  # UTF-8 and its kind hold everything llmfit writes
        except (UnicodeEncodeError, LookupError):
            pass
        try:
            if codecs.lookup(encoding).name == "ascii":
                stream.reconfigure(encoding=ASCII_CODEC, errors=FALLBACK_ERRORS)
            else:
                stream.reconfigure(errors=FALLBACK_ERRORS)
        except (ValueError, OSError, LookupError):  # a stream that cannot be reconfigured now
            pass
