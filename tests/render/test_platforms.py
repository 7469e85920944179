"""`--option D1 --commands --format llm-d|kserve|dynamo` (issue 37): a disaggregated option as
the platforms that run prefill and decode expect it, read back as they read it.

Each document is read with a YAML 1.2 reader (kubectl's and Helm's), then validated against the
platform's own schema shipped in fixtures/platforms/ (faithful extracts, their headers say of
what): KServe's LLMInferenceService CRD and Dynamo's DynamoGraphDeployment (v1alpha1) made
strict as the API server prunes, llm-d's modelservice values.schema.json as Helm checks it; every
pod spec or container in them against Kubernetes' own strict schema (kubernetes-validate). Each
role's engine words are the plan's role command (`--json`'s, render/disagg.py's), parsed back
with the engine's own grammar (`llmfit check`'s).

The plans (the bundled example fleet; tests/test_cli_disagg_deploy.py works them out):
- vLLM, 10 requests a second of Qwen3-235B-A22B, --xpyd 3:1 --prefill-tp 2: D1 is 3 prefill
  workers of 2 H200s (tp2, expert parallel) and 1 decode worker of 8 (tp2 × dp4), its KV over the
  ib0 fabric's RDMA (InfiniBand), one unit.
- SGLang, 20 requests a second, --xpyd 2:1 --prefill-tp 2: D1 is 2 prefill workers of 2 H200s and
  1 decode worker of 4 (tp4), on one node's NVLink, 15.2 requests a second a unit: 2 units, so 4
  prefill pods and 2 decode pods.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from llmfit.plan.engines import engine
from llmfit.plan.settings import PlanSettings
from tests.conftest import EXAMPLE_FLEET, FIXTURES, HUB
from tests.launch_check import k8s_expand, yaml12

K8S_VERSION = "1.37"
PLATFORMS = FIXTURES / "platforms"
KSERVE_CRD = PLATFORMS / "kserve-llminferenceservice-crd-v1alpha1.yaml"
DYNAMO_CRD = PLATFORMS / "dynamo-dynamographdeployment-v1alpha1.yaml"
LLM_D_SCHEMA = PLATFORMS / "llm-d-modelservice-values.schema.json"
MODEL = "Qwen/Qwen3-235B-A22B"
VLLM = [MODEL, "--fleet", str(EXAMPLE_FLEET), "--rate", "10", "--disagg", "on",
        "--xpyd", "3:1", "--prefill-tp", "2", "--option", "D1", "--commands"]  # fmt: skip
SGLANG = [MODEL, "--fleet", str(EXAMPLE_FLEET), "--rate", "20", "--engine", "sglang",
          "--xpyd", "2:1", "--prefill-tp", "2", "--option", "D1", "--commands"]  # fmt: skip
# The vLLM roles' engine words after the model, as the plan writes them (`--json`'s D1 commands,
# less the port each is given: 8100 and 8200 there, the platform's own here).
VLLM_PREFILL = ["--tensor-parallel-size", "2", "--enable-expert-parallel",
                "--quantization", "fp8_per_tensor", "--kv-cache-dtype", "fp8",
                "--max-model-len", "40960"]  # fmt: skip
VLLM_DECODE = ["--tensor-parallel-size", "2", "--data-parallel-size", "4",
               "--enable-expert-parallel", "--quantization", "fp8_per_tensor",
               "--kv-cache-dtype", "fp8", "--max-model-len", "40960"]  # fmt: skip
NIXL = ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
HF_TOKEN = {
    "name": "HF_TOKEN",
    "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}},
}
POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}
H200 = {"nvidia.com/gpu.product": "NVIDIA-H200"}


def strict(schema: Any) -> Any:
    """A CRD schema as the API server applies it, with a key it does not name an error instead
    of silently pruned: every object schema that names its keys, keeps no unknown ones and is
    not an elided part (x-llmfit-elided) admits no other."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k == "properties" else strict(v)) for k, v in schema.items()}
    if "properties" in schema:
        out["properties"] = {k: strict(v) for k, v in schema["properties"].items()}
        if not ({"additionalProperties", "x-llmfit-elided", "x-kubernetes-preserve-unknown-fields"}
                & schema.keys()):  # fmt: skip
            out["additionalProperties"] = False
    return out


