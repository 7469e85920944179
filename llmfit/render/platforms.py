"""A disaggregated option (`--option D1 --commands`) as the platforms that run prefill and decode
expect it (issue 37): `--format llm-d` writes the values of llm-d's modelservice Helm chart
(`prefill:` and `decode:`), `--format kserve` a KServe LLMInferenceService with `prefill`, and
`--format dynamo` an NVIDIA Dynamo DynamoGraphDeployment with a prefill and a decode worker
service. Each is one YAML document built from data (the field maps below, and each role's
container as its engine says the platform runs it: plan/engines/platform_launch.py), checked
word by word as the other launches are (render/safe.py), and naming no engine.

An aggregated option (one server that does both) is written the same way where it is one pod a
server: llm-d's decode pods alone (`prefill.create: false`, no sidecar), an LLMInferenceService
with no `prefill`, a DynamoGraphDeployment with one worker service; its replicas the plan's. A
multi-node option, and an engine a platform does not run, are refused in one sentence.

What each holds of the plan, and where the platform's own schema says it goes:

- a role's replicas: its workers in the unit times the units the load named needs (as
  `--format k8s`): llm-d `prefill.replicas` / `decode.replicas`; KServe `spec.prefill.replicas`
  and `spec.replicas` (the top-level workload is decode's where `prefill` is given: KServe's
  pkg/apis/serving/v1alpha1/llm_inference_service_types.go `WorkloadSpec`); Dynamo's worker
  services' `replicas`.
- a role's tensor-parallel size: llm-d's and KServe's `parallelism.tensor` (and KServe's
  `pipeline`, `expert`); the engine's own arguments say the rest, word for word.
- a pod's cards: the container's `nvidia.com/gpu` (Dynamo: the service's `resources.limits.gpu`),
  with CPU and memory requests as `--format k8s` sizes them.
- the engine's arguments: the role's command (render/disagg.py's), as the platform starts it.
- HF_TOKEN from the Secret `hf-token` (optional), never a value.

Where the KV crosses an InfiniBand or RoCE fabric, each pod requests the shared RDMA device and
IPC_LOCK, as `--format k8s` does; the platforms' own networking (KServe's and llm-d's
examples name a CNI network for RoCE) is the cluster's to add.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import yaml

from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.disagg import Offer
from llmfit.plan.engines import engine
from llmfit.plan.engines.platform_launch import (
    AGGREGATED,
    PLATFORMS,
    PlatformRun,
    RoleContainer,
    aggregated_run,
    platform_run,
    refusal,
)
from llmfit.render.deploy import (
    CARDS_ENV,
    GIB,
    RDMA_RESOURCE,
    TOKEN_KEY,
    TOKEN_SECRET,
    _Dumper,
    _expandable,
    _gpu_resource,
    _placement,
    _resources,
    _slug,
    _strings,
    refuse_local_repo,
    secret_env,
)
from llmfit.render.disagg import name
from llmfit.render.disagg_deploy import _index, _on_rdma
from llmfit.render.safe import check_words, clean

__all__ = ["PLATFORMS", "render_aggregated", "render_platform"]

# What each platform's document is, for the comment above it.
KIND = {
    "llm-d": "values for llm-d's modelservice Helm chart (llm-d-incubation/llm-d-modelservice)",
    "kserve": "a KServe LLMInferenceService (serving.kserve.io/v1alpha1)",
    "dynamo": "an NVIDIA Dynamo DynamoGraphDeployment (nvidia.com/v1alpha1)",
}
# How the document is applied: the chart's values file, or the platform's own resource.
APPLY = {
    "llm-d": "helm install NAME llm-d-modelservice/llm-d-modelservice -f THIS_FILE",
    "kserve": "kubectl apply -f THIS_FILE",
    "dynamo": "kubectl apply -f THIS_FILE",
}
# The container KServe merges into its template's (config/llmisvc/config-llm-*-template.yaml
# name theirs `main`), and the name llmfit gives it on the other platforms.
CONTAINER = "main"
# KServe's router: a Gateway, its HTTPRoute and llm-d's scheduler (the inference extension's
# endpoint picker), each as KServe's defaults make it (`{}`), as its P/D samples write them.
KSERVE_ROUTER: dict[str, Any] = {"gateway": {}, "route": {}, "scheduler": {}}
# Dynamo's HTTP front: its own component (componentType frontend), on the runtime image.
DYNAMO_FRONTEND = "Frontend"


@dataclass(frozen=True)
class _Role:
    """One role as a platform's document holds it: its container, the option whose cards and
    layout its pods take, and how many pods."""

    rc: RoleContainer
    o: Any
    replicas: int


def _pd_roles(offer: Offer, run: PlatformRun) -> list[_Role]:
    units = max(offer.result.units or 1, 1)
    unit = offer.result.unit
    counts = {"prefill": unit.prefill_workers, "decode": unit.decode_workers}
    options = {"prefill": offer.prefill, "decode": offer.decode}
    return [_Role(rc, options[rc.role], counts[rc.role] * units) for rc in run.roles]


def _parallelism(o: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """The role's layout in the platform's `parallelism` keys (those it has of tensor,
    pipeline, expert), each where it says more than its default."""
    lay = o.layout
    out: dict[str, Any] = {"tensor": lay.tp}
    if "pipeline" in keys and lay.pp > 1:
        out["pipeline"] = lay.pp
    if "expert" in keys and lay.ep:
        out["expert"] = True
    return out


def _container(rc: RoleContainer, encoding: str | None) -> dict[str, Any]:
    """The role's container: its command and arguments, each word as Kubernetes passes it on
    (render/deploy.py `_expandable`), HF_TOKEN from the Secret, its environment, and the pod's
    IP for its own address."""
    env: list[dict[str, Any]] = [secret_env("HF_TOKEN", TOKEN_SECRET, TOKEN_KEY, optional=True)]
    env += [{"name": k, "value": _expandable(v, encoding)} for k, v in rc.env if k != CARDS_ENV]
    env += [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
            for k in rc.pod_ip]  # fmt: skip
    c: dict[str, Any] = {
        "name": CONTAINER,
        "image": rc.image,
        "command": [_expandable(w, encoding) for w in rc.command],
        "args": [_expandable(w, encoding) for w in rc.args],
        "env": env,
    }
    if rc.port is not None:
        c["ports"] = [{"name": "http", "containerPort": rc.port, "protocol": "TCP"}]
    return c


def _pod_container(advice: Advice, r: _Role, rdma: bool, encoding: str | None) -> dict[str, Any]:
    """The role's container with its cards, CPU and memory (and RDMA) as `--format k8s` asks."""
    c = _container(r.rc, encoding)
    c["resources"] = _resources(r.o, r.o.gpus, _gpu_resource(r.o, advice.fleet), rdma)
    if rdma:
        c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    return c


