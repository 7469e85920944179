"""A repository's quantised siblings in the local Hugging Face cache: `Qwen/Qwen3-235B-A22B-FP8`
and `nvidia/Qwen3-235B-A22B-NVFP4` beside `Qwen/Qwen3-235B-A22B`.

A user whose checkpoint fits only as a what-if, or not at all, often has the quantised checkpoint
its authors (or NVIDIA, or a quantiser) published already in the cache; llmfit names them so the
next command is one of them. Only names are read: the cache's folder names, never their files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from llmfit.sources.cache import is_repo_id

# What a quantised sibling's name adds to its base's: a precision or a method.
_QUANT = re.compile(
    r"(^|[-_.])(fp8|fp4|nvfp4|mxfp4|int8|int4|w8a8|w4a16|w8a16|awq|gptq|gguf|bnb|4bit|8bit|"
    r"dynamic|quantized)([-_.]|$)",
    re.IGNORECASE,
)
# A cache with more folders than this is not searched further (a shared cache of thousands of
# models is listed in a few milliseconds; a directory of millions is not a cache to walk).
MAX_ENTRIES = 20_000
MAX_SHOWN = 5


def quantised_siblings(repo_id: str, cache: Path) -> tuple[str, ...]:
    """Repositories in `cache` named as a quantisation of `repo_id` (any organisation)."""
    name = repo_id.split("/", 1)[-1].lower()
    found: list[str] = []
    try:
        with os.scandir(cache) as entries:
            for i, entry in enumerate(entries):
                if i >= MAX_ENTRIES:
                    break
                if not entry.name.startswith("models--"):
                    continue
                org, _, other = entry.name[len("models--") :].partition("--")
                if not other or f"{org}/{other}" == repo_id:
                    continue
                low = other.lower()
                # A folder name is anyone's text: only a repository's name is named back.
                if (
                    low.startswith(name)
                    and _QUANT.search(low[len(name) :])
                    and is_repo_id(f"{org}/{other}")
                ):
                    found.append(f"{org}/{other}")
    except OSError:
        return ()
    return tuple(sorted(found)[:MAX_SHOWN])