def crd_schema(path: Path) -> dict:
    crd = yaml.safe_load(path.read_text())
    (version,) = crd["spec"]["versions"]
    return strict(version["schema"]["openAPIV3Schema"])


def pod_spec_ok(spec: dict, name: str) -> None:
    """Kubernetes' own strict PodSpec schema, as a Pod's."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def _one(run, args: list[str], fmt: str) -> tuple[list[str], dict]:
    code, out, err = run(*args, "--format", fmt)
    assert code == 0, err
    (doc,) = yaml12(out)
    header = out.split("\n---\n", 1)[0].splitlines()
    return header, doc


def _json_roles(run, args: list[str]) -> dict[str, dict]:
    """D1's first prefill and first decode command, as --json gives them."""
    code, out, err = run(*[a for a in args if a != "--commands"][:-2], "--json")
    assert code == 0, err
    (d1,) = [d for d in json.loads(out)["disaggregated"] if d["name"] == "D1"]
    first: dict[str, dict] = {}
    for c in d1["commands"]:
        first.setdefault(c["role"], c)
    return first


def _words(c: dict) -> list[str]:
    """The words a container runs, as Kubernetes expands them."""
    return [k8s_expand(w, {}) for w in (*c.get("command", ()), *c.get("args", ()))]


def _read_vllm(argv: list[str]) -> None:
    engine("vllm").read_command(argv, PlanSettings())


# -- KServe ------------------------------------------------------------------------------------


