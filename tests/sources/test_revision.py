"""An online run of a cached repository whose commit has not changed (issue 17): one light
request says so, and huggingface_hub's client is not used; any other answer fetches through it,
as before, with the same result and the same sentences."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmfit.sources import hub, revision
from llmfit.sources.repo import load_repo

REPO = "Qwen/Qwen3-8B"


def no_fetch(*args, **kwargs):
    raise AssertionError("fetched through huggingface_hub")


def test_a_warm_online_run_asks_once_and_not_through_huggingface_hub(hubserver, monkeypatch):
    first = load_repo(REPO)
    hubserver.reset()
    monkeypatch.setattr(hub, "fetch_repo", no_fetch)
    again = load_repo(REPO)
    assert again == first and again.source == "hub"
    assert [(r.path, r.status) for r in hubserver.requests] == [(f"/api/models/{REPO}", 200)]


def test_a_new_commit_is_read_afresh(hubserver):
    first = load_repo(REPO)
    new = "b" * 40
    hubserver.repos[REPO] = replace(hubserver.repos[REPO], commit=new, refs={})
    hubserver.reset()
    again = load_repo(REPO)
    assert first.commit != new and again.commit == new
    assert hubserver.count(contains=f"/resolve/{new}/config.json") == 1


def test_a_revision_is_asked_by_name(hubserver, monkeypatch):
    load_repo(f"{REPO}@main")
    hubserver.reset()
    monkeypatch.setattr(hub, "fetch_repo", no_fetch)
    load_repo(f"{REPO}@main")
    assert [r.path for r in hubserver.requests] == [f"/api/models/{REPO}/revision/main"]


@pytest.mark.parametrize("mode", ["error", "drop", "unauthorized", "repo-not-found"])
def test_any_other_answer_is_the_answer_huggingface_hub_gives(hubserver, monkeypatch, mode):
    load_repo(REPO)
    hubserver.mode, hubserver.fail_on = mode, "/api/models"
    outcomes = []
    for light in (True, False):
        if not light:
            monkeypatch.setattr(revision, "current_commit", lambda *a: None)
        try:
            outcomes.append(("planned", load_repo(REPO).warnings))
        except Exception as e:  # the sentence and the class, whichever way it was asked
            outcomes.append((type(e).__name__, getattr(e, "message", str(e))))
    assert outcomes[0] == outcomes[1]


def test_the_token_goes_with_the_question(hubserver, monkeypatch):
    load_repo(REPO)
    hubserver.reset()
    monkeypatch.setenv("HF_TOKEN", "hf_FromTheEnvironment000000000000000")
    monkeypatch.setattr(hub, "fetch_repo", no_fetch)
    load_repo(REPO)
    (r,) = hubserver.requests
    assert r.authorization == "Bearer hf_FromTheEnvironment000000000000000"


@contextmanager
def serving(answer: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[tuple[str, list[str]]]:
    """A server on 127.0.0.1 answering every GET with `answer`; (its URL, the paths asked)."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            answer(self)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def body(status: int, data: bytes, **headers: str) -> Callable[[BaseHTTPRequestHandler], None]:
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k.replace("_", "-"), v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    return answer


@pytest.mark.parametrize(
    "answer",
    [
        body(200, b"<html>a captive portal</html>"),
        body(200, b'{"sha": "main"}'),
        body(200, b'{"sha": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        body(200, b'{"sha": "' + b"a" * 40 + b'", "x": "' + b"y" * (1 << 20) + b'"}'),
        body(404, b'{"error": "Repository not found"}'),
    ],
    ids=["html", "not-a-commit", "deep", "too-long", "404"],
)
def test_an_answer_that_is_not_plainly_a_commit_is_none(monkeypatch, answer):
    from huggingface_hub import constants

    with serving(answer) as (url, asked):
        monkeypatch.setattr(constants, "ENDPOINT", url)
        assert revision.current_commit(REPO, None) is None
        assert asked == [f"/api/models/{REPO}?expand=sha"]


def test_a_redirect_is_not_followed_and_the_token_goes_nowhere_else(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    with serving(body(200, b'{"sha": "' + b"a" * 40 + b'"}')) as (elsewhere, asked_there):
        with serving(body(307, b"", Location=f"{elsewhere}/api/x")) as (url, asked):
            monkeypatch.setattr(constants, "ENDPOINT", url)
            assert revision.current_commit(REPO, "main") is None
    assert asked == [f"/api/models/{REPO}/revision/main?expand=sha"] and asked_there == []


def test_a_hub_that_never_answers_is_given_up_on_at_the_timeout(monkeypatch):
    from huggingface_hub import constants

    gate = threading.Event()
    with serving(lambda h: gate.wait(5)) as (url, asked):
        monkeypatch.setattr(constants, "ENDPOINT", url)
        monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 0.2)
        assert revision.current_commit(REPO, None) is None
        gate.set()


def test_a_warm_online_process_never_imports_the_hub_client(hubserver, tmp_path):
    """As a user runs it: the second run asks its one question without huggingface_hub's client
    (its HTTP stack alone is twice a plan from the cache), and prints the same document."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import EXAMPLE_FLEET, ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "LLMFIT"))}
    env.update(HF_ENDPOINT=hubserver.url, HF_HOME=str(tmp_path / "home"),
               HF_HUB_CACHE=str(tmp_path / "hub"), LLMFIT_CACHE=str(tmp_path / "llmfit"),
               HF_HUB_DISABLE_XET="1")  # fmt: skip
    script = (
        "import sys\nfrom llmfit.cli import main\ntry:\n    main(sys.argv[1:])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('huggingface_hub.hf_api', 'huggingface_hub.file_download', "
        "'httpx2') if m in sys.modules), file=sys.stderr)\n"
    )
    argv = [sys.executable, "-c", script, REPO, "--fleet", str(EXAMPLE_FLEET), "--json"]
    cold = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
    warm = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
    assert "huggingface_hub.hf_api" in cold.stderr
    assert warm.stderr == "[]\n"
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
