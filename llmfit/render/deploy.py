"""An option's launch in containers: `docker run` lines per node, or Kubernetes YAML.

Both are made from the option's own commands (its engine's `commands`) and its engine's `image`,
and name no engine. What a container changes, and why:

- A model on this machine's disk is named by its repository id instead (llama.cpp's `-hf
  REPO:QUANT`): the container reads it from the Hugging Face cache mounted into it, or downloads
  it there. A model in a local directory has no container launch: its path means nothing on the
  nodes.
- `CUDA_VISIBLE_DEVICES` becomes the container's cards (`--gpus`, or the pod's `nvidia.com/gpu`):
  inside, the cards a container was given are its only ones, numbered from 0.
- `HF_TOKEN` is passed from the environment (`-e HF_TOKEN`) or from a Secret, never its value.
- Every engine argument is passed as the plan wrote it.

Docker: one `docker run -d` a process, on the node the comment above it names; a second command
on the same node (vLLM's Ray form: `ray start`, then the serve) runs in the container the first
started there (`docker exec`). Multi-node containers use the host's network (`--network host`),
which NCCL, Gloo and Ray need to reach each other's ports by the nodes' addresses.

Kubernetes: one node is a Deployment and a Service; several are a LeaderWorkerSet (size = nodes)
and a Service on its leader. Independent servers (role "replica") are the Deployment's replicas,
each pod one server on its own cards; vLLM's data-parallel ranks are one process, so one pod holds
all of them. In a LeaderWorkerSet the head's address is `$(LWS_LEADER_ADDRESS)` and a number
that changes from worker to worker (a node rank) is written from `LWS_WORKER_INDEX`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml

from llmfit.errors import UsageError
from llmfit.plan import cards
from llmfit.plan.advice import Advice
from llmfit.plan.engines import Image, engine
from llmfit.plan.fleet import Fleet, PoolNode, is_mig
from llmfit.plan.launch import Command
from llmfit.plan.options import Option
from llmfit.render.commands import FORMATS

__all__ = ["FORMATS", "docker_lines", "k8s_documents", "render_deploy"]

# The Secret a pod reads HF_TOKEN from; optional, so that a public model needs none. Made with:
# kubectl create secret generic hf-token --from-literal=token="$HF_TOKEN"
TOKEN_SECRET = "hf-token"
TOKEN_KEY = "token"
# The host's Hugging Face cache, as `hf` finds it, mounted where the image's user keeps its own.
HOST_CACHE = '"${HF_HOME:-$HOME/.cache/huggingface}"'
# A node's cache for pods: a hostPath, so that every pod on a node shares one copy of the
# weights and a restart downloads nothing (a PersistentVolumeClaim can replace it: docs/deploy.md).
NODE_CACHE = "/var/cache/huggingface"
# /dev/shm for an engine whose processes share memory: the size LeaderWorkerSet's own vLLM example
# gives it (kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml).
SHM_LIMIT = "15Gi"
GPU_PRODUCT = "nvidia.com/gpu.product"
LEADER = "$(LWS_LEADER_ADDRESS)"
WORKER_INDEX = "LWS_WORKER_INDEX"
CARDS_ENV = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class Raw:
    """A shell word written as is: a variable expansion of llmfit's own, never an outside string."""

    text: str


def _join(words: Sequence[str | Raw]) -> str:
    return " ".join(w.text if isinstance(w, Raw) else shlex.quote(w) for w in words)


def _slug(repo_id: str) -> str:
    """A Kubernetes name (RFC 1035 label) and container name from a repository id."""
    base = re.sub(r"[^a-z0-9]+", "-", repo_id.rsplit("/", 1)[-1].lower()).strip("-")
    base = base[:40].rstrip("-") or "model"
    return base if base[0].isalpha() else f"m-{base}"[:40].rstrip("-")


