"""The command lines that make an engine do exactly what an option planned, role by role."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from llmfit.plan.options import Option


@dataclass(frozen=True)
class Command:
    role: str  # "all" on one node; "head" and "worker" across several
    argv: tuple[str, ...]
    node: str | None = None

    @property
    def shell(self) -> str:
        return shlex.join(self.argv)


def commands(o: Option, model_ref: str, revision: str | None = None) -> list[Command]:
    if o.engine == "vllm":
        return _vllm(o, model_ref, revision)
    return []


def _vllm(o: Option, model_ref: str, revision: str | None) -> list[Command]:
    argv = ["vllm", "serve", model_ref]
    if revision:
        argv += ["--revision", revision]
    argv += ["--tensor-parallel-size", str(o.tp)]
    if o.pp > 1:
        argv += ["--pipeline-parallel-size", str(o.pp)]
    if o.expert_parallel:
        argv.append("--enable-expert-parallel")
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
    # Several nodes without Ray (vLLM's multiprocessing executor across nodes): the same command on
    # each, by rank, the head's address given to all, and the workers headless.
    head = o.node_ids[0] if o.node_ids else "<head-address>"
    out = []
    for rank in range(o.nodes):
        node = o.node_ids[rank] if rank < len(o.node_ids) else None
        role_args = ["--nnodes", str(o.nodes), "--node-rank", str(rank), "--master-addr", head]
        if rank:
            role_args.append("--headless")
        out.append(Command("head" if rank == 0 else "worker", tuple(argv + role_args), node))
    return out
