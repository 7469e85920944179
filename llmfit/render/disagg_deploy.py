"""A disaggregated option's launch (`--option D1 --commands`), as shell lines, `docker run`
lines or Kubernetes YAML, made from its roles' commands (plan/engines/disagg_launch.py) with
render/deploy.py's rules for what a container changes (its cards, its caches, HF_TOKEN by name
or from a Secret, never its value) and naming no engine.

Docker: one `docker run -d` a worker, on the cards its command names (CUDA_VISIBLE_DEVICES
becomes `--gpus`), and one for the router. Every container uses the host's network: the router
reaches the workers at the addresses the plan gives them, and the workers reach each other's
KV side channel or bootstrap port there; on one node the host's IPC namespace too, which the
KV transfer over NVLink (CUDA IPC between processes) needs.

Kubernetes: each role a StatefulSet behind a headless Service, its replicas the role's workers
(times the units the load named needs), so that each worker has a name of its own
(`qwen3-235b-a22b-prefill-0.qwen3-235b-a22b-prefill`) that the router names, as the shell
launch names `prefill-1`: a Service spreading requests over the pool would send a decode worker
to another prefill worker than the one that holds its request's KV. A worker's own address in
its command (NIXL's side channel host) is its pod's IP. The router is a Deployment, and a
Service in front of it is the address clients call. A worker is one node at most (the planner
pairs one-node options only), so no LeaderWorkerSet is needed. A unit the plan put on one node's
NVLink is pinned there: each unit its own StatefulSets, labelled with its number, whose pods
require a node holding the unit's other pods (pod affinity on the node's hostname) and share the
host's IPC namespace (the KV moves between processes by CUDA IPC), and its own router, so that
no request's KV crosses from one unit's node to another's; the Service spreads clients over the
units' routers.

The router runs in a plain Python image that installs the router's pinned package from PyPI
when it starts (`router_package`): the engines' images are not known to hold it.
"""

from __future__ import annotations

from typing import Any

import yaml

from llmfit.errors import UsageError
from llmfit.plan.advice import Advice
from llmfit.plan.disagg import Offer
from llmfit.plan.engines import engine, pair_commands, router_package
from llmfit.plan.engines.disagg_launch import workers
from llmfit.plan.launch import Command
from llmfit.render.commands import command_text
from llmfit.render.deploy import (
    CARDS_ENV,
    RDMA_DEVICE,
    RDMA_KINDS,
    RDMA_RESOURCE,
    TOKEN_KEY,
    TOKEN_SECRET,
    Raw,
    _Dumper,
    _expandable,
    _foreground,
    _gpu_resource,
    _join,
    _metadata,
    _mounts_and_env,
    _placement,
    _Pod,
    _pod_spec,
    _runs_entrypoint,
    _slug,
    _strings,
    refuse_local_repo,
)
from llmfit.render.disagg import command_lines, name
from llmfit.render.safe import check_words, clean

__all__ = ["ROUTER_IMAGE", "docker_lines", "render_k8s", "shell_lines"]

# The router's image: Python, with pip, and nothing else; the router's wheel is a binary of its
# own (vllm-router and sglang-router are Rust), so it needs no GPU and no engine.
ROUTER_IMAGE = "python:3.12-slim"
# Installs the package ($0) and runs the router ("$@"): llmfit's own text, the words its
# arguments.
ROUTER_SCRIPT = 'pip install --no-cache-dir --root-user-action=ignore "$0" && exec "$@"'
# What the router pod requests: it forwards requests, it computes nothing.
ROUTER_CPU = "2"
ROUTER_MEMORY = "2Gi"


def _role_option(offer: Offer, role: str) -> Any:
    return offer.prefill if role == "prefill" else offer.decode


def _on_rdma(advice: Advice, offer: Offer) -> bool:
    """Whether the pools' KV crosses a fabric the fleet says is InfiniBand or RoCE."""
    if offer.result.transfer.link.kind != "rdma":
        return False
    classes = {offer.prefill.gpu_class, offer.decode.gpu_class}
    return any(
        n.fabric_kind in RDMA_KINDS and any(k.gpu_class in classes for k in n.kinds)
        for n in advice.fleet.nodes
    )