def container_commands(advice: Advice, o: Option, ray: bool = False) -> list[Command]:
    """The option's commands as a container runs them (see the module's docstring)."""
    repo = advice.repo
    if repo.source == "path":
        raise UsageError(
            f"{repo.id} is a directory on this machine, which a container on another node "
            "cannot see; --format docker and k8s launch models by their Hub id.",
            hint="upload it to the Hub (hf upload), or use --format shell",
        )
    if o.artifact.path:
        o = replace(o, artifact=replace(o.artifact, path=None, projector=None))
    cmds = engine(o.engine).commands(o, repo.id, repo.revision, ray=ray)
    image = engine(o.engine).image(o)
    held = sorted({v for c in cmds for _, v in c.secrets})
    if held:
        # The words are references to the variables that hold the credentials ("$VLLM_API_KEY"),
        # which a container's exec-form command would pass on unexpanded.
        raise UsageError(
            f"the command keeps credentials in {', '.join(held)}, which a container launch "
            "would pass on unexpanded; llmfit writes none for it.",
            hint="use --format shell, with the variables set",
        )
    for c in cmds:
        if not _in_image(c.argv, image):
            raise UsageError(
                f"{c.argv[0]} is not in {image.name}, so this option has no container launch.",
                hint="use --format shell, or another option (--option N)",
            )
    return cmds


def _in_image(argv: Sequence[str], image: Image) -> bool:
    return _runs_entrypoint(argv, image) or (bool(argv) and argv[0] in image.programs)


def _runs_entrypoint(argv: Sequence[str], image: Image) -> bool:
    if not image.entrypoint:
        # An image with no ENTRYPOINT (SGLang's) is given its server's whole command, whose
        # program is the first of `programs`.
        return bool(argv) and bool(image.programs) and argv[0] == image.programs[0]
    return tuple(argv[: len(image.entrypoint)]) == image.entrypoint


def _port(argv: Sequence[str], image: Image) -> int:
    for i, a in enumerate(argv[:-1]):
        if a == image.port_flag and argv[i + 1].isdigit():
            return int(argv[i + 1])
    return image.port


def _foreground(argv: Sequence[str], image: Image) -> tuple[str, ...]:
    flags = [flag for prog, flag in image.foreground if argv and argv[0] == prog]
    return tuple(argv) + tuple(f for f in flags if f not in argv)


def _devices(o: Option, c: Command) -> list[str]:
    """The host's cards a command runs on: its CUDA_VISIBLE_DEVICES, else the first of the node."""
    given = dict(c.env).get(CARDS_ENV)
    ids = given.split(",") if given else [str(i) for i in range(o.gpus_per_node)]
    # A MIG instance is named card:instance (nvidia-container-toolkit); the first card's
    # instances are named, which `nvidia-smi -L` can replace with the instance's UUID.
    return [f"0:{i}" for i in ids] if o.card and o.card.mig else ids


# -- docker ------------------------------------------------------------------------------------


def docker_lines(advice: Advice, o: Option, ray: bool = False) -> list[str]:
    """`docker run` (and `docker exec`) lines, each under a comment naming its node where the
    plan names one."""
    image = engine(o.engine).image(o)
    cmds = container_commands(advice, o, ray)
    name = _slug(advice.repo.id)
    multi = o.nodes > 1
    started: dict[str, str] = {}
    out: list[str] = []
    replica = 0
    for c in cmds:
        if c.node:
            out.append(f"# {c.role} on {c.node}")
        env = [e for e in c.env if e[0] != CARDS_ENV]
        if c.node and c.node in started:
            words: list[str | Raw] = ["docker", "exec"]
            for k, v in env:
                words += ["-e", f"{k}={v}"]
            out.append(_join([*words, started[c.node], *c.argv]))
            continue
        cname = name
        if c.role == "replica":
            replica += 1
            cname = f"{name}-{replica}"
        words = ["docker", "run", "-d", "--name", cname]
        if not o.cpu:
            words += ["--gpus", f'"device={",".join(_devices(o, c))}"']
        if image.shared_memory:
            words.append("--ipc=host")
        if multi:
            words += ["--network", "host"]
        elif _runs_entrypoint(c.argv, image):
            port = _port(c.argv, image)
            words += ["-p", f"{port}:{port}"]
        words += ["-v", Raw(f"{HOST_CACHE}:{image.hf_home}"), "-e", "HF_TOKEN"]
        for k, v in env:
            words += ["-e", f"{k}={v}"]
        if _runs_entrypoint(c.argv, image):
            args = c.argv[len(image.entrypoint) :]
        else:
            argv = _foreground(c.argv, image)
            words += ["--entrypoint", argv[0]]
            args = argv[1:]
        out.append(_join([*words, image.name, *args]))
        if c.node:
            started[c.node] = cname
    return out


