"""The command as a user runs it, online against the loopback Hub and then offline."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import EXAMPLE_FLEET, ROOT
from tests.hubrepos import commit_of, sharded_repo

FLEET = str(EXAMPLE_FLEET)


def _doc(out: str) -> dict:
    doc = json.loads(out)
    source = doc["repo"].pop("source")
    return {"source": source, "doc": doc}


def test_the_plan_is_the_same_online_and_offline(run_online, hubserver):
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "32k", "--json")
    assert code == 0, err
    online = _doc(out)
    hubserver.reset()
    code, out, err = run_online(
        "Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "32k", "--json", "--offline"
    )
    assert code == 0, err
    assert hubserver.requests == []
    offline = _doc(out)
    assert (online["source"], offline["source"]) == ("hub", "cache")
    assert online["doc"] == offline["doc"]
    assert online["doc"]["model"]["params"] == 8_190_735_360
    assert online["doc"]["repo"]["commit"] == commit_of("Qwen/Qwen3-8B")


def test_offline_and_not_cached_says_what_is_missing_and_asks_nothing(run_online, hubserver):
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--offline")
    assert code == 4
    assert out == ""
    assert err.splitlines()[0].startswith(
        "llmfit: Qwen/Qwen3-8B is not in the local Hugging Face cache ("
    )
    assert err.splitlines()[1] == (
        "hint: llmfit Qwen/Qwen3-8B  (with the network, once: it fetches metadata only), or: hf "
        "download "
        "Qwen/Qwen3-8B --include config.json '*.safetensors.index.json'"
    )
    assert hubserver.requests == []


def test_hf_hub_offline_is_honoured_like_the_flag(run_online, hubserver, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, _ = run_online("Qwen/Qwen3-8B", "--fleet", FLEET)
    assert code == 4
    assert hubserver.requests == []


def test_an_unreachable_hub_falls_back_to_the_cache_with_a_note(run_online, hubserver, monkeypatch):
    from huggingface_hub import constants

    assert run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "8k")[0] == 0
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "8k", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["repo"]["source"] == "cache"
    assert doc["model"]["params"] == 8_190_735_360
    assert (
        "Cannot reach the Hub at http://127.0.0.1:9; planned from the local cache."
        in (doc["notes"])
    )


def test_a_new_commit_is_noticed_online(run_online, hubserver):
    assert run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "8k")[0] == 0
    # The repository gets a new commit: four shards of the same tensors instead of five.
    moved = sharded_repo("Qwen/Qwen3-8B", "Qwen--Qwen3-8B.json", shards=4)
    moved.commit = commit_of("Qwen/Qwen3-8B at its next commit")
    moved.refs["main"] = moved.commit
    hubserver.add(moved)
    hubserver.reset()
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "8k", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["repo"]["commit"] == moved.commit
    assert doc["artifacts"][0]["shards"] == 4
    assert hubserver.count("GET", "-of-00004.safetensors") == 8  # two ranges for each shard


def test_revision_option_and_at_revision_agree(run_online, hubserver):
    commit = commit_of("Qwen/Qwen3-8B")
    code, out, _ = run_online("Qwen/Qwen3-8B", "--revision", commit, "--fleet", FLEET, "--json")
    assert code == 0
    assert json.loads(out)["repo"]["revision"] == commit
    code, _, err = run_online("Qwen/Qwen3-8B@main", "--revision", "v2", "--fleet", FLEET)
    assert code == 2
    assert err == "llmfit: 'Qwen/Qwen3-8B@main' names revision 'main' but --revision says 'v2'.\n"


def test_an_offline_plan_does_not_import_the_download_machinery(tmp_path):
    # Importing huggingface_hub.file_download costs a plan 0.18 s (see sources/cache.py).
    code = (
        "import sys\n"
        "from llmfit.cli import main\n"
        "try:\n"
        f"    main(['Qwen/Qwen3-8B', '--fleet', {FLEET!r}, '--offline', '--context', '8k'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "print(sorted(m for m in sys.modules if m.startswith('huggingface_hub')))\n"
    )
    env = {"HF_HUB_CACHE": str(ROOT / "fixtures" / "hub"), "LLMFIT_CACHE": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert r.returncode == 0, r.stderr
    loaded = r.stdout.strip().splitlines()[-1]
    assert "huggingface_hub.file_download" not in loaded
    assert "huggingface_hub.hf_api" not in loaded


def test_a_commit_planned_before_needs_no_request_at_all(run_online, hubserver):
    commit = commit_of("Qwen/Qwen3-8B")
    assert run_online(f"Qwen/Qwen3-8B@{commit}", "--fleet", FLEET, "--context", "8k")[0] == 0
    hubserver.reset()
    code, out, err = run_online(f"Qwen/Qwen3-8B@{commit}", "--fleet", FLEET, "--context", "8k")
    assert code == 0, err
    assert hubserver.requests == []


def test_a_snapshot_cached_without_its_config_says_how_to_get_it(run_online, hubserver, tmp_path):
    commit = commit_of("Qwen/Qwen3-8B")
    folder = tmp_path / "hf-cache" / "models--Qwen--Qwen3-8B"
    (folder / "snapshots" / commit).mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    code, out, err = run_online("Qwen/Qwen3-8B", "--fleet", FLEET, "--offline")
    assert code == 4
    assert err == (
        "llmfit: Qwen/Qwen3-8B is in the local Hugging Face cache without its config.json "
        f"(snapshot {commit[:12]}).\nhint: llmfit Qwen/Qwen3-8B  (with the network, once: it "
        "fetches metadata only), or: hf download Qwen/Qwen3-8B --include config.json "
        "'*.safetensors.index.json'\n"
    )
    assert hubserver.requests == []


def test_progress_is_reported_step_by_step(hubserver):
    from llmfit.sources.repo import load_repo

    class Recorder:
        def __init__(self) -> None:
            self.events: list[tuple] = []

        def begin(self, label: str, total: int) -> None:
            self.events.append(("begin", label, total))

        def advance(self, n: int = 1) -> None:
            self.events.append(("advance", n))

        def end(self) -> None:
            self.events.append(("end",))

    rec = Recorder()
    load_repo("Qwen/Qwen3-8B", progress=rec)
    begins = [e[1:] for e in rec.events if e[0] == "begin"]
    assert begins == [
        ("Qwen/Qwen3-8B: resolving", 1),
        ("Qwen/Qwen3-8B: config", 2),
        ("Qwen/Qwen3-8B: headers", 5),
    ]
    assert sum(e[1] for e in rec.events if e[0] == "advance") == 1 + 2 + 5
    assert rec.events[-1] == ("end",)


def test_progress_is_drawn_only_on_a_terminal(monkeypatch):
    import io

    from llmfit.render import progress

    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert progress.make_progress() is None

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", Tty())
    drawn = progress.make_progress()
    assert drawn is not None
    drawn.begin("org/x: headers", 3)
    drawn.advance(3)
    drawn.end()


def test_hf_endpoint_in_the_environment_is_honoured_by_a_real_process(hubserver, tmp_path):
    import os

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HUGGING", "LLMFIT", "TRANSFORMERS"))
    }
    env.update(
        HF_ENDPOINT=hubserver.url,
        HF_HOME=str(tmp_path / "home"),
        HF_HUB_CACHE=str(tmp_path / "hub"),
        LLMFIT_CACHE=str(tmp_path / "llmfit"),
        HF_HUB_DISABLE_XET="1",
        HF_TOKEN="hf_FromTheEnvironment000000000000000",
    )
    argv = [sys.executable, "-m", "llmfit", "Qwen/Qwen3-8B", "--fleet", FLEET, "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert json.loads(r.stdout)["repo"]["source"] == "hub"
    assert (tmp_path / "hub" / "models--Qwen--Qwen3-8B" / "refs" / "main").is_file()
    assert {q.authorization for q in hubserver.requests if "/resolve/" in q.path} == {
        "Bearer hf_FromTheEnvironment000000000000000"
    }
    r = subprocess.run([*argv, "--offline"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["repo"]["source"] == "cache"