# -- llm-d -------------------------------------------------------------------------------------


def _model_size(advice: Advice, o: Any) -> str:
    """The model volume's size: the checkpoint's bytes as downloaded (the repository's, not the
    weights an engine flag makes of it in memory) rounded up to a GiB, and one more for its
    tokenizer and config."""
    size = next((a.bytes for a in advice.repo.artifacts if a.name == o.artifact.name),
                o.artifact.bytes)  # fmt: skip
    return f"{math.ceil(size / GIB) + 1}Gi"


def _llm_d(advice: Advice, run: PlatformRun, roles: list[_Role], rdma: bool,
           encoding: str | None) -> dict[str, Any]:  # fmt: skip
    repo = advice.repo
    by_role = {r.rc.role: r for r in roles}
    if AGGREGATED in by_role:
        # One server, on the service port, with no sidecar in front: the chart's decode pods
        # only, its prefill pods not made.
        server = by_role[AGGREGATED]
        routing: dict[str, Any] = {"servicePort": server.rc.port, "proxy": {"enabled": False}}
        parts = [("decode", server)]
    else:
        # Prefill pods serve on the service port; a decode pod's engine listens on the proxy's
        # target port, behind llm-d's routing sidecar on the service port.
        routing = {"servicePort": by_role["prefill"].rc.port,
                   "proxy": {"enabled": True, "targetPort": by_role["decode"].rc.port}}  # fmt: skip
        parts = [("decode", by_role["decode"]), ("prefill", by_role["prefill"])]
    values: dict[str, Any] = {
        "multinode": False,
        "modelArtifacts": {
            "name": repo.id,
            "uri": f"hf://{repo.id}",
            "size": _model_size(advice, roles[0].o),
        },
        "routing": routing,
    }
    for key, r in parts:
        c = _pod_container(advice, r, rdma, encoding)
        # The chart starts the command and arguments as given (`custom`), and keeps the model
        # in its volume (HF_HOME there).
        c["modelCommand"] = "custom"
        c["mountModelVolume"] = True
        values[key] = {
            "create": True,
            "replicas": r.replicas,
            "parallelism": _parallelism(r.o, ()),
            "containers": [c],
        }
    if AGGREGATED in by_role:
        values["prefill"] = {"create": False}
    return values


