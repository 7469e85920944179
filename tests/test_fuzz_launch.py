"""Property tests of issue 24: whatever word reaches a launch, what is printed runs exactly the
planned words, or is refused in one sentence; and no token is sent to another origin.

- A word of every control and format character class (C0, DEL, C1, bidi, zero-width, line
  separators, surrogates), shell, YAML and Kubernetes specials, in every position an outside word
  reaches a launch (the model's name, the revision, a checked command's own words), printed as a
  shell line, a docker line and Kubernetes YAML, one node and two: refused exactly when it holds a
  character a terminal would not show as itself; else read back with `shlex.split`, and with a
  YAML 1.2 reader plus Kubernetes' `$(VAR)` expansion, to the planned words.
- Any next-page or redirect address: a request carrying the token is refused exactly when the
  address's origin is not the endpoint's.

Brief runs in the default suite; `-m slow` runs thousands (tests/fuzz/run_long.py, ten minutes
each: docs/reliability.md).
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from functools import cache
from urllib.parse import urlsplit

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfit.errors import UnprintableCommand
from llmfit.plan.advice import Advice
from llmfit.plan.launch import Command, unshowable
from llmfit.render.commands import command_text, commands
from llmfit.render.deploy import render_docker, render_k8s
from llmfit.render.launch import launch_lines
from tests.conftest import HUB
from tests.launch_check import k8s_expand, yaml12

BRIEF = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=4000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Every class of character a terminal acts on or hides, one or more of each.
CONTROLS = [chr(c) for c in range(0x20)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]
FORMAT = [
    "\u061c", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c",
    "\u202d", "\u202e", "\u2060", "\u2066", "\u2067", "\u2068", "\u2069", "\ufeff", "\u00ad",
    "\U000e0041",
]  # fmt: skip
SEPARATORS = ["\u2028", "\u2029"]
SURROGATES = ["\udc80", "\udcff", "\ud800"]
UNASSIGNED = ["\u0378", "\uffff"]
SHELL = list(" '\"`$\\;&|()<>*?[]{}~#!=%^,:@+-") + ["$(", "$((", "${", "$$", "\\'", "'\"'\"'"]
YAML = ["1e3", "0o17", "0x1F", "true", "null", "~", "yes", "off", ".inf", ": ", " #", "- ", "&a",
        "*a", "!!str ", "%YAML", "---", "...", "|", ">", "{", "}", "[", "]"]  # fmt: skip
K8S = ["$(LWS_LEADER_ADDRESS)", "$(LWS_WORKER_INDEX)", "$(HF_TOKEN)", "$(", "$$(", "$$$", ")"]
TEXT = ["a", "Qwen", "é", "ß", "中", "😀", "x" * 40]

pieces = st.sampled_from(
    CONTROLS + FORMAT + SEPARATORS + SURROGATES + UNASSIGNED + SHELL + YAML + K8S + TEXT
) | st.text(max_size=4)
words = st.lists(pieces, min_size=1, max_size=6).map("".join)
# Words KuberneteS or YAML would read as something else, and no terminal acts on.
special_words = st.lists(st.sampled_from(SHELL + YAML + K8S + TEXT), min_size=1, max_size=5).map(
    "".join
) | st.from_regex(r"[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9]*)?)([eE][-+]?[0-9]+)?", fullmatch=True)

LWS_ENV = {"LWS_LEADER_ADDRESS": "leader.svc", "LWS_WORKER_INDEX": "1"}


@cache
def _advice(repo: str, fleet: str, pp: int | None = None, tp: int | None = None) -> Advice:
    from llmfit.advise import advise
    from llmfit.plan.planner import PlanSettings
    from llmfit.plan.settings import Pins
    from llmfit.sources.fleet import resolve_fleet

    pins = Pins(pp=pp, tp=tp)
    settings_ = PlanSettings(pins=pins, precision="stored")
    return advise(repo, resolve_fleet(fleet), settings_, HUB, offline=True)


def one_node() -> Advice:
    return _advice("Qwen/Qwen3-8B", "1xh100-80g")


def two_nodes() -> Advice:
    # tp 4 × pp 2 is wider than a node of four: its stages go to two nodes.
    return _advice("meta-llama/Meta-Llama-3.1-70B", "2x4xh100-80g@ib0", pp=2, tp=4)


def with_word(advice: Advice, where: str, word: str) -> Advice:
    """The plan with `word` as the model's name the commands carry, or as its revision."""
    repo = advice.repo
    repo = replace(repo, id=word) if where == "model" else replace(repo, revision=word)
    return replace(advice, repo=repo)


def expected(advice: Advice) -> list[Command]:
    o = advice.plan.options[0]
    return commands(o, advice.repo.id, advice.repo.revision)


def check_shell(advice: Advice, word: str) -> None:
    o = advice.plan.options[0]
    try:
        lines = launch_lines(advice, o)
    except UnprintableCommand:
        assert unshowable(word) is not None, ascii(word)
        return
    assert unshowable(word) is None, ascii(word)
    printed = [line for line in lines if not line.startswith("# ")]
    assert [shlex.split(line) for line in printed] == [list(c.argv) for c in expected(advice)]
    assert all(unshowable(line) is None for line in lines)


def check_docker(advice: Advice, word: str) -> None:
    o = advice.plan.options[0]
    try:
        text = render_docker(advice, o)
    except UnprintableCommand:
        assert unshowable(word) is not None, ascii(word)
        return
    assert unshowable(word) is None, ascii(word)
    assert unshowable(text.replace("\n", "")) is None
    runs = [shlex.split(line) for line in text.splitlines() if not line.startswith("# ")]
    for argv, cmd in zip(runs, expected(advice), strict=True):
        image = argv.index("vllm/vllm-openai:v0.34.0")
        assert argv[image + 1 :] == list(cmd.argv[2:])


