"""Issue 27, item 11: a name that is not quite a cached repository's says which one was meant;
online, the Hub's search suggests; a mistyped command is named as one."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLE_FLEET, HUB

FLEET = str(EXAMPLE_FLEET)


@pytest.mark.parametrize("typed", ["Qwen/Qwen3-8b", "qwen/qwen3-8b", "QWEN/QWEN3-8B"])
def test_another_case_of_a_cached_id_names_the_cached_one(run, typed):
    code, out, err = run(typed, "--fleet", FLEET)
    assert code == 4
    assert out == ""
    assert err == (
        f"llmfit: {typed} is not in the local Hugging Face cache ({HUB}); did you mean "
        "Qwen/Qwen3-8B?\nhint: llmfit Qwen/Qwen3-8B  (in the local cache)\n"
    )


@pytest.mark.parametrize("typed", ["Qwen3-8B", "qwen3-8b"])
def test_a_bare_name_names_the_cached_repository_of_that_name(run, typed):
    code, out, err = run(typed, "--fleet", FLEET)
    assert code == 2
    assert err == (
        f"llmfit: {typed!r} is neither a directory nor a repository id like "
        "Qwen/Qwen3-8B[@revision]; did you mean Qwen/Qwen3-8B?\nhint: llmfit Qwen/Qwen3-8B\n"
    )


def test_a_revision_is_kept_in_the_id_meant(run):
    code, _, err = run("Qwen/Qwen3-8b@main", "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[1] == "hint: llmfit Qwen/Qwen3-8B@main  (in the local cache)"


def test_a_letter_off_is_meant_too_and_nothing_close_names_nothing(run):
    _, _, err = run("Qwen/Qwen3-8BB", "--fleet", FLEET)
    assert err.splitlines()[0].endswith("; did you mean Qwen/Qwen3-8B?")
    _, _, err = run("Qwen/Nope", "--fleet", FLEET)
    said = f"llmfit: Qwen/Nope is not in the local Hugging Face cache ({HUB})."
    assert err.splitlines()[0] == said


def test_a_bare_name_online_is_suggested_by_the_hubs_search(run_online, hubserver):
    # The loopback Hub's cache is empty: the suggestion is the search's.
    code, _, err = run_online("Qwen3-8B", "--fleet", FLEET)
    assert code == 2
    assert err.splitlines() == [
        "llmfit: 'Qwen3-8B' is neither a directory nor a repository id like "
        "Qwen/Qwen3-8B[@revision]; did you mean Qwen/Qwen3-8B?",
        "hint: llmfit Qwen/Qwen3-8B",
    ]
    assert [r.path for r in hubserver.requests] == ["/api/models"]


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("pln", "there is no command 'pln': did you mean `llmfit plan`?"),
        ("modles", "there is no command 'modles': did you mean `llmfit models`?"),
        (
            "foo",
            "there is no command 'foo': the commands are calibrate, check, fleet, models, plan, "
            "and `llmfit REPO` plans a repository (org/name)",
        ),
    ],
)
def test_an_unknown_subcommand_is_named(run, typed, said):
    code, out, err = run(typed, "Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 2
    assert out == ""
    assert err.splitlines()[-1] == f"Error: {said}"
    assert "unexpected extra argument" not in err
