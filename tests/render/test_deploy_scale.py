"""Launches at the plan's scale (issue 34 item 1): the replicas a named load needs are the
replicas the launch starts — the Deployment's and LeaderWorkerSet's `replicas`, N `docker run`
servers on their own cards and ports with the front that gives them one address — and
`--replicas N` overrides. Each launch is read back as its consumer reads it (shlex; YAML 1.2) and
validated against Kubernetes' strict schemas and LeaderWorkerSet's CRD schema."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest

from tests.launch_check import yaml12
from tests.render.test_deploy import validate

# A fleet whose every pool is priced (issue 34's platform engineer): four H100 nodes and two
# H200 nodes of eight cards, on one InfiniBand fabric.
PRICED = """
[[pool]]
name = "h100"
gpu = "h100-80g"
gpus = 8
count = 4
fabric = "ib0"
price_per_gpu_hour = 2.49

[[pool]]
name = "h200"
gpu = "h200-141g"
gpus = 8
count = 2
fabric = "ib0"
price_per_gpu_hour = 3.59
"""
LOAD = ("--input-len", "2000", "--output-len", "500", "--rate", "20", "--ttft", "2", "--tpot", "50")
VLLM = "vllm/vllm-openai:"  # at the release the plan models


@pytest.fixture
def priced(tmp_path: Path) -> str:
    path = tmp_path / "priced.toml"
    path.write_text(PRICED)
    return str(path)


def best(run, repo: str, fleet: str, *more: str) -> dict:
    code, out, err = run(repo, "--fleet", fleet, *LOAD, *more, "--json")
    assert code == 0, err
    return json.loads(out)["options"][0]


def needed(o: dict, rate: float = 20) -> int:
    # The replicas `rate` requests a second need: it over what one replica serves within the
    # targets, rounded up (plan/load.py serve; ROUNDING lets a load within 1 % of a whole number
    # of replicas be that many).
    return math.ceil(rate / o["serving"]["capacity_rate"] * (1 - 0.01))


# The priced fleet's H100 nodes alone: where DeepSeek-V3 runs as groups of two nodes.
H100_ONLY = "[[pool]]" + PRICED.split("[[pool]]")[1]


def test_the_deployment_runs_the_replicas_the_load_needs(run, priced):
    repo = "meta-llama/Meta-Llama-3.1-70B"
    o = best(run, repo, priced)
    n = needed(o)
    assert n > 1 and o["serving"]["replicas"] == n == o["launch_replicas"]
    assert all(c["count"] == n for c in o["commands"])
    code, out, err = run(repo, "--fleet", priced, *LOAD, "--commands", "--format", "k8s")
    assert code == 0, err
    deployment, service = yaml12(out)
    validate(deployment)
    validate(service)
    assert deployment["spec"]["replicas"] == n
    # The load each carries, said over the YAML: 20 requests a second over n replicas.
    assert f"for 20 requests a second: each carries {20 / n:.3g} requests a second" in out


def test_replicas_overrides_what_the_load_needs(run, priced):
    repo = "meta-llama/Meta-Llama-3.1-70B"
    code, out, err = run(
        repo, "--fleet", priced, *LOAD, "--commands", "--format", "k8s", "--replicas", "3"
    )
    assert code == 0, err
    deployment, _ = yaml12(out)
    validate(deployment)
    assert deployment["spec"]["replicas"] == 3
    # 20 requests a second over 3 replicas: 6.67 each, and what the plan sized is said.
    assert "each carries 6.67 requests a second" in out and "--replicas 3" in out
    o = best(run, repo, priced, "--replicas", "3")
    assert o["launch_replicas"] == 3 and o["commands"][0]["count"] == 3


def test_docker_starts_n_servers_on_their_own_cards_and_ports_behind_one_front(run, priced):
    repo = "meta-llama/Meta-Llama-3.1-70B"
    # One card a replica (--gpus 1), 12 requests a second: the replicas fit one H200 node.
    load = (*LOAD[:5], "12", *LOAD[6:], "--gpus", "1")
    code, out, err = run(repo, "--fleet", priced, *load, "--json")
    assert code == 0, err
    o = json.loads(out)["options"][0]
    n = needed(o, 12)
    assert (o["gpu_class"], o["gpus"]) == ("h200-141g", 1) and 1 < n <= 8
    code, out, err = run(repo, "--fleet", priced, *load, "--commands", "--format", "docker")
    assert code == 0, err
    lines = [line for line in out.splitlines() if not line.startswith("#")]
    servers, (front,) = lines[:-1], lines[-1:]
    assert len(servers) == n
    engine_args = o["commands"][0]["argv"][2:]  # what follows `vllm serve`
    for i, line in enumerate(servers):
        words = shlex.split(line)
        # One card each, the first node of H200s' cards 0, 1, …; host ports 8001, 8002, … (the
        # front keeps vLLM's 8000); the engine's words as the plan wrote them.
        assert words[words.index("--gpus") + 1] == f'"device={i}"'
        assert words[words.index("-p") + 1] == f"{8001 + i}:8000"
        image = next(i for i, w in enumerate(words) if w.startswith(VLLM))
        assert words[image + 1 :] == engine_args
    assert f"# replica 1 of {n} on h200-1, card 0" in out
    words = shlex.split(front)
    assert words[:8] == ["docker", "run", "-d", "--name", "meta-llama-3-1-70b-front", "--network",
                         "host", "nginx:1.27-alpine"]  # fmt: skip
    conf = words[words.index("sh", 9) + 1 :]
    assert [w.strip() for w in conf if w.startswith("  server ")] == [
        f"server h200-1:{8001 + i};" for i in range(n)
    ]
    assert "  listen 8000;" in conf


def test_a_leaderworkerset_runs_a_group_a_replica(run, tmp_path):
    repo = "deepseek-ai/DeepSeek-V3"
    priced = str(tmp_path / "h100.toml")
    Path(priced).write_text(H100_ONLY)
    o = best(run, repo, priced)
    n = needed(o)
    assert o["nodes"] == 2 and n > 1
    code, out, err = run(repo, "--fleet", priced, *LOAD, "--commands", "--format", "k8s")
    assert code == 0, err
    lws, service = yaml12(out)
    validate(lws)
    validate(service)
    assert lws["kind"] == "LeaderWorkerSet"
    assert (lws["spec"]["replicas"], lws["spec"]["leaderWorkerTemplate"]["size"]) == (n, 2)
    # Four H100 nodes hold two groups of two: the launch says so rather than start fewer.
    assert f"the fleet's cards run only {o['serving']['fleet_replicas']}" in out


def test_docker_groups_of_nodes_each_serve_on_their_own_port(run, tmp_path):
    repo = "deepseek-ai/DeepSeek-V3"
    priced = str(tmp_path / "h100.toml")
    Path(priced).write_text(H100_ONLY)
    # Two pipeline stages, a node each (--pp 2): each group's head is a node-rank-0 server.
    code, out, err = run(
        repo, "--fleet", priced, *LOAD, "--pp", "2", "--commands", "--format", "docker",
        "--replicas", "2",
    )  # fmt: skip
    assert code == 0, err
    assert "# replica 1 of 2 on h100-1, h100-2" in out
    assert "# replica 2 of 2 on h100-3, h100-4" in out
    heads = [shlex.split(line) for line in out.splitlines() if "--node-rank 0" in line]
    # On the nodes' own network each head listens on its own port, past the front's 8000.
    assert [h[h.index("--port") + 1] for h in heads] == ["8001", "8002"]
    front = shlex.split(out.splitlines()[-1])
    assert "  server h100-1:8001;" in front and "  server h100-3:8002;" in front


def test_one_replica_launches_as_before(run, priced):
    # No load named: one copy, no front, no replica comments.
    code, out, err = run(
        "Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--commands", "--format", "docker"
    )
    assert code == 0, err
    assert out.count("docker run") == 1 and "nginx" not in out and "replica" not in out


def test_a_burst_launch_says_the_share_of_the_burst_each_copy_carries(run):
    # --requests 100 on the example fleet: Qwen3-235B-A22B's best is 4 H200s at tp4+ep, of which
    # the plan sizes 3 copies for the burst (its JSON's serving.replicas), so each carries
    # 100 / 3 = 33.3 of it. The comment over the launch formatted the load as a rate, which a
    # burst has none of (a TypeError, until this test).
    code, out, err = run(
        "Qwen/Qwen3-235B-A22B", "--fleet", "examples/fleet.toml", "--requests", "100", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["options"][0]["serving"]["replicas"] == 3
    code, out, err = run(
        "Qwen/Qwen3-235B-A22B", "--fleet", "examples/fleet.toml", "--requests", "100"
    )
    assert code == 0, err
    assert "for 100 requests sent at once: each carries 33.3 of them" in out
