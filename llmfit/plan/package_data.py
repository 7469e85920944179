"""The package's own data files (llmfit/data/: the card table, the serving constants, the kernel
curves), read as Python reads the package's modules: by its loader.

`importlib.resources` reads them the same way, and more besides (temporary files for archives,
readers for every kind of loader), but importing it brings tempfile, zipfile, shutil and the
compression modules: about 10 ms of a cached plan's 300, more than reading the files.
`pkgutil.get_data` asks the same loader with nothing to import that a plan has not already.
"""

from __future__ import annotations

import pkgutil


def read_text(name: str) -> str:
    """The text of `name` ("data/cards.toml"), relative to the llmfit package."""
    data = pkgutil.get_data("llmfit", name)
    if data is None:  # a loader that reads no files beside its modules
        raise ValueError(f"{name}: llmfit's loader reads no data files")
    return data.decode("utf-8")
