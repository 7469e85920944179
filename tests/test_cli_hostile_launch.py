"""What is pasted or applied runs only what was planned (issue 24): printed commands, docker
lines and Kubernetes YAML, each read back as its consumer reads it.

A command is its argv words quoted once from their exact characters; a word a terminal would
act on or hide is refused in one sentence (exit 2), never cleaned. YAML is read with a YAML 1.2
reader and Kubernetes' `$(VAR)` expansion, and a pod's script is run in a real /bin/sh with the
engine replaced by a program that records the words it was given.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import HUB, invoke
from tests.launch_check import (
    fake_program,
    k8s_expand,
    run_argv,
    run_line,
    split_back,
    yaml12,
)

REPO_405B = HUB / "models--meta-llama--Meta-Llama-3.1-405B"
REPO_70B = HUB / "models--meta-llama--Meta-Llama-3.1-70B"
COMMIT_70B = (REPO_70B / "refs" / "main").read_text().strip()


def model_dir(parent: Path, name: str) -> Path:
    """A local model directory named `name`, holding 405B's config and index."""
    d = parent / name
    d.mkdir()
    for f in next((REPO_405B / "snapshots").iterdir()).iterdir():
        shutil.copy(f, d / f.name)
    return d


def json_argvs(run, *args: str) -> list[list[str]]:
    code, out, _ = run(*args, "--json")
    assert code == 0
    return [c["argv"] for c in json.loads(out)["options"][0]["commands"]]


@pytest.mark.parametrize(
    ("name", "at", "what", "point"),
    [
        # The example: ESC then the closing quote, which clean() took for an escape.
        ("x;touch PWNED;y\x1b", 15, "a control character", "001B"),
        ("a\tb", 1, "a control character", "0009"),
        ("a\nb", 1, "a control character", "000A"),
        ("a\u200bb", 1, "a format character (bidi or zero-width)", "200B"),
        ("a\u202eb", 1, "a format character (bidi or zero-width)", "202E"),
        ("a\u2028b", 1, "a line separator", "2028"),
        ("a\x9bb", 1, "a control character", "009B"),
        # A name that is not UTF-8, as Python's surrogateescape holds its byte 0xff.
        ("a\udcffb", 1, "a byte that is not UTF-8", "DCFF"),
    ],
)
def test_a_word_a_terminal_would_change_is_refused_never_cleaned(
    run, tmp_path, monkeypatch, name, at, what, point
):
    model_dir(tmp_path, name)
    monkeypatch.chdir(tmp_path)
    # The commands alone, and the table (refused before a line of it is printed).
    for view in (("--commands",), ()):
        code, out, err = run(name, "--fleet", "8xh100-80g", *view)
        assert (code, out) == (2, "")
        assert err == (
            f"llmfit: the command is not printed: its word {name!r} holds {what} (U+{point}, "
            f"at {at}), which a terminal would act on or hide, and a command printed any other "
            "way would name something else.\n"
            "hint: rename the file or folder, or read the exact words from --json\n"
        )
    # --json writes the word exactly (a terminal's controls as \u escapes).
    assert json_argvs(run, name, "--fleet", "8xh100-80g")[0][2] == name


def test_shell_characters_in_a_name_are_quoted_once_and_run_as_one_word(run, tmp_path, monkeypatch):
    name = "a b;$(touch PWNED)'q\"`x`é"
    model_dir(tmp_path, name)
    monkeypatch.chdir(tmp_path)
    (argv,) = json_argvs(run, name, "--fleet", "8xh100-80g")
    code, out, _ = run(name, "--fleet", "8xh100-80g", "--commands")
    assert code == 0
    line, measure = out.splitlines()
    assert split_back(line) == argv
    # The benchmark's line quotes the name once too: its --model is the name, whole.
    bench = split_back(measure.removeprefix("# measure it: "))
    assert bench[bench.index("--model") + 1] == name
    assert argv[:3] == ["vllm", "serve", name]
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "vllm")
    assert run_line(line, bin_dir) == argv
    assert not (bin_dir / "PWNED").exists() and not (tmp_path / "PWNED").exists()


