from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
HUB = FIXTURES / "hub"
EXAMPLE_FLEET = ROOT / "examples" / "fleet.toml"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bundled Hugging Face cache, as the cache every run in the test sees."""
    monkeypatch.setenv("HF_HUB_CACHE", str(HUB))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "160")
    return HUB


@pytest.fixture
def run(hub: Path, capsys: pytest.CaptureFixture[str]):
    """Run the CLI in-process as a user would, returning (exit code, stdout, stderr)."""
    from llmfit.cli import main

    def _run(*args: str) -> tuple[int, str, str]:
        code = 0
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run
