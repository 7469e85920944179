"""`--format docker|k8s` (issue 19): the launch of a plan in containers, checked against the plan.

The YAML is validated, without the network, against Kubernetes' own strict schemas (Deployment,
Service, PodTemplate, shipped by the kubernetes-validate package) and LeaderWorkerSet's published
CRD schema (fixtures/k8s/, with jsonschema); each pod template of a LeaderWorkerSet is validated as
a Kubernetes PodTemplate too. Every docker line is parsed back with shlex: what follows the image
is the plan's engine arguments, word for word.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from llmfit.advise import advise
from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.planner import PlanSettings
from llmfit.plan.settings import Pins
from llmfit.render.commands import commands
from llmfit.render.deploy import docker_lines, render_docker, render_k8s
from llmfit.sources.fleet import resolve_fleet
from tests.conftest import EXAMPLE_FLEET, FIXTURES

K8S_VERSION = "1.37"
LWS_CRD = FIXTURES / "k8s" / "leaderworkerset-crd-v1.yaml"
CACHE_MOUNT = '"${HF_HOME:-$HOME/.cache/huggingface}":/root/.cache/huggingface'


def plan(repo: str, fleet: str, **settings) -> Advice:
    # The fewest cards first (--rank cards): the launches here are of the narrowest layout.
    settings.setdefault("rank", "cards")
    return advise(repo, resolve_fleet(fleet), PlanSettings(**settings), offline=True)


@pytest.fixture(autouse=True)
def _cache(hub: Path) -> None:
    """Every plan here is of the bundled cache, offline."""


def lws_schema() -> dict:
    crd = yaml.safe_load(LWS_CRD.read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def validate(doc: dict) -> None:
    """Kubernetes' strict schema for a built-in kind; LeaderWorkerSet's CRD schema for an LWS,
    and Kubernetes' strict PodTemplate schema for each of its pod templates."""
    if doc["kind"] != "LeaderWorkerSet":
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        return
    jsonschema.Draft202012Validator(lws_schema()).validate(doc)
    lwt = doc["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": f"{doc['metadata']['name']}-{key.lower()}"},
            "template": lwt[key],
        }
        kubernetes_validate.validate(template, K8S_VERSION, strict=True)


def k8s(advice: Advice, option: int = 0, ray: bool = False) -> tuple[str, list[dict]]:
    text = render_k8s(advice, advice.plan.options[option], ray)
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:
        validate(d)
    return text, docs


def only_container(pod_spec: dict) -> dict:
    (c,) = pod_spec["containers"]
    return c


def test_the_validators_refuse_what_kubernetes_refuses():
    # The checks below mean something only if a wrong object fails them.
    good = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"ports": [{"port": 80}]},
    }
    validate(good)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate({**good, "spec": {"ports": [{"port": "eighty"}]}})
    with pytest.raises(kubernetes_validate.ValidationError):  # strict: no unknown fields
        validate({**good, "spec": {"portz": []}})
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet"}
    with pytest.raises(jsonschema.ValidationError):  # leaderWorkerTemplate is required
        jsonschema.Draft202012Validator(lws_schema()).validate({**lws, "spec": {}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(lws_schema()).validate(
            {**lws, "spec": {"leaderWorkerTemplate": {"size": "2", "workerTemplate": {}}}}
        )


# -- one node ----------------------------------------------------------------------------------


def test_single_node_vllm_is_a_deployment_of_one_pod_with_the_plans_cards_and_command():
    advice = plan("Qwen/Qwen3-8B", "1xh100-80g")
    o = advice.plan.options[0]
    assert (o.gpus, o.layout.replicas) == (1, 1)
    (cmd,) = commands(o, "Qwen/Qwen3-8B")
    text, (deployment, service) = k8s(advice)
    assert deployment["kind"] == "Deployment" and service["kind"] == "Service"
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    # A rolling update would need a second card for the new pod while the old one runs.
    assert spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    c = only_container(pod)
    assert c["image"] == "vllm/vllm-openai:v0.34.0"
    # The image's ENTRYPOINT is `vllm serve`: the pod is given the rest, word for word.
    assert c["args"] == list(cmd.argv[2:])
    # One card: its card, 2 + 2 × 1 cores and the 8 GiB every GPU pod asks for beyond the plan's
    # host RAM (none here); CPU and memory are requests only (issue 27, item 8).
    assert c["resources"] == {
        "limits": {"nvidia.com/gpu": 1},
        "requests": {"nvidia.com/gpu": 1, "cpu": "4", "memory": "8Gi"},
    }
    assert c["env"] == [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}},
        }
    ]
    assert c["ports"] == [{"name": "http", "containerPort": 8000}]
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert c["volumeMounts"] == [
        {"name": "hf-cache", "mountPath": "/root/.cache/huggingface"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    assert pod["volumes"] == [
        {
            "name": "hf-cache",
            "hostPath": {"path": "/var/cache/huggingface", "type": "DirectoryOrCreate"},
        },
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "15Gi"}},
    ]
    # An inline fleet has no labels: the selector is the card table's product name, as GPU
    # Feature Discovery labels an H100 SXM.
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert "card table's product name for h100-80g" in text
    assert service["spec"] == {
        "selector": {"app.kubernetes.io/name": "qwen3-8b"},
        "ports": [{"name": "http", "port": 8000, "targetPort": "http"}],
    }
    assert text.startswith("# Qwen/Qwen3-8B: 1 × h100-80g")


