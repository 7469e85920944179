"""Under --json an error is a JSON document on stdout with the same exit code (issue 16), and a
reader that stops early ends the run quietly with 0."""

from __future__ import annotations

import json

from tests.conftest import HUB


def test_a_repository_that_cannot_be_had_is_a_json_error(run):
    code, out, err = run("Nope/Nothing", "--fleet", "1xh100", "--json")
    assert code == 4
    assert json.loads(out) == {
        "schema": 1,
        "error": {
            "message": f"Nope/Nothing is not in the local Hugging Face cache ({HUB}).",
            # HF_HUB_OFFLINE=1 keeps it offline: the hint sets it to 0 (issue 34).
            "hint": "HF_HUB_OFFLINE=0 llmfit Nope/Nothing  (with the network, once: it fetches "
            "metadata only), or: hf "
            "download Nope/Nothing --include config.json '*.safetensors.index.json'",
            "exit": 4,
        },
    }
    assert err.startswith("llmfit: Nope/Nothing is not in the local Hugging Face cache")


def test_a_bad_flag_is_a_json_error(run):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100", "--json", "--context", "abc")
    assert code == 2
    assert json.loads(out) == {
        "schema": 1,
        "error": {
            "message": "--context 'abc' is not a token count (like 32768, 32k or 1m).",
            "exit": 2,
        },
    }


def test_a_bad_fleet_file_is_a_json_error(run, tmp_path):
    f = tmp_path / "f.toml"
    f.write_text("[[node]]\ngpus = 8\n")
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", str(f), "--json")
    assert code == 3
    assert json.loads(out) == {
        "schema": 1,
        "error": {
            "message": f"{f}:2: node[0].gpus is given without a gpu class to say what they are.",
            "exit": 3,
        },
    }


def test_json_after_the_double_dash_is_the_checked_commands(run):
    code, out, err = run("check", "--fleet", "1xh100", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                         "--json")  # fmt: skip
    # Read as a word of vLLM's command, not as llmfit's flag: vLLM 0.33 has no --json, so the
    # command is refused as vLLM would refuse it, in a sentence, not as a JSON document.
    assert (code, out) == (2, "")
    assert (
        err == "llmfit: the command to check: vLLM 0.34 refuses it: --json: not one of its flags.\n"
    )


# A reader that stops early: test_cli_hostile.py::test_a_reader_that_goes_away_is_no_traceback.
