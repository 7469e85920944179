"""A disaggregated option (`--option D1 --commands`) as the platforms that run prefill and decode
expect it (issue 37): `--format llm-d` writes the values of llm-d's modelservice Helm chart
(`prefill:` and `decode:`), `--format kserve` a KServe LLMInferenceService with `prefill`, and
`--format dynamo` an NVIDIA Dynamo DynamoGraphDeployment with a prefill and a decode worker
service. Each is one YAML document built from data (the field maps below, and each role's
container as its engine says the platform runs it: plan/engines/platform_launch.py), checked
word by word as the other launches are (render/safe.py), and naming no engine.

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
from typing import Any

import yaml

from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.disagg import Offer
from llmfit.plan.engines import engine
from llmfit.plan.engines.platform_launch import (
    PLATFORMS,
    PlatformRun,
    RoleContainer,
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
    secret_env,
)
from llmfit.render.disagg import name
from llmfit.render.disagg_deploy import _check_source, _index, _on_rdma
from llmfit.render.safe import check_words, clean

__all__ = ["PLATFORMS", "render_platform"]

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


def _replicas(offer: Offer, role: str) -> int:
    unit = offer.result.unit
    workers = unit.prefill_workers if role == "prefill" else unit.decode_workers
    return workers * max(offer.result.units or 1, 1)


def _option(offer: Offer, role: str) -> Any:
    return offer.prefill if role == "prefill" else offer.decode


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


def _pod_container(
    advice: Advice, offer: Offer, rc: RoleContainer, rdma: bool, encoding: str | None
) -> dict[str, Any]:
    """The role's container with its cards, CPU and memory (and RDMA) as `--format k8s` asks."""
    o = _option(offer, rc.role)
    c = _container(rc, encoding)
    c["resources"] = _resources(o, o.gpus, _gpu_resource(o, advice.fleet), rdma)
    if rdma:
        c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    return c


# -- llm-d -------------------------------------------------------------------------------------


def _model_size(advice: Advice, offer: Offer) -> str:
    """The model volume's size: the checkpoint's bytes as downloaded (the repository's, not the
    weights an engine flag makes of it in memory) rounded up to a GiB, and one more for its
    tokenizer and config."""
    art = offer.prefill.artifact
    size = next((a.bytes for a in advice.repo.artifacts if a.name == art.name), art.bytes)
    return f"{math.ceil(size / GIB) + 1}Gi"


def _llm_d(advice: Advice, offer: Offer, run: PlatformRun, rdma: bool,
           encoding: str | None) -> dict[str, Any]:  # fmt: skip
    repo = advice.repo
    prefill, decode = run.roles
    values: dict[str, Any] = {
        "multinode": False,
        "modelArtifacts": {
            "name": repo.id,
            "uri": f"hf://{repo.id}",
            "size": _model_size(advice, offer),
        },
        # Prefill pods serve on the service port; a decode pod's engine listens on the proxy's
        # target port, behind llm-d's routing sidecar on the service port.
        "routing": {
            "servicePort": prefill.port,
            "proxy": {"enabled": True, "targetPort": decode.port},
        },
    }
    for rc in (decode, prefill):
        c = _pod_container(advice, offer, rc, rdma, encoding)
        # The chart starts the command and arguments as given (`custom`), and keeps the model
        # in its volume (HF_HOME there).
        c["modelCommand"] = "custom"
        c["mountModelVolume"] = True
        values[rc.role] = {
            "create": True,
            "replicas": _replicas(offer, rc.role),
            "parallelism": _parallelism(_option(offer, rc.role), ()),
            "containers": [c],
        }
    return values


# -- KServe ------------------------------------------------------------------------------------


def _kserve(advice: Advice, offer: Offer, run: PlatformRun, rdma: bool,
            encoding: str | None) -> dict[str, Any]:  # fmt: skip
    repo = advice.repo
    prefill, decode = run.roles

    def workload(rc: RoleContainer) -> dict[str, Any]:
        o = _option(offer, rc.role)
        placement, _ = _placement(o, advice.fleet)
        return {
            "replicas": _replicas(offer, rc.role),
            "parallelism": _parallelism(o, ("pipeline", "expert")),
            "template": {**placement,
                         "containers": [_pod_container(advice, offer, rc, rdma, encoding)]},
        }  # fmt: skip

    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "LLMInferenceService",
        "metadata": {"name": _slug(repo.id)},
        "spec": {
            "model": {"uri": f"hf://{repo.id}", "name": repo.id},
            # The top-level workload is decode's; `prefill` the prefill pods'.
            **workload(decode),
            "prefill": workload(prefill),
            "router": KSERVE_ROUTER,
        },
    }


