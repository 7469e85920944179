"""vLLM's knobs, declared once (plan/engines/knobs.py): the flags of `vllm serve` that change what
a card holds or how fast it runs, beside the release llmfit models. llmfit's own command line, the
reader of a checked `vllm serve` line and the printed launch all follow this declaration.

Spellings, ranges and choices are vLLM 0.33's (vllm/engine/arg_utils.py EngineArgs.add_cli_args,
vllm/config/*.py; fixtures/engines/vllm-0.33.0-serve-args.json is its parser's dump). This module
stays light: the CLI imports it at start-up, and the memory model only when a value is checked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from llmfit.plan.engines.knobs import MEMORY, SPEED, knob

if TYPE_CHECKING:
    from llmfit.plan.artifact import Artifact
    from llmfit.plan.engines.vllm_inputs import Speculative
    from llmfit.plan.model import Model

# --speculative-config methods whose proposer is part of the model or needs no weights (n-gram
# lookup), and those that load another model (vllm/config/speculative.py SpeculativeConfig).
OWN_METHODS = ("mtp", "ngram")
DRAFT_METHODS = ("eagle", "eagle3", "draft_model", "medusa")
# A JSON text from the command line is small; past this it is not a flag worth reading.
MAX_JSON = 4096
# The LoRA ranks vLLM takes (vllm/config/lora.py LoRAConfig.max_lora_rank's Literal).
LORA_RANKS = ("1", "8", "16", "32", "64", "128", "256", "320", "512")
# vLLM's own defaults for a LoRA launch: one adapter slot of rank 16 (LoRAConfig).
LORA_DEFAULTS = (1, 16)


def human_readable_int(flag: str, text: str, what: str = "token count") -> int:
    """A count as vLLM's human_readable_int reads it (vllm/utils/argparse_utils.py): what int()
    takes, or digits and a suffix, k/m/g/t in 1000s and K/M/G/T in 1024s ("8k" = 8,000, "8K" =
    8,192), a decimal only with a decimal suffix ("25.6k"); "1e5" and "1.5K" it refuses, saying
    the text is not a `what`."""
    t = text.strip()
    m = re.fullmatch(r"(\d{1,24}(?:\.\d{1,24})?)([kKmMgGtT])", t)
    if m:
        number, suffix = m.groups()
        power = "kmgt".index(suffix.lower()) + 1
        if suffix.islower():
            return int(float(number) * 1000**power)
        if "." not in number:
            return int(number) << (10 * power)
    elif re.fullmatch(r"[+-]?\d{1,30}(?:_\d{1,30})*", t):
        return int(t)
    raise ValueError(f"{flag} {text!r} is not a {what}.")


def human_readable_bytes(flag: str, text: str) -> int:
    """A byte count as vLLM reads --kv-cache-memory-bytes: its human_readable_int ("20g" =
    20,000,000,000, "20G" = 20 GiB)."""
    return human_readable_int(flag, text, "byte count")


def _json_object(flag: str, text: str) -> dict[str, object]:
    if len(text) > MAX_JSON:
        raise ValueError(f"{flag} is {len(text):,} characters; a JSON object of a few is expected.")
    try:
        value = json.loads(text)
    except RecursionError:  # 4,096 characters can nest 2,048 deep, past json's recursion
        raise ValueError(f"{flag} nests JSON too deep to be a flag's object.") from None
    except ValueError:
        raise ValueError(f"{flag} {text[:80]!r} is not JSON (like '{{\"image\": 0}}').") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} {text[:80]!r} is not a JSON object.")
    return value


def speculative(text: str) -> tuple[Speculative, str | None]:
    """--speculative-config → what it costs a card (a vllm_memory.Speculative), and the draft
    model's repository, if it names one (its weights are read with the plan's own)."""
    from llmfit.plan.engines.vllm_inputs import Speculative

    cfg = _json_object("--speculative-config", text)
    method = cfg.get("method")
    draft = cfg.get("model")
    if method is None:
        method = "draft_model" if isinstance(draft, str) else None
    if method not in OWN_METHODS + DRAFT_METHODS:
        known = ", ".join(OWN_METHODS + DRAFT_METHODS)
        raise ValueError(f"--speculative-config method {method!r} is not one of {known}.")
    n = cfg.get("num_speculative_tokens", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 64:
        raise ValueError(f"--speculative-config num_speculative_tokens {n!r} is not 1 to 64.")
    if method in DRAFT_METHODS and not (isinstance(draft, str) and draft):
        raise ValueError(f'--speculative-config method {method!r} needs a "model" to load.')
    assert isinstance(method, str)
    return Speculative(method, n), draft if isinstance(
        draft, str
    ) and method in DRAFT_METHODS else None


def limits(text: str) -> tuple[tuple[str, int], ...]:
    """--limit-mm-per-prompt '{"image": 0}' → (("image", 0),)."""
    out = []
    for k, v in _json_object("--limit-mm-per-prompt", text).items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1024:
            raise ValueError(f"--limit-mm-per-prompt {k!r}: {v!r} is not a count of 0 to 1024.")
        out.append((str(k), v))
    return tuple(out)


@dataclass(frozen=True)
class VllmOptions:
    """vLLM's own knobs; None is the default of the release modelled, for the card. Declared in
    the order a launch passes them on."""

    version: str | None = knob(
        None, kind="text", cli="--vllm-version", changes=(MEMORY, SPEED), metavar="X.Y",
        help="The vLLM release to plan for (0.11 … 0.34); default: the newest llmfit models.",
        example="0.19",
    )  # fmt: skip
    max_num_batched_tokens: int | None = knob(
        None, "--max-num-batched-tokens", low=1, high=1 << 24, changes=(MEMORY, SPEED),
        parser=human_readable_int, help="tokens a step (passed on).",
        example="4096",
    )  # fmt: skip
    max_num_seqs: int | None = knob(
        None, "--max-num-seqs", low=1, high=1 << 20, changes=(MEMORY, SPEED),
        help="sequences a step (passed on).",
        example="64",
    )  # fmt: skip
    enforce_eager: bool = knob(
        False, "--enforce-eager", kind="bool", negations=("--no-enforce-eager",),
        changes=(MEMORY, SPEED), help="no CUDA graphs (passed on).",
    )  # fmt: skip
    # vllm/config/scheduler.py SchedulerConfig.async_scheduling: None is the release's default
    # (on from 0.14, vllm_versions "async_scheduling").
    async_scheduling: bool | None = knob(
        None, "--async-scheduling", kind="bool", negations=("--no-async-scheduling",),
        changes=(SPEED,), help="schedule the next step while the GPU runs this one (default: "
        "on from vLLM 0.14; passed on).",
    )  # fmt: skip
    # vllm/entrypoints/cli/serve.py ServeSubcommand.cmd: None is the release's default (one a
    # data-parallel rank from 0.15, one before: vllm_versions "api_server_per_dp_rank").
    api_server_count: int | None = knob(
        None, "--api-server-count", "-asc", low=1, high=1024, changes=(SPEED,),
        help="API server processes a launch takes its requests through (default: one a "
        "data-parallel rank from vLLM 0.15, one before; passed on).",
        example="2",
    )  # fmt: skip
    enable_prefix_caching: bool | None = knob(
        None, "--enable-prefix-caching", kind="bool",
        negations=("--no-enable-prefix-caching", "--disable-prefix-caching"), changes=(MEMORY,),
        help="prefix caching on or off (hybrid models keep more state with it).",
    )  # fmt: skip
    # vllm/config/offload.py UVAOffloadConfig.cpu_offload_gb: GiB of each rank's layer weights
    # kept in pinned host memory and read over PCIe every step.
    cpu_offload_gb: float | None = knob(
        None, "--cpu-offload-gb", kind="float", low=0, high=1 << 20, changes=(MEMORY, SPEED),
        help="GiB of each card's layer weights kept in the host's memory, read over PCIe every "
        "step (passed on).",
        example="10",
    )  # fmt: skip
    # vllm/config/cache.py CacheConfig.num_gpu_blocks_override: the KV cache's blocks on each
    # card, whatever its memory (v1/core/kv_cache_planning.py may_override_num_blocks).
    num_gpu_blocks_override: int | None = knob(
        None, "--num-gpu-blocks-override", low=1, high=1 << 31, changes=(MEMORY,),
        help="the KV cache's blocks on each card, whatever its memory gives (passed on).",
        example="4096",
    )  # fmt: skip
    # vllm/config/cache.py CacheConfig.kv_cache_memory_bytes: the KV cache's bytes on each card,
    # reserved as given after the profile run (v1/worker/gpu_worker.py
    # determine_available_memory), --gpu-memory-utilization ignored and the extensible cache off.
    kv_cache_memory_bytes: int | None = knob(
        None, "--kv-cache-memory-bytes", low=1 << 20, high=1 << 50, changes=(MEMORY,),
        parser=human_readable_bytes,
        help="the KV cache's bytes on each card, as vLLM reserves them whatever "
        "--gpu-memory-utilization says (passed on).",
        example="20G",
    )  # fmt: skip
    enable_extensible_kv_cache: bool | None = knob(
        None, "--enable-extensible-kv-cache", kind="bool",
        negations=("--no-enable-extensible-kv-cache", "--disable-extensible-kv-cache"),
        changes=(MEMORY,),
        help="vLLM 0.34's KV cache measured after warm-up, on or off (off: sized by the profile "
        "run, at 0.92 by default).",
    )  # fmt: skip
    enable_lora: bool = knob(
        False, "--enable-lora", kind="bool", negations=("--no-enable-lora", "--disable-lora"),
        changes=(MEMORY,), help="LoRA adapter slots (--max-loras of --max-lora-rank each).",
    )  # fmt: skip
    max_loras: int | None = knob(
        None, "--max-loras", low=1, high=1024, implies="enable_lora", changes=(MEMORY,),
        help="LoRA adapter slots (default 1; turns on --enable-lora).",
        example="2",
    )  # fmt: skip
    max_lora_rank: int | None = knob(
        None, "--max-lora-rank", choices=LORA_RANKS, implies="enable_lora", changes=(MEMORY,),
        help="the rank of each LoRA slot (default 16).",
        example="32",
    )  # fmt: skip
    speculative_config: str | None = knob(
        None, "--speculative-config", "-sc", kind="json", changes=(MEMORY,), metavar="JSON",
        help='speculative decoding, as JSON (\'{"method": "mtp", "num_speculative_tokens": 1}\').',
        example='{"method": "mtp", "num_speculative_tokens": 1}',
    )  # fmt: skip
    limit_mm_per_prompt: str | None = knob(
        None, "--limit-mm-per-prompt", kind="json", changes=(MEMORY,), metavar="JSON",
        help="items a prompt may carry, as JSON ('{\"image\": 0}' for text only).",
        example='{"image": 0}',
    )  # fmt: skip
    # What the knobs above mean, worked out by checked(): the speculation's cost a card (a
    # vllm_memory.Speculative, its draft's weights filled in once its repository is read), the
    # draft's repository, and the multimodal limits as (modality, count) pairs.
    speculative: Speculative | None = None
    draft_repo: str | None = None
    limits: tuple[tuple[str, int], ...] = ()

    def checked(self) -> VllmOptions:
        """The options as vLLM would take them, with what they mean worked out; raises
        ValueError with the sentence that says what vLLM would refuse."""
        from llmfit.plan.engines.vllm_versions import VllmVersion

        if self.version is not None:
            release = VllmVersion.parse(self.version)
            if self.enable_extensible_kv_cache is not None and not release.has(
                "extensible_kv_cache"
            ):
                flag = "--enable-extensible-kv-cache"
                raise ValueError(
                    f"{flag if self.enable_extensible_kv_cache else '--no-' + flag[2:]} is a "
                    f"flag of vLLM 0.34 on, and vLLM {release} has none."
                )
        seqs, tokens = self.max_num_seqs, self.max_num_batched_tokens
        if seqs is not None and tokens is not None and tokens < seqs:
            # vllm/config/scheduler.py SchedulerConfig (its check of the two, in its words).
            raise ValueError(
                f"--max-num-batched-tokens {tokens} is below --max-num-seqs {seqs}, which vLLM "
                f"refuses: max_num_batched_tokens ({tokens}) must be greater than or equal to "
                f"max_num_seqs ({seqs})."
            )
        spec, draft = (
            speculative(self.speculative_config) if self.speculative_config else (None, None)
        )
        out = replace(
            self,
            speculative=spec if self.speculative is None else self.speculative,
            draft_repo=draft,
            limits=limits(self.limit_mm_per_prompt) if self.limit_mm_per_prompt else (),
        )
        if self.enable_lora:
            # Every value the plan relies on is passed on: a LoRA launch names its slots and rank.
            loras, rank = LORA_DEFAULTS
            out = replace(
                out, max_loras=self.max_loras or loras, max_lora_rank=self.max_lora_rank or rank
            )
        return out

    @property
    def lora(self) -> tuple[int, int] | None:
        """(slots, rank) of a LoRA launch; None without --enable-lora (vLLM ignores the others)."""
        if not self.enable_lora:
            return None
        return (self.max_loras or LORA_DEFAULTS[0], self.max_lora_rank or LORA_DEFAULTS[1])

    def extra_repos(self) -> tuple[str, ...]:
        """The repositories the plan must read beside the model's own: a speculative draft's."""
        return (self.draft_repo,) if self.draft_repo else ()

    def with_repo(self, repo_id: str, model: Model, artifacts: tuple[Artifact, ...]) -> VllmOptions:
        """The options once the draft's repository is read: its weights and cache, so that each
        card is charged for them. A draft whose files give no size (a pytorch_model.bin) is
        weighed from its config at 2 B a parameter (4 for a float32 one), and the plan says so."""
        from llmfit.plan.engines.vllm_inputs import Speculative
        from llmfit.plan.model import Shape

        spec = self.speculative
        assert isinstance(spec, Speculative) and repo_id == self.draft_repo
        stored = [a for a in artifacts if a.format == "safetensors"]
        best = max(stored, key=lambda a: a.bytes, default=None)
        weights = best.bytes if best is not None else 0
        elem = 4 if model.dtype == "float32" else 2
        unweighed = ""
        if not weights:
            split = model.param_split
            h, vocab = model.hidden_size or 0, model.vocab_size or 0
            params = (
                split.embed + split.output + sum(split.layers)
                if split is not None
                # No sizes to split (no layer kinds): a layer of 12 H² and an embedding and
                # head, each layer.
                else model.layers * 12 * h * h + 2 * vocab * h
            )
            weights, unweighed = params * elem, repo_id
        exact = best.weights if best is not None and best.weights_exact else None
        # An EAGLE head's fc takes the target's hidden states (2 of them for EAGLE-1, the 3
        # auxiliary layers' for EAGLE-3, eagle_aux_hidden_state_layer_ids' default) to its own:
        # a ReplicatedLinear every rank holds whole.
        hidden = model.hidden_size or 0
        fc_in = {"eagle": 2, "eagle3": 3}.get(spec.method, 0)
        replicated = fc_in * hidden * hidden * elem
        shape = Shape.of(model)
        layers = sum(g.layers for g in shape.layer_groups)
        token = shape.kv_bytes_per_token() // max(layers, 1)
        spec = replace(
            spec,
            draft_weight_bytes=weights,
            draft_layers=layers,
            draft_token_bytes=token,
            draft_embed_bytes=exact.embed_bytes if exact is not None else 0,
            draft_embedding_size=(model.vocab_size or 0) * (model.hidden_size or 0) * elem,
            draft_replicated_bytes=replicated,
            draft_unweighed=unweighed,
        )
        return replace(self, speculative=spec)