def check_k8s(advice: Advice, word: str, leader: str | None = None) -> None:
    o = advice.plan.options[0]
    try:
        text = render_k8s(advice, o)
    except UnprintableCommand:
        assert unshowable(word) is not None, ascii(word)
        return
    assert unshowable(word) is None, ascii(word)
    assert unshowable(text.replace("\n", "")) is None
    want = [list(c.argv) for c in expected(advice)]
    if leader:  # the head's address, as the leader pod's
        want = [[w.replace(leader, LWS_ENV["LWS_LEADER_ADDRESS"]) for w in a] for a in want]
    for docs in (yaml12(text), [d for d in yaml.safe_load_all(text) if d]):
        spec = docs[0]["spec"]
        if "leaderWorkerTemplate" in spec:
            lwt = spec["leaderWorkerTemplate"]
            pods = [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
        else:
            pods = [spec["template"]["spec"]]
        got = []
        for pod in pods:
            (c,) = pod["containers"]
            args = c.get("command") or ["vllm", "serve", *c["args"]]
            got.append([k8s_expand(w, LWS_ENV) for w in args])
        assert got == want
        assert docs[0]["metadata"]["annotations"]["llmfit/repo"].startswith(advice.repo.id)


def check_word(where: str, word: str) -> None:
    base = one_node()
    shown = with_word(base, where, word)
    check_shell(shown, word)
    check_docker(shown, word)
    check_k8s(shown, word)
    lws = two_nodes()
    check_k8s(with_word(lws, where, word), word, leader=lws.plan.options[0].node_ids[0])


positions = st.sampled_from(["model", "revision"])


@BRIEF
@given(positions, words)
def test_any_word_in_any_position_prints_exactly_or_is_refused(where, word):
    check_word(where, word)


@pytest.mark.slow
@LONG
@given(positions, words)
def test_any_word_in_any_position_prints_exactly_or_is_refused_long(where, word):
    check_word(where, word)


@BRIEF
@given(positions, special_words)
def test_yaml_and_kubernetes_specials_reach_the_pod_unchanged(where, word):
    check_word(where, word)


@pytest.mark.slow
@LONG
@given(positions, special_words)
def test_yaml_and_kubernetes_specials_reach_the_pod_unchanged_long(where, word):
    check_word(where, word)


def check_checked_words(argv: list[str]) -> None:
    cmd = Command("all", ("vllm", "serve", *argv))
    try:
        line = command_text(cmd)
    except UnprintableCommand:
        assert any(unshowable(w) is not None for w in argv)
        return
    assert all(unshowable(w) is None for w in argv)
    assert shlex.split(line) == list(cmd.argv)


@BRIEF
@given(st.lists(words, min_size=1, max_size=4))
def test_a_checked_commands_own_words_echo_exactly_or_are_refused(argv):
    check_checked_words(argv)


# -- tokens ----------------------------------------------------------------------------------

ENDPOINT = "https://hub.example.org"
hosts = st.sampled_from(
    ["hub.example.org", "HUB.EXAMPLE.ORG", "hub.example.org.evil", "evil.example", "127.0.0.1",
     "hub.example.org.", "xn--hub-example", "sub.hub.example.org", "[::1]"]
)  # fmt: skip
ports = st.sampled_from(["", ":443", ":80", ":8443", ":0443"])
schemes = st.sampled_from(["https", "http", "HTTPS"])
userinfo = st.sampled_from(["", "user@", "hub.example.org@", "user:pw@"])
paths = st.sampled_from(["/api/models?cursor=2", "/", "", "/@evil.example/x", "/%2e%2e/"])


def _origin(url: str, *, fqdn: bool = False) -> tuple[str, str, int | None]:
    """An origin worked out apart from the code under test (urllib, not httpx); with `fqdn`, a
    host's trailing dot dropped (the same host to DNS)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    port = parts.port or {"http": 80, "https": 443}[scheme]
    return scheme, host.rstrip(".") if fqdn else host, port


def check_next_link(url: str) -> None:
    import httpx2
    from huggingface_hub import constants

    from llmfit.sources import session

    try:
        request = httpx2.Request("GET", url, headers={"authorization": "Bearer hf_x"})
    except Exception:  # an address httpx will not build a request for is never sent
        return
    # Sent only home (the same host to DNS); sent wherever it is exactly the endpoint's origin.
    home = _origin(ENDPOINT, fqdn=True) == _origin(str(request.url), fqdn=True)
    exactly = _origin(ENDPOINT) == _origin(str(request.url))
    old = constants.ENDPOINT
    constants.ENDPOINT = ENDPOINT
    try:
        session._credentials_stay_home(request)
        assert home, url
    except session.CredentialsElsewhere:
        assert not exactly, url
    finally:
        constants.ENDPOINT = old


@BRIEF
@given(schemes, userinfo, hosts, ports, paths)
def test_a_token_goes_to_no_origin_but_the_endpoints(scheme, user, host, port, path):
    check_next_link(f"{scheme}://{user}{host}{port}{path}")


@pytest.mark.slow
@LONG
@given(schemes, userinfo, hosts, ports, paths)
def test_a_token_goes_to_no_origin_but_the_endpoints_long(scheme, user, host, port, path):
    check_next_link(f"{scheme}://{user}{host}{port}{path}")
