"""vLLM's disaggregated launch as the platforms that run prefill and decode start it
(platform_launch.py): each role's container, made from the role's own `vllm serve` line
(vllm_disagg.py).

- llm-d (llm-d-incubation/llm-d-modelservice, charts/llm-d-modelservice/values.schema.json and
  examples/values-pd.yaml): the role's `vllm serve` line whole (`modelCommand: custom`); a
  prefill pod serves on `routing.servicePort` (8000), a decode pod's vLLM on
  `routing.proxy.targetPort` (8200) behind llm-d's routing sidecar, which takes the service port
  and fetches the KV from the prefill pod over NIXL (connector `nixlv2`, the chart's default).
  NIXL's side channel host is the pod's IP, as the example sets it.
- KServe (kserve/kserve, config/llmisvc/config-llm-prefill-template.yaml and
  config-llm-decode-template.yaml): container `main`, prefill's vLLM on 8000, decode's on 8001
  behind its llm-d routing sidecar on 8000; the `vllm serve` line whole, which replaces the
  template's command and arguments. NIXL's side channel host is the pod's IP, as
  docs/samples/llmisvc/single-node-gpu/llm-inference-service-pd-qwen2-7b-gpu.yaml sets it.
An aggregated option (prefill and decode in one server) is its one `vllm serve` line the same
way: on 8000 on llm-d (no sidecar) and KServe (config/llmisvc/config-llm-template.yaml), and on
Dynamo a worker with no `--is-prefill-worker` (components/backends/vllm/deploy/agg.yaml).

- NVIDIA Dynamo (ai-dynamo/dynamo, components/backends/vllm/deploy/disagg.yaml): a worker is
  `python3 -m dynamo.vllm --model MODEL [engine arguments]`, `--is-prefill-worker` on prefill;
  dynamo.vllm's parser is vLLM's engine arguments and its own two flags
  (components/backends/vllm/src/dynamo/vllm/args.py `parse_args`), so the serve line's server
  flags (`--host`, `--port`) are not its; it sets the NixlConnector itself (`overwrite_args`:
  `kv_transfer_config` NixlConnector, kv_both) and the side channel's host and port
  (`set_side_channel_host_and_port`), so the role's `--kv-transfer-config` and
  VLLM_NIXL_SIDE_CHANNEL_* are left to it. Dynamo's Frontend serves HTTP and routes.
"""

from __future__ import annotations

from typing import Any

from llmfit.plan.engines.disagg_launch import with_value
from llmfit.plan.engines.platform_launch import (
    AGGREGATED,
    Platform,
    Platforms,
    RoleContainer,
    without,
)
from llmfit.plan.launch import Command

# The serve line's leading words: the program and its subcommand.
SERVE = ("vllm", "serve")
SIDE_CHANNEL_HOST = "VLLM_NIXL_SIDE_CHANNEL_HOST"
SIDE_CHANNEL_PORT = "VLLM_NIXL_SIDE_CHANNEL_PORT"
# An aggregated server serves on the service port: llm-d's with no sidecar in front, KServe's as
# its config/llmisvc/config-llm-template.yaml.
LLM_D_PORTS = {"prefill": 8000, "decode": 8200, AGGREGATED: 8000}
KSERVE_PORTS = {"prefill": 8000, "decode": 8001, AGGREGATED: 8000}
# Dynamo's vLLM runtime image, at the tag of the example cited above (its vLLM is Dynamo's
# build, of the release that tag pins, not necessarily the version the plan models).
DYNAMO_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1"
DYNAMO_WORKER = ("python3", "-m", "dynamo.vllm")
# What dynamo.vllm does not take from a serve line (see above).
DYNAMO_DROPS = frozenset({"--host", "--port", "--kv-transfer-config"})


def _image(o: Any) -> str:
    from llmfit.plan.engines import engine

    return engine(o.engine).image(o).name


def _serve(ports: dict[str, int]) -> Any:
    def container(role: str, c: Command, o: Any) -> RoleContainer:
        port = ports[role]
        argv = with_value(c.argv, "--port", str(port))
        env = tuple((k, v) for k, v in c.env if k != SIDE_CHANNEL_HOST)
        own = (SIDE_CHANNEL_HOST,) if len(env) < len(c.env) else ()
        return RoleContainer(role, _image(o), SERVE, argv[len(SERVE) :], env, own, port)

    return container


def _dynamo(role: str, c: Command, o: Any) -> RoleContainer:
    model, rest = c.argv[len(SERVE)], c.argv[len(SERVE) + 1 :]
    args = ("--model", model, *without(rest, DYNAMO_DROPS))
    if role == "prefill":
        args += ("--is-prefill-worker",)
    env = tuple((k, v) for k, v in c.env if k not in (SIDE_CHANNEL_HOST, SIDE_CHANNEL_PORT))
    return RoleContainer(role, DYNAMO_IMAGE, DYNAMO_WORKER, args, env)


PLATFORMS: Platforms = {
    "llm-d": Platform(_serve(LLM_D_PORTS)),
    "kserve": Platform(_serve(KSERVE_PORTS)),
    "dynamo": Platform(
        _dynamo,
        backend="vllm",
        frontend_image=DYNAMO_IMAGE,
        services=("VllmPrefillWorker", "VllmDecodeWorker"),
        aggregated_service="VllmDecodeWorker",
    ),
}