def test_kserve_is_an_llminferenceservice_with_prefill(run):
    header, doc = _one(run, VLLM, "kserve")
    jsonschema.Draft7Validator(crd_schema(KSERVE_CRD)).validate(doc)
    assert header[:4] == [
        "# Qwen/Qwen3-235B-A22B: D1 3P1D, 14 cards, its KV over the ib0 fabric's RDMA",
        "# a KServe LLMInferenceService (serving.kserve.io/v1alpha1): kubectl apply -f THIS_FILE",
        "# prefill: 3 pods of 2 cards, tensor-parallel 2",
        "# decode: 1 pod of 8 cards, tensor-parallel 2",
    ]
    assert (doc["apiVersion"], doc["kind"]) == ("serving.kserve.io/v1alpha1", "LLMInferenceService")
    spec = doc["spec"]
    assert spec["model"] == {"uri": "hf://Qwen/Qwen3-235B-A22B", "name": MODEL}
    # The top-level workload is decode's (1 worker), `prefill` the 3 prefill workers'; each
    # role's TP 2 with its experts spread (tp2+ep), as the plan's layouts.
    assert (spec["replicas"], spec["prefill"]["replicas"]) == (1, 3)
    assert spec["parallelism"] == spec["prefill"]["parallelism"] == {"tensor": 2, "expert": True}
    assert spec["router"] == {"gateway": {}, "route": {}, "scheduler": {}}
    roles = _json_roles(run, VLLM)
    for workload, role, port, cards, words in (
        (spec["prefill"], "prefill", 8000, 2, VLLM_PREFILL),
        (spec, "decode", 8001, 8, VLLM_DECODE),
    ):
        template = workload["template"]
        pod_spec_ok(template, f"kserve-{role}")
        assert template["nodeSelector"] == H200
        (c,) = template["containers"]
        # KServe merges the container named `main` into its template's; its vLLM listens on
        # 8000 for prefill, on 8001 behind the routing sidecar for decode.
        assert c["name"] == "main" and c["image"] == "vllm/vllm-openai:v0.34.0"
        argv = _words(c)
        assert argv == ["vllm", "serve", MODEL, *words, "--port", str(port), *NIXL]
        plan = roles[role]["argv"]
        at = plan.index("--port")
        assert argv == [*plan[: at + 1], str(port), *plan[at + 2 :]]
        _read_vllm(argv)
        assert c["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        # Cards as the plan's worker has them, and one RDMA device: the KV crosses InfiniBand.
        assert c["resources"]["limits"] == {"nvidia.com/gpu": cards,
                                            "rdma/rdma_shared_device_a": 1}  # fmt: skip
        env = {e["name"]: e for e in c["env"]}
        assert env["HF_TOKEN"] == HF_TOKEN
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == POD_IP
        given = dict(roles[role]["env"])
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == given["VLLM_NIXL_SIDE_CHANNEL_PORT"]
        assert env["UCX_NET_DEVICES"]["value"] == "all"


# -- llm-d -------------------------------------------------------------------------------------


def test_llm_d_values_hold_prefill_and_decode(run):
    header, values = _one(run, VLLM, "llm-d")
    schema = json.loads(LLM_D_SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(values)
    assert header[1] == ("# values for llm-d's modelservice Helm chart "
                         "(llm-d-incubation/llm-d-modelservice): helm install NAME "
                         "llm-d-modelservice/llm-d-modelservice -f THIS_FILE")  # fmt: skip
    # The checkpoint's 470,187,269,120 bytes (its index's total_size in the bundled cache,
    # fixtures/build_cache.py; what is downloaded, though the plan runs it as fp8) are 437.9 GiB:
    # 438 rounded up, and one more for its tokenizer and config.
    assert values["modelArtifacts"] == {"name": MODEL, "uri": "hf://Qwen/Qwen3-235B-A22B",
                                        "size": "439Gi"}  # fmt: skip
    assert values["multinode"] is False
    # Prefill serves on the service port; decode's vLLM on the sidecar's target port.
    assert values["routing"] == {"servicePort": 8000, "proxy": {"enabled": True,
                                                                "targetPort": 8200}}  # fmt: skip
    for role, replicas, port, cards, words in (("prefill", 3, 8000, 2, VLLM_PREFILL),
                                               ("decode", 1, 8200, 8, VLLM_DECODE)):  # fmt: skip
        part = values[role]
        assert (part["create"], part["replicas"]) == (True, replicas)
        assert part["parallelism"] == {"tensor": 2}
        (c,) = part["containers"]
        assert (c.pop("modelCommand"), c.pop("mountModelVolume")) == ("custom", True)
        pod_spec_ok({"containers": [c]}, f"llm-d-{role}")
        argv = _words(c)
        assert argv == ["vllm", "serve", MODEL, *words, "--port", str(port), *NIXL]
        _read_vllm(argv)
        assert c["resources"]["limits"]["nvidia.com/gpu"] == cards
        assert c["env"][0] == HF_TOKEN


# -- Dynamo ------------------------------------------------------------------------------------


def _dynamo_ok(doc: dict) -> dict:
    jsonschema.Draft7Validator(crd_schema(DYNAMO_CRD)).validate(doc)
    services = doc["spec"]["services"]
    for key, s in services.items():
        pod = {k: v for k, v in s["extraPodSpec"].items() if k != "mainContainer"}
        pod_spec_ok({**pod, "containers": [s["extraPodSpec"]["mainContainer"]]},
                    f"dynamo-{key.lower()}")  # fmt: skip
    return services


def test_dynamo_runs_vllm_workers_as_its_example(run):
    header, doc = _one(run, VLLM, "dynamo")
    services = _dynamo_ok(doc)
    assert (doc["apiVersion"], doc["kind"]) == ("nvidia.com/v1alpha1", "DynamoGraphDeployment")
    assert doc["spec"]["backendFramework"] == "vllm"
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1"
    # The names of Dynamo's own vLLM example (components/backends/vllm/deploy/disagg.yaml).
    assert list(services) == ["Frontend", "VllmPrefillWorker", "VllmDecodeWorker"]
    assert services["Frontend"] == {
        "componentType": "frontend",
        "replicas": 1,
        "extraPodSpec": {"mainContainer": {"name": "main", "image": image}},
    }
    for key, role, replicas, cards, cpu, words in (
        ("VllmPrefillWorker", "prefill", 3, "2", "6", VLLM_PREFILL),
        ("VllmDecodeWorker", "decode", 1, "8", "18", VLLM_DECODE),
    ):
        s = services[key]
        assert (s["componentType"], s["subComponentType"], s["replicas"]) == ("worker", role,
                                                                              replicas)  # fmt: skip
        # CPU as --format k8s asks: 2 and 2 a card; memory 8 GiB and the host's bytes (none).
        rdma = {"rdma/rdma_shared_device_a": "1"}
        assert s["resources"]["limits"] == {"gpu": cards, "custom": rdma}
        assert s["resources"]["requests"]["gpu"] == cards
        assert s["resources"]["requests"]["cpu"] == cpu
        c = s["extraPodSpec"]["mainContainer"]
        assert s["extraPodSpec"]["nodeSelector"] == H200
        assert c["image"] == image
        # dynamo.vllm reads vLLM's engine arguments: the serve line's, less its server's
        # port and the connector Dynamo sets itself; --is-prefill-worker on prefill.
        tail = ["--is-prefill-worker"] if role == "prefill" else []
        assert _words(c) == ["python3", "-m", "dynamo.vllm", "--model", MODEL, *words, *tail]
        _read_vllm(["vllm", "serve", MODEL, *words])
        # Dynamo sets NIXL's side channel itself; UCX as the plan's role sets it.
        assert c["env"] == [HF_TOKEN, {"name": "UCX_NET_DEVICES", "value": "all"}]


def test_dynamo_runs_sglang_workers_with_its_units(run):
    header, doc = _one(run, SGLANG, "dynamo")
    services = _dynamo_ok(doc)
    assert doc["spec"]["backendFramework"] == "sglang"
    assert list(services) == ["Frontend", "prefill", "decode"]
    # 2 units of 2P1D: 4 prefill pods, 2 decode pods.
    assert (services["prefill"]["replicas"], services["decode"]["replicas"]) == (4, 2)
    assert header[2:4] == ["# prefill: 4 pods of 2 cards, tensor-parallel 2",
                           "# decode: 2 pods of 4 cards, tensor-parallel 4"]  # fmt: skip
    roles = _json_roles(run, SGLANG)
    for role in ("prefill", "decode"):
        c = services[role]["extraPodSpec"]["mainContainer"]
        words = _words(c)
        assert words[:3] == ["python3", "-m", "dynamo.sglang"]
        args = words[3:]
        # The role's own server arguments, less its port, its KV over NIXL, and the Frontend
        # tokenizing (components/backends/sglang/deploy/disagg.yaml).
        plan = roles[role]["argv"][2:]
        at = plan.index("--port")
        plan = plan[:at] + plan[at + 2 :]
        at = plan.index("--disaggregation-transfer-backend")
        assert plan[at + 1] == "mooncake"
        plan = plan[:at] + plan[at + 2 :]
        assert args == [*plan, "--disaggregation-transfer-backend", "nixl", "--skip-tokenizer-init"]
        engine("sglang").read_command(["sglang", "serve", *args], PlanSettings())
        assert args[args.index("--disaggregation-mode") + 1] == role
    assert services["decode"]["resources"]["limits"] == {"gpu": "4"}


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "platform"),
    [("kserve", "KServe's LLMInferenceService"), ("llm-d", "llm-d's modelservice")],
)
def test_an_sglang_plan_has_no_kserve_or_llm_d_spec(run, fmt, platform):
    code, out, err = run(*SGLANG, "--format", fmt)
    assert code == 2 and out == ""
    assert " ".join(err.split()) == (
        f"llmfit: llmfit writes {platform} for vLLM's launches only: its templates start `vllm "
        "serve`, and its prefill and decode run behind llm-d's routing sidecar, whose KV "
        "connectors are vLLM's (NIXL); --format dynamo or k8s writes SGLang's."
    )