def test_an_escape_spanning_two_gguf_names_is_refused_not_joined(run, tmp_path, monkeypatch):
    # An OSC sequence opened in the model's name and closed in the projector's: cleaned, it took
    # `-m`'s file and `--mmproj` with it.
    d = tmp_path / "g"
    d.mkdir()
    gguf = next((HUB / "models--llmfit-fixtures--Tiny-Llama-GGUF" / "snapshots").iterdir())
    model = next(p for p in gguf.rglob("*.gguf") if "mmproj" not in p.name and "-of-" not in p.name)
    shutil.copy(model, d / "m\x1b]0;x.gguf")
    shutil.copy(model, d / "mmproj-y\x07.gguf")
    monkeypatch.chdir(tmp_path)
    code, out, err = run("g", "--fleet", "1xrtx4090-24g", "--commands")
    assert (code, out) == (2, "")
    assert "holds a control character (U+001B, at " in err


def test_check_echoes_the_command_exactly_or_refuses_it(run):
    code, out, _ = run(
        "check", "--fleet", "1xh100", "--", "vllm", "serve", "Qwen/Qwen3-8B",
        "--served-model-name", "a b$(x)",
    )  # fmt: skip
    assert code == 0
    first = out.splitlines()[0]
    assert first == "$ vllm serve Qwen/Qwen3-8B --served-model-name 'a b$(x)'"
    code, out, err = run(
        "check", "--fleet", "1xh100", "--", "vllm", "serve", "Qwen/Qwen3-8B",
        "--served-model-name", "a\x1b[2Jb",
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert err.startswith("llmfit: the command is not printed: its word 'a\\x1b[2Jb' holds a")


# -- Kubernetes ----------------------------------------------------------------------------------

# A valid git ref: Kubernetes expands its first half in the leader's command; the pod's shell, had
# the word been pasted into its script, would run the second.
HOSTILE_REVISION = "$(LWS_LEADER_ADDRESS)$(touch${IFS}PWNED)"


@pytest.fixture
def revision_cache(tmp_path, monkeypatch) -> Path:
    """The bundled cache's Meta-Llama-3.1-70B with a ref named HOSTILE_REVISION and one `$((`."""
    cache = tmp_path / "hub"
    shutil.copytree(REPO_70B, cache / REPO_70B.name)
    for ref in (HOSTILE_REVISION, "$((1+1))", *RETYPED):
        (cache / REPO_70B.name / "refs" / ref).write_text(COMMIT_70B)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


LWS_ENV = {"LWS_LEADER_ADDRESS": "leader.svc", "LWS_WORKER_INDEX": "1"}


def pod_commands(doc: dict, entrypoint: list[str]) -> dict[str, list[str]]:
    """Each pod template's command as Kubernetes starts it: `command` (or the image's entrypoint
    and `args`) with $(VAR) expanded from the container's environment and LWS's."""
    lwt = doc["spec"]["leaderWorkerTemplate"]
    out = {}
    for key in ("leaderTemplate", "workerTemplate"):
        (c,) = lwt[key]["spec"]["containers"]
        words = c.get("command") or [*entrypoint, *c["args"]]
        out[key] = [k8s_expand(w, LWS_ENV) for w in words]
    return out


@pytest.mark.parametrize("revision", [HOSTILE_REVISION, "$((1+1))"])
@pytest.mark.parametrize("ray", [False, True])
def test_a_revision_kubernetes_or_a_shell_would_expand_reaches_the_engine_exactly(
    revision_cache, capsys, tmp_path, revision, ray
):
    args = (
        # tp 4 × pp 2 is wider than a node of four: its stages go to two nodes.
        f"meta-llama/Meta-Llama-3.1-70B@{revision}", "--fleet", "2x4xh100-80g@ib0", "--tp", "4",
        "--pp", "2",
        "--precision", "stored", "--commands", "--format", "k8s", *(["--ray"] if ray else []),
    )  # fmt: skip
    code, out, _ = invoke(capsys, args)
    assert code == 0
    (lws, service) = yaml12(out)
    assert [lws["kind"], service["kind"]] == ["LeaderWorkerSet", "Service"]
    started = pod_commands(lws, ["vllm", "serve"])
    bin_dir = tmp_path / "bin"
    for program in ("vllm", "ray", "python3"):
        fake_program(bin_dir, program)
    leader = started["leaderTemplate"]
    if ray:
        # The leader's script, in a real shell: `ray start`, the wait (the fake python3 exits 0:
        # joined), then exactly the serve's words.
        assert leader[:2] == ["/bin/sh", "-c"]
        ran = run_argv(leader, bin_dir)
        serve = ran[ran.index("vllm") :]
    else:
        serve = leader
    assert serve[serve.index("--revision") + 1] == revision
    assert "--master-addr" in serve or ray
    if not ray:
        assert serve[serve.index("--master-addr") + 1] == "leader.svc"
    assert not (bin_dir / "PWNED").exists()


def test_a_worker_rank_worked_out_by_the_shell_is_the_only_word_it_changes(hub, capsys, tmp_path):
    # Three nodes of data parallelism: each worker's first rank is 4 × LWS_WORKER_INDEX, which
    # only the shell can work out; the rest of its words pass through "$@" untouched.
    args = (
        "deepseek-ai/DeepSeek-V3", "--fleet", "3x4xh200-141g@ib0", "--context", "8192",
        "--dp", "12", "--commands", "--format", "k8s",
    )  # fmt: skip
    code, out, _ = invoke(capsys, args)
    assert code == 0
    (lws, _) = yaml12(out)
    worker = pod_commands(lws, ["vllm", "serve"])["workerTemplate"]
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "vllm")
    for index, rank in (("1", "4"), ("2", "8")):
        ran = run_argv(worker, bin_dir, {"LWS_WORKER_INDEX": index})
        assert ran[ran.index("--data-parallel-start-rank") + 1] == rank
        given = worker[4:]
        at = given.index("--data-parallel-start-rank") + 1
        assert ran == [*given[:at], rank, *given[at + 1 :]]


