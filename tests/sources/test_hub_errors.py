"""Each way the Hub or the network fails: one sentence, a hint, its own exit code, no token."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLE_FLEET

FLEET = str(EXAMPLE_FLEET)
TOKEN = "hf_SeCrEtToKeN0123456789abcdefABCDEF"


def test_an_invalid_token_is_refused_without_showing_it(run_online, hubserver, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hubserver.mode = "unauthorized"
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 7
    assert out == ""
    assert err == (
        f"llmfit: the Hub ({hubserver.url}) refused your token (401 Unauthorized): it is invalid "
        "or expired.\nhint: hf auth login  (or set HF_TOKEN to a valid token)\n"
    )
    # The token was sent (HF_TOKEN is honoured), and is nowhere in what the user sees.
    assert hubserver.requests[0].authorization == f"Bearer {TOKEN}"
    assert TOKEN not in out + err


def test_a_gated_repo_says_where_to_accept_the_licence(run_online, hubserver, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hubserver.mode = "gated"
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 6
    assert err == (
        f"llmfit: Qwen/Qwen3-8B is gated: accept its licence at {hubserver.url}/Qwen/Qwen3-8B, "
        "then log in with that account.\nhint: hf auth login\n"
    )
    assert TOKEN not in out + err


def test_no_such_repo_suggests_what_the_hub_search_offers(run_online, hubserver):
    code, out, err = run_online("Qwen/Qwen3-8b-typo", "--fleet", FLEET)
    assert code == 5
    assert err == (
        f"llmfit: Qwen/Qwen3-8b-typo is not a repository on the Hub ({hubserver.url}), or it is "
        "private and your token cannot see it.\nhint: if it is private, log in first: hf auth "
        "login\n"
    )
    # The same name under another namespace is offered; another model is not (issue 34: a
    # search for Qwen3 finds Qwen3-8B, which is not what Qwen/Qwen3 names).
    code, out, err = run_online("unsloth/Qwen3-8B", "--fleet", FLEET)
    assert code == 5
    assert err.splitlines()[1] == "hint: did you mean Qwen/Qwen3-8B?"
    code, out, err = run_online("Qwen/Qwen3", "--fleet", FLEET)
    assert code == 5
    assert err.splitlines()[1] == "hint: if it is private, log in first: hf auth login"


def test_the_404_repo_answer_itself(run_online, hubserver):
    hubserver.mode = "repo-not-found"
    code, _, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 5
    assert err.startswith("llmfit: Qwen/Qwen3-8B is not a repository on the Hub")


def test_a_revision_that_is_not_there(run_online, hubserver):
    code, _, err = run_online("Qwen/Qwen3-8B@v9", "--fleet", FLEET)
    assert code == 8
    assert err == (
        "llmfit: Qwen/Qwen3-8B has no branch, tag or commit 'v9'.\n"
        "hint: llmfit Qwen/Qwen3-8B  (its default branch)\n"
    )
    code, _, err2 = run_online("Qwen/Qwen3-8B", "--revision", "v9", "--fleet", FLEET)
    assert (code, err2) == (8, err)


def test_a_server_error(run_online, hubserver):
    hubserver.mode = "error"
    code, _, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 4
    assert err == (
        f"llmfit: the Hub ({hubserver.url}) answered 500 Internal Server Error for Qwen/Qwen3-8B."
        "\nhint: try again later, or where the Hub can be reached: "
        "hf download Qwen/Qwen3-8B --include config.json '*.safetensors.index.json', then copy "
        "the cache here\n"
    )


def test_a_dropped_connection(run_online, hubserver):
    hubserver.mode = "drop"
    code, _, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) closed the connection before it had answered in full."
    )


def test_a_slow_answer_times_out(run_online, hubserver, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 0.3)
    hubserver.mode = "slow"
    hubserver.slow_seconds = 3
    code, _, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 9
    assert err == (
        f"llmfit: the Hub ({hubserver.url}) did not answer within 0.3 s.\n"
        "hint: raise HF_HUB_ETAG_TIMEOUT, or where the Hub can be reached: "
        "hf download Qwen/Qwen3-8B --include config.json '*.safetensors.index.json', then copy "
        "the cache here\n"
    )


def test_no_hub_at_all(run_online, hubserver, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    code, _, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 4
    assert err == (
        "llmfit: cannot reach the Hub at http://127.0.0.1:9.\n"
        "hint: check the network, HF_ENDPOINT and any proxy, or where the Hub can be reached: "
        "hf download Qwen/Qwen3-8B --include config.json '*.safetensors.index.json', then copy "
        "the cache here\n"
    )


@pytest.mark.parametrize("mode", ["error", "drop", "unauthorized"])
def test_a_failure_while_reading_headers_is_the_same_sentence(run_online, hubserver, mode):
    hubserver.mode = mode
    # The first weight shard fails, after config.json and the index were fetched.
    hubserver.fail_on = "model-00001-of"
    code, _, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == {"error": 4, "drop": 4, "unauthorized": 7}[mode]
    assert err.startswith("llmfit: the Hub (" + hubserver.url)
    assert "Traceback" not in err
    # A transient failure is tried again (twice), a refusal is not.
    tries = hubserver.count("GET", "model-00001-of")
    assert tries == (1 if mode == "unauthorized" else 3)


def test_one_bad_answer_among_the_shards_is_tried_again(run_online, hubserver):
    hubserver.mode = "error"
    failing = iter([True])  # only the first request for that shard fails
    hubserver.fail_on = lambda path: "model-00003-of" in path and next(failing, False)
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    assert hubserver.count("GET", "model-00003-of") == 3  # failed, retried, then its second range
