"""The streams llmfit writes to, as a shell can leave them (issue 24): full (/dev/full), closed,
in ASCII or Latin-1. Each case runs llmfit in a fresh process, since the interpreter's own
start-up and last flush are part of what is tested."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import EXAMPLE_FLEET, HUB, ROOT

FULL = "llmfit: the output could not be written (No space left on device).\n"


def llmfit(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    base = {
        **os.environ,
        "HF_HUB_CACHE": str(HUB),
        "HF_HUB_OFFLINE": "1",
        "LLMFIT_CACHE": str(ROOT / ".no-llmfit-cache"),
        "COLUMNS": "160",
    }
    base.pop("PYTHONIOENCODING", None)
    return subprocess.run(
        [sys.executable, "-m", "llmfit", *args],
        env={**base, **(env or {})},
        cwd=ROOT,
        timeout=120,
        **kw,
    )


pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


@pytest.mark.parametrize(
    "args",
    [
        ("Qwen/Qwen3-8B", "--fleet", "1xh100"),
        ("Qwen/Qwen3-8B", "--fleet", "1xh100", "--json"),
        ("Qwen/Qwen3-8B", "--fleet", "1xh100", "--commands"),
        ("Qwen/Qwen3-8B", "--fleet", "1xh100", "--commands", "--format", "k8s"),
        ("models", "--fleet", "1xh100"),
        ("fleet", str(EXAMPLE_FLEET)),
    ],
)
def test_a_full_stdout_is_exit_11_and_one_sentence(args):
    with open("/dev/full", "w") as full:
        done = llmfit(*args, stdout=full, stderr=subprocess.PIPE, text=True)
    assert (done.returncode, done.stderr) == (11, FULL)


def test_a_full_stderr_is_exit_11_not_the_errors_code():
    with open("/dev/full", "w") as full:
        done = llmfit("Qwen/Qwen3-8B", "--fleet", "nope", stdout=subprocess.PIPE, stderr=full)
    assert (done.returncode, done.stdout) == (11, b"")


def test_an_errors_json_on_a_full_stdout_is_exit_11():
    with open("/dev/full", "w") as full:
        done = llmfit(
            "Qwen/Qwen3-8B", "--fleet", "nope", "--json",
            stdout=full, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    assert done.returncode == 11
    assert done.stderr.endswith(FULL)


def test_a_closed_stdout_is_exit_11_and_a_closed_stdin_changes_nothing():
    closed = llmfit("Qwen/Qwen3-8B", "--fleet", "1xh100", stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE, text=True, pass_fds=(),
                    preexec_fn=lambda: os.close(1))  # fmt: skip
    assert (closed.returncode, closed.stderr) == (
        11,
        "llmfit: stdout is closed, so the answer cannot be written.\n",
    )
    given = llmfit("Qwen/Qwen3-8B", "--fleet", "1xh100", capture_output=True, text=True)
    no_stdin = llmfit(
        "Qwen/Qwen3-8B", "--fleet", "1xh100", capture_output=True, text=True,
        preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert (no_stdin.returncode, no_stdin.stdout) == (0, given.stdout)
    no_stdin = llmfit(
        "fleet", "import", "nvidia-smi", "-", capture_output=True, text=True,
        preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert (no_stdin.returncode, no_stdin.stderr) == (
        3,
        "llmfit: <stdin> is closed: there is nothing to import.\n",
    )


def test_a_reader_that_goes_away_still_ends_quietly_with_0():
    head = subprocess.Popen(["head", "-c", "10"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    done = llmfit(
        "deepseek-ai/DeepSeek-V3", "--fleet", str(EXAMPLE_FLEET), "--all",
        stdout=head.stdin, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    head.stdin.close()
    head.wait()
    assert (done.returncode, done.stderr) == (0, "")


def test_an_ascii_console_gets_ascii_fallbacks_and_exact_commands():
    done = llmfit(
        "Qwen/Qwen3-8B", "--fleet", "1xh100", env={"PYTHONIOENCODING": "ascii"},
        capture_output=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii()
    lines = done.stdout.decode().splitlines()
    assert lines[0] == (
        "Qwen/Qwen3-8B qwen3 . 36 layers . 8 KV heads x 128 . KV 147,456 B/token . context 40,960"
    )
    assert lines[-1] == ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --max-model-len 40960")


def test_a_latin1_console_gets_its_bars_in_ascii(tmp_path):
    done = llmfit(
        "fleet", str(EXAMPLE_FLEET), env={"PYTHONIOENCODING": "latin-1"}, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("latin-1")
    # The summary's bars: used '#', free '-' (█ and ░ are not Latin-1); × and · are.
    assert (
        "h100-80g                    79.2      4    32    16    16          0  ##########------"
        in text
    )


def test_a_command_word_the_console_cannot_write_is_refused_not_replaced(tmp_path):
    import shutil

    d = tmp_path / "modèle"
    d.mkdir()
    for f in next((HUB / "models--Qwen--Qwen3-8B" / "snapshots").iterdir()).iterdir():
        shutil.copy(f, d / f.name)
    done = llmfit(
        str(d), "--fleet", "1xh100", "--commands", env={"PYTHONIOENCODING": "ascii"},
        capture_output=True,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, b"")
    shown = ascii(str(d))
    assert done.stderr.decode("ascii") == (
        f"llmfit: the command is not printed: its word {shown} cannot be written in this output's "
        "encoding (llmfit-ascii), and a command printed any other way would name something else."
        "\nhint: set PYTHONIOENCODING=utf-8, or read the exact words from --json\n"
    )