# -- an aggregated option ----------------------------------------------------------------------

# Option 7 of Qwen3-8B on the example fleet: one server on 2 H200s (tp2), 40,960 tokens of context.
QWEN8 = ["Qwen/Qwen3-8B", "--fleet", str(EXAMPLE_FLEET), "--option", "7", "--commands"]
QWEN8_ARGS = ["vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2",
              "--max-model-len", "40960"]  # fmt: skip


def test_an_aggregated_option_is_one_server_on_each_platform(run):
    header, doc = _one(run, QWEN8, "kserve")
    jsonschema.Draft7Validator(crd_schema(KSERVE_CRD)).validate(doc)
    assert header[:3] == [
        "# Qwen/Qwen3-8B: option 7, 2 × h200-141g (tp2)",
        "# a KServe LLMInferenceService (serving.kserve.io/v1alpha1): kubectl apply -f THIS_FILE",
        "# one server: 1 pod of 2 cards, tensor-parallel 2",
    ]
    spec = doc["spec"]
    assert "prefill" not in spec and (spec["replicas"], spec["parallelism"]) == (1, {"tensor": 2})
    pod_spec_ok(spec["template"], "kserve-server")
    (c,) = spec["template"]["containers"]
    # KServe's own template (config-llm-template.yaml) serves on 8000; no KV to move, so no
    # side channel.
    assert _words(c) == [*QWEN8_ARGS, "--port", "8000"]
    _read_vllm(_words(c))
    assert c["env"] == [HF_TOKEN] and c["resources"]["limits"] == {"nvidia.com/gpu": 2}

    _, values = _one(run, QWEN8, "llm-d")
    jsonschema.Draft7Validator(json.loads(LLM_D_SCHEMA.read_text())).validate(values)
    # Decode pods only, each the whole server on the service port, no sidecar in front.
    assert values["routing"] == {"servicePort": 8000, "proxy": {"enabled": False}}
    assert values["prefill"] == {"create": False}
    # 16,381,470,720 bytes (2 × 8,190,735,360 parameters, fixtures/build_cache.py) are 15.3 GiB:
    # 16, and one more.
    assert values["modelArtifacts"]["size"] == "17Gi"
    (c,) = values["decode"]["containers"]
    assert _words(c) == [*QWEN8_ARGS, "--port", "8000"]

    _, dgd = _one(run, QWEN8, "dynamo")
    services = _dynamo_ok(dgd)
    # Dynamo's vLLM agg example's names (components/backends/vllm/deploy/agg.yaml): a worker
    # with no sub-component, no --is-prefill-worker.
    assert list(services) == ["Frontend", "VllmDecodeWorker"]
    worker = services["VllmDecodeWorker"]
    assert (worker["componentType"], worker["replicas"]) == ("worker", 1)
    assert "subComponentType" not in worker
    assert _words(worker["extraPodSpec"]["mainContainer"]) == [
        "python3", "-m", "dynamo.vllm", "--model", *QWEN8_ARGS[2:]]  # fmt: skip