def render_docker(advice: Advice, o: Option, ray: bool = False) -> str:
    return "\n".join(docker_lines(advice, o, ray)) + "\n"


# -- Kubernetes --------------------------------------------------------------------------------


def _gpu_resource(o: Option, fleet: Fleet) -> str:
    """nvidia.com/gpu, or a MIG instance's own resource under the device plugin's mixed strategy
    (nvidia.com/mig-3g.40gb); under the single strategy, which GFD shows by naming the instance
    as the product, MIG instances are nvidia.com/gpu too."""
    if not (o.card and o.card.mig):
        return "nvidia.com/gpu"
    if any("-MIG-" in v.upper() for v in _products(o, fleet)):
        return "nvidia.com/gpu"
    return "nvidia.com/mig-" + o.card.gpu_class.rsplit("-mig-", 1)[1]


def _hosts(o: Option, fleet: Fleet) -> list[PoolNode]:
    """The fleet's nodes the option could land on: its named nodes, else every node of its
    class."""
    if o.node_ids:
        wanted = set(o.node_ids)
        return [n for n in fleet.nodes if wanted & set(n.node_ids(len(wanted)))]
    return [n for n in fleet.nodes if any(k.gpu_class == o.gpu_class for k in n.kinds)]


def _products(o: Option, fleet: Fleet) -> list[str]:
    return sorted({v for n in _hosts(o, fleet) for k, v in n.labels if k == GPU_PRODUCT})


def _card_product(gpu_class: str) -> str | None:
    """GPU Feature Discovery's product label for a class in the card table: NVML's product name
    with its spaces as dashes ("NVIDIA H100 80GB HBM3" → "NVIDIA-H100-80GB-HBM3")."""
    spec = cards.BY_KEY.get(gpu_class)
    if spec is None or is_mig(gpu_class):
        return None
    names = {a.replace(" ", "-") for a in spec.aliases if a.startswith("NVIDIA ")}
    return names.pop() if len(names) == 1 else None


def _placement(o: Option, fleet: Fleet) -> tuple[dict[str, Any], str]:
    """The pod spec's scheduling keys for the option's class, and a sentence saying where they
    came from."""
    if o.cpu:
        return {}, "a CPU option: no node selector"
    found = _products(o, fleet)
    if len(found) == 1:
        return {"nodeSelector": {GPU_PRODUCT: found[0]}}, "node selector from the fleet's labels"
    if found:
        term = {"matchExpressions": [{"key": GPU_PRODUCT, "operator": "In", "values": found}]}
        rule = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        return {"affinity": {"nodeAffinity": rule}}, "node affinity from the fleet's labels"
    product = _card_product(o.gpu_class or "")
    if product:
        return (
            {"nodeSelector": {GPU_PRODUCT: product}},
            f"node selector from the card table's product name for {o.gpu_class}",
        )
    return {}, (
        f"no node selector: the fleet has no {GPU_PRODUCT} label for {o.gpu_class} and the card "
        "table no product name (llmfit fleet import kubectl keeps the label)"
    )


def _workers_template(workers: list[Command]) -> tuple[list[str], bool]:
    """One argv for every worker of a LeaderWorkerSet, and whether it needs a shell.

    The workers' commands differ only in numbers that grow with the worker (a node rank, a first
    data-parallel rank): each is written from LWS_WORKER_INDEX (1 for the first worker), as is
    when there is one worker, since its number is then the only one. A word that varies some
    other way has no template, and is refused."""
    first = list(workers[0].argv)
    if len(workers) == 1:
        return first, False
    shell = False
    out = []
    for i, word in enumerate(first):
        column = [w.argv[i] if i < len(w.argv) else None for w in workers]
        if all(w == word for w in column):
            out.append(word)
            continue
        if not all(w is not None and w.isdigit() for w in column):
            raise UsageError("the workers' commands differ in more than their ranks.")
        values = [int(w) for w in column if w is not None]
        step, base = values[1] - values[0], values[0] - (values[1] - values[0])
        if any(v != step * k + base for k, v in enumerate(values, 1)):
            raise UsageError("the workers' ranks are not a sequence a template can write.")
        if step == 1 and base == 0:
            out.append(f"$({WORKER_INDEX})")
        else:
            shell = True
            out.append(f"$(( ${WORKER_INDEX} * {step} + {base} ))")
    return out, shell


