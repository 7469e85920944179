from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
HUB = FIXTURES / "hub"
EXAMPLE_FLEET = ROOT / "examples" / "fleet.toml"


def modules_a_json_plan_imports(repo: str, fleet: str | Path = EXAMPLE_FLEET) -> set[str]:
    """The modules a `--json` plan of `repo` on `fleet` has imported by its end, in a fresh
    process (the bundled cache, offline): what a run of the command pays at its start."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, io, contextlib; from llmfit.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: main([sys.argv[1], '--fleet', sys.argv[2], '--json'])\n"
        "    except SystemExit: pass\n"
        "print('\\n'.join(sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, repo, str(fleet)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_CACHE": str(HUB), "HF_HUB_OFFLINE": "1"},
    )
    return set(r.stdout.split())


def around_the_entry_point(before: str, after: str) -> list[str]:
    """The lines a fresh interpreter prints running `before` (Python statements), then the
    `llmfit` command's entry point (`llmfit --version`, llmfit.entry:main), then `after`: what
    importing llmfit does, and what only its command does."""
    import subprocess
    import sys

    probe = (
        f"{before}\nimport sys; sys.argv = ['llmfit', '--version']; import llmfit.entry\n"
        f"try:\n    llmfit.entry.main()\nexcept SystemExit:\n    pass\n{after}"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return r.stdout.splitlines()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bundled Hugging Face cache, as the cache every run in the test sees."""
    monkeypatch.setenv("HF_HUB_CACHE", str(HUB))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "160")
    return HUB


@pytest.fixture(scope="session")
def _gguf_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled cache with two real models' GGUF repositories beside it (fixtures/gguf_repos.py):
    their files are sparse, which git cannot keep, so they are written here, once a session."""
    import shutil

    from fixtures.gguf_repos import build_gguf_repos

    cache = tmp_path_factory.mktemp("gguf-hub") / "hub"
    shutil.copytree(HUB, cache)
    build_gguf_repos(cache)
    return cache


@pytest.fixture
def gguf_hub(monkeypatch: pytest.MonkeyPatch, _gguf_cache: Path) -> Path:
    """`hub`, with unsloth/Qwen3-235B-A22B-GGUF (a mixture of experts) and
    unsloth/gemma-3-27b-it-GGUF (sliding windows) in it too."""
    monkeypatch.setenv("HF_HUB_CACHE", str(_gguf_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "160")
    return _gguf_cache


def invoke(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> tuple[int, str, str]:
    """Run the CLI in-process as a user would: (exit code, stdout, stderr)."""
    from llmfit.cli import main

    code = 0
    try:
        main(list(args))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def run(hub: Path, capsys: pytest.CaptureFixture[str]):
    """The CLI on the bundled cache, offline."""
    return lambda *args: invoke(capsys, args)


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test reads the user's llmfit cache or token, and none reaches a real Hub: an online path
    that a test did not point at the loopback Hub finds a closed port on 127.0.0.1."""
    from huggingface_hub import constants

    monkeypatch.setenv("LLMFIT_CACHE", str(tmp_path_factory.mktemp("llmfit-cache")))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path_factory.mktemp("hf") / "token"))
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(
        constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        "http://127.0.0.1:9/{repo_id}/resolve/{revision}/{filename}",
    )
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    # huggingface_hub fetches a registry of AI-agent harnesses from the Hub once a day (telemetry,
    # utils/_detect_agent.py) and keeps it in HF_HOME: an empty one, held in-process, means tests
    # neither count that request nor write outside their temporary directories.
    from huggingface_hub.utils import _detect_agent

    monkeypatch.setattr(_detect_agent, "_registry", _detect_agent._EMPTY_REGISTRY)
