"""Tokens stay home (issue 24): no request carrying credentials goes to a host other than the
endpoint named, whether the Hub's answer points elsewhere with a next-page `Link` (which
huggingface_hub's paginator follows with the first page's headers) or with a redirect."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from tests.hubrepos import sharded_repo
from tests.hubserver import HubServer

TOKEN = "hf_" + "k" * 34


@pytest.fixture
def elsewhere() -> Iterator[HubServer]:
    """A second server, on another port of the loopback: another origin, which must never see
    the token (nor, for a next page, any request at all)."""
    with HubServer() as server:
        yield server


@pytest.fixture
def token(monkeypatch) -> str:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return TOKEN


def test_a_next_page_on_another_host_is_not_asked_with_the_token(
    run_online, hubserver, elsewhere, token
):
    hubserver.next_page = f"{elsewhere.url}/api/models?search=qwen3&cursor=2"
    code, out, err = run_online("models", "--fleet", "1xh100-80g", "--search", "qwen3")
    assert (code, out) == (4, "")
    assert err == (
        f"llmfit: the Hub ({hubserver.url}) pointed llmfit elsewhere for search 'qwen3': it would "
        f"send your token to {elsewhere.url}, not {hubserver.url}, so it was not asked.\n"
        "hint: check HF_ENDPOINT and any proxy\n"
    )
    assert elsewhere.requests == []
    # The first page was asked of the Hub, with the token.
    assert [(r.path, r.authorization) for r in hubserver.requests] == [
        ("/api/models", f"Bearer {token}")
    ]


def test_the_quantised_siblings_lookup_does_not_follow_a_link_away_either(
    run_online, hubserver, elsewhere, token
):
    quantised = sharded_repo("Qwen/Qwen3-8B-FP8", "Qwen--Qwen3-8B.json", shards=1)
    hubserver.add(replace(quantised, quantises="Qwen/Qwen3-8B"))
    hubserver.next_page = f"{elsewhere.url}/api/models?filter=x&cursor=2"
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", "1xt4-16g", "--json")
    # A hint beside the plan, never its failure: the plan stands, without the Hub's names.
    assert code in (0, 1), err
    assert not any("on the Hub" in n for n in json.loads(out)["notes"])
    assert elsewhere.requests == []


def test_a_redirect_to_another_host_carries_no_token(run_online, hubserver, elsewhere, token):
    hubserver.mode, hubserver.away = "redirect-away", elsewhere.url
    hubserver.fail_on = "/resolve/"
    code, _, err = run_online("Qwen/Qwen3-8B", "--fleet", "1xh100-80g")
    assert code != 0 and "Traceback" not in err
    # httpx drops the Authorization header of a redirect to another origin, and the hook would
    # refuse one that kept it: whatever reached the other host, none of it held the token.
    assert all(r.authorization is None for r in elsewhere.requests)
    assert all(TOKEN not in (r.authorization or "") for r in elsewhere.requests)


def test_the_check_is_made_before_a_request_leaves(monkeypatch):
    import httpx2
    from huggingface_hub import constants

    from llmfit.sources import session

    monkeypatch.setattr(constants, "ENDPOINT", "https://hub.example:443")
    home = httpx2.Request("GET", "https://hub.example/api/models", headers={"authorization": "x"})
    session._credentials_stay_home(home)  # the endpoint itself, the default port spelt out
    plain = httpx2.Request("GET", "https://elsewhere.example/api/models")
    session._credentials_stay_home(plain)  # no credentials: nothing to keep home
    for url in (
        "https://elsewhere.example/api/models",
        "http://hub.example/api/models",  # another scheme is another origin
        "https://hub.example:8443/api/models",
        "https://hub.example.evil/api/models",
    ):
        away = httpx2.Request("GET", url, headers={"authorization": "x"})
        with pytest.raises(session.CredentialsElsewhere):
            session._credentials_stay_home(away)
        cookie = httpx2.Request("GET", url, headers={"cookie": "token=x"})
        with pytest.raises(session.CredentialsElsewhere):
            session._credentials_stay_home(cookie)
