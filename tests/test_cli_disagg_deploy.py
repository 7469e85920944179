"""`--option D1 --commands [--format docker|k8s]` (issue 37): a disaggregated option's launch,
read back as its consumers read it: every docker line with shlex, the words after the image
the plan's role command (read by its engine's own parser, llmfit check's), every YAML document
with a YAML 1.2 reader and validated against Kubernetes' strict schema, and the pods' commands
expanded as Kubernetes does and run (with stand-in programs) to see the words they start.

The plans (the bundled example fleet, 20 requests a second of Qwen3-235B-A22B):
- SGLang, --xpyd 2:1 --prefill-tp 2: D1 is 2 prefill workers of 2 H200s and 1 decode worker of
  4, on one node's 8 cards (its KV over NVLink); 15.2 requests a second a unit, so the 20 need 2
  units (tests/test_cli_disagg.py).
- vLLM, --disagg on: D1 is 3 prefill workers of 2 H200s and 1 decode worker of 8 (tp2×dp4), 14
  cards, more than a node: its KV over the ib0 fabric's RDMA (the example fleet says ib0 is
  InfiniBand); 24.6 requests a second, so one unit.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import kubernetes_validate
import pytest

from llmfit.plan.engines import engine
from llmfit.plan.settings import PlanSettings
from tests.conftest import EXAMPLE_FLEET, ROOT
from tests.launch_check import fake_program, k8s_expand, run_argv, yaml12

K8S_VERSION = "1.37"
QWEN = ["Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET), "--rate", "20"]
SGLANG = [*QWEN, "--engine", "sglang", "--xpyd", "2:1", "--prefill-tp", "2"]
# One unit of 3P1D at 10 requests a second (at 20 the load needs two).
VLLM = ["Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET), "--rate", "10", "--disagg", "on",
        "--xpyd", "3:1", "--prefill-tp", "2"]  # fmt: skip
ROUTER_SCRIPT = 'pip install --no-cache-dir --root-user-action=ignore "$0" && exec "$@"'


def _d1_commands(run, args: list[str]) -> list[dict]:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    (d1,) = [d for d in json.loads(out)["disaggregated"] if d["name"] == "D1"]
    return d1["commands"]


def test_shell_is_the_plans_own_launch_of_d1(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, text, _ = run(*SGLANG)
    assert code == 0
    lines = text.splitlines()
    block = lines[
        lines.index("# all on one node of 8 cards or more, each worker on its own cards") :
    ]
    code, out, err = run(*SGLANG, "--option", "D1", "--commands")
    assert code == 0, err
    # The plan's text shows D1's launch; --commands prints it alone, under the units it takes.
    assert out.splitlines() == [
        "# the load named needs 2 such units: this is one, start 1 more on cards of their own",
        *block,
    ]


def _docker_words(line: str, image: str) -> tuple[list[str], list[str]]:
    words = shlex.split(line)
    at = words.index(image)
    return words[:at], words[at + 1 :]


def test_docker_one_run_a_worker_on_its_own_cards_and_the_router(run, tmp_path):
    roles = _d1_commands(run, SGLANG)
    code, out, err = run(*SGLANG, "--option", "D1", "--commands", "--format", "docker")
    assert code == 0, err
    runs = [x for x in out.splitlines() if x.startswith("docker run")]
    assert len(runs) == len(roles) == 4
    comments = [x for x in out.splitlines() if x.startswith("#")]
    assert comments[:2] == [
        "# Qwen/Qwen3-235B-A22B: D1 2P1D, 8 cards, its KV over NVLink",
        "# the load named needs 2 such units: this is one, start 1 more on cards of their own",
    ]
    # The workers' cards are their CUDA_VISIBLE_DEVICES: 2 + 2 for prefill, 4 for decode.
    for line, role, cards in zip(runs, roles, ["0,1", "2,3", "4,5,6,7"], strict=False):
        head, argv = _docker_words(line, "lmsysorg/sglang:v0.5.23")
        assert head[:5] == ["docker", "run", "-d", "--name", f"qwen3-235b-a22b-{role['node']}"]
        assert head[head.index("--gpus") + 1] == f'"device={cards}"'
        assert "--ipc=host" in head and head[head.index("--network") + 1] == "host"
        # HF_TOKEN by name only; the cards are the container's, not a variable.
        assert head[head.index("-e") + 1] == "HF_TOKEN" and "CUDA_VISIBLE_DEVICES" not in line
        # The image has no entrypoint: it is given the whole role command, word for word, which
        # SGLang 0.5.23's own parser reads.
        assert argv == role["argv"]
        request = engine("sglang").read_command(argv, PlanSettings(), {})
        assert request.repo == "Qwen/Qwen3-235B-A22B"
        assert argv[argv.index("--disaggregation-mode") + 1] == role["role"]
    head, rest = _docker_words(runs[3], "python:3.12-slim")
    assert head == ["docker", "run", "-d", "--name", "qwen3-235b-a22b-router", "--network", "host"]
    assert rest[:4] == ["sh", "-c", ROUTER_SCRIPT, "sglang-router==0.3.2"]
    router = roles[3]["argv"]
    assert rest[4:] == router
    # The script installs the pinned router, then runs the router's words as they are.
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "pip")
    fake_program(bin_dir, "python")
    got = run_argv(rest, bin_dir)
    assert got == ["pip", "install", "--no-cache-dir", "--root-user-action=ignore",
                   "sglang-router==0.3.2", *router]  # fmt: skip


def test_docker_across_nodes_carries_rdma(run):
    roles = _d1_commands(run, VLLM)
    code, out, err = run(*VLLM, "--option", "D1", "--commands", "--format", "docker")
    assert code == 0, err
    runs = [x for x in out.splitlines() if x.startswith("docker run")]
    assert len(runs) == 5
    for line, role in zip(runs[:4], roles, strict=False):
        head, argv = _docker_words(line, "vllm/vllm-openai:v0.34.0")
        # A node of its own each, all of its cards: 2 for a prefill worker, 8 for the decode.
        cards = "0,1" if role["role"] == "prefill" else "0,1,2,3,4,5,6,7"
        assert head[head.index("--gpus") + 1] == f'"device={cards}"'
        # ib0 is InfiniBand in the example fleet: the devices, IPC_LOCK, memlock lifted.
        assert head[head.index("--device") + 1] == "/dev/infiniband"
        assert head[head.index("--cap-add") + 1] == "IPC_LOCK"
        env = [head[i + 1] for i, w in enumerate(head) if w == "-e"]
        # (The JSON's env is a mapping with its keys sorted: compared as one.)
        assert env[0] == "HF_TOKEN"
        assert dict(e.split("=", 1) for e in env[1:]) == role["env"]
        # The image's entrypoint is `vllm serve`: the rest of the role command, word for word.
        assert ["vllm", "serve", *argv] == role["argv"]
        engine("vllm").read_command(role["argv"], PlanSettings(), role["env"])
    assert shlex.split(runs[4])[-len(roles[4]["argv"]) :] == roles[4]["argv"]


def _k8s(run, args: list[str]) -> tuple[str, list[dict]]:
    code, out, err = run(*args, "--option", "D1", "--commands", "--format", "k8s")
    assert code == 0, err
    docs = yaml12(out)
    for d in docs:
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    return out, docs


def _pod_env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_k8s_each_role_a_statefulset_its_replicas_its_workers(run, tmp_path):
    text, docs = _k8s(run, VLLM)
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Service", "qwen3-235b-a22b-prefill"),
        ("StatefulSet", "qwen3-235b-a22b-prefill"),
        ("Service", "qwen3-235b-a22b-decode"),
        ("StatefulSet", "qwen3-235b-a22b-decode"),
        ("Deployment", "qwen3-235b-a22b-router"),
        ("Service", "qwen3-235b-a22b"),
    ]
    assert text.splitlines()[:4] == [
        "# Qwen/Qwen3-235B-A22B: D1 3P1D, 14 cards, its KV over the ib0 fabric's RDMA",
        "# prefill: 3 pods of 2 cards (node selector from the card table's product name for "
        "h200-141g)",
        "# decode: 1 pod of 8 cards (node selector from the card table's product name for "
        "h200-141g)",
        "# RDMA for the KV: host network, IPC_LOCK and one rdma/rdma_shared_device_a a pod (the "
        "NVIDIA Network Operator's shared RDMA device; name your cluster's own if it differs)",
    ]
    roles = _d1_commands(run, VLLM)
    urls: list[str] = []
    for sts, cards, replicas, role in ((docs[1], 2, 3, roles[0]), (docs[3], 8, 1, roles[3])):
        spec = sts["spec"]
        assert spec["replicas"] == replicas and spec["serviceName"] == sts["metadata"]["name"]
        pod = spec["template"]["spec"]
        assert pod["hostNetwork"] is True
        (c,) = pod["containers"]
        assert c["resources"]["limits"] == {"nvidia.com/gpu": cards,
                                            "rdma/rdma_shared_device_a": 1}  # fmt: skip
        assert c["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        # The first worker's command: its side channel's host is the pod's own IP, every other
        # variable as the command sets it; HF_TOKEN from the Secret, never a value.
        env = dict(role["env"])
        assert env.pop("VLLM_NIXL_SIDE_CHANNEL_HOST") == role["node"]
        assert _pod_env(c) == env
        by_name = {e["name"]: e for e in c["env"]}
        assert by_name["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == {
            "fieldRef": {"fieldPath": "status.podIP"}
        }
        assert by_name["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "hf-token"
        argv = ["vllm", "serve", *(k8s_expand(a, {}) for a in c["args"])]
        assert argv == role["argv"]
        engine("vllm").read_command(argv, PlanSettings(), _pod_env(c))
        port = c["ports"][0]["containerPort"]
        name = sts["metadata"]["name"]
        urls += [f"http://{name}-{i}.{name}:{port}" for i in range(replicas)]
    # The router: each pod by its own name (pod.service), run as Kubernetes expands it.
    (router,) = docs[4]["spec"]["template"]["spec"]["containers"]
    command = [k8s_expand(w, {}) for w in router["command"]]
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "pip")
    fake_program(bin_dir, "vllm-router")
    got = run_argv(command, bin_dir)
    install = ["pip", "install", "--no-cache-dir", "--root-user-action=ignore",
               "vllm-router==0.1.17"]  # fmt: skip
    assert got[:5] == install
    assert got[5:] == [
        "vllm-router", "--vllm-pd-disaggregation",
        "--prefill", urls[0], "--prefill", urls[1], "--prefill", urls[2], "--decode", urls[3],
        "--policy", "round_robin", "--host", "0.0.0.0", "--port", "8000",
    ]  # fmt: skip
    assert urls[0] == "http://qwen3-235b-a22b-prefill-0.qwen3-235b-a22b-prefill:8100"
    assert docs[5]["spec"]["selector"] == docs[4]["spec"]["selector"]["matchLabels"]


def test_k8s_pins_each_nvlink_unit_to_one_node_behind_a_router_of_its_own(run, tmp_path):
    # 2 units of 2P1D, each on one node's NVLink in the plan: each unit a StatefulSet a role
    # (2 prefill pods, 1 decode pod) whose pods require a node with the unit's other pods on it
    # (the first placed anywhere its node selector allows) and share its IPC namespace, and a
    # router of its own naming its unit's pods alone; the Service in front of every router.
    text, docs = _k8s(run, SGLANG)
    slug = "qwen3-235b-a22b"
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Service", f"{slug}-u1-prefill"), ("StatefulSet", f"{slug}-u1-prefill"),
        ("Service", f"{slug}-u1-decode"), ("StatefulSet", f"{slug}-u1-decode"),
        ("Service", f"{slug}-u2-prefill"), ("StatefulSet", f"{slug}-u2-prefill"),
        ("Service", f"{slug}-u2-decode"), ("StatefulSet", f"{slug}-u2-decode"),
        ("Deployment", f"{slug}-u1-router"), ("Deployment", f"{slug}-u2-router"),
        ("Service", slug),
    ]  # fmt: skip
    assert text.splitlines()[3:5] == [
        f"# the load named needs 2 units of 2P1D: each unit a StatefulSet a role and a router of "
        f"its own ({slug}-u1-prefill, {slug}-u1-decode, {slug}-u1-router, {slug}-u2-…), the "
        f"Service {slug} in front of every router",
        "# the plan moves the KV over NVLink inside one node: each unit's pods are pinned to one "
        "node (pod affinity on kubernetes.io/hostname) and share its IPC namespace (hostIPC), as "
        "--format docker runs them",
    ]
    for unit, (prefill, decode) in ((1, (docs[1], docs[3])), (2, (docs[5], docs[7]))):
        assert (prefill["spec"]["replicas"], decode["spec"]["replicas"]) == (2, 1)
        for sts, role in ((prefill, "prefill"), (decode, "decode")):
            labels = {"app.kubernetes.io/name": slug, "llmfit/role": role,
                      "llmfit/unit": str(unit)}  # fmt: skip
            assert sts["spec"]["selector"]["matchLabels"] == labels
            pod = sts["spec"]["template"]["spec"]
            assert pod["hostIPC"] is True and "hostNetwork" not in pod
            assert pod["affinity"] == {"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": slug,
                                                      "llmfit/unit": str(unit)}},
                    "topologyKey": "kubernetes.io/hostname",
                }],
            }}  # fmt: skip
            # The node selector the aggregated launch gives the card stays beside it.
            assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    (c,) = docs[1]["spec"]["template"]["spec"]["containers"]
    # SGLang's image has no entrypoint: the pod's args are the role's whole command.
    argv = [k8s_expand(w, {}) for w in c["args"]]
    engine("sglang").read_command(argv, PlanSettings(), {})
    assert argv[argv.index("--disaggregation-bootstrap-port") + 1] == "8998"
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "pip")
    fake_program(bin_dir, "python")
    for unit, router in ((1, docs[8]), (2, docs[9])):
        (container,) = router["spec"]["template"]["spec"]["containers"]
        got = run_argv([k8s_expand(w, {}) for w in container["command"]], bin_dir)
        # Its unit's prefill pods with the bootstrap port their command gives, then its decode.
        p = [f"http://{slug}-u{unit}-prefill-{i}.{slug}-u{unit}-prefill:8100" for i in range(2)]
        d = f"http://{slug}-u{unit}-decode-0.{slug}-u{unit}-decode:8200"
        assert got[5:] == [
            "python", "-m", "sglang_router.launch_router", "--pd-disaggregation",
            *(w for u in p for w in ("--prefill", u, "8998")), "--decode", d,
            "--host", "0.0.0.0", "--port", "8000",
        ]  # fmt: skip
        assert router["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/name": slug, "llmfit/role": "router", "llmfit/unit": str(unit)
        }  # fmt: skip
    # The Service selects every unit's router.
    assert docs[10]["spec"]["selector"] == {"app.kubernetes.io/name": slug,
                                            "llmfit/role": "router"}  # fmt: skip


def test_no_credential_is_written(run, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue123")
    for fmt in ("shell", "docker", "k8s"):
        code, out, _ = run(*VLLM, "--option", "D1", "--commands", "--format", fmt)
        assert code == 0 and "hf_secretvalue123" not in out


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (["--option", "D1"], "--option D1 picks a disaggregated option's launch, which --commands "
         "prints (with --format shell, docker, k8s, llm-d, kserve or dynamo); the plan's text "
         "shows D1 in full and --json every one."),
        (["--option", "D4", "--commands"], "--option D4: the plan lists only 3 (D1 to D3)."),
        (["--option", "D1", "--commands", "--disagg", "off"], "--option D1: the plan lists no "
         "disaggregated option (--disagg on lists those its engines launch, winning or not)."),
        (["--option", "x2", "--commands"], "--option 'x2' is neither an option's number (4) nor "
         "a disaggregated option's name (D1)."),
    ],
)  # fmt: skip
def test_a_bad_d_option_is_one_sentence(run, extra, why):
    args = QWEN if "off" in extra else VLLM
    code, out, err = run(*args, *extra)
    assert code == 2 and out == ""
    assert why in " ".join(err.split())


def test_the_docs_example_is_what_it_prints(run, monkeypatch):
    # docs/deploy.md's disaggregated example: each line it shows (other than an elided "…")
    # is a line of the real output, in order.
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n\$ (llmfit [^\n]*--option D1[^\n]*)\n(.*?)```", text, re.S)
    assert [b[0].rsplit(" ", 1)[1] for b in blocks] == ["docker", "k8s", "dynamo"]
    monkeypatch.chdir(ROOT)
    for command, shown in blocks:
        code, out, _ = run(*shlex.split(command)[1:])
        assert code == 0
        real = out.splitlines()
        at = 0
        for line in shown.splitlines():
            if line.strip() == "…":
                continue
            at = real.index(line, at) + 1


def test_the_fleet_file_says_ib0_is_infiniband():
    # What the RDMA above rests on.
    assert 'fabric_kind = "infiniband"' in Path(EXAMPLE_FLEET).read_text()


@pytest.mark.parametrize("fmt", ["docker", "k8s"])
def test_a_local_directory_has_no_container_launch_of_d1(run, fmt):
    from tests.conftest import HUB

    snap = next((HUB / "models--Qwen--Qwen3-8B" / "snapshots").iterdir())
    code, out, err = run(str(snap), "--fleet", "8xh100-80g", "--rate", "20", "--disagg", "on",
                         "--option", "D1", "--commands", "--format", fmt)  # fmt: skip
    assert code == 2 and out == ""
    assert "is a directory on this machine, which a container on another node cannot see" in err
