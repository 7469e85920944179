"""`llmfit check` says first what was asked (issue 34 item 4): the line under the command answers
the command as written — fits or not with its own -ngl, -c, -np, --max-model-len — and, where a
load is named, whether one server of it serves that load, with exit 12 for "fits but does not
serve it"; the lines below describe that same command."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0"


@pytest.fixture
def desk(tmp_path: Path) -> str:
    # A card of 0.4 GB (0.9 of it counted on: 0.34 GiB, printed 0.4) and 64 GB of RAM: the
    # Tiny-Llama's four layers, KV and compute buffer (0.5 GiB) do not fit the card, and fit RAM.
    path = tmp_path / "desk.toml"
    path.write_text(
        '[[node]]\nname = "desk"\ngpu = "tiny-1g"\ngpus = 1\ngpu_memory_gb = 0.4\nram_gb = 64\n'
    )
    return str(path)


def answer(out: str) -> str:
    """The line under the `$ command` line, unwrapped."""
    lines = out.splitlines()
    rest = [lines[1]]
    for line in lines[2:]:
        if not line.startswith("    "):
            break
        rest.append(line.strip())
    return " ".join(rest)


def test_layers_named_for_the_card_that_do_not_fit_it_do_not_fit(run, desk):
    # -ngl 4 puts all four layers on the card: the CPU alone is not this command (it was
    # answered "fits: no cards of a CPU", exit 0).
    code, out, err = run("check", "--fleet", desk, "--", "llama-server", "-hf", TINY,
                         "-c", "4096", "-ngl", "4")  # fmt: skip
    assert code == 1, err
    assert out.splitlines()[1] == "does not fit:"
    assert "  1 × tiny-1g: needs 0.5 GiB of 0.4 a card" in out
    assert "CPU" not in out


def test_no_layers_on_the_card_is_answered_on_the_cpu(run, desk):
    code, out, err = run("check", "--fleet", desk, "--", "llama-server", "-hf", TINY,
                         "-c", "4096", "-ngl", "0")  # fmt: skip
    assert code == 0, err
    assert answer(out) == "fits: the CPU alone, no card, on 1 node that could run it, free now"


def test_a_named_load_it_does_not_serve_is_the_first_answer_and_exit_12(run):
    code, out, err = run("check", "--fleet", "1xh100-80g", "--rate", "40", "--tpot", "30", "--",
                         "sglang", "serve", "--model-path", "Qwen/Qwen3-8B")  # fmt: skip
    assert code == 12, err
    said = answer(out)
    assert said.startswith(
        "fits: 1 card of h100-80g, on 1 node that could run it, free now; does not serve 40 "
        "requests a second within TTFT ≤ 2 s, TPOT ≤ 30 ms alone ("
    )
    # One card holds one server; the fleet's one card runs one of the servers the load needs.
    assert said.endswith(", and the fleet's cards run 1")


def test_a_named_load_it_serves_is_said_and_exit_0(run):
    code, out, err = run("check", "--fleet", "1xh100-80g", "--rate", "2", "--tpot", "30", "--",
                         "sglang", "serve", "--model-path", "Qwen/Qwen3-8B")  # fmt: skip
    assert code == 0, err
    assert answer(out) == (
        "fits: 1 card of h100-80g, on 1 node that could run it, free now; serves 2 requests a "
        "second within TTFT ≤ 2 s, TPOT ≤ 30 ms"
    )


def test_the_longest_sequence_is_the_commands_own(run):
    # --max-model-len 32k is 32,000 to vLLM (human_readable_int); the cards would hold the
    # trained 40,960, which is no longer what the command holds.
    code, out, err = run("check", "--fleet", "8xh100-80g", "--", "vllm", "serve",
                         "Qwen/Qwen3-235B-A22B", "-tp", "8", "--max-model-len", "32k")  # fmt: skip
    assert code == 0, err
    flat = " ".join(out.split())
    assert (
        "holds: one sequence of up to 32,000 tokens, as the command sets it (the cards would "
        "hold 40,960)"
    ) in flat
    assert "longest sequence 32,000" in flat
