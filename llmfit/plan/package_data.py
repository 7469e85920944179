"""The package's own data files (llmfit/data/: the card table, the serving constants, the kernel
curves), read as Python reads the package's modules: by its loader.

`importlib.resources` reads the files the same way, and more besides (temporary files for
archives, readers for every kind of loader), but importing it brings tempfile, zipfile, shutil
and the compression modules: about 10 ms of a cached plan's 300, more than reading the files.
`pkgutil.get_data` asks the same loader with nothing to import that a plan has not already.

Parsing the card table's TOML takes 7 ms of every plan (tomllib is Python), the kernel curves'
JSON 3 ms. The `llmfit` command keeps a file's parse from run to run (llmfit/data_cache.py,
installed by llmfit/entry.py as the dataclass cache is): this module only asks `KEEPER` for the
parse of a text and hands it what it parsed, so the core itself writes nothing and a program that
imports llmfit's library parses every time, as it would without the command.
"""

from __future__ import annotations

import json
import pkgutil
from collections.abc import Callable
from typing import Any, Protocol


class Keeper(Protocol):
    """Keeps parses from run to run: the parse of `text` (the whole file) or None, and a parse to
    keep. Whatever goes wrong in keeping is its own affair: never an error here."""

    def get(self, name: str, text: str) -> Any: ...

    def put(self, name: str, text: str, doc: Any) -> None: ...


# Set by the command's entry point (llmfit/data_cache.py install); None: every read parses.
KEEPER: Keeper | None = None


def read_text(name: str) -> str:
    """The text of `name` ("data/cards.toml"), relative to the llmfit package."""
    data = pkgutil.get_data("llmfit", name)
    if data is None:  # a loader that reads no files beside its modules
        raise ValueError(f"{name}: llmfit's loader reads no data files")
    return data.decode("utf-8")


def read_toml(name: str) -> dict[str, Any]:
    """`tomllib.loads` of the text of `name`, or the parse kept of the same text."""
    doc: dict[str, Any] = _parsed(name, _toml)
    return doc


def _toml(text: str) -> Any:
    # Imported only where a text is parsed: the command keeps every parse (KEEPER), and tomllib
    # with the modules it brings (datetime, string, its regular expressions) is about 6 ms of a
    # cached plan that reads its fleet without it (sources/fleet.py's fast reader).
    import tomllib

    return tomllib.loads(text)


def read_json(name: str) -> Any:
    """`json.loads` of the text of `name`, kept as `read_toml` keeps a parse."""
    return _parsed(name, json.loads)


def _parsed(name: str, parse: Callable[[str], Any]) -> Any:
    text = read_text(name)
    keeper = KEEPER
    if keeper is not None:
        kept = keeper.get(name, text)
        if kept is not None:
            return kept
    doc = parse(text)
    if keeper is not None:
        keeper.put(name, text, doc)
    return doc
