"""Hostile input, round three (issue 33): what a checked command says in the forms its engine's
parser takes, mounts and fabrics, and bounds on what a run reads and draws. Each runs end to end
and checks the sentence, the exit code and, where something is launched, what it parses back to."""

from __future__ import annotations

import shlex

import pytest

from tests.launch_check import yaml12


def _container(out: str) -> dict:
    (deployment, _service) = yaml12(out.split("\n---\n", 1)[1])
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize(
    "command, port",
    [
        (["vllm", "serve", "Qwen/Qwen3-8B", "--port=9000"], 9000),
        (["vllm", "serve", "Qwen/Qwen3-8B", "--port", "9000", "--port=9100"], 9100),
        (["sglang", "serve", "--model-path", "Qwen/Qwen3-8B", "--port=30001"], 30001),
        (["llama-server", "-hf", "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0", "--port=8181"], 8181),
    ],
)
def test_the_port_in_either_form_is_the_one_published_and_probed(run, command, port):
    # `--port=9000` launched on 8000: docker mapped 8000 and the pod's probe never saw it Ready.
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "docker", "--", *command)
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("docker run")]
    words = shlex.split(line)
    assert words[words.index("-p") + 1] == f"{port}:{port}"
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "k8s", "--", *command)
    assert code == 0, err
    container = _container(out)
    # The readiness probe goes to the port named http, which is this containerPort.
    assert container["ports"] == [{"name": "http", "containerPort": port}]
    assert container["readinessProbe"]["httpGet"]["port"] == "http"
    service = yaml12(out.split("\n---\n", 1)[1])[1]
    assert service["spec"]["ports"][0]["port"] == port


def _check_json(run, *command: str) -> tuple[int, dict | None, str]:
    import json

    code, out, err = run("check", "--fleet", "4xh100-80g", "--json", "--", *command)
    return code, (json.loads(out) if code in (0, 1) else None), err


def test_a_config_file_is_read_as_vllm_reads_it(run, tmp_path):
    # vLLM 0.33 pulls a --config YAML's flags in after the model (FlexibleArgumentParser.
    # _pull_args_from_config), so the file's TP 4 and 1,000,000 tokens are what it runs; the check
    # said TP 1 at 40,960 (issue 33).
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("tensor-parallel-size: 4\nmax-model-len: 1000000\nenforce-eager: true\n")
    code, doc, err = _check_json(run, "vllm", "serve", "Qwen/Qwen3-8B", "--config", str(cfg))
    assert code == 0, err
    o = doc["options"][0]
    assert (o["tp"], o["gpus"], doc["context"]) == (4, 4, 1_000_000)
    # And vLLM's refusal of a length past the trained 40,960 without its variable, said.
    assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in n for n in doc["notes"])
    # The launch carries the file's flags in its place, as vLLM pulls them in: the container or
    # pod it starts has no such file.
    assert [c["argv"] for c in o["commands"]] == [
        ["vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "4",
         "--max-model-len", "1000000", "--enforce-eager"]
    ]  # fmt: skip
    # A flag on the command line wins over the file's (it comes after them).
    tp4 = tmp_path / "tp4.yaml"
    tp4.write_text("tensor-parallel-size: 4\n")
    code, doc, err = _check_json(
        run, "vllm", "serve", "Qwen/Qwen3-8B", "--config", str(tp4), "-tp", "2"
    )
    assert code == 0, err
    assert doc["options"][0]["tp"] == 2
    # The file may name the model.
    named = tmp_path / "named.yml"
    named.write_text("model: Qwen/Qwen3-8B\ntensor-parallel-size: 2\n")
    code, doc, err = _check_json(run, "vllm", "serve", "--config", str(named))
    assert code == 0, err
    assert (doc["repo"]["id"], doc["options"][0]["tp"]) == ("Qwen/Qwen3-8B", 2)


