from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import invoke
from tests.hubrepos import sharded_repo
from tests.hubserver import HubServer


@pytest.fixture
def hubserver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubServer]:
    """A loopback Hub serving Qwen/Qwen3-8B (five shards declared as 16 GB, headers real), with
    huggingface_hub pointed at it, an empty Hugging Face cache, and online mode."""
    from huggingface_hub import constants

    server = HubServer([sharded_repo("Qwen/Qwen3-8B", "Qwen--Qwen3-8B.json", shards=5)])
    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(
        constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        server.url + "/{repo_id}/resolve/{revision}/{filename}",
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 5)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 5)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    with server:
        yield server


@pytest.fixture
def run_online(hubserver: HubServer, capsys: pytest.CaptureFixture[str], monkeypatch):
    """Run the CLI in-process against the loopback Hub: (exit code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "160")
    return lambda *args: invoke(capsys, args)