def test_vllm_data_parallel_ranks_are_one_pod_holding_every_card():
    # vLLM's --data-parallel-size 8 is one process whose API server balances its eight ranks:
    # one pod with the eight cards, not eight pods (which would be eight servers, not the plan).
    advice = plan("Qwen/Qwen3-8B", "8xh100-80g", pins=Pins(dp=8))
    o = advice.plan.options[0]
    assert (o.dp, o.gpus) == (8, 8)
    (cmd,) = commands(o, "Qwen/Qwen3-8B")
    _, (deployment, _) = k8s(advice)
    assert deployment["spec"]["replicas"] == 1
    c = only_container(deployment["spec"]["template"]["spec"])
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert c["args"] == list(cmd.argv[2:])
    assert c["args"][c["args"].index("--data-parallel-size") + 1] == "8"


def test_llamacpp_replicas_are_the_deployments_replicas_each_on_its_own_card():
    # Four llama-server replicas of one card each on a 4-card node: four pods of one card; a
    # pod's card is its own (the device plugin's), so no CUDA_VISIBLE_DEVICES, and every pod
    # listens on the first replica's port.
    advice = plan("llmfit-fixtures/Tiny-Llama-GGUF", "4xrtx4090-24g", precision="stored")
    i, o = next((i, o) for i, o in enumerate(advice.plan.options) if o.layout.replicas == 4)
    assert o.artifact.path  # on this machine's disk: a container names it by its Hub id
    first = commands(o, advice.repo.id)[0]
    assert first.env == (("CUDA_VISIBLE_DEVICES", "0"),)
    _, (deployment, service) = k8s(advice, i)
    assert deployment["spec"]["replicas"] == 4
    pod = deployment["spec"]["template"]["spec"]
    c = only_container(pod)
    assert c["image"] == "ghcr.io/ggml-org/llama.cpp:server-cuda"
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert c["args"][:2] == ["-hf", f"llmfit-fixtures/Tiny-Llama-GGUF:{o.artifact.quant}"]
    assert c["args"][2:] == [a for a in first.argv[3:]]  # after -m PATH: every other word
    # llama-server -hf downloads into LLAMA_CACHE, not the Hugging Face cache: a node's
    # /var/cache/llama.cpp is mounted there, so a restart downloads nothing (issue 27, item 8).
    assert c["env"][1:] == [{"name": "LLAMA_CACHE", "value": "/root/.cache/llama.cpp"}]
    assert c["volumeMounts"] == [
        {"name": "hf-cache", "mountPath": "/root/.cache/huggingface"},
        {"name": "download-cache", "mountPath": "/root/.cache/llama.cpp"},
    ]
    assert c["ports"] == [{"name": "http", "containerPort": 8080}]
    # llama-server shares no memory between processes: no /dev/shm volume.
    assert [v["name"] for v in pod["volumes"]] == ["hf-cache", "download-cache"]
    assert pod["volumes"][1]["hostPath"] == {
        "path": "/var/cache/llama.cpp",
        "type": "DirectoryOrCreate",
    }
    assert service["spec"]["ports"][0]["port"] == 8080
    # GPU Feature Discovery's label is NVML's name with dashes: "NVIDIA GeForce RTX 4090".
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090"}