# Read as a number, a boolean or null by YAML 1.2 (kubectl) or YAML 1.1 (go-yaml v2, PyYAML).
RETYPED = ["1e3", "1E3", "12e3", "0o17", "0x1F", "true", "True", "null", "NULL", "yes", "off"]


@pytest.mark.parametrize("product", RETYPED)
def test_a_label_value_yaml_would_retype_stays_a_string(run, tmp_path, product):
    # A fleet node whose GPU Feature Discovery product label is a YAML 1.2 number, boolean or
    # null: written plain, kubectl would read it as such and refuse the Deployment.
    fleet = tmp_path / "f.toml"
    fleet.write_text(
        f'[[node]]\nname = "n1"\ngpu = "h100-80g"\ngpus = 1\n'
        f'labels = {{"nvidia.com/gpu.product" = "{product}"}}\n'
    )
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", str(fleet), "--commands", "--format", "k8s")
    assert code == 0
    for docs in (yaml12(out), [d for d in yaml.safe_load_all(out) if d]):
        selector = docs[0]["spec"]["template"]["spec"]["nodeSelector"]
        assert selector == {"nvidia.com/gpu.product": product}


@pytest.mark.parametrize("revision", RETYPED)
def test_a_revision_yaml_would_retype_is_passed_as_the_string_it_is(
    revision_cache, capsys, revision
):
    args = (
        f"meta-llama/Meta-Llama-3.1-70B@{revision}", "--fleet", "8xh100-80g",
        "--precision", "stored", "--commands", "--format", "k8s",
    )  # fmt: skip
    code, out, _ = invoke(capsys, args)
    assert code == 0
    for docs in (yaml12(out), [d for d in yaml.safe_load_all(out) if d]):
        (c,) = docs[0]["spec"]["template"]["spec"]["containers"]
        assert c["args"][c["args"].index("--revision") + 1] == revision
