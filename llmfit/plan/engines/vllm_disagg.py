"""vLLM 0.34's disaggregated launch: each worker a `vllm serve` with the NixlConnector, and
vllm-router in front.

- `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'` on every worker
  (vllm/config/kv_transfer.py KVTransferConfig: kv_connector, kv_role one of kv_producer,
  kv_consumer, kv_both; the NixlConnector serves either side, and the router tells each request
  which it is).
- NIXL's side channel, where a decode worker asks a prefill worker for its KV's whereabouts
  (vllm/envs.py VLLM_NIXL_SIDE_CHANNEL_HOST, default localhost, and VLLM_NIXL_SIDE_CHANNEL_PORT,
  default 5600): a port of its own for each worker of a node, and, across nodes, the address the
  others reach it at.
- UCX, NIXL's transport (vLLM's NixlConnector usage guide): UCX_NET_DEVICES=all over RDMA;
  UCX_TLS=tcp where the pools share no fabric.
- vllm-router 0.1.17 (`vllm-router --vllm-pd-disaggregation --prefill URL --decode URL`,
  vllm_router/router_args.py), which sends each request to a prefill worker, then to a decode
  worker that pulls its KV.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llmfit.plan.engines.disagg_launch import ROUTER_PORT, Worker, value, with_value
from llmfit.plan.launch import Command

KV_TRANSFER = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                         separators=(",", ":"))  # fmt: skip
SIDE_CHANNEL_PORT = 5600
# The router's package on PyPI, at the version whose flags `roles` writes (a container launch
# installs it: render/disagg_deploy.py).
ROUTER_PACKAGE = "vllm-router==0.1.17"


# The kv_role a side's --kv-transfer-config may give (vllm/config/kv_transfer.py
# KVTransferConfig): the NixlConnector's kv_both serves either.
ROLES = {"prefill": ("kv_producer", "kv_both"), "decode": ("kv_consumer", "kv_both")}


def role_refusal(words: Sequence[str], side: str) -> str | None:
    """Why a `vllm serve` command cannot be the `side` of a pair: its --kv-transfer-config
    (none: vLLM serves it whole; the NixlConnector, the one llmfit plans; its kv_role)."""
    text = value(words, "--kv-transfer-config")
    if text is None:
        return f"the {side} command has no --kv-transfer-config, so vLLM serves it whole"
    try:
        config = json.loads(text)
    except ValueError:
        return f"the {side} command's --kv-transfer-config is not JSON"
    if not isinstance(config, dict) or config.get("kv_connector") != "NixlConnector":
        return f"the {side} command's kv_connector is not NixlConnector, the one llmfit plans"
    role = config.get("kv_role")
    if role not in ROLES[side]:
        return f"the {side} command's role is {role!r}, not {' or '.join(ROLES[side])}"
    return None


def roles(prefill: Command, decode: Command, offer: Any, workers: list[Worker]) -> list[Command]:
    link = offer.result.transfer.link.kind
    out: list[Command] = []
    for n, w in enumerate(workers):
        base = prefill if w.role == "prefill" else decode
        env = list(base.env)
        if w.devices is not None:
            env.append(("CUDA_VISIBLE_DEVICES", w.devices))
        else:
            env.append(("VLLM_NIXL_SIDE_CHANNEL_HOST", w.host))
        env.append(("VLLM_NIXL_SIDE_CHANNEL_PORT", str(SIDE_CHANNEL_PORT + 10 * n)))
        if link == "rdma":
            env.append(("UCX_NET_DEVICES", "all"))
        elif link == "tcp":
            env.append(("UCX_TLS", "tcp"))
        argv = (*with_value(base.argv, "--port", str(w.port)), "--kv-transfer-config", KV_TRANSFER)
        out.append(replace(base, role=w.role, argv=argv, node=w.name, env=tuple(env)))
    router = ["vllm-router", "--vllm-pd-disaggregation"]
    for w in workers:
        router += [f"--{w.role}", w.url]
    router += ["--policy", "round_robin", "--host", "0.0.0.0", "--port", str(ROUTER_PORT)]
    out.append(Command("router", tuple(router), node="router"))
    return out


# What the platforms that run prefill and decode start of this launch (--format llm-d, kserve,
# dynamo): platform_launch.py reads it here, beside ROUTER_PACKAGE.
from llmfit.plan.engines.vllm_platforms import PLATFORMS as PLATFORMS  # noqa: E402
