"""A hostile or broken Hub, and what llmfit says to each (issue 12): one sentence and its exit code,
within the stated deadlines, nothing written outside the caches, nothing kept that did not parse,
and no byte of a credential in the output."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from llmfit.sources import session
from tests.conftest import EXAMPLE_FLEET
from tests.hubrepos import commit_of
from tests.hubserver import FileSpec, FixtureRepo

FLEET = str(EXAMPLE_FLEET)
QWEN = "Qwen/Qwen3-8B"
SHARD = "model-00001-of-00005.safetensors"


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")} if root.exists() else set()


@pytest.fixture
def fast(monkeypatch):
    """Short deadlines, so that a server that never finishes costs a test half a second."""
    from huggingface_hub import constants

    monkeypatch.setattr(session, "DEADLINE", 0.5)
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 5)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 5)


# -- answers that are not the Hub's --------------------------------------------------------------


def test_a_web_page_for_the_description_is_one_sentence(run_online, hubserver):
    hubserver.mode = "html"
    code, out, err = run_online(QWEN, "--fleet", FLEET)
    assert (code, out) == (4, "")
    assert err == (
        f"llmfit: the Hub ({hubserver.url}) did not describe Qwen/Qwen3-8B as the Hub does (its "
        "answer is not a repository's description).\nhint: check HF_ENDPOINT and any proxy\n"
    )


def test_a_web_page_for_config_json_is_not_kept(run_online, hubserver, tmp_path):
    hubserver.mode = "html"
    hubserver.fail_on = "config.json"
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the server at {hubserver.url} does not answer as the Hub does (no commit or "
        "ETag); check HF_ENDPOINT and any proxy."
    )
    assert not list((tmp_path / "hf-cache").rglob("config.json"))


def test_a_web_page_for_a_header_is_one_sentence(run_online, hubserver):
    hubserver.mode = "html"
    hubserver.fail_on = SHARD
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) answered a web page for Qwen/Qwen3-8B/{SHARD}, not "
        "the file."
    )


@pytest.mark.parametrize(
    "value",
    [["not", "a", "repository"], "a string", 42, None, {"siblings": 7}, {"sha": ["x"]}],
    ids=["list", "string", "number", "null", "siblings-number", "sha-list"],
)
def test_a_description_of_the_wrong_json_type_is_one_sentence(run_online, hubserver, value):
    hubserver.mode = "wrong-json"
    hubserver.wrong_json = value
    code, out, err = run_online(QWEN, "--fleet", FLEET)
    assert (code, out) == (4, "")
    first = err.splitlines()[0]
    assert first in (
        f"llmfit: the Hub ({hubserver.url}) did not describe Qwen/Qwen3-8B as the Hub does (its "
        "answer is not a repository's description).",
        f"llmfit: the Hub ({hubserver.url}) named None as the commit of Qwen/Qwen3-8B, which is "
        "not a commit hash.",
    )
    assert "Traceback" not in err


def test_a_redirect_loop_is_given_up_on(run_online, hubserver):
    hubserver.mode = "redirect-loop"
    started = time.monotonic()
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) kept redirecting the request for Qwen/Qwen3-8B (a "
        "loop?)."
    )
    assert hubserver.count(contains="/api/models/") == session.MAX_REDIRECTS + 1
    assert time.monotonic() - started < 5


def test_a_redirect_loop_on_a_file_is_given_up_on(run_online, hubserver):
    hubserver.mode = "redirect-loop"
    hubserver.fail_on = "config.json"
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) kept redirecting the request for Qwen/Qwen3-8B (a "
        "loop?)."
    )


def test_a_truncated_description_is_one_sentence(run_online, hubserver):
    hubserver.mode = "truncate"
    hubserver.fail_on = "/api/models/"
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) closed the connection before it had answered in full."
    )


def test_a_truncated_header_is_tried_again_then_one_sentence(run_online, hubserver):
    hubserver.mode = "truncate"
    hubserver.fail_on = SHARD
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) closed the connection before it had answered in full."
    )
    assert hubserver.count("GET", SHARD) == 3  # tried, then twice again


@pytest.mark.slow  # huggingface_hub retries a download five times, a second apart
def test_a_truncated_config_is_one_sentence(run_online, hubserver, tmp_path):
    hubserver.mode = "truncate"
    hubserver.fail_on = "resolve"
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert "closed the connection before it had answered in full" in err.splitlines()[0]
    assert not list((tmp_path / "hf-cache").rglob("config.json"))


def test_a_range_answer_from_the_wrong_offset_is_refused(run_online, hubserver):
    hubserver.mode = "wrong-range"
    hubserver.fail_on = SHARD
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    size = hubserver.repos[QWEN].files[SHARD].length
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) answered 'bytes 1-8/{size}' for "
        f"Qwen/Qwen3-8B/{SHARD} when asked for bytes 0-7."
    )


# -- bounds --------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["/api/models/", "resolve"])
def test_a_server_that_trickles_is_given_up_on_at_the_deadline(run_online, hubserver, fast, where):
    hubserver.mode = "trickle"
    hubserver.fail_on = where
    hubserver.trickle_seconds = 0.05  # well within the 5 s allowed between two reads
    started = time.monotonic()
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    took = time.monotonic() - started
    assert code == 9
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) did not finish answering within 0.5 s."
    )
    assert took < 3


def test_a_trickled_header_read_is_given_up_on(run_online, hubserver, fast):
    hubserver.mode = "trickle"
    hubserver.fail_on = SHARD
    hubserver.trickle_seconds = 0.05
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 9
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) did not finish answering within 0.5 s."
    )


def test_a_gzip_bomb_for_the_description_stops_at_the_cap(run_online, hubserver, monkeypatch):
    monkeypatch.setattr(session, "MAX_ANSWER", 1 << 20)
    hubserver.mode = "gzip-bomb"
    hubserver.fail_on = "/api/models/"
    hubserver.bomb_bytes = 64 << 20  # 64 KB on the wire
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) answered with more than 1,048,576 bytes for "
        "Qwen/Qwen3-8B, more than llmfit reads of any answer."
    )
    assert hubserver.bytes_sent < 1 << 20


def test_a_gzip_bomb_for_config_json_stops_at_its_cap(run_online, hubserver, tmp_path):
    from llmfit.sources.config import MAX_CONFIG

    hubserver.mode = "gzip-bomb"
    hubserver.fail_on = "config.json"
    hubserver.bomb_bytes = MAX_CONFIG * 2
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 3
    assert err == (
        f"llmfit: Qwen/Qwen3-8B/config.json is more than {MAX_CONFIG:,} bytes, the most llmfit "
        "reads of such a file.\n"
    )
    written = [p.stat().st_size for p in (tmp_path / "hf-cache").rglob("*") if p.is_file()]
    assert max(written, default=0) <= MAX_CONFIG + (1 << 20)


@pytest.mark.parametrize("coding", ["br", "zstd", "compress"])
def test_an_encoding_not_asked_for_is_refused(run_online, hubserver, coding):
    hubserver.mode = "gzip-bomb"
    hubserver.fail_on = "/api/models/"
    hubserver.bomb_bytes = 1 << 20
    hubserver.bomb_encoding = coding
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) sent an answer llmfit cannot read for Qwen/Qwen3-8B: "
        f"it came in the {coding!r} encoding, not one llmfit asked for."
    )


def test_a_config_listed_as_300_mb_is_not_downloaded(run_online, hubserver):
    repo = hubserver.repos[QWEN]
    spec = repo.files["config.json"]
    repo.files["config.json"] = FileSpec(spec.content, size=300_000_000)
    code, out, err = run_online(QWEN, "--fleet", FLEET)
    assert (code, out) == (3, "")
    assert err == (
        "llmfit: Qwen/Qwen3-8B/config.json is 300,000,000 bytes, more than the 16,777,216 llmfit "
        "reads of such a file; it is not downloaded.\n"
    )
    assert hubserver.count(contains="config.json") == 0


# -- names from the Hub that would be paths ------------------------------------------------------


@pytest.mark.parametrize(
    "commit",
    ["../../../../outside", "a" * 39, "A" * 40, "g" * 40, 12345, "", "a" * 40 + "/.."],
)
def test_a_commit_that_is_not_one_is_refused_before_any_path(
    run_online, hubserver, tmp_path, commit
):
    hubserver.mode = "bad-commit"
    hubserver.bad_commit = commit
    before = files_under(tmp_path)
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    shown = repr(commit) if commit != 12345 else "12345"
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) named {shown} as the commit of Qwen/Qwen3-8B, which "
        "is not a commit hash."
    )
    # Where ../../../../outside would have led from snapshots/ and from llmfit's cache.
    llmfit_cache = Path(os.environ["LLMFIT_CACHE"])
    for where in (tmp_path, tmp_path.parent, llmfit_cache.parent, llmfit_cache.parent.parent):
        assert not (where / "outside").exists()
    # Nothing but llmfit's own cache of the test, which lies elsewhere, was written.
    assert files_under(tmp_path) == before


def test_a_listed_file_name_with_dot_dot_is_refused(run_online, hubserver, tmp_path):
    hubserver.repos[QWEN].files["../../evil.json"] = FileSpec(b"{}")
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) listed a file '../../evil.json' in Qwen/Qwen3-8B, "
        "which no repository can hold: it has an empty, '.' or '..' part."
    )
    llmfit_cache = Path(os.environ["LLMFIT_CACHE"])
    assert not list(tmp_path.rglob("evil.json")) and not list(llmfit_cache.rglob("evil.json"))
    for where in (tmp_path.parent, llmfit_cache.parent, llmfit_cache.parent.parent):
        assert not (where / "evil.json").exists()


@pytest.mark.parametrize(
    ("arg", "why"),
    [
        ("Qwen/Qwen3-8B@../../../../x", "it holds '..' or '@{', or is '@'"),
        ("Qwen/Qwen3-8B@refs/../../x", "it holds '..' or '@{', or is '@'"),
        ("Qwen/Qwen3-8B@/etc/passwd", "a part of it is empty, starts with '.', or ends with '.' "
         "or '.lock'"),
        ("Qwen/Qwen3-8B@main/", "a part of it is empty, starts with '.', or ends with '.' or "
         "'.lock'"),
        ("Qwen/Qwen3-8B@.hidden", "a part of it is empty, starts with '.', or ends with '.' or "
         "'.lock'"),
        ("Qwen/Qwen3-8B@x.lock", "a part of it is empty, starts with '.', or ends with '.' or "
         "'.lock'"),
        ("Qwen/Qwen3-8B@-rf", "it starts with '-'"),
        ("Qwen/Qwen3-8B@a b", "it holds a space, a control character or one of ~^:?*[\\"),
        ("Qwen/Qwen3-8B@x\x1b[31m", "it holds a space, a control character or one of ~^:?*[\\"),
        ("Qwen/Qwen3-8B@a\\b", "it holds a space, a control character or one of ~^:?*[\\"),
        ("Qwen/Qwen3-8B@" + "v" * 256, "it is longer than 255 bytes"),
    ],
)  # fmt: skip
def test_a_revision_that_cannot_be_one_is_refused_before_any_request(
    run_online, hubserver, tmp_path, arg, why
):
    before = files_under(tmp_path)
    code, out, err = run_online(arg, "--fleet", FLEET)
    assert (code, out) == (2, "")
    revision = arg.split("@", 1)[1]
    shown = repr(arg) if len(repr(arg)) <= 60 else repr(arg)[:56] + "…" + repr(arg)[-3:]
    rev = (
        repr(revision)
        if len(repr(revision)) <= 60
        else repr(revision)[:56] + "…" + repr(revision)[-3:]
    )
    sentence = f"{shown} names revision {rev}, which cannot be a branch, tag or commit: {why}."
    assert err == f"llmfit: {sentence}\n".replace("\x1b", "")
    assert hubserver.requests == []
    assert files_under(tmp_path) == before


def test_a_revision_flag_is_checked_the_same(run_online, hubserver, tmp_path):
    code, _, err = run_online(QWEN, "--revision", "../../x", "--fleet", FLEET)
    assert code == 2
    assert err == (
        "llmfit: --revision '../../x', which cannot be a branch, tag or commit: it holds '..' "
        "or '@{', or is '@'.\n"
    )
    assert hubserver.requests == []


def test_a_revision_with_shell_characters_is_quoted_in_hints(run_online, hubserver):
    code, _, err = run_online("Qwen/Qwen3-8B@$(touch${IFS}pwned)", "--fleet", FLEET)
    assert code == 8
    assert err == (
        "llmfit: Qwen/Qwen3-8B has no branch, tag or commit '$(touch${IFS}pwned)'.\n"
        "hint: llmfit Qwen/Qwen3-8B  (its default branch)\n"
    )
    hubserver.mode = "error"
    code, _, err = run_online("Qwen/Qwen3-8B@$(touch${IFS}pwned)", "--fleet", FLEET)
    assert err.splitlines()[1] == (
        "hint: try again later, or where the Hub can be reached: hf download Qwen/Qwen3-8B "
        "--revision '$(touch${IFS}pwned)' --include config.json '*.safetensors.index.json', then "
        "copy the cache here"
    )


def test_suggestions_are_only_names_that_are_repository_ids(run_online, hubserver):
    for name in ("Mirror/Qwen3-8B\x1b]0;owned\x07", "Mirror/Qwen3-8B a b", "Mirror/Qwen3-8B"):
        hubserver.add(FixtureRepo(name, commit_of(name), {}))
    code, _, err = run_online("Typo/Qwen3-8B", "--fleet", FLEET)
    assert code == 5
    assert err.splitlines()[1] == "hint: did you mean Mirror/Qwen3-8B, Qwen/Qwen3-8B?"


# -- transactions --------------------------------------------------------------------------------


def test_a_poisoned_config_in_the_cache_is_discarded_and_fetched_again(
    run_online, hubserver, tmp_path
):
    code, _, err = run_online(QWEN, "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    (config,) = (tmp_path / "hf-cache").rglob("snapshots/*/config.json")
    blob = config.resolve()
    blob.chmod(0o644)
    blob.write_bytes(b"<html>a proxy's page</html>")
    hubserver.reset()
    code, _, err = run_online(QWEN, "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    assert json.loads(config.read_text())["model_type"] == "qwen3"
    assert hubserver.count("GET", "config.json") == 1


def test_a_header_that_does_not_parse_is_not_cached(run_online, hubserver):
    from llmfit.sources.metacache import MetaCache

    repo = hubserver.repos[QWEN]
    good = repo.files[SHARD]
    repo.files[SHARD] = FileSpec(good.content[:8] + b"!" + good.content[9:], size=good.length)
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 3
    assert err.startswith(
        f"llmfit: Qwen/Qwen3-8B/{SHARD}: the safetensors header is not valid JSON: Expecting"
    )
    assert MetaCache().header(QWEN, repo.commit, SHARD, "safetensors") is None
    # Fixed on the Hub: the next run reads it again rather than trusting the bad bytes.
    repo.files[SHARD] = good
    code, _, err = run_online(QWEN, "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    assert MetaCache().header(QWEN, repo.commit, SHARD, "safetensors") is not None


def test_a_damaged_cached_header_is_discarded_and_read_again(run_online, hubserver, monkeypatch):
    from llmfit.sources.metacache import MetaCache

    code, _, err = run_online(QWEN, "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    commit = hubserver.repos[QWEN].commit
    meta = MetaCache()
    path = meta._header_path(QWEN, commit, "safetensors", SHARD)
    path.write_bytes(b'{"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 3]}}')
    # Offline, it cannot be read again: it is discarded and the plan uses the index's size.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = run_online(QWEN, "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    assert not path.exists()
    # Online, it is read again from the Hub.
    monkeypatch.delenv("HF_HUB_OFFLINE")
    hubserver.reset()
    code, _, err = run_online(QWEN, "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    assert hubserver.count("GET", SHARD) == 2  # its length, then its header
    assert meta.header(QWEN, commit, SHARD, "safetensors") is not None


# -- the environment -----------------------------------------------------------------------------


def test_credentials_in_hf_endpoint_are_never_printed(run_online, hubserver, monkeypatch):
    from huggingface_hub import constants

    host = hubserver.url.removeprefix("http://")
    monkeypatch.setattr(constants, "ENDPOINT", f"http://alice:pa55w0rd@{host}")
    hubserver.mode = "error"
    code, out, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: the Hub ({hubserver.url}) answered 500 Internal Server Error for Qwen/Qwen3-8B."
    )
    assert "pa55w0rd" not in out + err and "alice" not in out + err


def test_credentials_of_an_unreachable_endpoint_are_never_printed(run_online, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://alice:pa55w0rd@127.0.0.1:9")
    code, out, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err == (
        "llmfit: cannot reach the Hub at http://127.0.0.1:9.\n"
        "hint: check the network, HF_ENDPOINT and any proxy, or where the Hub can be reached: "
        "hf download Qwen/Qwen3-8B --include config.json '*.safetensors.index.json', then copy "
        "the cache here\n"
    )


@pytest.mark.parametrize(
    ("var", "value", "sentence"),
    [
        ("HF_HUB_ETAG_TIMEOUT", "abc", "HF_HUB_ETAG_TIMEOUT is 'abc', not a whole number of "
         "seconds."),
        ("HF_HUB_ETAG_TIMEOUT", "1.5", "HF_HUB_ETAG_TIMEOUT is '1.5', not a whole number of "
         "seconds."),
        ("HF_HUB_ETAG_TIMEOUT", "-1", "HF_HUB_ETAG_TIMEOUT is -1; it must be a number of seconds "
         "from 1 to 86,400."),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "9" * 30, f"HF_HUB_DOWNLOAD_TIMEOUT is {int('9' * 30):,}; it "
         "must be a number of seconds from 1 to 86,400."),
    ],
)  # fmt: skip
def test_a_timeout_that_is_not_a_number_is_one_sentence(
    run_online, hubserver, monkeypatch, var, value, sentence
):
    monkeypatch.setenv(var, value)
    code, out, err = run_online(QWEN, "--fleet", FLEET)
    assert (code, out) == (2, "")
    assert err == f"llmfit: {sentence}\nhint: unset {var}\n"
    assert hubserver.requests == []


def test_a_timeout_that_is_not_a_number_is_no_traceback_in_a_fresh_process(tmp_path):
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "HF_HUB_ETAG_TIMEOUT": "abc",
        "HF_HOME": str(tmp_path),
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "LLMFIT_CACHE": str(tmp_path / "llmfit"),
    }
    env.pop("HF_HUB_CACHE", None)
    env.pop("HF_HUB_OFFLINE", None)
    done = subprocess.run(
        [sys.executable, "-m", "llmfit", QWEN, "--fleet", FLEET],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "llmfit: HF_HUB_ETAG_TIMEOUT is 'abc', not a whole number of seconds.\n"
        "hint: unset HF_HUB_ETAG_TIMEOUT\n"
    )


# (A newline is not among them: huggingface_hub takes line breaks out of HF_TOKEN itself.)
@pytest.mark.parametrize("token", ["hf_tökén0123456789", "hf_abc def", "hf_\x1b[2J", "hf_\x7f"])
def test_a_token_no_header_can_carry_is_one_sentence_and_never_shown(
    run_online, hubserver, monkeypatch, token
):
    monkeypatch.setenv("HF_TOKEN", token)
    code, out, err = run_online(QWEN, "--fleet", FLEET)
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: HF_TOKEN holds a character no token has (a space, a control character or one "
        "outside ASCII); it is neither sent nor shown.\n"
        "hint: hf auth login  (or set HF_TOKEN to a token from huggingface.co/settings/tokens)\n"
    )
    assert hubserver.requests == []


@pytest.mark.parametrize("url", ["http://[::1", "ftp://hub.example", "hub.example", "http://h:x/"])
def test_an_endpoint_that_is_no_address_is_one_sentence(run_online, monkeypatch, url):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", url)
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 2
    assert err.splitlines()[0].startswith("llmfit: HF_ENDPOINT is not an http(s) address of a Hub")
    assert err.splitlines()[1] == "hint: unset HF_ENDPOINT  (the Hub at https://huggingface.co)"


def test_a_cache_that_cannot_be_written_is_one_sentence(
    run_online, hubserver, tmp_path, monkeypatch
):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HF_HUB_CACHE", str(blocker / "hub"))
    code, out, err = run_online(QWEN, "--fleet", FLEET)
    assert (code, out) == (4, "")
    assert err == (
        f"llmfit: cannot write the Hugging Face cache at {blocker / 'hub'} (Not a directory).\n"
        "hint: set HF_HUB_CACHE to a folder you can write, or: llmfit Qwen/Qwen3-8B --offline  "
        "(plans from what is cached)\n"
    )


def test_a_full_disk_is_one_sentence(run_online, hubserver, tmp_path, monkeypatch):
    import errno
    import os

    from huggingface_hub import file_download

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(file_download, "_chmod_and_move", full)
    code, _, err = run_online(QWEN, "--fleet", FLEET)
    assert code == 4
    assert err.splitlines()[0] == (
        f"llmfit: cannot write the Hugging Face cache at {tmp_path / 'hf-cache'} (No space left "
        "on device)."
    )
