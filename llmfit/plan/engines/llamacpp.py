"""llama.cpp, the engine: the ways llama-server can run a GGUF file, and the lines that start it.

Its parts live in modules named for what they hold: llamacpp_place (where a file can run, and
what each device holds there, with llamacpp_sizes), llamacpp_serving (how fast, and under load),
llamacpp_launch (the launch part of an option, its command lines and images), llamacpp_explain
(--explain's parts and settings), llamacpp_command (reading a llama-server line back).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from llmfit.plan.artifact import Artifact
from llmfit.plan.credentials import Vault
from llmfit.plan.engines import NO_ENV, Explanation, Found, Image, Job, Request
from llmfit.plan.engines import llamacpp_explain as explaining
from llmfit.plan.engines import llamacpp_launch as launching
from llmfit.plan.engines.llamacpp_launch import RPC_PORT, LlamaCppLaunch
from llmfit.plan.engines.llamacpp_place import Placing, pin_refusal, variants
from llmfit.plan.launch import Command
from llmfit.plan.layout import LayoutSpace
from llmfit.plan.model import AttentionCharge, Model, Shape
from llmfit.plan.options import Option, Rejection
from llmfit.plan.settings import PlanSettings


class LlamaCpp(Placing):
    key = "llama.cpp"
    name = "llama.cpp"
    programs = ("llama-server",)
    # The layer split over a node's cards is a pipeline (--tensor-split splits layers, not a
    # layer: llama.cpp's default split mode), its servers side by side are copies (each its own
    # process, cards and port), and over nodes the split reaches rpc-servers (--rpc). It has no
    # tensor or expert parallelism to launch.
    # llama-server takes any --ctx-size (its slots share it), past the trained one too.
    long_context_env: tuple[tuple[str, str], ...] = ()
    layouts = LayoutSpace(
        pipeline=True, data=True, replicas=True, across_nodes=frozenset({"pipeline"}), cpu=True
    )

    def runs(self, artifact: Artifact) -> bool:
        return artifact.format == "gguf"

    def plan(self, job: Job) -> Found:
        found = Found()
        if job.artifact.layout is None:
            found.rejected.append(
                Rejection(job.artifact.name, self.key, "any", "its header was not read")
            )
            return found
        refusal = pin_refusal(job.settings.pins)
        if refusal:
            found.rejected.append(Rejection(job.artifact.name, self.key, "any", refusal))
            return found
        for kv_type, what_if, flags in variants(job.settings):
            refused: list[Rejection] = []
            options = self._options(job, refused, kv_type)
            found.rejected += [replace(r, what_if=what_if) for r in refused]
            found.options += [
                replace(o, what_if=what_if, engine_flags=flags, changes=int(bool(what_if)))
                for o in options
            ]
        if any(o.nodes > 1 for o in found.options):
            # rpc-server has no authentication and runs what it is sent (tools/rpc/README.md:
            # "never run the RPC server on an open network"): issue 34 asked who can reach it.
            found.notes.append(
                f"llama.cpp across nodes: each worker's rpc-server -H 0.0.0.0 listens on every "
                f"address, with no authentication, and runs what it is sent: let only the head "
                f"reach port {RPC_PORT} (a firewall, or -H the worker's fabric address)"
            )
        return found

    # -- launching ------------------------------------------------------------------------------

    def commands(
        self,
        option: Option[LlamaCppLaunch],
        repo_id: str,
        revision: str | None,
        *,
        ray: bool = False,
    ) -> list[Command]:
        return launching.commands(option, repo_id, revision, ray=ray)

    def image(self, option: Option[LlamaCppLaunch]) -> Image:
        return launching.image(option)

    # -- explaining -----------------------------------------------------------------------------

    def attention(self, shape: Shape, context: int) -> tuple[AttentionCharge, ...]:
        # The summary of the model's kinds of layer in vLLM's terms: llama.cpp's own per-layer
        # cache is llamacpp_sizes.layer_kv_bytes, charged in each option's cards.
        from llmfit.plan.engines.vllm_kv import attention_charges

        return attention_charges(shape, context)

    def explain(self, option: Option[LlamaCppLaunch], model: Model) -> Explanation:
        return explaining.explain(option, model)

    def where(self, option: Option[LlamaCppLaunch]) -> str:
        return launching.where(option)

    # --n-gpu-layers, --n-cpu-moe, and what a card option keeps in the host's RAM beside its
    # cards (weights, KV and compute of the host's part).
    def values(self, option: Option[LlamaCppLaunch]) -> dict[str, object]:
        launch = option.launch
        return {
            "gpu_layers": launch.gpu_layers,
            "cpu_moe_layers": launch.cpu_moe_layers,
            "host_bytes": option.host_bytes,
        }

    # -- reading a command ----------------------------------------------------------------------

    def read_command(
        self,
        argv: Sequence[str],
        defaults: PlanSettings,
        env: Mapping[str, str] = NO_ENV,
        vault: Vault | None = None,
        load: Callable[[str], Any] | None = None,
    ) -> Request:
        from llmfit.plan.engines.llamacpp_command import read

        return read(argv, defaults, env, vault, load)


ENGINE = LlamaCpp()
