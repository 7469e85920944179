"""SGLang's options in containers (`--format docker|k8s`): its official image, which has no
ENTRYPOINT and so is given the whole `sglang serve …` command; checked against the plan, and the
YAML validated as tests/render/test_deploy.py validates every engine's."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from llmfit.errors import UsageError
from llmfit.render.commands import commands
from llmfit.render.deploy import docker_lines
from tests.render.test_deploy import k8s, only_container, plan
from tests.render.test_sglang_argv import parse

IMAGE = "lmsysorg/sglang:v0.5.23"


@pytest.fixture(autouse=True)
def _cache(hub: Path) -> None:
    """Every plan here is of the bundled cache, offline."""


def test_one_node_runs_the_whole_command_in_sglangs_image():
    advice = plan("Qwen/Qwen3-8B", "8xh100-80g", engines=("sglang",), precision="stored")
    o = advice.plan.options[0]
    (line,) = docker_lines(advice, o)
    words = shlex.split(line)
    at = words.index(IMAGE)
    # What follows the image is the plan's command, word for word (the image has no ENTRYPOINT).
    (cmd,) = commands(o, "Qwen/Qwen3-8B", None)
    assert words[at + 1 :] == list(cmd.argv)
    assert "--entrypoint" not in words
    assert {"--ipc=host", "-p"} <= set(words) and words[words.index("-p") + 1] == "30000:30000"
    assert parse(words[at + 3 :]).tp_size == 1
    _, docs = k8s(advice)
    c = only_container(docs[0]["spec"]["template"]["spec"])
    assert (c["image"], c["args"][:2], "command" in c) == (IMAGE, ["sglang", "serve"], False)
    assert c["ports"] == [{"name": "http", "containerPort": 30000}]
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"


def test_nodes_of_a_leaderworkerset_each_run_their_rank():
    # Three nodes of four cards (TP 4 × PP 3): two workers, whose ranks the template writes.
    advice = plan(
        "deepseek-ai/DeepSeek-V3", "3x4xh100-80g@ib0", engines=("sglang",), precision="stored",
        context=8192,
    )  # fmt: skip
    assert (advice.plan.options[0].nodes, advice.plan.options[0].pp) == (3, 3)
    _, docs = k8s(advice)
    lws = next(d for d in docs if d["kind"] == "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    leader = only_container(lwt["leaderTemplate"]["spec"])["args"]
    worker = only_container(lwt["workerTemplate"]["spec"])["args"]
    assert leader[leader.index("--node-rank") + 1] == "0"
    assert worker[worker.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert worker[worker.index("--dist-init-addr") + 1] == "$(LWS_LEADER_ADDRESS):50000"


def test_the_ray_form_has_no_container_launch():
    advice = plan(
        "deepseek-ai/DeepSeek-V3", "2x8xh100-80g@ib0", engines=("sglang",), precision="stored",
        context=8192,
    )  # fmt: skip
    with pytest.raises(UsageError, match="ray is not in lmsysorg/sglang:v0.5.23"):
        docker_lines(advice, advice.plan.options[0], ray=True)
