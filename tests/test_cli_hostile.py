"""The command line against hostile flags and the last net: one sentence, a documented exit code,
nothing a terminal acts on, no credential, no traceback (issue 12)."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLE_FLEET
from tests.fleet_data import fixture_text

FLEET = str(EXAMPLE_FLEET)


@pytest.mark.parametrize(
    ("value", "sentence"),
    [
        ("inf", "--context 'inf' is not a token count (like 32768, 32k or 1m)."),
        ("-inf", "--context '-inf' is not a token count (like 32768, 32k or 1m)."),
        ("nan", "--context 'nan' is not a token count (like 32768, 32k or 1m)."),
        ("1e400", "--context '1e400' is not a token count (like 32768, 32k or 1m)."),
        ("9" * 400, f"--context '{'9' * 400}' is not a token count (like 32768, 32k or 1m)."),
        ("", "--context '' is not a token count (like 32768, 32k or 1m)."),
        ("0", "--context '0' must be positive."),
        ("-5k", "--context '-5k' must be positive."),
        ("0.0001", "--context '0.0001' must be positive."),
        (
            "2048m",
            "--context '2048m' is 2,147,483,648 tokens, more than the 1,073,741,824 llmfit "
            "plans for.",
        ),
    ],
)
def test_a_context_that_is_no_token_count_is_a_usage_error(run, value, sentence):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", value)
    assert (code, out) == (2, "")
    assert err == f"llmfit: {sentence}\n"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        # click's FloatRange lets nan through: no comparison with it is true.
        ("nan", "nan is not a finite number."),
        ("NaN", "nan is not a finite number."),
        ("inf", "inf is not in the range 0.05<=x<=1.0."),
        ("-inf", "-inf is not in the range 0.05<=x<=1.0."),
    ],
)
def test_a_gpu_memory_utilization_that_is_not_finite_is_a_usage_error(run, value, why):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", FLEET, "--gpu-memory-utilization", value)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == f"Error: Invalid value for '--gpu-memory-utilization': {why}"


def test_an_output_path_that_cannot_be_written_is_one_sentence(run, tmp_path):
    csv = tmp_path / "gpus.csv"
    csv.write_text(fixture_text("nvidia-smi-csv-l40s-2gpu.txt"))
    target = tmp_path / "no" / "such" / "dir" / "f.toml"
    code, out, err = run("fleet", "import", "nvidia-smi", str(csv), "-o", str(target))
    assert (code, out) == (2, "")
    assert err == (f"llmfit: -o {target}: cannot be written (No such file or directory).\n")
    assert not (tmp_path / "no").exists()


def test_an_output_path_under_a_file_is_one_sentence(run, tmp_path):
    csv = tmp_path / "gpus.csv"
    csv.write_text(fixture_text("nvidia-smi-csv-l40s-2gpu.txt"))
    code, _, err = run("fleet", "import", "nvidia-smi", str(csv), "-o", str(csv / "f.toml"))
    assert code == 2
    assert err == f"llmfit: -o {csv / 'f.toml'}: cannot be written (Not a directory).\n"


def test_a_full_disk_leaves_the_old_file_and_no_temporary(run, tmp_path, monkeypatch):
    import errno
    import os

    csv = tmp_path / "gpus.csv"
    csv.write_text(fixture_text("nvidia-smi-csv-l40s-2gpu.txt"))
    target = tmp_path / "out"
    target.mkdir()
    (target / "f.toml").write_text("# the old fleet\n")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    code, _, err = run("fleet", "import", "nvidia-smi", str(csv), "-o", str(target / "f.toml"))
    assert code == 2
    assert err == (
        f"llmfit: -o {target / 'f.toml'}: cannot be written (No space left on device).\n"
    )
    assert [p.name for p in target.iterdir()] == ["f.toml"]
    assert (target / "f.toml").read_text() == "# the old fleet\n"


# -- the last net --------------------------------------------------------------------------------


def _crash(exc: BaseException):
    def advise(*args, **kwargs):
        raise exc

    return advise


def test_an_unexpected_exception_is_one_sentence_and_exit_10(run, monkeypatch):
    import llmfit.advise

    monkeypatch.delenv("LLMFIT_DEBUG", raising=False)
    monkeypatch.setattr(llmfit.advise, "advise", _crash(ZeroDivisionError("division by zero")))
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert (code, out) == (10, "")
    assert err == (
        "llmfit: internal error: ZeroDivisionError: division by zero; please report it with "
        "LLMFIT_DEBUG=1 output\n"
    )


def test_the_net_prints_no_escape_and_no_credential(run, monkeypatch):
    import llmfit.advise

    token = "hf_abcdefghijklmnopqrstuvwxyz012345"
    monkeypatch.setenv("HF_TOKEN", token)
    message = (
        f"at http://user:pa55word@hub.example/x\x1b[2J\nllmfit: forged {token} hf_Other0123456"
    )
    monkeypatch.setattr(llmfit.advise, "advise", _crash(RuntimeError(message)))
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 10
    assert err == (
        "llmfit: internal error: RuntimeError: at http://hub.example/x llmfit: forged *** hf_***; "
        "please report it with LLMFIT_DEBUG=1 output\n"
    )


def test_the_traceback_only_with_llmfit_debug(run, monkeypatch):
    import llmfit.advise

    monkeypatch.setattr(llmfit.advise, "advise", _crash(KeyError("k")))
    monkeypatch.setenv("LLMFIT_DEBUG", "1")
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 10
    lines = err.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-2] == "KeyError: 'k'"
    assert lines[-1] == (
        "llmfit: internal error: KeyError: 'k'; please report it with LLMFIT_DEBUG=1 output"
    )


def test_an_interrupt_is_aborted_not_a_traceback(run, monkeypatch):
    import llmfit.advise

    monkeypatch.setattr(llmfit.advise, "advise", _crash(KeyboardInterrupt()))
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert (code, err) == (130, "\nAborted.\n")  # click ends the line the ^C was typed on


def test_every_printed_error_is_cleaned(run, tmp_path):
    # A directory name is the user's, but a cloned or unpacked tree can name anything.
    name = "model\x1b]0;owned\x07\x1b[2J\nllmfit: all is well\u202e"
    code, out, err = run(f"./{name}", "--fleet", FLEET)
    assert (code, out) == (3, "")
    assert err == "llmfit: model llmfit: all is well: no such directory.\n"


def test_click_messages_are_cleaned_too(run):
    code, _, err = run("fleet", "import", "nvidia-smi", "/no/such\x1b[2J\x9b31m.csv")
    assert code == 2
    # click quotes the name with its escapes spelt out (no byte a terminal acts on), so the
    # sentence names the very file that is not there (issue 24).
    assert err.splitlines()[-1] == (
        "Error: Invalid value for 'CSV_FILE': Path '/no/such\\x1b[2J\\x9b31m.csv' does not exist."
    )


def test_every_exit_code_is_documented_in_the_readme():
    import re

    from llmfit import errors
    from tests.conftest import ROOT

    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Exit codes") :].split("\n\n")[1]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert codes <= documented, codes - documented
    assert errors.EXIT_INTERNAL == 10


def test_a_reader_that_goes_away_is_no_traceback(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import HUB

    env = {**os.environ, "HF_HUB_CACHE": str(HUB), "HF_HUB_OFFLINE": "1"}
    for how in ("--json", "--all"):  # printed by click, and by rich
        proc = subprocess.Popen(
            [sys.executable, "-m", "llmfit", "Qwen/Qwen3-8B", "--fleet", FLEET, how],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        proc.stdout.close()  # long before llmfit writes: its first write finds no reader
        err = proc.stderr.read()
        # The reader has what it wanted (issue 16): quietly, and with 0, not 1 ("nothing fits").
        assert (proc.wait(timeout=60), err) == (0, b"")