def test_an_aggregated_option_runs_as_many_replicas_as_the_load_needs(run):
    # 20 requests a second: option 6 is 2 H100s (tp2), and the plan sizes 2 replicas of it (each
    # carries 10 requests a second, as --format k8s says above its Deployment of 2). (2 H200s in
    # tp2, option 3, carry all 20 in one replica.)
    load = ["Qwen/Qwen3-8B", "--fleet", str(EXAMPLE_FLEET), "--rate", "20"]
    code, out, err = run(*load, "--json")
    assert code == 0, err
    o = json.loads(out)["options"][5]
    assert (o["gpu_class"], o["tp"], o["launch_replicas"]) == ("h100-80g", 2, 2)
    pick = [*load, "--option", "6", "--commands"]
    header, doc = _one(run, pick, "kserve")
    assert header[2] == "# one server: 2 pods of 2 cards, tensor-parallel 2"
    assert doc["spec"]["replicas"] == 2
    _, values = _one(run, pick, "llm-d")
    assert values["decode"]["replicas"] == 2
    _, dgd = _one(run, pick, "dynamo")
    assert dgd["spec"]["services"]["VllmDecodeWorker"]["replicas"] == 2


def test_a_multi_node_option_or_a_llamacpp_one_is_refused(run, tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[pool]]\nname = "h100-80g"\ncount = 2\ngpu = "h100-80g"\ngpus = 2\n'
                     'fabric = "ib0"\nfabric_kind = "infiniband"\n')  # fmt: skip
    code, out, err = run("meta-llama/Meta-Llama-3.1-70B", "--fleet", str(fleet), "--pp", "2",
                         "--precision", "stored", "--commands", "--format", "dynamo")  # fmt: skip
    assert code == 2 and out == ""
    assert err.splitlines()[0] == (
        "llmfit: --format dynamo writes one server a pod, and option 1 runs on 2 nodes; "
        "--format k8s launches it as a LeaderWorkerSet."
    )
    code, out, err = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", str(EXAMPLE_FLEET),
                         "--commands", "--format", "kserve")  # fmt: skip
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "llmfit: --format kserve has no launch of llama.cpp's servers."