def test_a_class_with_no_product_name_has_no_selector_and_the_yaml_says_why():
    advice = plan("Qwen/Qwen3-8B", "1xmygpu-96g")
    text, (deployment, _) = k8s(advice)
    assert "nodeSelector" not in deployment["spec"]["template"]["spec"]
    assert "# no node selector: the fleet has no nvidia.com/gpu.product label for mygpu-96g" in text


# -- several nodes -------------------------------------------------------------------------------


def test_two_node_pipeline_is_a_leaderworkerset_whose_templates_run_the_nnodes_commands():
    advice = plan(
        "meta-llama/Meta-Llama-3.1-70B", "2x2xh100-80g@ib0", pins=Pins(pp=2), precision="stored"
    )
    o = advice.plan.options[0]
    assert (o.nodes, o.tp, o.pp, o.gpus_per_node) == (2, 2, 2, 2)
    head, worker = commands(o, advice.repo.id)
    _, (lws, service) = k8s(advice)
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    assert lwt["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader = only_container(lwt["leaderTemplate"]["spec"])
    work = only_container(lwt["workerTemplate"]["spec"])
    # The plan's commands, the head's address the leader pod's: LWS_LEADER_ADDRESS.
    assert leader["args"] == [
        "$(LWS_LEADER_ADDRESS)" if a == "h100-80g-1" else a for a in head.argv[2:]
    ]
    assert work["args"] == [
        "$(LWS_LEADER_ADDRESS)" if a == "h100-80g-1" else a for a in worker.argv[2:]
    ]
    assert work["args"][-5:] == [
        "--node-rank",
        "1",
        "--master-addr",
        "$(LWS_LEADER_ADDRESS)",
        "--headless",
    ]
    for c, spec in ((leader, lwt["leaderTemplate"]["spec"]), (work, lwt["workerTemplate"]["spec"])):
        # ib0 is InfiniBand: one shared RDMA device, IPC_LOCK and the host's network, so that
        # NCCL uses the fabric rather than TCP (issue 27, item 8).
        assert c["resources"] == {
            "limits": {"nvidia.com/gpu": 2, "rdma/rdma_shared_device_a": 1},
            "requests": {
                "nvidia.com/gpu": 2,
                "rdma/rdma_shared_device_a": 1,
                "cpu": "6",
                "memory": "8Gi",
            },
        }
        assert c["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert (spec["hostNetwork"], spec["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
        assert [m["mountPath"] for m in c["volumeMounts"]] == [
            "/root/.cache/huggingface",
            "/dev/shm",
        ]
    # Only the leader serves, and only it is probed; the Service selects it.
    assert "readinessProbe" in leader and "readinessProbe" not in work
    assert service["spec"]["selector"] == {
        "app.kubernetes.io/name": "meta-llama-3-1-70b",
        "llmfit/role": "leader",
    }
    assert lwt["leaderTemplate"]["metadata"]["labels"]["llmfit/role"] == "leader"


def test_two_node_ray_form_starts_the_cluster_waits_for_it_then_serves():
    advice = plan(
        "meta-llama/Meta-Llama-3.1-70B", "2x2xh100-80g@ib0", pins=Pins(pp=2), precision="stored"
    )
    _, (lws, _) = k8s(advice, ray=True)
    lwt = lws["spec"]["leaderWorkerTemplate"]
    leader = only_container(lwt["leaderTemplate"]["spec"])
    work = only_container(lwt["workerTemplate"]["spec"])
    assert leader["command"][:2] == ["/bin/sh", "-c"]
    # The script is llmfit's own text (its `$` doubled for Kubernetes); the serve's words are
    # its arguments, run by `exec "$@"`, never pasted into it (issue 24).
    start, wait, serve = leader["command"][2].split(" && ")
    assert start == "ray start --head --port=6379"
    assert wait.startswith("until python3 -c ") and "< 2)'; do sleep 5; done" in wait
    assert serve == 'exec "$$@"'
    assert leader["command"][3:7] == ["sh", "vllm", "serve", "meta-llama/Meta-Llama-3.1-70B"]
    assert leader["command"][-2:] == ["--distributed-executor-backend", "ray"]
    # A worker's container is its Ray node: `ray start` kept in the foreground.
    assert work["command"] == ["ray", "start", "--address=$(LWS_LEADER_ADDRESS):6379", "--block"]


def test_data_parallel_across_nodes_numbers_the_workers_ranks_from_lws_worker_index():
    # Three nodes: the workers' first ranks (4, 8) are written from LWS_WORKER_INDEX by the shell.
    advice = plan("deepseek-ai/DeepSeek-V3", "3x4xh200-141g@ib0", context=8192, pins=Pins(dp=12))
    i = next(i for i, o in enumerate(advice.plan.options) if o.nodes == 3 and o.dp == 12)
    _, (lws, _) = k8s(advice, i)
    work = only_container(lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"])
    assert work["command"][:2] == ["/bin/sh", "-c"]
    words = work["command"][4:]
    at = words.index("--data-parallel-start-rank") + 1
    # The rank is the script's argument at that position, worked out before the exec; the
    # script holds no word of the command.
    assert work["command"][2] == (
        'i=0; for a in "$$@"; do i=$$((i + 1)); shift; case $$i in '
        f"{at + 1}) a=$$(( LWS_WORKER_INDEX * 4 + 0 )) ;; esac; "
        'set -- "$$@" "$$a"; done; exec "$$@"'
    )
    assert words[at] == "0"


def test_the_fleets_labels_are_the_node_selector(tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        '[[node]]\nname = "gpu-a"\ngpu = "h100-80g"\ngpus = 8\n'
        'labels = { "nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3-custom" }\n'
    )
    advice = plan("Qwen/Qwen3-8B", str(fleet))
    text, (deployment, _) = k8s(advice)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-custom"}
    assert "# node selector from the fleet's labels" in text


# -- docker --------------------------------------------------------------------------------------


def test_docker_line_carries_exactly_the_plans_engine_arguments():
    advice = plan("Qwen/Qwen3-8B", "2xh100-80g", pins=Pins(tp=2))
    o = advice.plan.options[0]
    (cmd,) = commands(o, "Qwen/Qwen3-8B")
    (line,) = docker_lines(advice, o)
    words = shlex.split(line)
    image = words.index("vllm/vllm-openai:v0.34.0")
    assert words[image + 1 :] == list(cmd.argv[2:])
    assert words[:image] == [
        "docker", "run", "-d", "--name", "qwen3-8b",
        "--gpus", '"device=0,1"',  # the docker CLI's own quoting of a list of cards
        "--ipc=host", "-p", "8000:8000",
        "-v", "${HF_HOME:-$HOME/.cache/huggingface}:/root/.cache/huggingface",
        "-e", "HF_TOKEN",  # the name only: docker passes the variable's value from the shell
    ]  # fmt: skip
    # The cache is the user's, wherever HF_HOME puts it: the shell expands it, unquoted.
    assert CACHE_MOUNT in line


def test_docker_env_of_a_command_is_passed_and_a_long_context_keeps_its_variable():
    # Past Llama 3.1's 131,072, which its card documents no way beyond (Qwen3-8B's YaRN needs no
    # variable: issue 27).
    advice = plan("meta-llama/Llama-3.1-8B-Instruct", "1xh100-80g", context=262144)
    o = advice.plan.options[0]
    (cmd,) = commands(o, "meta-llama/Llama-3.1-8B-Instruct")
    assert cmd.env == (("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"),)
    (line,) = docker_lines(advice, o)
    words = shlex.split(line)
    assert words[words.index("HF_TOKEN") + 1 : words.index("HF_TOKEN") + 3] == [
        "-e",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
    ]
    assert words[words.index("vllm/vllm-openai:v0.34.0") + 1 :] == list(cmd.argv[2:])


def test_docker_multi_node_lines_run_on_each_node_with_the_hosts_network():
    advice = plan(
        "meta-llama/Meta-Llama-3.1-70B", "2x2xh100-80g@ib0", pins=Pins(pp=2), precision="stored"
    )
    o = advice.plan.options[0]
    head, worker = commands(o, advice.repo.id)
    lines = docker_lines(advice, o)
    assert lines[0] == "# head on h100-80g-1" and lines[2] == "# worker on h100-80g-2"
    for line, cmd in ((lines[1], head), (lines[3], worker)):
        words = shlex.split(line)
        assert words[words.index("vllm/vllm-openai:v0.34.0") + 1 :] == list(cmd.argv[2:])
        assert ["--network", "host"] == words[
            words.index("--network") : words.index("--network") + 2
        ]
        assert "-p" not in words
        assert words[words.index("--gpus") + 1] == '"device=0,1"'


def test_docker_ray_form_runs_ray_in_containers_and_serves_in_the_heads():
    advice = plan(
        "meta-llama/Meta-Llama-3.1-70B", "2x2xh100-80g@ib0", pins=Pins(pp=2), precision="stored"
    )
    o = advice.plan.options[0]
    cmds = commands(o, advice.repo.id, ray=True)
    lines = [line for line in docker_lines(advice, o, ray=True) if not line.startswith("#")]
    head, worker, serve = (shlex.split(line) for line in lines)
    image = "vllm/vllm-openai:v0.34.0"
    assert head[head.index("--entrypoint") + 1] == "ray"
    assert head[head.index(image) + 1 :] == ["start", "--head", "--port=6379", "--block"]
    assert worker[worker.index(image) + 1 :] == [*cmds[1].argv[1:], "--block"]
    # The serve runs beside Ray's head, in its container.
    assert serve[:3] == ["docker", "exec", "meta-llama-3-1-70b"]
    assert serve[3:] == list(cmds[2].argv)


def test_docker_llamacpp_replicas_each_get_their_cards_and_port():
    advice = plan("llmfit-fixtures/Tiny-Llama-GGUF", "4xrtx4090-24g", precision="stored")
    o = next(o for o in advice.plan.options if o.layout.replicas == 4)
    cmds = commands(o, advice.repo.id)
    lines = docker_lines(advice, o)
    # Four servers, then the front that gives them one address (issue 34): llama-server's own
    # port 8080 is the front's; each server is published on its own port past it.
    assert len(lines) == 6 and lines[4].startswith("# the front: one address for the 4 servers")
    for n, (line, cmd) in enumerate(zip(lines[:4], cmds, strict=True)):
        words = shlex.split(line)
        assert words[words.index("--name") + 1] == f"tiny-llama-gguf-{n + 1}"
        assert words[words.index("--gpus") + 1] == f'"device={n}"'
        assert words[words.index("-p") + 1] == f"{8081 + n}:{8080 + n}"
        assert "CUDA_VISIBLE_DEVICES" not in line  # the container's one card is its card 0
        rest = words[words.index("ghcr.io/ggml-org/llama.cpp:server-cuda") + 1 :]
        assert rest[:2] == ["-hf", f"llmfit-fixtures/Tiny-Llama-GGUF:{o.artifact.quant}"]
        assert rest[2:] == list(cmd.argv[3:])
    front = shlex.split(lines[5])
    assert [w for w in front if w.startswith("  server ")] == [
        f"  server 127.0.0.1:{8081 + n};" for n in range(4)
    ]


def test_a_cpu_option_runs_the_cpu_image_with_no_cards():
    advice = plan("llmfit-fixtures/Tiny-Llama-GGUF", "cpu:64g", precision="stored")
    o = advice.plan.options[0]
    assert o.cpu
    (line,) = docker_lines(advice, o)
    words = shlex.split(line)
    assert "--gpus" not in words and "ghcr.io/ggml-org/llama.cpp:server" in words
    _, (deployment, _) = k8s(advice)
    pod = deployment["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod
    # No cards, but the cores llama.cpp computes on and the RAM the plan sized, in whole MiB
    # (the CPU Deployment had no resources at all: issue 27, item 8).
    mib = -(-o.per_card.need // (1 << 20))
    assert only_container(pod)["resources"] == {"requests": {"cpu": "8", "memory": f"{mib}Mi"}}


def test_llamacpp_rpc_across_nodes_has_no_image_and_says_so():
    # llama.cpp's images hold llama-server only, built without GGML_RPC: no rpc-server to run.
    from llmfit.check import check

    argv = ("llama-server", "-hf", "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0", "--rpc", "w:50052")
    advice = check(argv, resolve_fleet("2x1xrtx4090-24g@ib0"), offline=True).advice
    (o,) = advice.plan.options
    assert o.nodes == 2
    message = "rpc-server is not in ghcr.io/ggml-org/llama.cpp:server-cuda"
    with pytest.raises(UsageError, match=message):
        render_docker(advice, o)
    with pytest.raises(UsageError, match=message):
        render_k8s(advice, o)


def test_the_example_fleets_best_options_all_render_and_validate():
    # The worked examples of docs/deploy.md: every shown option of three models, both formats.
    for repo in ("Qwen/Qwen3-235B-A22B", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-8B"):
        advice = plan(repo, str(EXAMPLE_FLEET))
        for i, o in enumerate(advice.plan.options[:10]):
            k8s(advice, i)
            k8s(advice, i, ray=True)
            assert docker_lines(advice, o)
