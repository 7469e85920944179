"""The command lines that make an engine do exactly what an option planned, role by role."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from llmfit.plan.options import Option

RAY_PORT = 6379


@dataclass(frozen=True)
class Command:
    role: str  # "all" on one node; "head" and "worker" across several
    argv: tuple[str, ...]
    node: str | None = None

    @property
    def shell(self) -> str:
        return shlex.join(self.argv)


def commands(
    o: Option, model_ref: str, revision: str | None = None, ray: bool = False
) -> list[Command]:
    if o.engine == "vllm":
        return _vllm(o, model_ref, revision, ray)
    if o.engine == "llama.cpp":
        return _llama_server(o, model_ref)
    return []


RPC_PORT = 50052  # rpc-server's default port (tools/rpc/README.md)


def _llama_server(o: Option, model_ref: str) -> list[Command]:
    art = o.artifact
    argv = ["llama-server"]
    if art.path:
        # The first part of a split file: llama.cpp opens the others from its directory.
        argv += ["-m", art.path]
        if art.projector:
            argv += ["--mmproj", art.projector]
    else:
        # Not on disk: llama.cpp fetches the quant (every part, and the mmproj) by its tag.
        argv += ["-hf", f"{model_ref}:{art.quant}" if art.quant else model_ref]
    # Every value the plan relied on is explicit, so that llama.cpp's --fit (on by default) and
    # its defaults (ctx 0 = the trained context, -ngl auto) cannot change the plan.
    argv += ["--ctx-size", str(o.context), "--n-gpu-layers", str(o.gpu_layers or 0)]
    if o.tensor_split:
        argv += ["--tensor-split", ",".join(map(str, o.tensor_split))]
    if o.cpu_moe_layers:
        argv += ["--n-cpu-moe", str(o.cpu_moe_layers)]
    workers = o.node_ids[1:] if o.nodes > 1 else ()
    if o.nodes > 1:
        hosts = workers or tuple(f"<worker-{i}>" for i in range(1, o.nodes))
        argv += ["--rpc", ",".join(f"{h}:{RPC_PORT}" for h in hosts)]
    argv += o.engine_flags
    argv += ["--flash-attn", "on", "--host", "0.0.0.0", "--port", "8080"]
    if o.nodes <= 1:
        return [Command("all", tuple(argv))]
    # The workers first: the head connects to them as it starts.
    rpc = ("rpc-server", "-H", "0.0.0.0", "-p", str(RPC_PORT))
    out = [Command("worker", rpc, h) for h in workers]
    out.append(Command("head", tuple(argv), o.node_ids[0] if o.node_ids else None))
    return out


def _vllm(o: Option, model_ref: str, revision: str | None, ray: bool) -> list[Command]:
    argv = ["vllm", "serve", model_ref]
    if revision:
        argv += ["--revision", revision]
    argv += ["--tensor-parallel-size", str(o.tp)]
    if o.pp > 1:
        argv += ["--pipeline-parallel-size", str(o.pp)]
    if o.expert_parallel:
        argv.append("--enable-expert-parallel")
    argv += o.engine_flags
    # Every value the plan relied on is passed explicitly, so the engine's defaults (which have
    # changed between releases: 0.9 then 0.92 utilisation) cannot quietly change the plan.
    argv += [
        "--max-model-len",
        str(o.context),
        "--gpu-memory-utilization",
        f"{o.gpu_memory_utilization:.2f}",
    ]
    if o.kv_cache_dtype:
        argv += ["--kv-cache-dtype", o.kv_cache_dtype]
    if o.nodes <= 1:
        return [Command("all", tuple(argv))]
    names = [o.node_ids[i] if i < len(o.node_ids) else None for i in range(o.nodes)]
    head = names[0] or "<head-address>"
    if ray:
        # Ray: a cluster first (head, then each worker joining it), then one serve on the head.
        # vLLM no longer picks Ray by itself when the replica is wider than the node.
        out = [Command("head", ("ray", "start", "--head", f"--port={RAY_PORT}"), names[0])]
        for name in names[1:]:
            join = ("ray", "start", f"--address={head}:{RAY_PORT}")
            out.append(Command("worker", join, name))
        serve = (*argv, "--distributed-executor-backend", "ray")
        out.append(Command("head", serve, names[0]))
        return out
    # Without Ray (vLLM's multiprocessing executor across nodes): the same command on each node,
    # by rank, the head's address given to all, and the workers headless.
    out = []
    for rank, name in enumerate(names):
        role_args = ["--nnodes", str(o.nodes), "--node-rank", str(rank), "--master-addr", head]
        if rank:
            role_args.append("--headless")
        out.append(Command("head" if rank == 0 else "worker", tuple(argv + role_args), name))
    return out
