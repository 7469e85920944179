"""`llmfit models` over a hostile or damaged Hugging Face cache (issue 24): a folder name is a
repository only if it is one's, a folder's trouble is its own row, and a cache that is no folder
is one sentence, never a hang or a traceback."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from tests.conftest import HUB, invoke

QWEN = HUB / "models--Qwen--Qwen3-8B"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "hub"
    root.mkdir()
    shutil.copytree(QWEN, root / QWEN.name)
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "200")
    return root


def within(seconds: float, capsys, *args: str) -> tuple[int, str, str]:
    """The CLI in-process, failing the test (not hanging it) if it is not done in time."""
    done: list[tuple[int, str, str]] = []
    worker = threading.Thread(target=lambda: done.append(invoke(capsys, args)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"llmfit {' '.join(args)} did not finish within {seconds} s"
    return done[0]


@pytest.mark.parametrize("name", ["models----tmp--x", "models--..--outside--x", "models--a--b--c"])
def test_a_folder_named_as_no_repository_is_not_planned_as_a_path(cache, capsys, tmp_path, name):
    shutil.copytree(QWEN, cache / name)
    # What scan_cache_dir made of the first, /tmp/x, exists: it must not be what is planned.
    code, out, _ = within(60, capsys, "models", "--fleet", "1xh100", "--json")
    assert code == 0
    import json

    assert [d["repo"]["id"] for d in json.loads(out)] == ["Qwen/Qwen3-8B"]
    code, out, _ = within(60, capsys, "models", "--fleet", "1xh100")
    assert (
        f"note: {name!r} in {cache} is named as no repository is (a repository id like "
        "Org/Name), so it is not planned.\n"
    ) in out


def test_a_fifo_as_a_ref_is_its_repositorys_row_not_a_hang(cache, capsys):
    shutil.copytree(QWEN, cache / "models--a--fifo")
    ref = cache / "models--a--fifo" / "refs" / "main"
    ref.unlink()
    os.mkfifo(ref)
    code, out, _ = within(60, capsys, "models", "--fleet", "1xh100")
    assert code == 0
    # The row is wrapped at the terminal's width: compared word by word.
    assert (
        f"a/fifo: {ref} is not a file (a folder, a FIFO or a device): the cache is damaged. "
        f"(hint: rm -r {ref} (an online run writes it again))"
    ) in " ".join(out.split())
    assert "Qwen/Qwen3-8B" in out


def test_a_ref_that_is_not_utf8_is_its_repositorys_row(cache, capsys):
    shutil.copytree(QWEN, cache / "models--a--bytes")
    ref = cache / "models--a--bytes" / "refs" / "main"
    ref.write_bytes(b"\xff" * 40)
    code, out, _ = within(60, capsys, "models", "--fleet", "1xh100")
    assert code == 0
    held = repr("\ufffd" * 40)
    assert f"a/bytes: {ref} holds {held}, not a commit hash: the cache is damaged." in " ".join(
        out.split()
    )
    assert "Qwen/Qwen3-8B" in out


def test_a_plan_of_a_fifo_ref_is_one_sentence(cache, capsys):
    ref = cache / QWEN.name / "refs" / "main"
    ref.unlink()
    os.mkfifo(ref)
    code, out, err = within(60, capsys, "Qwen/Qwen3-8B", "--fleet", "1xh100")
    assert (code, out) == (3, "")
    assert err.startswith(f"llmfit: {ref} is not a file (a folder, a FIFO or a device)")


@pytest.mark.parametrize("kind", ["fifo", "file", "loop", "dev-zero"])
def test_a_cache_that_is_not_a_folder_is_one_sentence(capsys, tmp_path, monkeypatch, kind):
    where = tmp_path / "hub"
    if kind == "fifo":
        os.mkfifo(where)
    elif kind == "file":
        where.write_text("x")
    elif kind == "loop":
        where.symlink_to(where)
    else:
        where = Path("/dev/zero")
    monkeypatch.setenv("HF_HUB_CACHE", str(where))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = within(60, capsys, "models", "--fleet", "1xh100")
    assert (code, out) == (4, "")
    if kind == "loop":
        assert err == (
            f"llmfit: the Hugging Face cache {where} cannot be read (Too many levels of symbolic "
            "links).\n"
        )
    else:
        assert err == (
            f"llmfit: the Hugging Face cache {where} is not a folder (a file, a FIFO or a device)."
            "\nhint: set HF_HUB_CACHE to the folder hf download writes to\n"
        )