def _shell(argv: Sequence[str]) -> str:
    """A command for `sh -c`, its LWS words left for the shell and Kubernetes to expand."""
    parts = []
    for w in argv:
        if w.startswith("$((") or w == f"$({WORKER_INDEX})" or LEADER in w:
            # Kubernetes replaces $(VAR) before the shell runs; $((…)) is the shell's arithmetic.
            parts.append(f'"{w}"' if LEADER in w else w)
        else:
            parts.append(shlex.quote(w))
    return " ".join(parts)


@dataclass(frozen=True)
class _Pod:
    """What one pod template runs: its argv (or a shell script) and env, and whether it serves."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    serves: bool
    script: str | None = None


def _container(image: Image, pod: _Pod, gpus: int, resource: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "server" if pod.serves else "worker", "image": image.name}
    if pod.script is not None:
        c["command"] = ["/bin/sh", "-c", pod.script]
    elif _runs_entrypoint(pod.argv, image):
        c["args"] = list(pod.argv[len(image.entrypoint) :])
    else:
        c["command"] = list(_foreground(pod.argv, image))
    token = {"secretKeyRef": {"name": TOKEN_SECRET, "key": TOKEN_KEY, "optional": True}}
    env: list[dict[str, Any]] = [{"name": "HF_TOKEN", "valueFrom": token}]
    env += [{"name": k, "value": v} for k, v in pod.env if k != CARDS_ENV]
    c["env"] = env
    if pod.serves:
        c["ports"] = [{"name": "http", "containerPort": _port(pod.argv, image)}]
    if gpus:
        c["resources"] = {"limits": {resource: gpus}, "requests": {resource: gpus}}
    mounts = [{"name": "hf-cache", "mountPath": image.hf_home}]
    if image.shared_memory:
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    c["volumeMounts"] = mounts
    if pod.serves:
        # Ready once the model is loaded: a large model takes minutes, so no liveness probe
        # that would restart it while it loads.
        c["readinessProbe"] = {
            "httpGet": {"path": image.health, "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        }
    return c


def _pod_spec(
    image: Image, pod: _Pod, gpus: int, resource: str, placement: dict[str, Any]
) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [
        {"name": "hf-cache", "hostPath": {"path": NODE_CACHE, "type": "DirectoryOrCreate"}}
    ]
    if image.shared_memory:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_LIMIT}})
    return {
        "containers": [_container(image, pod, gpus, resource)],
        **placement,
        "volumes": volumes,
    }


def _metadata(name: str, advice: Advice, o: Option) -> dict[str, Any]:
    repo = advice.repo
    return {
        "name": name,
        "labels": {"app.kubernetes.io/name": name},
        "annotations": {
            "llmfit/repo": repo.id + (f"@{repo.revision}" if repo.revision else ""),
            "llmfit/artifact": o.artifact.name,
            "llmfit/where": engine(o.engine).where(o),
        },
    }


def _service(name: str, selector: dict[str, str], port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "selector": selector,
            "ports": [{"name": "http", "port": port, "targetPort": "http"}],
        },
    }


def k8s_documents(advice: Advice, o: Option, ray: bool = False) -> tuple[list[dict], list[str]]:
    """The option as Kubernetes objects, and the notes to print above them."""
    image = engine(o.engine).image(o)
    name = _slug(advice.repo.id)
    resource = _gpu_resource(o, advice.fleet)
    placement, where = _placement(o, advice.fleet)
    notes = [where]
    labels = {"app.kubernetes.io/name": name}
    if o.nodes <= 1:
        cmds = container_commands(advice, o, ray)
        first = cmds[0]
        replicas = sum(1 for c in cmds if c.role == "replica") or 1
        gpus = o.layout.cards_per_replica if replicas > 1 else o.gpus_per_node
        pod = _Pod(first.argv, first.env, serves=True)
        spec = _pod_spec(image, pod, 0 if o.cpu else gpus, resource, placement)
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(name, advice, o),
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                # Recreate: a rolling update would need a second set of cards for the new pod.
                "strategy": {"type": "Recreate"},
                "template": {"metadata": {"labels": labels}, "spec": spec},
            },
        }
        if replicas > 1:
            notes.append(f"{replicas} pods, one server each; the Service spreads requests")
        return [deployment, _service(name, labels, _port(first.argv, image))], notes
    # Several nodes: the head's address is the leader pod's, the node names placeholders.
    lws_option = replace(o, node_ids=(LEADER, *(f"worker-{i}" for i in range(1, o.nodes))))
    cmds = container_commands(advice, lws_option, ray)
    head = [c for c in cmds if c.role == "head"]
    workers = [c for c in cmds if c.role == "worker"]
    serve = head[-1]
    if len(head) > 1:
        # The leader runs the head's commands in turn (Ray: start the head, wait for the
        # workers to join, serve); the last in the foreground.
        steps = [_shell(c.argv) for c in head[:-1]]
        if image.joined:
            steps.append(f"until {image.joined.replace('{nodes}', str(o.nodes))}; do sleep 5; done")
        steps.append("exec " + _shell(serve.argv))
        leader = _Pod(serve.argv, serve.env, serves=True, script=" && ".join(steps))
    else:
        leader = _Pod(serve.argv, serve.env, serves=True)
    argv, needs_shell = _workers_template(workers)
    worker = _Pod(
        tuple(argv),
        workers[0].env,
        serves=False,
        script=("exec " + _shell(_foreground(argv, image))) if needs_shell else None,
    )
    gpus = o.gpus_per_node
    leader_labels = {**labels, "llmfit/role": "leader"}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(name, advice, o),
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": o.nodes,
                # One pod lost breaks the group's collective: start the group again.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": {"labels": leader_labels},
                    "spec": _pod_spec(image, leader, gpus, resource, placement),
                },
                "workerTemplate": {
                    "metadata": {"labels": {**labels, "llmfit/role": "worker"}},
                    "spec": _pod_spec(image, worker, gpus, resource, placement),
                },
            },
        },
    }
    notes.append(
        f"a LeaderWorkerSet of {o.nodes} pods, {gpus} cards each (the LeaderWorkerSet "
        "controller must be installed)"
    )
    return [lws, _service(name, leader_labels, _port(serve.argv, image))], notes


class _Dumper(yaml.SafeDumper):
    """YAML a person reads: every mapping written out where it stands, no anchors or aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render_k8s(advice: Advice, o: Option, ray: bool = False) -> str:
    docs, notes = k8s_documents(advice, o, ray)
    repo = advice.repo
    header = [
        f"# {repo.id}: {engine(o.engine).where(o)}, {o.artifact.name}",
        *(f"# {n}" for n in notes),
        f"# HF_TOKEN from the Secret {TOKEN_SECRET} (optional), made with:",
        f'#   kubectl create secret generic {TOKEN_SECRET} --from-literal={TOKEN_KEY}="$HF_TOKEN"',
    ]
    # Outside strings (repository ids, node names) in a comment could hold a newline: kept on
    # their line.
    header = [h.replace("\n", " ").replace("\r", " ") for h in header]
    body = yaml.dump_all(
        docs,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
    return "\n".join(header) + "\n---\n" + body


def render_deploy(fmt: str, advice: Advice, o: Option, ray: bool = False) -> str:
    """The option's launch in `fmt` ("docker" or "k8s")."""
    if fmt == "docker":
        return render_docker(advice, o, ray)
    if fmt == "k8s":
        return render_k8s(advice, o, ray)
    raise ValueError(f"unknown format {fmt!r}")
