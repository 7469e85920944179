"""SGLang 0.5.23's disaggregated launch: each worker a `python -m sglang.launch_server` with
`--disaggregation-mode prefill|decode`, and sglang_router in front.

- `--disaggregation-mode`, `--disaggregation-transfer-backend` (mooncake, its default, over
  RDMA; mooncake_tcp where the pools share no fabric, which SGLang turns into mooncake over TCP)
  and `--disaggregation-bootstrap-port` (the prefill side's bootstrap server, 8998 by default:
  a port of its own for each prefill worker of a node): sglang/srt/arg_groups/fields/disagg.py,
  pd_disaggregation_hook.py `handle_pd_disaggregation`. The decode side reads the prefill's
  parallel sizes from that server (disaggregation/common/conn.py `try_ensure_parallel_info`), so
  neither side names the other's TP. `--disaggregation-ib-device` is the node's own (mlx5_0,
  ...), left to the transfer backend's choice here, as SGLang does when it is not given.
- sglang_router 0.3.2 (`python -m sglang_router.launch_router --pd-disaggregation --prefill URL
  BOOTSTRAP_PORT --decode URL`, sglang_router/router_args.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llmfit.plan.engines.disagg_launch import ROUTER_PORT, Worker, value, with_value
from llmfit.plan.launch import Command

BOOTSTRAP_PORT = 8998
# The router's package on PyPI, at the version whose flags `roles` writes (a container launch
# installs it: render/disagg_deploy.py).
ROUTER_PACKAGE = "sglang-router==0.3.2"


def role_refusal(words: Sequence[str], side: str) -> str | None:
    """Why an SGLang command cannot be the `side` of a pair: its --disaggregation-mode (none, or
    "null": SGLang serves it whole; else the side's own)."""
    role = value(words, "--disaggregation-mode")
    if role in (None, "null"):
        return f"the {side} command has no --disaggregation-mode, so SGLang serves it whole"
    if role != side:
        return f"the {side} command's role is {role!r}, not {side}"
    return None


def roles(prefill: Command, decode: Command, offer: Any, workers: list[Worker]) -> list[Command]:
    backend = "mooncake_tcp" if offer.result.transfer.link.kind == "tcp" else "mooncake"
    out: list[Command] = []
    router = ["python", "-m", "sglang_router.launch_router", "--pd-disaggregation"]
    for w in workers:
        base = prefill if w.role == "prefill" else decode
        env = list(base.env)
        if w.devices is not None:
            env.append(("CUDA_VISIBLE_DEVICES", w.devices))
        argv = [*with_value(base.argv, "--port", str(w.port)), "--disaggregation-mode", w.role,
                "--disaggregation-transfer-backend", backend]  # fmt: skip
        if w.role == "prefill":
            bootstrap = str(BOOTSTRAP_PORT + w.index - 1)
            argv += ["--disaggregation-bootstrap-port", bootstrap]
            router += ["--prefill", w.url, bootstrap]
        else:
            router += ["--decode", w.url]
        out.append(replace(base, role=w.role, argv=tuple(argv), node=w.name, env=tuple(env)))
    router += ["--host", "0.0.0.0", "--port", str(ROUTER_PORT)]
    out.append(Command("router", tuple(router), node="router"))
    return out


# What the platforms that run prefill and decode start of this launch (--format llm-d, kserve,
# dynamo): platform_launch.py reads it here, beside ROUTER_PACKAGE.
from llmfit.plan.engines.sglang_platforms import PLATFORMS as PLATFORMS  # noqa: E402
