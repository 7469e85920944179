"""JSON from outside (config.json, an index, a safetensors header, a cached listing), read within
bounds.

Python's json reads whatever it is given: a file of any size, nesting until the interpreter's
recursion limit, an integer of thousands of digits (until 3.11's int-from-string limit raises a
bare ValueError), UTF-16 when handed bytes. Each of those is refused here with a phrase the caller
puts after the file's name: "{file} {problem}.".
"""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path
from typing import Any

# A config or an index is a few levels deep (DeepSeek's quantization_config, the deepest seen, is
# four); a safetensors header three. Thirty-two is far past any, and far within the interpreter's
# recursion limit, which is where Python's json would otherwise stop.
MAX_DEPTH = 32
# Sizes in these files are below 2⁶⁴ (20 digits); a number of more is not a size.
MAX_DIGITS = 40


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
# How a JSON object or array begins in UTF-16 (or UTF-32) without a byte-order mark.
_WIDE_OPENINGS = (b"{\0", b"\0{", b"[\0", b"\0[")


class JsonProblem(ValueError):
    """What is wrong with bytes that should be JSON, as a phrase: "is not UTF-8 text (…)"."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _whole(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise JsonProblem(f"is not valid JSON: a number has more than {MAX_DIGITS} digits")
    return int(text)


def _depth(value: Any) -> int:
    """How many objects and arrays deep `value` nests (0 for a scalar), walked without recursion
    and stopping as soon as it is past MAX_DEPTH."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        depth += 1
        if depth > MAX_DEPTH:
            return depth
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in item if isinstance(child, (dict, list)))
    return deepest


def parse(raw: bytes, limit: int) -> Any:
    """The JSON value of `raw`, or JsonProblem saying why it is not one llmfit reads."""
    if len(raw) > limit:
        raise JsonProblem(f"is more than {limit:,} bytes, the most llmfit reads of such a file")
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, *_WIDE_OPENINGS)):
        # json.loads would guess UTF-16 from the bytes and read it; transformers and vLLM open
        # config.json as UTF-8 and would not.
        raise JsonProblem("is UTF-16 (or UTF-32) text; a JSON file must be UTF-8")
    if raw.startswith(codecs.BOM_UTF8):
        raise JsonProblem(
            "begins with a UTF-8 byte-order mark, which JSON does not allow (and transformers "
            "refuses)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonProblem(
            f"is not UTF-8 text (byte {e.start:,} is {raw[e.start]:#04x}); a JSON file must be "
            "UTF-8"
        ) from None
    try:
        value = json.loads(text, parse_int=_whole)
    except JsonProblem:
        raise
    except RecursionError:
        raise JsonProblem(f"nests objects and arrays more than {MAX_DEPTH} deep") from None
    except json.JSONDecodeError as e:
        raise JsonProblem(f"is not valid JSON: {e}") from None
    except ValueError as e:  # what else json raises on text: a number it cannot convert
        raise JsonProblem(f"is not valid JSON: {str(e)[:80]}") from None
    if _depth(value) > MAX_DEPTH:
        raise JsonProblem(f"nests objects and arrays more than {MAX_DEPTH} deep")
    if _SURROGATE_ESCAPE.search(text):
        # UTF-8 cannot hold a lone surrogate, but a \u escape can name one; such a string is not
        # text, and would fail wherever it is printed or written.
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise JsonProblem("holds a \\u escape of a lone surrogate, which is not text") from None
    return value


def read(path: Path, limit: int) -> Any:
    """The JSON value of a file, reading at most `limit` + 1 bytes of it. OSError as open()
    raises it; JsonProblem for what is in it."""
    with path.open("rb") as f:
        raw = f.read(limit + 1)
    return parse(raw, limit)
