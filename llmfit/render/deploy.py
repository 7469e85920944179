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

Every word is exact (issue 24). A docker line's words are each quoted once from their exact
characters, and refused (render/safe.py `check_words`) rather than cleaned. YAML is written by
PyYAML from data, with every string that YAML 1.2 (kubectl) or YAML 1.1 would read as something
else quoted (`1e3`, `true`, `null`, `~`, `0o17`), and every `$` of a word in `command`, `args` or
an environment value doubled (`$$`), so that Kubernetes' `$(VAR)` expansion gives back the word;
only llmfit's own `$(LWS_LEADER_ADDRESS)` and `$(LWS_WORKER_INDEX)` are left to expand. A pod
that needs a shell (Ray's leader, a worker's rank worked out by arithmetic) runs a script of
llmfit's own text that gets the command's words as its arguments (`"$@"`), never pasted into it.

On a fabric the fleet says is InfiniBand or RoCE (`fabric_kind`; a fabric's name says nothing),
a multi-node launch carries RDMA: docker's `--device /dev/infiniband --cap-add IPC_LOCK
--ulimit memlock=-1`, and a pod's `hostNetwork`, `IPC_LOCK` and one shared RDMA device
(RDMA_RESOURCE), as NCCL needs them to use the fabric instead of falling back to TCP sockets.
Every pod requests CPU and memory (requests, not limits: a limit would kill a server at a peak
the plan does not model).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml

from llmfit.errors import UsageError
from llmfit.plan import cards
from llmfit.plan.advice import Advice
from llmfit.plan.credentials import FROM_CALLER
from llmfit.plan.engines import Image, engine
from llmfit.plan.fleet import Fleet, PoolNode, is_mig
from llmfit.plan.launch import Command
from llmfit.plan.options import Option
from llmfit.render.commands import FORMATS, scale_line
from llmfit.render.safe import check_words, clean, shown

__all__ = ["FORMATS", "docker_lines", "k8s_documents", "render_docker", "render_k8s"]

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
# What stands for the leader's address in the commands llmfit makes for a LeaderWorkerSet: a name
# no outside word can hold (argv and revisions cannot hold NUL), replaced by LEADER only after
# every outside `$` is doubled.
LEADER_MARK = "\x00lws-leader\x00"
WORKER_INDEX = "LWS_WORKER_INDEX"
CARDS_ENV = "CUDA_VISIBLE_DEVICES"
# RDMA over InfiniBand or RoCE: the devices, the capability that lets NCCL pin memory for them,
# and the locked-memory limit lifted (NVIDIA's and the engines' multi-node container docs).
RDMA_DEVICE = "/dev/infiniband"
# The shared RDMA device a pod asks for: the NVIDIA Network Operator's rdma-shared-device-plugin
# default; a cluster with another RDMA device plugin names its own (docs/deploy.md).
RDMA_RESOURCE = "rdma/rdma_shared_device_a"
# The fabrics (a fleet's `fabric_kind`) whose multi-node launches carry RDMA.
RDMA_KINDS = ("infiniband", "roce")


def _set_path(env: Sequence[tuple[str, str]], name: str) -> str | None:
    """The path a command's own environment sets `name` to (HF_HOME=/data/hf), the last one
    winning as in a shell; None where it sets none. A container's path must be absolute."""
    value = None
    for k, v in env:
        if k == name and v != FROM_CALLER:
            value = v
    if value is not None and not value.startswith("/"):
        raise UsageError(
            f"{name}={shown(value)} is not an absolute path, so a container cannot mount the "
            "cache there.",
            hint=f"give {name} as an absolute path, or use --format shell",
        )
    return value


def _hf_home(image: Image, env: Sequence[tuple[str, str]]) -> str:
    """Where the container's Hugging Face cache is mounted: where the command's HF_HOME says,
    else the image user's own."""
    return _set_path(env, "HF_HOME") or image.hf_home


def _download_paths(image: Image, env: Sequence[tuple[str, str]] = ()) -> tuple[str, str, str]:
    """Where an engine's own downloads (Image.download_cache) are kept: in the container (where
    the command's own variable says, else under its user's home, /root), on a docker host (the
    variable, else the user's own), and on a Kubernetes node (under /var/cache)."""
    inside = _set_path(env, image.download_cache) or f"/root/{image.download_dir}"
    host = f'"${{{image.download_cache}:-$HOME/{image.download_dir}}}"'
    node = f"/var/cache/{image.download_dir.rsplit('/', 1)[-1]}"
    return inside, host, node


# CPU a GPU pod requests: a core for each card's worker process and two for the API server, the
# tokenizer and the scheduler (vLLM and SGLang run one process a card).
CPU_PER_CARD = 2
CPU_BASE = 2
# A CPU server's pod requests the cores llama.cpp computes on (it takes every core it sees).
CPU_SERVER_CORES = 8
# Memory a GPU pod requests beyond what the plan puts in the host's RAM: the Python runtime, the
# tokenizer, pinned transfer buffers and the model's files read through the page cache.
POD_MEMORY_BASE = 8 << 30
GIB = 1 << 30


@dataclass(frozen=True)
class Raw:
    """A shell word written as is: a variable expansion of llmfit's own, never an outside string."""

    text: str


def _join(words: Sequence[str | Raw], encoding: str | None = None) -> str:
    """A docker line: each outside word quoted once, after every one is checked to print exactly;
    llmfit's own expansions (Raw) as they are."""
    check_words([w for w in words if not isinstance(w, Raw)], encoding)
    return " ".join(w.text if isinstance(w, Raw) else shlex.quote(w) for w in words)


def _quoted(word: str, encoding: str | None) -> str:
    """An outside word, checked to print exactly and quoted once, to join to llmfit's own text
    inside one shell word."""
    check_words([word], encoding)
    return shlex.quote(word)


def rdma(o: Option, fleet: Fleet) -> bool:
    """Whether the option's nodes talk over a fabric the fleet says is InfiniBand or RoCE
    (`fabric_kind`), never by its name (`ibm-cloud` is no InfiniBand)."""
    if o.nodes <= 1 or not o.fabric:
        return False
    return any(n.fabric == o.fabric and n.fabric_kind in RDMA_KINDS for n in fleet.nodes)


def secret_env(name: str, secret: str, key: str, optional: bool = False) -> dict[str, Any]:
    """An environment variable of a container read from a Secret's key, never written as a
    value: `name` from `secret`'s `key` (optional: the pod starts without it)."""
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def _slug(repo_id: str) -> str:
    """A Kubernetes name (RFC 1035 label) and container name from a repository id."""
    base = re.sub(r"[^a-z0-9]+", "-", repo_id.rsplit("/", 1)[-1].lower()).strip("-")
    base = base[:40].rstrip("-") or "model"
    return base if base[0].isalpha() else f"m-{base}"[:40].rstrip("-")


def refuse_local_repo(advice: Advice) -> None:
    """A repository read from a directory on this machine cannot be launched in a container,
    which finds models by their Hub id: one sentence, for every container launch."""
    repo = advice.repo
    if repo.source == "path":
        raise UsageError(
            f"{shown(repo.id)} is a directory on this machine, which a container on another node "
            "cannot see; --format docker and k8s launch models by their Hub id.",
            hint="upload it to the Hub (hf upload), or use --format shell",
        )


def container_commands(advice: Advice, o: Option, ray: bool = False) -> list[Command]:
    """The option's commands as a container runs them (see the module's docstring)."""
    refuse_local_repo(advice)
    repo = advice.repo
    if o.artifact.path:
        o = replace(o, artifact=replace(o.artifact, path=None, projector=None))
    cmds = engine(o.engine).commands(o, repo.id, repo.revision, ray=ray)
    image = engine(o.engine).image(o)
    for c in cmds:
        if not _in_image(c.argv, image):
            raise UsageError(
                f"{c.argv[0]} is not in {image.name}, so this option has no container launch.",
                hint="use --format shell, or another option (--option N)",
            )
    return cmds


def _in_image(argv: Sequence[str], image: Image) -> bool:
    return _runs_entrypoint(argv, image) or (bool(argv) and argv[0] in image.programs)


def _mounts_and_env(
    image: Image, env: Sequence[tuple[str, str]], encoding: str | None
) -> list[str | Raw]:
    """A `docker run`'s caches and environment: the caches mounted where the command's own
    HF_HOME or download variable says (LLAMA_CACHE=/models), which its own `-e` then sets, each
    variable listed once; HF_TOKEN and every credential set in front of the command passed by
    name from the caller's environment, never its value."""
    home = _quoted(_hf_home(image, env), encoding)
    words: list[str | Raw] = ["-v", Raw(f"{HOST_CACHE}:{home}"), "-e", "HF_TOKEN"]
    if image.download_cache:
        inside, host, _ = _download_paths(image, env)
        words += ["-v", Raw(f"{host}:{_quoted(inside, encoding)}")]
        if _set_path(env, image.download_cache) is None:
            words += ["-e", f"{image.download_cache}={inside}"]
    passed = {"HF_TOKEN"}
    for k, v in env:
        if v != FROM_CALLER:
            words += ["-e", f"{k}={v}"]
        elif k not in passed:
            passed.add(k)
            words += ["-e", k]
    return words


def _runs_entrypoint(argv: Sequence[str], image: Image) -> bool:
    if not image.entrypoint:
        # An image with no ENTRYPOINT (SGLang's) is given its server's whole command, whose
        # program is the first of `programs`.
        return bool(argv) and bool(image.programs) and argv[0] == image.programs[0]
    return tuple(argv[: len(image.entrypoint)]) == image.entrypoint


def _port(argv: Sequence[str], image: Image) -> int:
    """The port the server listens on: its port flag's value in either form the engines' parsers
    take (`--port 9000`, `--port=9000`), the last one given winning as it does for them; else the
    image's default."""
    port = image.port
    for i, a in enumerate(argv):
        name, eq, value = a.partition("=")
        if name != image.port_flag:
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        if value.isascii() and value.isdigit() and 0 < int(value) < 65536:
            port = int(value)
    return port


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


@dataclass(frozen=True)
class Seat:
    """Where one copy of an option runs: its nodes, head first (() where the plan names none),
    and the first of its cards on each."""

    nodes: tuple[str, ...]
    first_card: int = 0


def seats(o: Option, fleet: Fleet, n: int) -> list[Seat]:
    """Where each of `n` copies of the option runs: the fleet's nodes of its class (its fabric,
    across nodes), on free cards where the free ones hold all `n`, packed a node's cards at a
    time; the first copy on the plan's own nodes. A copy the fleet has no room for gets
    placeholder nodes (`<node-1>`), which the user names."""
    if n <= 1:
        return [Seat(o.node_ids)]
    spare = iter(f"<node-{i}>" for i in range(1, n * max(o.nodes, 1) + 1))
    if o.cpu:
        ids = [i for node in fleet.nodes if node.is_cpu for i in node.node_ids(n)]
        ids += [next(spare) for _ in range(n - len(ids))]
        return [Seat((i,)) for i in ids[:n]]
    per = max(o.gpus_per_node, 1)
    mig = bool(o.card and o.card.mig)

    def hosts(free: bool) -> list[tuple[str, int]]:
        """(node id, copies it holds) of the class, up to what n copies need."""
        out: list[tuple[str, int]] = []
        want = n * o.nodes
        for node in fleet.nodes:
            if o.nodes > 1 and node.fabric != (o.fabric or ""):
                continue
            for k in node.kinds:
                if k.gpu_class != o.gpu_class:
                    continue
                cards = min(k.free_gpus, k.healthy) if free else k.healthy
                fits = min(cards, 1) if mig else cards // per
                if o.nodes > 1:
                    fits = min(fits, 1)
                if fits and len(out) < want:
                    out += [(i, fits) for i in node.node_ids(want - len(out))]
        return out

    free = hosts(True)
    room = sum(f for _, f in free) if o.nodes <= 1 else len(free) // o.nodes
    found = free if room >= n else hosts(False)
    out: list[Seat] = []
    if o.nodes <= 1:
        for node_id, fits in found:
            out += [Seat((node_id,), j * per) for j in range(fits)][: n - len(out)]
        out += [Seat((next(spare),)) for _ in range(n - len(out))]
        return out
    first = o.node_ids or tuple(i for i, _ in found[: o.nodes])
    rest = [i for i, _ in found if i not in first]
    out.append(Seat(first))
    while len(out) < n:
        group = tuple(rest[: o.nodes])
        rest = rest[o.nodes :]
        group += tuple(next(spare) for _ in range(o.nodes - len(group)))
        out.append(Seat(group))
    return out


# The front of several servers: nginx, spreading requests to the server with the fewest in
# flight (least_conn), streaming answers as they come (no buffering), and waiting as long as a
# long generation takes. Its configuration is llmfit's own text, the servers' addresses its
# arguments (names checked to be host names: an outside name is never configuration).
FRONT_IMAGE = "nginx:1.27-alpine"
FRONT_SCRIPT = 'printf "%s\\n" "$@" > /etc/nginx/conf.d/default.conf && exec nginx -g "daemon off;"'
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?|<node-[0-9]+>|127\.0\.0\.1")


def front_words(name: str, servers: Sequence[tuple[str, int]], port: int) -> list[str | Raw]:
    """The `docker run` words of the front that gives `servers` (host, port) one address, on
    `port` of the node it runs on."""
    for host, _ in servers:
        if not _HOST.fullmatch(host):
            raise UsageError(
                f"the node name {shown(host)} is not a host name, so the front of the servers "
                "cannot be written to reach it.",
                hint="name the fleet's nodes by their host names",
            )
    conf = [
        "upstream servers {",
        "  least_conn;",
        *(f"  server {h}:{p};" for h, p in servers),
        "}",
        "server {",
        f"  listen {port};",
        "  location / {",
        "    proxy_pass http://servers;",
        "    proxy_buffering off;",
        "    proxy_read_timeout 1h;",
        "  }",
        "}",
    ]
    return [
        "docker", "run", "-d", "--name", f"{name}-front", "--network", "host", FRONT_IMAGE,
        "sh", "-c", FRONT_SCRIPT, "sh", *conf,
    ]  # fmt: skip


def _with_port(argv: Sequence[str], flag: str, port: int) -> tuple[str, ...]:
    """The command listening on `port`: its own `flag` value replaced, else the flag added."""
    words = list(argv)
    for i, a in enumerate(words[:-1]):
        if a == flag:
            words[i + 1] = str(port)
            return tuple(words)
    return (*words, flag, str(port))


def _serves(c: Command, image: Image) -> bool:
    """Whether the command is a server clients call (not a worker, not Ray's daemon)."""
    return (
        c.role != "worker"
        and _in_image(c.argv, image)
        and (_runs_entrypoint(c.argv, image) or c.argv[0] == (image.programs or ("",))[0])
    )


def docker_lines(
    advice: Advice, o: Option, ray: bool = False, encoding: str | None = None
) -> list[str]:
    """`docker run` (and `docker exec`) lines, each under a comment naming its node where the
    plan names one; as many copies of the option as its launch starts (Option.launched), and
    where that is more than one server, the front that gives them one address."""
    image = engine(o.engine).image(o)
    name = _slug(advice.repo.id)
    n = o.launched
    places = seats(o, advice.fleet, n)
    copies = [
        (seat, container_commands(advice, replace(o, node_ids=seat.nodes) if o.nodes > 1 else o,
                                  ray))
        for seat in places
    ]  # fmt: skip
    servers = sum(1 for _, cmds in copies for c in cmds if _serves(c, image))
    out: list[str] = []
    line = scale_line(o)
    if line:
        out.append(clean(f"# {line}"))
    fronted: list[tuple[str, int]] = []
    for i, (seat, cmds) in enumerate(copies):
        if n > 1:
            where = f"on {seat.nodes[0]}" if o.nodes <= 1 else "on " + ", ".join(seat.nodes)
            cards = ""
            if not o.cpu and o.nodes <= 1 and not (o.card and o.card.mig):
                last = seat.first_card + o.gpus_per_node - 1
                cards = f", card{'s' if last > seat.first_card else ''} {seat.first_card}" + (
                    f"-{last}" if last > seat.first_card else ""
                )
            out.append(clean(f"# replica {i + 1} of {n} {where}{cards}"))
        out += _docker_copy(
            o, image, cmds, name if n == 1 else f"{name}-r{i + 1}", seat, servers > 1,
            fronted, encoding, rdma(o, advice.fleet),
        )  # fmt: skip
    if servers > 1:
        port = image.port
        here = all(h == "127.0.0.1" for h, _ in fronted)
        out.append(
            f"# the front: one address for the {servers} servers, on "
            + ("the same node" if here else "any node that reaches them")
            + f" (clients call its port {port})"
        )
        out.append(_join(front_words(name, fronted, port), encoding))
    return out


def _docker_copy(
    o: Option, image: Image, cmds: list[Command], name: str, seat: Seat, fronted_many: bool,
    fronted: list[tuple[str, int]], encoding: str | None, on_rdma: bool,
) -> list[str]:  # fmt: skip
    """One copy's lines. With several servers in all (`fronted_many`), each listens on its own
    port past the front's, and is added to `fronted` as (host, port)."""
    multi = o.nodes > 1
    started: dict[str, str] = {}
    out: list[str] = []
    replica = 0
    for c in cmds:
        if c.node:
            out.append(clean(f"# {c.role} on {c.node}"))
        env = [e for e in c.env if e[0] != CARDS_ENV]
        argv = c.argv
        serves = _serves(c, image)
        host_port = image.port + 1 + len(fronted) if fronted_many and serves else None
        if host_port is not None:
            host = seat.nodes[0] if seat.nodes else (c.node or "127.0.0.1")
            fronted.append((host, host_port))
            if multi:
                # The node's own network: the server itself listens on its port.
                argv = _with_port(argv, image.port_flag, host_port)
                c = replace(c, argv=argv)
        if c.node and c.node in started:
            words: list[str | Raw] = ["docker", "exec"]
            for k, v in env:
                words += ["-e", k if v == FROM_CALLER else f"{k}={v}"]
            out.append(_join([*words, started[c.node], *c.argv], encoding))
            continue
        cname = name
        if c.role == "replica":
            replica += 1
            cname = f"{name}-{replica}"
        words = ["docker", "run", "-d", "--name", cname]
        if not o.cpu:
            devices = _devices(o, c)
            if seat.first_card and not (o.card and o.card.mig):
                devices = [str(int(d) + seat.first_card) for d in devices]
            words += ["--gpus", f'"device={",".join(devices)}"']
        if image.shared_memory:
            words.append("--ipc=host")
        if multi:
            words += ["--network", "host"]
        elif _runs_entrypoint(c.argv, image) or serves:
            port = _port(c.argv, image)
            words += ["-p", f"{host_port or port}:{port}"]
        if on_rdma:
            words += ["--device", RDMA_DEVICE, "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1"]
        words += _mounts_and_env(image, env, encoding)
        # The variables that passed by name (HF_TOKEN and the caller's credentials).
        passed = {"HF_TOKEN", *(k for k, v in env if v == FROM_CALLER)}
        held = _credentials(c)
        if held:
            # Each credential passed by name from the caller's environment, and a shell of
            # llmfit's own text that appends it to its word, by position (_unsecret).
            for var in held:
                if var not in passed:
                    passed.add(var)
                    words += ["-e", var]
            words += ["--entrypoint", "/bin/sh"]
            args = ("-c", _unsecret(c), "sh", *_leads(c, _foreground(c.argv, image)))
        elif _runs_entrypoint(c.argv, image):
            args = c.argv[len(image.entrypoint) :]
        else:
            fg = _foreground(c.argv, image)
            words += ["--entrypoint", fg[0]]
            args = fg[1:]
        out.append(_join([*words, image.name, *args], encoding))
        if c.node:
            started[c.node] = cname
    return out


def render_docker(advice: Advice, o: Option, ray: bool = False, encoding: str | None = None) -> str:
    return "\n".join(docker_lines(advice, o, ray, encoding)) + "\n"


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


@dataclass(frozen=True)
class _Rank:
    """A worker's word that is a number growing with the worker: step × LWS_WORKER_INDEX + base."""

    step: int
    base: int


def _workers_template(workers: list[Command]) -> list[str | Raw | _Rank]:
    """One argv for every worker of a LeaderWorkerSet.

    The workers' commands differ only in numbers that grow with the worker (a node rank, a first
    data-parallel rank): each is written from LWS_WORKER_INDEX (1 for the first worker), as is
    when there is one worker, since its number is then the only one. A word that varies some
    other way has no template, and is refused."""
    first = list(workers[0].argv)
    if len(workers) == 1:
        return list(first)
    out: list[str | Raw | _Rank] = []
    for i, word in enumerate(first):
        column = [w.argv[i] if i < len(w.argv) else None for w in workers]
        if all(w == word for w in column):
            out.append(word)
            continue
        if not all(w is not None and w.isascii() and w.isdigit() for w in column):
            raise UsageError("the workers' commands differ in more than their ranks.")
        values = [int(w) for w in column if w is not None]
        step, base = values[1] - values[0], values[0] - (values[1] - values[0])
        if any(v != step * k + base for k, v in enumerate(values, 1)):
            raise UsageError("the workers' ranks are not a sequence a template can write.")
        # Kubernetes writes the index itself; any other step needs the shell's arithmetic.
        out.append(Raw(f"$({WORKER_INDEX})") if (step, base) == (1, 0) else _Rank(step, base))
    if len(workers[0].argv) != max(len(w.argv) for w in workers):
        raise UsageError("the workers' commands differ in more than their ranks.")
    return out


# A credential of a checked command (Command.secrets) is a word "$VARIABLE" in the command: a
# container gets the variable (docker: passed by name from the caller's environment; Kubernetes:
# from the Secret CREDENTIALS, its key the variable's name, or HF_TOKEN's own), and the word the
# variable's value, never the value written out.
CREDENTIALS = "llmfit-credentials"


def _credentials(c: Command) -> list[str]:
    """The variables that hold the command's credentials, in order."""
    out: list[str] = []
    for _, var in c.secrets:
        if var not in out:
            out.append(var)
    return out


def _leads(c: Command, argv: Sequence[str]) -> list[str]:
    """`argv` (the command's words, foreground flags after them) with each credential's word
    cut to the literal text in front of its reference (`--api-key=`, or ""): _unsecret's script
    appends the value there."""
    out = list(argv)
    for i, _ in c.secrets:
        ref = c.reference(i)
        assert ref is not None
        out[i] = ref[0]
    return out


def _unsecret(c: Command) -> str:
    """A POSIX shell script of llmfit's own text that appends each credential's value to the
    argument at its word's position (given the literal text in front of it, `--api-key=` or ""),
    then runs the command: the words are its arguments ("$@"), never pasted into it (docker's
    exec-form command would pass "$VARIABLE" on as it is). By position, not by what a word reads:
    a word of the user's that is literally "$VLLM_API_KEY" is passed on as it is."""
    cases = " ".join(f'{i + 1}) a="$a${v}" ;;' for i, v in c.secrets)
    return (
        'i=0; for a in "$@"; do i=$((i + 1)); shift; '
        f'case $i in {cases} esac; set -- "$@" "$a"; done; exec "$@"'
    )


def _expandable(word: str | Raw, encoding: str | None, secret: str | None = None) -> str:
    """A word as Kubernetes must be given it in `command`, `args` or an environment value to
    pass it on unchanged: every `$` doubled (`$$` is Kubernetes' escape for `$`), then llmfit's
    own leader address written as the `$(LWS_LEADER_ADDRESS)` Kubernetes expands, and a
    credential's word (`secret`: its variable) as the `$(VARIABLE)` it expands from the Secret. A
    word that cannot be printed exactly is refused."""
    if isinstance(word, Raw):
        return word.text
    if secret is not None:
        # Kubernetes expands $(VARIABLE) from the container's environment: the credential,
        # after the literal text in front of it (`--api-key=`), its `$` doubled.
        lead = word[: len(word) - len(secret) - 1]
        check_words([lead], encoding)
        return lead.replace("$", "$$") + f"$({secret})"
    parts = word.split(LEADER_MARK)
    check_words(parts, encoding)
    return LEADER.join(p.replace("$", "$$") for p in parts)


def _script(steps: list[str], ranks: dict[int, _Rank]) -> str:
    """A POSIX shell script of llmfit's own text that runs `steps` (commands of llmfit's own
    words), then `exec "$@"`: the command whose words come from outside is the script's
    arguments, never pasted into it. `ranks` are the argument positions (1 first) that become
    step × LWS_WORKER_INDEX + base before the exec. Its `$` are doubled for Kubernetes."""
    lines = [step + " &&" for step in steps]
    if ranks:
        cases = " ".join(
            f"{i}) a=$(( {WORKER_INDEX} * {r.step} + {r.base} )) ;;" for i, r in ranks.items()
        )
        lines.append(
            f'i=0; for a in "$@"; do i=$((i + 1)); shift; case $i in {cases} esac; '
            'set -- "$@" "$a"; done;'
        )
    lines.append('exec "$@"')
    return " ".join(lines).replace("$", "$$")


@dataclass(frozen=True)
class _Pod:
    """What one pod template runs: its argv and env, whether it serves, and the shell script
    (llmfit's own text) that runs the argv, where one is needed."""

    argv: tuple[str | Raw | _Rank, ...]
    env: tuple[tuple[str, str], ...]
    serves: bool
    script: str | None = None
    # The words of argv that are credentials: (index, the variable that holds it).
    secrets: tuple[tuple[int, str], ...] = ()
    # Whether the pod carries RDMA (rdma: the fleet says its fabric is InfiniBand or RoCE).
    rdma: bool = False


def _words(argv: Sequence[str | Raw | _Rank]) -> list[str | Raw]:
    """A pod's words with no rank left to work out (those are the script's)."""
    out: list[str | Raw] = []
    for w in argv:
        if isinstance(w, _Rank):
            raise ValueError("a rank to work out needs the pod's script")
        out.append(w)
    return out


def _container(
    image: Image, pod: _Pod, o: Option, gpus: int, resource: str, encoding: str | None
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "server" if pod.serves else "worker", "image": image.name}
    plain = [w for w in pod.argv if isinstance(w, str)]
    held = dict(pod.secrets)
    if pod.script is not None:
        given = [
            "0" if isinstance(w, _Rank) else _expandable(w, encoding, held.get(i))
            for i, w in enumerate(pod.argv)
        ]
        c["command"] = ["/bin/sh", "-c", pod.script, "sh", *given]
    elif _runs_entrypoint(plain, image):
        skip = len(image.entrypoint)
        c["args"] = [
            _expandable(w, encoding, held.get(i + skip))
            for i, w in enumerate(_words(pod.argv[skip:]))
        ]
    else:
        words = _words(pod.argv)
        extra = [f for prog, f in image.foreground if words and words[0] == prog]
        words += [f for f in extra if f not in words]
        c["command"] = [_expandable(w, encoding, held.get(i)) for i, w in enumerate(words)]
    env: list[dict[str, Any]] = [secret_env("HF_TOKEN", TOKEN_SECRET, TOKEN_KEY, optional=True)]
    # Each credential once, from the Secret: the command's words' and those set in front of it
    # (never a `value:` after it, which Kubernetes would use instead).
    refs = [v for _, v in pod.secrets] + [k for k, v in pod.env if v == FROM_CALLER]
    for var in dict.fromkeys(refs):
        if var != "HF_TOKEN":
            env.append(secret_env(var, CREDENTIALS, var))
    env += [
        {"name": k, "value": _expandable(v, encoding)}
        for k, v in pod.env
        if k != CARDS_ENV and v != FROM_CALLER
    ]
    if image.download_cache and _set_path(pod.env, image.download_cache) is None:
        env.append({"name": image.download_cache, "value": _download_paths(image)[0]})
    # Each variable once: the command's own value where it sets one twice (the last, as a
    # shell keeps it).
    last = {e["name"]: i for i, e in enumerate(env)}
    c["env"] = [e for i, e in enumerate(env) if last[e["name"]] == i]
    if pod.serves:
        c["ports"] = [{"name": "http", "containerPort": _port(plain, image)}]
    c["resources"] = _resources(o, gpus, resource, pod.rdma)
    if pod.rdma:
        c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    mounts = [{"name": "hf-cache", "mountPath": _hf_home(image, pod.env)}]
    if image.download_cache:
        mounts.append({"name": "download-cache", "mountPath": _download_paths(image, pod.env)[0]})
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


def _mib(n: int) -> str:
    """A memory quantity Kubernetes reads: whole GiB where it is one, else MiB rounded up."""
    return f"{n // GIB}Gi" if n % GIB == 0 else f"{-(-n // (1 << 20))}Mi"


def _resources(o: Option, gpus: int, resource: str, on_rdma: bool) -> dict[str, Any]:
    """What one pod requests (and, for cards, is limited to): its cards, its CPU and its memory;
    on an RDMA fabric one shared RDMA device. CPU and memory are requests only."""
    if o.cpu:
        # The host's RAM is what a CPU option's plan sizes (its weights, KV cache and buffers).
        return {"requests": {"cpu": str(CPU_SERVER_CORES), "memory": _mib(o.per_card.need)}}
    cards: dict[str, Any] = {resource: gpus}
    if on_rdma:
        cards[RDMA_RESOURCE] = 1
    requests = {
        **cards,
        "cpu": str(CPU_BASE + CPU_PER_CARD * gpus),
        "memory": _mib(POD_MEMORY_BASE + o.host_bytes),
    }
    return {"limits": dict(cards), "requests": requests}


def _pod_spec(
    image: Image, pod: _Pod, o: Option, gpus: int, resource: str, placement: dict[str, Any],
    encoding: str | None,
) -> dict[str, Any]:  # fmt: skip
    volumes: list[dict[str, Any]] = [
        {"name": "hf-cache", "hostPath": {"path": NODE_CACHE, "type": "DirectoryOrCreate"}}
    ]
    if image.download_cache:
        volumes.append(
            {
                "name": "download-cache",
                "hostPath": {"path": _download_paths(image)[2], "type": "DirectoryOrCreate"},
            }
        )
    if image.shared_memory:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_LIMIT}})
    spec: dict[str, Any] = {"containers": [_container(image, pod, o, gpus, resource, encoding)]}
    if pod.rdma:
        # The node's own network, whose RDMA interfaces NCCL finds by name; the pod still
        # resolves the cluster's names.
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    return {**spec, **placement, "volumes": volumes}


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


def k8s_documents(
    advice: Advice, o: Option, ray: bool = False, encoding: str | None = None
) -> tuple[list[dict], list[str]]:
    """The option as Kubernetes objects, and the notes to print above them."""
    image = engine(o.engine).image(o)
    name = _slug(advice.repo.id)
    resource = _gpu_resource(o, advice.fleet)
    placement, where = _placement(o, advice.fleet)
    on_rdma = rdma(o, advice.fleet)
    notes = [where]
    labels = {"app.kubernetes.io/name": name}
    if o.nodes <= 1:
        cmds = container_commands(advice, o, ray)
        first = cmds[0]
        servers = sum(1 for c in cmds if c.role == "replica") or 1
        gpus = 0 if o.cpu else o.layout.cards_per_replica if servers > 1 else o.gpus_per_node
        # Each copy the launch starts is `servers` pods (Option.launched).
        replicas = servers * o.launched
        pod = _Pod(first.argv, first.env, serves=True, secrets=first.secrets, rdma=on_rdma)
        spec = _pod_spec(image, pod, o, gpus, resource, placement, encoding)
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
        line = scale_line(o)
        if line:
            notes.append(line)
        if replicas > 1:
            notes.append(f"{replicas} pods, one server each; the Service spreads requests")
        return [deployment, _service(name, labels, _port(first.argv, image))], notes
    # Several nodes: the head's address is the leader pod's (a mark no outside word can hold,
    # written as $(LWS_LEADER_ADDRESS) once the outside words' `$` are doubled), the workers'
    # names placeholders.
    marks = (LEADER_MARK, *(f"worker-{i}" for i in range(1, o.nodes)))
    cmds = container_commands(advice, replace(o, node_ids=marks), ray)
    head = [c for c in cmds if c.role == "head"]
    workers = [c for c in cmds if c.role == "worker"]
    serve = head[-1]
    if len(head) > 1:
        # The leader runs the head's commands in turn (Ray: start the head, wait for the
        # workers to join, serve); the serve, whose words come from outside, as the script's
        # arguments, in the foreground.
        steps = []
        for c in head[:-1]:
            if any(LEADER_MARK in w for w in c.argv):
                raise UsageError("the head's first commands name its own address.")
            steps.append(" ".join(shlex.quote(w) for w in c.argv))
        if image.joined:
            steps.append(f"until {image.joined.replace('{nodes}', str(o.nodes))}; do sleep 5; done")
        check_words(steps, encoding)
        leader = _Pod(
            serve.argv, serve.env, serves=True, script=_script(steps, {}), secrets=serve.secrets,
            rdma=on_rdma,
        )  # fmt: skip
    else:
        leader = _Pod(serve.argv, serve.env, serves=True, secrets=serve.secrets, rdma=on_rdma)
    template = _workers_template(workers)
    ranks = {i: w for i, w in enumerate(template, 1) if isinstance(w, _Rank)}
    if ranks:
        # The foreground flags come last, so the positions of the ranks do not move.
        argv = (*template, *_foreground(workers[0].argv, image)[len(workers[0].argv) :])
        worker = _Pod(
            argv, workers[0].env, serves=False, script=_script([], ranks),
            secrets=workers[0].secrets, rdma=on_rdma,
        )  # fmt: skip
    else:
        worker = _Pod(
            tuple(template), workers[0].env, serves=False, secrets=workers[0].secrets,
            rdma=on_rdma,
        )  # fmt: skip
    gpus = o.gpus_per_node
    leader_labels = {**labels, "llmfit/role": "leader"}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(name, advice, o),
        "spec": {
            # Each group one copy of the option: as many as its launch starts.
            "replicas": o.launched,
            "leaderWorkerTemplate": {
                "size": o.nodes,
                # One pod lost breaks the group's collective: start the group again.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": {"labels": leader_labels},
                    "spec": _pod_spec(image, leader, o, gpus, resource, placement, encoding),
                },
                "workerTemplate": {
                    "metadata": {"labels": {**labels, "llmfit/role": "worker"}},
                    "spec": _pod_spec(image, worker, o, gpus, resource, placement, encoding),
                },
            },
        },
    }
    line = scale_line(o)
    if line:
        notes.append(line)
    groups = f"{o.launched} groups" if o.launched > 1 else "a LeaderWorkerSet"
    notes.append(
        f"{groups} of {o.nodes} pods, {gpus} cards each (the LeaderWorkerSet controller must be "
        "installed)" + ("; the Service spreads requests over the leaders" if o.launched > 1 else "")
    )
    if on_rdma:
        notes.append(
            f"RDMA on {o.fabric}: host network, IPC_LOCK and one {RDMA_RESOURCE} a pod (the "
            "NVIDIA Network Operator's shared RDMA device; name your cluster's own if it differs)"
        )
    elif o.fabric:
        notes.append(
            f"no RDMA: the fleet does not say the fabric {o.fabric} is InfiniBand or RoCE "
            "(fabric_kind), so NCCL talks over TCP"
        )
    return [lws, _service(name, leader_labels, _port(serve.argv, image))], notes


# What YAML 1.2's core schema (kubectl's reader), or YAML 1.1 as go-yaml v2 and PyYAML read it,
# takes for a number, a boolean or null when written plain: each is quoted, so that a label
# value `1e3` or a revision `true` stays the string it is. PyYAML quotes what its own 1.1
# resolver would retype; this adds what YAML 1.2 and go-yaml read otherwise (1e3, 0o17, 1_000).
_RETYPED = re.compile(
    r"""[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?
    |[-+]?0[xX][0-9a-fA-F_]+|[-+]?0[oO][0-7_]+|[-+]?0[bB][01_]+
    |[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)
    |true|True|TRUE|false|False|FALSE|null|Null|NULL|~|
    |y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|=|<<""",
    re.VERBOSE,
)


class _Dumper(yaml.SafeDumper):
    """YAML a person reads: every mapping written out where it stands, no anchors or aliases,
    and no string written so that a YAML reader takes it for anything but that string."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "'" if _RETYPED.fullmatch(data) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def _strings(value: Any) -> Iterator[str]:
    """Every string of a document, keys and values, walked without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _credential_keys(docs: list[dict]) -> list[str]:
    """The keys of the Secret CREDENTIALS that the documents read, in order."""
    keys: list[str] = []
    stack: list[Any] = list(docs)
    while stack:
        item = stack.pop(0)
        if isinstance(item, dict):
            ref = item.get("secretKeyRef")
            if isinstance(ref, dict) and ref.get("name") == CREDENTIALS:
                keys.append(str(ref["key"]))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return sorted(set(keys))


def render_k8s(advice: Advice, o: Option, ray: bool = False, encoding: str | None = None) -> str:
    docs, notes = k8s_documents(advice, o, ray, encoding)
    # Every string of the YAML, not only the commands' (names, annotations, selectors), printed
    # exactly or not at all: PyYAML would write a bidi override or a zero-width space as it is.
    check_words(list(_strings(docs)), encoding)
    repo = advice.repo
    header = [
        f"# {repo.id}: {engine(o.engine).where(o)}, {o.artifact.name}",
        *(f"# {n}" for n in notes),
        f"# HF_TOKEN from the Secret {TOKEN_SECRET} (optional), made with:",
        f'#   kubectl create secret generic {TOKEN_SECRET} --from-literal={TOKEN_KEY}="$HF_TOKEN"',
    ]
    keys = _credential_keys(docs)
    if keys:
        made = " ".join(f'--from-literal={k}="${k}"' for k in keys)
        header += [
            f"# {', '.join(keys)} from the Secret {CREDENTIALS}, made with:",
            f"#   kubectl create secret generic {CREDENTIALS} {made}",
        ]
    # Outside strings (repository ids, node names) in a comment: each line cleaned, so that it
    # stays one comment line.
    header = [clean(h) for h in header]
    body = yaml.dump_all(
        docs,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
    return "\n".join(header) + "\n---\n" + body
