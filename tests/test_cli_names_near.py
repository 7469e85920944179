"""Names (issue 34 item 5): a did-you-mean offers only the name typed spelt nearly the same — case,
separator, a letter, a namespace — never another model; an offline hint says how to fetch the
repository with the network."""

from __future__ import annotations

import pytest

from llmfit.sources.cache import near_spelling


@pytest.mark.parametrize(
    ("typed", "cached", "near"),
    [
        ("qwen/qwen3-8b", "Qwen/Qwen3-8B", True),  # case
        ("Qwen/Qwen3_8B", "Qwen/Qwen3-8B", True),  # separator
        ("Qwen/Qwen3-8C", "Qwen/Qwen3-8B", True),  # one letter
        ("Qwen/Qewn3-8B", "Qwen/Qwen3-8B", True),  # two letters swapped
        ("unsloth/Qwen3-8B", "Qwen/Qwen3-8B", True),  # another namespace
        ("Qwen3-8B", "Qwen/Qwen3-8B", True),  # none
        ("Qwen/Qwen3-14B", "Qwen/Qwen3-8B", False),  # another size: another model
        ("Qwen/Qwen3-4B", "Qwen/Qwen3-8B", False),  # one digit off is still another model
        ("Qwen/Qwen3", "Qwen/Qwen3-8B", False),
        ("Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B", False),
    ],
)
def test_a_near_spelling_is_the_same_name(typed, cached, near):
    assert near_spelling(typed, cached) is near


def test_a_missing_model_is_not_answered_with_another(run):
    code, out, err = run("Qwen/Qwen3-14B", "--fleet", "1xh100")
    assert code == 4
    # Under HF_HUB_OFFLINE=1 (the run fixture's), how to fetch it with the network.
    assert err == (
        "llmfit: Qwen/Qwen3-14B is not in the local Hugging Face cache "
        f"({err.split('(', 1)[1].split(')', 1)[0]}).\n"
        "hint: HF_HUB_OFFLINE=0 llmfit Qwen/Qwen3-14B  (with the network, once: it fetches "
        "metadata only), or: hf download Qwen/Qwen3-14B --include config.json "
        "'*.safetensors.index.json'\n"
    )


def test_a_misspelt_cached_model_is_offered(run):
    code, out, err = run("qwen/qwen3_8b", "--fleet", "1xh100")
    assert code == 4
    assert err.splitlines()[0].endswith("; did you mean Qwen/Qwen3-8B?")
    assert err.splitlines()[1] == "hint: llmfit Qwen/Qwen3-8B  (in the local cache)"