# -- KServe ------------------------------------------------------------------------------------


def _kserve(advice: Advice, run: PlatformRun, roles: list[_Role], rdma: bool,
            encoding: str | None) -> dict[str, Any]:  # fmt: skip
    repo = advice.repo

    def workload(r: _Role) -> dict[str, Any]:
        placement, _ = _placement(r.o, advice.fleet)
        return {
            "replicas": r.replicas,
            "parallelism": _parallelism(r.o, ("pipeline", "expert")),
            "template": {**placement, "containers": [_pod_container(advice, r, rdma, encoding)]},
        }

    by_role = {r.rc.role: r for r in roles}
    spec: dict[str, Any] = {"model": {"uri": f"hf://{repo.id}", "name": repo.id}}
    if AGGREGATED in by_role:
        spec.update(workload(by_role[AGGREGATED]))
    else:
        # The top-level workload is decode's; `prefill` the prefill pods'.
        spec.update(workload(by_role["decode"]))
        spec["prefill"] = workload(by_role["prefill"])
    spec["router"] = KSERVE_ROUTER
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "LLMInferenceService",
        "metadata": {"name": _slug(repo.id)},
        "spec": spec,
    }


# -- Dynamo ------------------------------------------------------------------------------------


def _dynamo_resources(o: Any, advice: Advice, rdma: bool) -> dict[str, Any]:
    """Dynamo's resources of a worker (its ResourceItem: strings, cards as `gpu`), from what
    `--format k8s` asks for the pod."""
    resource = _gpu_resource(o, advice.fleet)
    asked = _resources(o, o.gpus, resource, rdma)
    requests = {"cpu": asked["requests"]["cpu"], "memory": asked["requests"]["memory"],
                "gpu": str(o.gpus)}  # fmt: skip
    limits: dict[str, Any] = {"gpu": str(o.gpus)}
    if resource != "nvidia.com/gpu":
        # A MIG instance's own resource (Dynamo's default type is nvidia.com/gpu).
        requests["gpuType"] = limits["gpuType"] = resource
    if rdma:
        requests["custom"] = {RDMA_RESOURCE: "1"}
        limits["custom"] = {RDMA_RESOURCE: "1"}
    return {"requests": requests, "limits": limits}


def _dynamo(advice: Advice, run: PlatformRun, roles: list[_Role], rdma: bool,
            encoding: str | None) -> dict[str, Any]:  # fmt: skip
    repo = advice.repo
    services: dict[str, Any] = {
        DYNAMO_FRONTEND: {
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {"mainContainer": {"name": CONTAINER, "image": run.frontend_image}},
        }
    }
    for key, r in zip(run.services, roles, strict=True):
        placement, _ = _placement(r.o, advice.fleet)
        c = _container(r.rc, encoding)
        if rdma:
            c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        service: dict[str, Any] = {"componentType": "worker"}
        if r.rc.role != AGGREGATED:
            service["subComponentType"] = r.rc.role
        services[key] = {
            **service,
            "replicas": r.replicas,
            "resources": _dynamo_resources(r.o, advice, rdma),
            "extraPodSpec": {**placement, "mainContainer": c},
        }
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": _slug(repo.id)},
        "spec": {"backendFramework": run.backend, "services": services},
    }


