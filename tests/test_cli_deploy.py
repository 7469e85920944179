"""`--format` on `llmfit plan` and `llmfit check` (issue 19): what a user pipes to sh or kubectl."""

from __future__ import annotations

import shlex

import yaml


def test_commands_format_k8s_is_yaml_alone(run):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--commands", "--format", "k8s")
    assert code == 0, err
    # Nothing but YAML (its comments included): `kubectl apply -f -` reads it as it is.
    kinds = [d["kind"] for d in yaml.safe_load_all(out) if d]
    assert kinds == ["Deployment", "Service"]


def test_commands_format_docker_is_one_line_a_container(run):
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--commands", "--format", "docker"
    )
    assert code == 0, err
    (line,) = out.splitlines()
    assert shlex.split(line)[:2] == ["docker", "run"]


def test_the_plans_text_shows_the_best_options_launch_in_the_format(run):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--format", "docker")
    assert code == 0
    assert "Best: 1 × h100-80g" in out
    assert out.rstrip().splitlines()[-1].startswith("docker run -d --name qwen3-8b --gpus ")


def test_check_format_k8s_is_the_verdict_as_comments_then_the_yaml(run):
    code, out, err = run(
        "check", "--fleet", "2xh100-80g", "--format", "k8s", "--",
        "vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2",
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("# $ vllm serve Qwen/Qwen3-8B -tp 2\n# fits: 2 cards of h100-80g")
    docs = [d for d in yaml.safe_load_all(out) if d]
    container = docs[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 2}


def test_a_local_directory_has_no_container_launch(run, tmp_path):
    from tests.conftest import HUB

    snap = next((HUB / "models--Qwen--Qwen3-8B" / "snapshots").iterdir())
    code, out, err = run(str(snap), "--fleet", "1xh100-80g", "--commands", "--format", "docker")
    assert code == 2
    assert "is a directory on this machine, which a container on another node cannot see" in err
