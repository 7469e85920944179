"""What the hostile-input sweep (issue 12) found outside its own files: a checked command's
context past sense, the fleet summary's JSON, and cache folder names in the siblings note."""

from __future__ import annotations

import pytest

from llmfit.sources.siblings import quantised_siblings


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        (
            "--max-model-len",
            "inf",
            "vLLM 0.34 refuses it: --max-model-len 'inf' is not a token count.",
        ),
        (
            "--max-model-len",
            "nan",
            "vLLM 0.34 refuses it: --max-model-len 'nan' is not a token count.",
        ),
        (
            "--max-model-len",
            "1e400",
            "vLLM 0.34 refuses it: --max-model-len '1e400' is not a token count.",
        ),
        # vLLM's human_readable_int takes G as 2^30, but no decimal with a binary suffix and no
        # exponent (vllm/utils/argparse_utils.py).
        (
            "--max-model-len",
            "2.5G",
            "vLLM 0.34 refuses it: --max-model-len '2.5G' is not a token count.",
        ),
        (
            "--max-model-len",
            "1e5",
            "vLLM 0.34 refuses it: --max-model-len '1e5' is not a token count.",
        ),
        (
            "--max-model-len",
            "2G",
            "its context of 2,147,483,648 tokens is more than the 1,073,741,824 llmfit plans for.",
        ),
        (
            "--max-model-len",
            "2048M",
            "its context of 2,147,483,648 tokens is more than the 1,073,741,824 llmfit plans for.",
        ),
    ],
)
def test_a_checked_commands_context_past_sense_is_one_sentence(run, flag, value, message):
    code, out, err = run("check", "--fleet", "1xh100", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                         flag, value)  # fmt: skip
    assert (code, out) == (2, "")
    assert err == f"llmfit: the command to check: {message}\n"


def test_the_fleet_summary_json_escapes_what_a_terminal_acts_on(run, tmp_path):
    # A file name is anyone's text, and the summary names its fleet's file: the name survives,
    # escaped, in JSON, and cleaned in the text.
    f = tmp_path / "fleet\u202eevil.toml"
    f.write_text('[[node]]\ngpu = "h100-80g"\ngpus = 1\n')
    code, out, err = run("fleet", str(f), "--json")
    assert code == 0, err
    assert "\u202e" not in out and "fleet\\u202eevil.toml" in out
    code, out, err = run("fleet", str(f))
    assert code == 0, err
    assert "\u202e" not in out and "fleetevil.toml" in out


def test_siblings_never_name_a_folder_that_is_no_repository(tmp_path):
    for name in ("Qwen3-8B-FP8", "Qwen3-8B-AWQ\x1b[2J", "Qwen3-8B-GPTQ..x"):
        (tmp_path / f"models--Qwen--{name}").mkdir()
    assert quantised_siblings("Qwen/Qwen3-8B", tmp_path) == ("Qwen/Qwen3-8B-FP8",)