# -- Dynamo ------------------------------------------------------------------------------------


def _dynamo_resources(o: Any, advice: Advice, rdma: bool) -> dict[str, Any]:
    """Dynamo's resources of a worker (its ResourceItem: strings, cards as `gpu`), from what
    `--format k8s` asks for the pod."""
    asked = _resources(o, o.gpus, _gpu_resource(o, advice.fleet), rdma)
    requests = {"cpu": asked["requests"]["cpu"], "memory": asked["requests"]["memory"],
                "gpu": str(o.gpus)}  # fmt: skip
    limits: dict[str, Any] = {"gpu": str(o.gpus)}
    if rdma:
        requests["custom"] = {RDMA_RESOURCE: "1"}
        limits["custom"] = {RDMA_RESOURCE: "1"}
    return {"requests": requests, "limits": limits}


def _dynamo(advice: Advice, offer: Offer, run: PlatformRun, rdma: bool,
            encoding: str | None) -> dict[str, Any]:  # fmt: skip
    repo = advice.repo
    services: dict[str, Any] = {
        DYNAMO_FRONTEND: {
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {"mainContainer": {"name": CONTAINER, "image": run.frontend_image}},
        }
    }
    for key, rc in zip(run.services, run.roles, strict=True):
        o = _option(offer, rc.role)
        placement, _ = _placement(o, advice.fleet)
        c = _container(rc, encoding)
        if rdma:
            c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        services[key] = {
            "componentType": "worker",
            "subComponentType": rc.role,
            "replicas": _replicas(offer, rc.role),
            "resources": _dynamo_resources(o, advice, rdma),
            "extraPodSpec": {**placement, "mainContainer": c},
        }
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": _slug(repo.id)},
        "spec": {"backendFramework": run.backend, "services": services},
    }


BUILD = {"llm-d": _llm_d, "kserve": _kserve, "dynamo": _dynamo}


def aggregated_refusal(fmt: str, advice: Advice, o: Any) -> UsageError:
    """Why an aggregated option has no `fmt` spec: llmfit writes the platforms' prefill and
    decode specs only; `--format k8s` launches the aggregated option."""
    number = next((i for i, x in enumerate(advice.plan.options, 1) if x is o), 1)
    return UsageError(
        f"--format {fmt} writes a disaggregated option's prefill and decode (--option D1), and "
        f"option {number} runs them together; --format k8s launches it.",
        hint="add --disagg on --option D1 --commands (the plan's disaggregated block names D1, "
        "D2, …)",
    )


def platform_document(
    fmt: str, advice: Advice, offer: Offer, encoding: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The offer as platform `fmt` expects it, and the notes to print above it; refused in one
    sentence where the platform runs none of the offer's engine's launches."""
    eng = engine(offer.prefill.engine)
    why = refusal(eng, fmt)
    if why is not None:
        raise UsageError(why)
    _check_source(advice)
    repo = advice.repo
    run = platform_run(eng, offer, repo.id, repo.revision, fmt)
    rdma = _on_rdma(advice, offer)
    doc = BUILD[fmt](advice, offer, run, rdma, encoding)
    notes = [f"{KIND[fmt]}: {APPLY[fmt]}"]
    for rc in run.roles:
        o = _option(offer, rc.role)
        n = _replicas(offer, rc.role)
        pods = "1 pod" if n == 1 else f"{n} pods"
        notes.append(f"{rc.role}: {pods} of {o.gpus} cards, tensor-parallel {o.layout.tp}")
    if rdma:
        notes.append(f"RDMA for the KV: IPC_LOCK and one {RDMA_RESOURCE} a pod (name your "
                     "cluster's own device, and its network, if they differ)")  # fmt: skip
    return doc, notes


def render_platform(fmt: str, advice: Advice, offer: Offer, encoding: str | None = None) -> str:
    """The offer's document for platform `fmt`, under comments, every word exact or refused."""
    doc, notes = platform_document(fmt, advice, offer, encoding)
    check_words(list(_strings(doc)), encoding)
    repo = advice.repo
    header = [
        f"# {repo.id}: {name(_index(advice, offer))} {offer.result.unit.label}, "
        f"{offer.result.unit.cards} cards, its KV over {offer.result.transfer.link.name}",
        *(f"# {n}" for n in notes),
        f"# HF_TOKEN from the Secret {TOKEN_SECRET} (optional), made with:",
        f'#   kubectl create secret generic {TOKEN_SECRET} --from-literal={TOKEN_KEY}="$HF_TOKEN"',
    ]
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)  # fmt: skip
    return "\n".join(clean(h) for h in header) + "\n---\n" + body