def test_a_config_file_that_cannot_be_read_is_one_sentence(run, tmp_path):
    import os

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    alias = tmp_path / "alias.yaml"
    alias.write_text("a: &x [1, 2]\nb: *x\n")
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    cases = {
        str(tmp_path / "cfg.json"): "vLLM 0.34 refuses it: its --config file must be .yaml or "
        ".yml, not .json.",
        str(tmp_path / "missing.yaml"): f"its --config file {str(tmp_path / 'missing.yaml')!r} "
        "cannot be read (No such file or directory).",
        # A FIFO is refused at once, not waited on.
        str(fifo): f"its --config file {str(fifo)!r} is not a regular file of at most "
        "1,048,576 bytes.",
        str(alias): f"its --config file {str(alias)!r} has an alias (*name), which no flag's "
        "value needs.",
        str(listed): f"its --config file {str(listed)!r} is not a mapping of flags to values.",
    }
    for path, sentence in cases.items():
        code, out, err = run("check", "--fleet", "4xh100-80g", "--", "vllm", "serve",
                             "Qwen/Qwen3-8B", "--config", path)  # fmt: skip
        assert (code, out, err) == (2, "", f"llmfit: the command to check: {sentence}\n"), path


def _docker_words(out: str) -> list[str]:
    (line,) = [x for x in out.splitlines() if x.startswith("docker run")]
    return shlex.split(line)


def _pairs(words: list[str], flag: str) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words) if w == flag]


def test_a_cache_variable_set_in_front_is_where_the_cache_is_mounted(run):
    # LLAMA_CACHE=/models got `-e LLAMA_CACHE=/root/.cache/… -e LLAMA_CACHE=/models` (downloads
    # then went to an unmounted path), and in Kubernetes twice with the command's value dropped.
    command = ["LLAMA_CACHE=/models", "llama-server", "-hf", "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0"]
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "docker", "--", *command)
    assert code == 0, err
    words = _docker_words(out)
    # shlex reads the host side's "${LLAMA_CACHE:-$HOME/.cache/llama.cpp}" as its text.
    assert _pairs(words, "-v")[1] == "${LLAMA_CACHE:-$HOME/.cache/llama.cpp}:/models"
    assert [e for e in _pairs(words, "-e") if e.startswith("LLAMA_CACHE")] == [
        "LLAMA_CACHE=/models"
    ]
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "k8s", "--", *command)
    assert code == 0, err
    container = _container(out)
    assert [e for e in container["env"] if e["name"] == "LLAMA_CACHE"] == [
        {"name": "LLAMA_CACHE", "value": "/models"}
    ]
    assert {"name": "download-cache", "mountPath": "/models"} in container["volumeMounts"]


def test_hf_home_set_in_front_is_where_the_hub_cache_is_mounted(run):
    command = ["HF_HOME=/data/hf", "vllm", "serve", "Qwen/Qwen3-8B"]
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "docker", "--", *command)
    assert code == 0, err
    words = _docker_words(out)
    assert _pairs(words, "-v") == ["${HF_HOME:-$HOME/.cache/huggingface}:/data/hf"]
    assert _pairs(words, "-e") == ["HF_TOKEN", "HF_HOME=/data/hf"]
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "k8s", "--", *command)
    assert code == 0, err
    container = _container(out)
    assert container["volumeMounts"][0] == {"name": "hf-cache", "mountPath": "/data/hf"}
    assert [e["name"] for e in container["env"]].count("HF_HOME") == 1


def test_a_relative_cache_path_has_no_container_launch(run):
    code, out, err = run("check", "--fleet", "1xh100-80g", "--format", "docker", "--",
                         "HF_HOME=data", "vllm", "serve", "Qwen/Qwen3-8B")  # fmt: skip
    assert code == 2 and out == ""
    assert err.startswith(
        "llmfit: HF_HOME=data is not an absolute path, so a container cannot mount the cache "
        "there.\n"
    )


def _fleet(nodes: int, distinct: int) -> str:
    return "".join(
        f'[[node]]\nname = "n{i}"\ngpu = "h100-80g"\ngpus = 8\nfabric = "ib0"\n'
        f"memory_bandwidth_gbs = {3000 + i % distinct}\n"
        for i in range(nodes)
    )


def test_a_fleet_of_ten_thousand_card_figures_is_refused_at_the_limit(run, tmp_path):
    # 1,000 nodes each with its own bandwidth took 2 min 15 s and 746 MB, each planned as a class
    # of its own (issue 33). The 33rd set of figures is refused, on the line that makes it: node
    # 32's table starts on line 6 × 32 + 1 = 193, its memory_bandwidth_gbs 5 lines on.
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(_fleet(10_000, 10_000))
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", str(fleet))
    assert (code, out) == (3, "")
    assert err == (
        f"llmfit: {fleet}:198: node[32].memory_bandwidth_gbs makes 33 different sets of card "
        "figures in the fleet; llmfit plans each apart, at most 32: give cards that are alike "
        "the same figures.\n"
    )


