"""Each exception huggingface_hub or httpx raises, turned into its llmfit sentence, unit by unit."""

from __future__ import annotations

import httpx2
import pytest

from llmfit import errors
from llmfit.sources.cache import RepoRef
from llmfit.sources.hub import hub_error

REF = RepoRef("org/model", "v1")
ENDPOINT = "http://127.0.0.1:9"  # what tests/conftest.py points huggingface_hub at
SECRET = "hf_NeverShowThis0000000000000000000"


def _raised(status: int, headers: dict[str, str], path: str = "/api/models/org/model") -> Exception:
    from huggingface_hub.utils import hf_raise_for_status

    # An https URL, as the Hub's are: huggingface_hub reads a bare 401 on one as "not found".
    auth = {"authorization": f"Bearer {SECRET}"}
    request = httpx2.Request("GET", "https://hub.test" + path, headers=auth)
    response = httpx2.Response(status, headers=headers, request=request, content=b"{}")
    with pytest.raises(Exception) as e:
        hf_raise_for_status(response)
    return e.value


@pytest.mark.parametrize(
    ("status", "headers", "kind", "code", "message"),
    [
        (403, {"X-Error-Code": "GatedRepo"}, errors.GatedRepo, 6,
         f"org/model is gated: accept its licence at {ENDPOINT}/org/model, then log in with that "
         "account."),
        (401, {"X-Error-Code": "GatedRepo"}, errors.GatedRepo, 6, None),
        (404, {"X-Error-Code": "RepoNotFound"}, errors.HubRepoNotFound, 5,
         f"org/model is not a repository on the Hub ({ENDPOINT}), or it is private and your token "
         "cannot see it."),
        (401, {}, errors.HubRepoNotFound, 5, None),  # the Hub's 401 for a repo it will not show
        (404, {"X-Error-Code": "RevisionNotFound"}, errors.RevisionNotFound, 8,
         "org/model has no branch, tag or commit 'v1'."),
        (401, {"X-Error-Message": "Invalid credentials in Authorization header"},
         errors.Unauthorized, 7,
         f"the Hub ({ENDPOINT}) refused your token (401 Unauthorized): it is invalid or expired."),
        (403, {}, errors.Unauthorized, 7, "your token may not read org/model (403 Forbidden)."),
        (503, {}, errors.HubUnreachable, 4,
         f"the Hub ({ENDPOINT}) answered 503 Service Unavailable for org/model."),
    ],
)  # fmt: skip
def test_http_answers(status, headers, kind, code, message):
    err = hub_error(_raised(status, headers), REF)
    assert type(err) is kind
    assert err.exit_code == code
    if message:
        assert err.message == message
    assert SECRET not in err.message + (err.hint or "")


def test_network_failures():
    request = httpx2.Request("GET", ENDPOINT)
    cases = [
        (httpx2.ConnectError("refused", request=request), errors.HubUnreachable, 4),
        (httpx2.ReadTimeout("slow", request=request), errors.HubTimeout, 9),
        (httpx2.RemoteProtocolError("dropped", request=request), errors.HubUnreachable, 4),
    ]
    for exc, kind, code in cases:
        err = hub_error(exc, REF)
        assert (type(err), err.exit_code) == (kind, code)


def test_a_failed_head_wrapped_by_hf_hub_download_is_unwrapped():
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        try:
            raise httpx2.ConnectError("refused")
        except httpx2.ConnectError as cause:
            raise LocalEntryNotFoundError("not cached") from cause
    except LocalEntryNotFoundError as e:
        err = hub_error(e, REF)
    assert err.message == f"cannot reach the Hub at {ENDPOINT}."


def test_what_is_not_a_hub_failure_is_left_alone():
    assert hub_error(ValueError("a bug"), REF) is None