def _units_line(offer: Offer) -> str | None:
    units = offer.result.units
    if not units or units <= 1:
        return None
    more = units - 1
    return (
        f"the load named needs {units} such units: this is one, start {more} more on cards of "
        "their own"
    )


def shell_lines(advice: Advice, offer: Offer, encoding: str | None = None) -> list[str]:
    """The roles' command lines, each word checked to print exactly, under comments naming
    them (render/disagg.py `command_lines`)."""
    repo = advice.repo
    for c in pair_commands(offer, repo.id, repo.revision):
        command_text(c, encoding)
    out = [clean(line) if line.startswith("#") else line for line in command_lines(advice, offer)]
    line = _units_line(offer)
    return ([f"# {line}"] if line else []) + out


# -- docker ------------------------------------------------------------------------------------


def docker_lines(advice: Advice, offer: Offer, encoding: str | None = None) -> list[str]:
    """One `docker run` a worker on its own cards and port, then the router's."""
    refuse_local_repo(advice)
    repo = advice.repo
    slug = _slug(repo.id)
    one_node = offer.result.transfer.link.kind == "node"
    rdma = _on_rdma(advice, offer)
    out = [
        f"# {repo.id}: {name(_index(advice, offer))} {offer.result.unit.label}, "
        f"{offer.result.unit.cards} cards, its KV over {offer.result.transfer.link.name}"
    ]
    line = _units_line(offer)
    if line:
        out.append(f"# {line}")
    if one_node:
        out.append(f"# all on one node of {offer.result.unit.cards} cards or more, each worker on "
                   "its own cards, the host's network and IPC shared")  # fmt: skip
    else:
        out.append("# each worker on a node of its own, reached at its name (prefill-1, "
                   "decode-1, …: the node's address), on the host's network")  # fmt: skip
    for c in pair_commands(offer, repo.id, repo.revision):
        if c.role == "router":
            out.append("# router, in front of them (clients call its port)")
            words: list[str | Raw] = [
                "docker", "run", "-d", "--name", f"{slug}-router", "--network", "host",
                ROUTER_IMAGE, "sh", "-c", ROUTER_SCRIPT, router_package(offer), *c.argv,
            ]  # fmt: skip
            out.append(_join(words, encoding))
            continue
        out.append(f"# {c.node}")
        out.append(_docker_worker(_role_option(offer, c.role), c, f"{slug}-{c.node}",
                                  one_node, rdma, encoding))  # fmt: skip
    return [clean(x) if x.startswith("#") else x for x in out]


def _docker_worker(
    o: Any, c: Command, cname: str, one_node: bool, rdma: bool, encoding: str | None
) -> str:
    if c.secrets:
        raise UsageError("a disaggregated launch holds no credential word.")
    image = engine(o.engine).image(o)
    env = [e for e in c.env if e[0] != CARDS_ENV]
    given = dict(c.env).get(CARDS_ENV)
    devices = given.split(",") if given else [str(i) for i in range(o.gpus)]
    words: list[str | Raw] = ["docker", "run", "-d", "--name", cname,
                              "--gpus", f'"device={",".join(devices)}"']  # fmt: skip
    if image.shared_memory or one_node:
        words.append("--ipc=host")
    words += ["--network", "host"]
    if rdma:
        words += ["--device", RDMA_DEVICE, "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1"]
    words += _mounts_and_env(image, env, encoding)
    if _runs_entrypoint(c.argv, image):
        args: tuple[str, ...] = c.argv[len(image.entrypoint) :]
    else:
        fg = _foreground(c.argv, image)
        words += ["--entrypoint", fg[0]]
        args = fg[1:]
    return _join([*words, image.name, *args], encoding)


def _index(advice: Advice, offer: Offer) -> int:
    for i, o in enumerate(advice.plan.disaggregated, 1):
        if o is offer:
            return i
    return 1


# -- Kubernetes --------------------------------------------------------------------------------