def test_thirty_two_sets_of_card_figures_are_read():
    from llmfit.sources.fleet import parse_fleet

    fleet = parse_fleet(_fleet(64, 32), "f.toml")
    assert len({n.kinds[0].override for n in fleet.nodes}) == 32


def test_a_command_past_the_words_llmfit_reads_is_one_sentence(run):
    # 50,000 repeated words took 54 s to read (argparse's time grows with the square of the
    # flags); past 4,096 words a command is refused at once.
    words = ["vllm", "serve", "Qwen/Qwen3-8B", *["--enforce-eager"] * 49_997]
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", *words)
    assert (code, out, err) == (
        2, "", "llmfit: the command to check has 50,000 words; llmfit reads at most 4,096, more "
        "than any engine's command needs.\n",
    )  # fmt: skip
    code, out, err = run("check", "--fleet", "1xh100-80g", "--", *words[:4096])
    assert code == 0, err


@pytest.mark.parametrize("columns", ["²", "①", "٣٠"])
@pytest.mark.parametrize(
    "args",
    [
        ("Qwen/Qwen3-8B", "--fleet", "1xh100-80g"),
        ("models", "--fleet", "1xh100-80g", "--max-params", "10b"),
        ("check", "--fleet", "1xh100-80g", "--", "vllm", "serve", "Qwen/Qwen3-8B"),
        ("--help",),
    ],
)
def test_a_columns_of_digits_int_refuses_is_no_internal_error(run, monkeypatch, columns, args):
    # "²".isdigit() is true and int("²") refuses it: every command was an internal error (exit
    # 10), in llmfit's width and in rich's. Such a COLUMNS is no width: the default is drawn.
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("LINES", columns)
    code, out, err = run(*args)
    assert code == 0, err
    assert "internal error" not in err


def _too_wide(text: str, width: int) -> list[str]:
    from rich.cells import cell_len

    # A command is printed whole, to copy (never wrapped): every other line within the width.
    return [
        line for line in text.splitlines()
        if cell_len(line) > width and not line.startswith(("vllm ", "llama-server ", "$ "))
    ]  # fmt: skip


def test_a_long_class_label_draws_within_the_width(run, monkeypatch, tmp_path):
    # A label of 124 characters (valid to 128) drew a 172-column fleet table at 80 columns.
    monkeypatch.setenv("COLUMNS", "80")
    fleet = tmp_path / "fleet.toml"
    label = "x" * 120 + "-48g"
    fleet.write_text(f'[[node]]\nname = "n"\ngpu = "{label}"\ngpus = 1\n')
    for args in (("fleet", str(fleet)), ("Qwen/Qwen3-8B", "--fleet", str(fleet))):
        code, out, err = run(*args)
        assert code == 0, err
        assert _too_wide(out, 80) == [], args
    code, out, err = run("fleet", str(fleet))
    # The name cut to its column's share, the header's width kept: "x" × 31 and "…".
    assert "\n" + "x" * 31 + "…        48.0" in out


def test_a_directory_of_wide_characters_draws_within_the_width(run, monkeypatch, tmp_path):
    import shutil

    from tests.conftest import HUB

    # Six repetitions of a directory named in wide characters (two cells each) drew a 98-column
    # line at 80: the wrapping counted characters.
    monkeypatch.setenv("COLUMNS", "80")
    (snapshot,) = (HUB / "models--Qwen--Qwen3-8B" / "snapshots").iterdir()
    folder = tmp_path.joinpath(*["模型目录名字"] * 6)
    folder.mkdir(parents=True)
    for f in snapshot.iterdir():
        shutil.copyfile(f, folder / f.name)
    outs = []
    for extra in ((), ("--explain",)):
        code, out, err = run(str(folder), "--fleet", "1xh100-80g", *extra)
        assert code == 0, err
        assert _too_wide(out, 80) == [], extra
        outs.append(out)
    # The path is printed, wrapped where its cells reach the width.
    assert "模型目录名字" in outs[0]