def test_a_local_directory_has_no_platform_spec(run):
    snap = next((HUB / "models--Qwen--Qwen3-8B" / "snapshots").iterdir())
    code, out, err = run(str(snap), "--fleet", "8xh100-80g", "--rate", "20", "--disagg", "on",
                         "--option", "D1", "--commands", "--format", "dynamo")  # fmt: skip
    assert code == 2 and out == ""
    assert "is a directory on this machine, which a container on another node cannot see" in err


def test_check_keeps_its_three_formats(run):
    code, _, err = run("check", "--format", "dynamo", "--", "vllm", "serve", "Qwen/Qwen3-8B")
    assert code == 2 and "'dynamo' is not one of 'shell', 'docker', 'k8s'" in err


def test_the_schemas_refuse_what_the_platforms_would_not_read(run):
    # The checks above bite: a key the CRD does not name, a replica count as a string, and a
    # values key the chart's schema does not allow are each refused.
    _, doc = _one(run, VLLM, "kserve")
    kserve = jsonschema.Draft7Validator(crd_schema(KSERVE_CRD))
    spec = doc["spec"]
    for bad in (
        {**spec, "decode": {}},
        {**spec, "replicas": "1"},
        {**spec, "prefill": {**spec["prefill"], "gpus": 2}},
    ):
        assert not kserve.is_valid({**doc, "spec": bad})
    _, values = _one(run, VLLM, "llm-d")
    llm_d = jsonschema.Draft7Validator(json.loads(LLM_D_SCHEMA.read_text()))
    assert not llm_d.is_valid({**values, "parallelism": {"tensor": 2}})
    assert not llm_d.is_valid({**values, "routing": {"servicePort": 8000, "proxyPort": 8200}})
    _, dgd = _one(run, VLLM, "dynamo")
    dynamo = jsonschema.Draft7Validator(crd_schema(DYNAMO_CRD))
    worker = dgd["spec"]["services"]["VllmDecodeWorker"]
    assert not dynamo.is_valid({**dgd, "spec": {**dgd["spec"], "backendFramework": "tgi"}})
    assert not dynamo.is_valid({**dgd, "spec": {**dgd["spec"], "services": {
        "VllmDecodeWorker": {**worker, "replicas": -1}}}})  # fmt: skip
    assert not dynamo.is_valid({**dgd, "spec": {**dgd["spec"], "services": {
        "VllmDecodeWorker": {**worker, "gpus": 8}}}})  # fmt: skip