def _headless(name: str, selector: dict[str, str], port: int) -> dict[str, Any]:
    """The Service that gives each worker of a role its own name (pod.service): no cluster IP,
    and every pod's name published while it loads, so that the router finds it from the start
    (the routers wait for each worker's health themselves)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [{"name": "http", "port": port, "targetPort": "http"}],
        },
    }


# The node label every node carries with its own name: pods whose affinity names it share a node.
HOSTNAME = "kubernetes.io/hostname"


def _with_unit(spec: dict[str, Any], slug: str, unit_no: int) -> dict[str, Any]:
    """The pod spec's keys that put a unit's pods on one node: a required affinity to the pods
    of its unit on the node's hostname (the first pod of a unit, matching its own selector with
    none placed yet, is placed anywhere its node selector allows: the scheduler's InterPodAffinity
    filter lets a pod whose affinity only it satisfies start a group), beside the node
    affinity the placement may have given, and the host's IPC namespace."""
    term = {
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": slug,
                                          "llmfit/unit": str(unit_no)}},
        "topologyKey": HOSTNAME,
    }  # fmt: skip
    affinity = dict(spec.get("affinity", {}))
    affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return {"affinity": affinity, "hostIPC": True}


def _router_argv(argv: tuple[str, ...], urls: dict[str, list[str]]) -> list[str]:
    """The router's words with its workers' addresses (`--prefill URL [BOOTSTRAP]`, `--decode
    URL`) replaced by the pods' own, in place of the first: a prefill's bootstrap port, where
    the launch gives one, is the same for every prefill pod (each has its own address)."""
    out: list[str] = []
    placed = False
    bootstrap: str | None = None
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("--prefill", "--decode"):
            i += 2
            if word == "--prefill" and i < len(argv) and argv[i].isdigit():
                bootstrap = bootstrap or argv[i]
                i += 1
            if not placed:
                placed = True
                out.append("\x00urls")
            continue
        out.append(word)
        i += 1
    at = out.index("\x00urls")
    words: list[str] = []
    for role in ("prefill", "decode"):
        for url in urls[role]:
            words += [f"--{role}", url]
            if role == "prefill" and bootstrap is not None:
                words.append(bootstrap)
    return [*out[:at], *words, *out[at + 1 :]]