BUILD = {"llm-d": _llm_d, "kserve": _kserve, "dynamo": _dynamo}


def _notes(fmt: str, roles: list[_Role]) -> list[str]:
    notes = [f"{KIND[fmt]}: {APPLY[fmt]}"]
    for r in roles:
        pods = "1 pod" if r.replicas == 1 else f"{r.replicas} pods"
        what = "one server" if r.rc.role == AGGREGATED else r.rc.role
        cards = "1 card" if r.o.gpus == 1 else f"{r.o.gpus} cards"
        notes.append(f"{what}: {pods} of {cards}, tensor-parallel {r.o.layout.tp}")
    return notes


def _body(doc: dict[str, Any], header: list[str], encoding: str | None) -> str:
    check_words(list(_strings(doc)), encoding)
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)  # fmt: skip
    token = [
        f"HF_TOKEN from the Secret {TOKEN_SECRET} (optional), made with:",
        f'  kubectl create secret generic {TOKEN_SECRET} --from-literal={TOKEN_KEY}="$HF_TOKEN"',
    ]
    return "\n".join(clean(f"# {h}") for h in (*header, *token)) + "\n---\n" + body


def render_platform(fmt: str, advice: Advice, offer: Offer, encoding: str | None = None) -> str:
    """A disaggregated offer's document for platform `fmt`, under comments, every word exact or
    refused; refused in one sentence where the platform runs none of its engine's launches."""
    eng = engine(offer.prefill.engine)
    why = refusal(eng, fmt)
    if why is not None:
        raise UsageError(why)
    refuse_local_repo(advice)
    repo = advice.repo
    run = platform_run(eng, offer, repo.id, repo.revision, fmt)
    rdma = _on_rdma(advice, offer)
    roles = _pd_roles(offer, run)
    doc = BUILD[fmt](advice, run, roles, rdma, encoding)
    header = [
        f"{repo.id}: {name(_index(advice, offer))} {offer.result.unit.label}, "
        f"{offer.result.unit.cards} cards, its KV over {offer.result.transfer.link.name}",
        *_notes(fmt, roles),
    ]
    if rdma:
        header.append(f"RDMA for the KV: IPC_LOCK and one {RDMA_RESOURCE} a pod (name your "
                      "cluster's own device, and its network, if they differ)")  # fmt: skip
    return _body(doc, header, encoding)


def render_aggregated(
    fmt: str, advice: Advice, o: Any, ray: bool = False, encoding: str | None = None
) -> str:
    """An aggregated option on platform `fmt`: its one server (prefill and decode together) as
    the platform runs one, its replicas the plan's; refused in one sentence where the platform
    runs none of its engine's, or the option is more than one server on one node."""
    eng = engine(o.engine)
    why = refusal(eng, fmt)
    if why is not None:
        raise UsageError(why)
    number = next((i for i, x in enumerate(advice.plan.options, 1) if x is o), 1)
    repo = advice.repo
    cmds = eng.commands(o, repo.id, repo.revision, ray=ray)
    if o.layout.nodes > 1:
        raise UsageError(
            f"--format {fmt} writes one server a pod, and option {number} runs on "
            f"{o.layout.nodes} nodes; --format k8s launches it as a LeaderWorkerSet."
        )
    if len(cmds) != 1:
        raise UsageError(
            f"--format {fmt} writes one server a pod, and option {number} starts {len(cmds)} "
            "processes; --format k8s launches it."
        )
    refuse_local_repo(advice)
    run = aggregated_run(eng, o, cmds[0], fmt)
    roles = [_Role(run.roles[0], o, max(o.launched, 1))]
    doc = BUILD[fmt](advice, run, roles, False, encoding)
    header = [f"{repo.id}: option {number}, {eng.where(o)}", *_notes(fmt, roles)]
    return _body(doc, header, encoding)
