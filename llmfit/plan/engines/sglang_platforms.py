"""SGLang's disaggregated launch as the platforms that run prefill and decode start it
(platform_launch.py), from the role's own `sglang serve` line (sglang_disagg.py).

- NVIDIA Dynamo (ai-dynamo/dynamo, components/backends/sglang/deploy/disagg.yaml): a worker is
  `python3 -m dynamo.sglang` with SGLang's server arguments: the role's, less `--port` (Dynamo's
  Frontend serves HTTP; the worker's example names none), its KV over NIXL
  (`--disaggregation-transfer-backend nixl`, as the example: Dynamo's SGLang runtime ships
  NIXL) and `--skip-tokenizer-init` (the Frontend tokenizes, as in the example). An aggregated
  option's server is its one line the same way, without the disaggregation flags
  (components/backends/sglang/deploy/agg.yaml), its service `decode` as there.
- llm-d's modelservice and KServe's LLMInferenceService run prefill and decode behind llm-d's
  routing sidecar, whose connectors are vLLM's NIXL ones (the chart's `routing.proxy.connector`:
  nixl, nixlv2) and whose templates start `vllm serve` (KServe's config/llmisvc/
  config-llm-prefill-template.yaml): neither runs SGLang's.
"""

from __future__ import annotations

from typing import Any

from llmfit.plan.engines.platform_launch import (
    AGGREGATED,
    Platform,
    Platforms,
    RoleContainer,
    without,
)
from llmfit.plan.launch import Command

SERVE = ("sglang", "serve")
# Dynamo's SGLang runtime image, at the tag of the example cited above.
DYNAMO_IMAGE = "nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.6.1"
DYNAMO_WORKER = ("python3", "-m", "dynamo.sglang")
BACKEND_FLAG = "--disaggregation-transfer-backend"


def _dynamo(role: str, c: Command, o: Any) -> RoleContainer:
    args = without(c.argv[len(SERVE) :], frozenset({"--port", BACKEND_FLAG}))
    if role != AGGREGATED:
        args += (BACKEND_FLAG, "nixl")
    args += ("--skip-tokenizer-init",)
    return RoleContainer(role, DYNAMO_IMAGE, DYNAMO_WORKER, args, c.env)


_SIDECAR = (
    "llmfit writes {platform} for vLLM's launches only: its templates start `vllm serve`, and "
    "its prefill and decode run behind llm-d's routing sidecar, whose KV connectors are vLLM's "
    "(NIXL); --format dynamo or k8s writes SGLang's."
)

PLATFORMS: Platforms = {
    "llm-d": _SIDECAR.format(platform="llm-d's modelservice"),
    "kserve": _SIDECAR.format(platform="KServe's LLMInferenceService"),
    "dynamo": Platform(
        _dynamo, backend="sglang", frontend_image=DYNAMO_IMAGE, aggregated_service="decode"
    ),
}