def k8s_documents(
    advice: Advice, offer: Offer, encoding: str | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The offer as Kubernetes objects, and the notes to print above them."""
    refuse_local_repo(advice)
    repo = advice.repo
    slug = _slug(repo.id)
    rdma = _on_rdma(advice, offer)
    units = max(offer.result.units or 1, 1)
    cmds = pair_commands(offer, repo.id, repo.revision, apart=True)
    hosts = {w.name: w.host for w in workers(offer, apart=True)}
    docs: list[dict[str, Any]] = []
    # Each group's workers' addresses, by role: a unit's own router names its unit's alone.
    urls: dict[int, dict[str, list[str]]] = {}
    notes: list[str] = []
    # A unit the plan put on one node's NVLink: each unit's pods on one node, sharing its IPC
    # namespace (the KV moves between processes by CUDA IPC, as --format docker's --ipc=host),
    # each unit a StatefulSet a role labelled with its number, which its pods' affinity names.
    together = offer.result.transfer.link.kind == "node"
    groups = [(u, 1) for u in range(1, units + 1)] if together else [(0, units)]
    for (unit_no, times), role in (
        (g, r) for g in groups for r in ("prefill", "decode")
    ):  # fmt: skip
        count = offer.result.unit.prefill_workers if role == "prefill" else (
            offer.result.unit.decode_workers
        )  # fmt: skip
        o = _role_option(offer, role)
        first = next(c for c in cmds if c.role == role)
        if first.secrets:
            raise UsageError("a disaggregated launch holds no credential word.")
        image = engine(o.engine).image(o)
        own = hosts[first.node or ""]
        # A worker's own address in its environment (NIXL's side channel host) is its pod's IP,
        # set below from the pod's status; every other variable as the command sets it.
        addressed = [k for k, v in first.env if v == own]
        env = tuple((k, v) for k, v in first.env if v != own)
        pod = _Pod(first.argv, env, serves=True, rdma=rdma)
        placement, where = _placement(o, advice.fleet)
        spec = _pod_spec(image, pod, o, o.gpus, _gpu_resource(o, advice.fleet), placement,
                         encoding)  # fmt: skip
        container = spec["containers"][0]
        container["name"] = role
        container["env"] += [
            {"name": k, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} for k in addressed
        ]
        name_ = f"{slug}-{role}" if len(groups) == 1 else f"{slug}-u{unit_no}-{role}"
        labels = {"app.kubernetes.io/name": slug, "llmfit/role": role}
        if together:
            labels["llmfit/unit"] = str(unit_no)
            spec = {**spec, **_with_unit(spec, slug, unit_no)}
        replicas = count * times
        port = int(container["ports"][0]["containerPort"])
        docs.append(_headless(name_, labels, port))
        docs.append({
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": _metadata(name_, advice, o),
            "spec": {
                "serviceName": name_,
                "replicas": replicas,
                # Every worker at once: none waits for another to be ready.
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": spec},
            },
        })  # fmt: skip
        urls.setdefault(unit_no, {})[role] = [
            f"http://{name_}-{i}.{name_}:{port}" for i in range(replicas)
        ]
        if unit_no <= 1:
            pods = count * units
            pods_ = "1 pod" if pods == 1 else f"{pods} pods"
            notes.append(f"{role}: {pods_} of {o.gpus} cards ({where})")
    router = next(c for c in cmds if c.role == "router")
    serving = {"app.kubernetes.io/name": slug, "llmfit/role": "router"}
    script = ROUTER_SCRIPT.replace("$", "$$")
    port = 8000
    # One router a group: where the units are pinned to nodes of their own, each unit's router
    # pairs its own workers only (a router over every unit would send a request's KV from one
    # unit's node to another's, over the pod network); the Service spreads clients over them.
    for unit_no, _ in groups:
        argv = _router_argv(router.argv, urls[unit_no])
        port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8000
        labels = dict(serving)
        if len(groups) > 1:
            labels["llmfit/unit"] = str(unit_no)
        container = {
            "name": "router",
            "image": ROUTER_IMAGE,
            "command": ["sh", "-c", script, *(_expandable(w, encoding)
                                              for w in (router_package(offer), *argv))],
            "ports": [{"name": "http", "containerPort": port}],
            "resources": {"requests": {"cpu": ROUTER_CPU, "memory": ROUTER_MEMORY}},
        }  # fmt: skip
        rname = f"{slug}-router" if len(groups) == 1 else f"{slug}-u{unit_no}-router"
        docs.append({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": rname, "labels": {"app.kubernetes.io/name": slug}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                             "spec": {"containers": [container]}},
            },
        })  # fmt: skip
    docs.append({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": slug, "labels": {"app.kubernetes.io/name": slug}},
        "spec": {"selector": serving,
                 "ports": [{"name": "http", "port": port, "targetPort": "http"}]},
    })  # fmt: skip
    if units > 1:
        label = offer.result.unit.label
        notes.append(
            f"the load named needs {units} units of {label}: each unit a StatefulSet a role "
            f"and a router of its own ({slug}-u1-prefill, {slug}-u1-decode, {slug}-u1-router, "
            f"{slug}-u2-…), the Service {slug} in front of every router"
            if together
            else f"the load named needs {units} units of {label}: each role's replicas are its "
            "workers times that, behind one router"
        )
    if rdma:
        notes.append(f"RDMA for the KV: host network, IPC_LOCK and one {RDMA_RESOURCE} a pod "
                     "(the NVIDIA Network Operator's shared RDMA device; name your cluster's own "
                     "if it differs)")  # fmt: skip
    elif together:
        notes.append(f"the plan moves the KV over {offer.result.transfer.link.name} inside one "
                     "node: each unit's pods are pinned to one node (pod affinity on "
                     f"{HOSTNAME}) and share its IPC namespace (hostIPC), as --format docker "
                     "runs them")  # fmt: skip
    return docs, notes


def render_k8s(advice: Advice, offer: Offer, encoding: str | None = None) -> str:
    docs, notes = k8s_documents(advice, offer, encoding)
    check_words(list(_strings(docs)), encoding)
    repo = advice.repo
    header = [
        f"# {repo.id}: {name(_index(advice, offer))} {offer.result.unit.label}, "
        f"{offer.result.unit.cards} cards, its KV over {offer.result.transfer.link.name}",
        *(f"# {n}" for n in notes),
        f"# HF_TOKEN from the Secret {TOKEN_SECRET} (optional), made with:",
        f'#   kubectl create secret generic {TOKEN_SECRET} --from-literal={TOKEN_KEY}="$HF_TOKEN"',
    ]
    header = [clean(h) for h in header]
    body = yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=100)  # fmt: skip
    return "\n".join(header) + "\n---\n" + body
