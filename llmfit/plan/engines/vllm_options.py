"""vLLM's flags that change memory, read and checked into VllmOptions: from llmfit's own options
and from a `vllm serve` line alike (`llmfit check`), so that both mean the same."""

from __future__ import annotations

import json
import math

from llmfit.plan.engines.vllm_memory import Speculative
from llmfit.plan.engines.vllm_versions import VllmVersion
from llmfit.plan.settings import VllmOptions

# --speculative-config methods whose proposer is part of the model or needs no weights (n-gram
# lookup), and those that load another model (vllm/config/speculative.py SpeculativeConfig).
OWN_METHODS = ("mtp", "ngram")
DRAFT_METHODS = ("eagle", "eagle3", "draft_model", "medusa")
# A JSON text from the command line is small; past this it is not a flag worth reading.
MAX_JSON = 4096


def _json_object(flag: str, text: str) -> dict:
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
    """--speculative-config → what it costs a card, and the draft model's repository, if it
    names one (its weights are read with the plan's own)."""
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
    return Speculative(method, n), draft if method in DRAFT_METHODS else None


def limits(text: str) -> tuple[tuple[str, int], ...]:
    """--limit-mm-per-prompt '{"image": 0}' → (("image", 0),)."""
    out = []
    for k, v in _json_object("--limit-mm-per-prompt", text).items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1024:
            raise ValueError(f"--limit-mm-per-prompt {k!r}: {v!r} is not a count of 0 to 1024.")
        out.append((str(k), v))
    return tuple(out)


def vllm_options(
    *,
    version: str | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    enforce_eager: bool = False,
    enable_prefix_caching: bool | None = None,
    max_loras: int = 0,
    max_lora_rank: int = 0,
    speculative_config: str | None = None,
    limit_mm_per_prompt: str | None = None,
) -> VllmOptions:
    """The options checked: a release llmfit models, JSON that says what vLLM would read from
    it. Raises ValueError with the sentence that says what is wrong."""
    if version is not None:
        VllmVersion.parse(version)
    for flag, n in (("--max-num-seqs", max_num_seqs),
                    ("--max-num-batched-tokens", max_num_batched_tokens)):  # fmt: skip
        if n is not None and (not isinstance(n, int) or n <= 0 or not math.isfinite(n)):
            raise ValueError(f"{flag} {n!r} must be a positive whole number.")
    spec, draft = speculative(speculative_config) if speculative_config else (None, None)
    return VllmOptions(
        version=version,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        enforce_eager=enforce_eager,
        enable_prefix_caching=enable_prefix_caching,
        max_loras=max_loras,
        max_lora_rank=max_lora_rank,
        speculative_config=speculative_config,
        speculative=spec,
        draft_repo=draft,
        limit_mm_per_prompt=limits(limit_mm_per_prompt) if limit_mm_per_prompt else (),
    )
