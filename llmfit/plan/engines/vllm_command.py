"""A `vllm serve` line read back into a plan request (`llmfit check -- vllm serve …`).

Flag spellings are vLLM 0.33's (vllm/engine/arg_utils.py EngineArgs.add_cli_args and
vllm/entrypoints/openai/cli_args.py): each flag that changes memory is read; every other flag is
kept as read but not modelled, and said so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llmfit.plan.engines import Request
from llmfit.plan.engines.argv import number, scan, whole
from llmfit.plan.engines.vllm_options import vllm_options
from llmfit.plan.settings import Pins, PlanSettings

# Flags that take a value, by every spelling vLLM accepts, → what they set.
VALUED = {
    "--model": "model",
    "--revision": "revision",
    "--tensor-parallel-size": "tp",
    "-tp": "tp",
    "--pipeline-parallel-size": "pp",
    "-pp": "pp",
    "--data-parallel-size": "dp",
    "-dp": "dp",
    "--max-model-len": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--quantization": "quantization",
    "-q": "quantization",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--max-loras": "max_loras",
    "--max-lora-rank": "max_lora_rank",
    "--speculative-config": "speculative_config",
    "--limit-mm-per-prompt": "limit_mm_per_prompt",
}
SWITCHES = {
    "--enable-expert-parallel": "ep",
    "-ep": "ep",
    "--enforce-eager": "enforce_eager",
    "--enable-lora": "lora",
    "--enable-prefix-caching": "prefix_on",
    "--no-enable-prefix-caching": "prefix_off",
}
# Flags that shape a launch but not a card's memory: read, and not reported as ignored.
LAUNCH_ONLY = {
    "--host", "--port", "--served-model-name", "--trust-remote-code", "--nnodes", "-n",
    "--node-rank", "-r", "--master-addr", "--master-port", "--headless",
    "--data-parallel-size-local", "--data-parallel-address", "--data-parallel-rpc-port",
    "--data-parallel-start-rank", "--data-parallel-backend", "--distributed-executor-backend",
    "--api-key", "--uvicorn-log-level", "--disable-log-requests", "--disable-log-stats",
}  # fmt: skip
LAUNCH_SWITCHES = {"--trust-remote-code", "--headless", "--disable-log-requests",
                   "--disable-log-stats"}  # fmt: skip


def _tokens(flag: str, value: str) -> int | None:
    """--max-model-len: a count, with vLLM's k/K/m/M suffixes (1k = 1000, 1K = 1024), or auto."""
    text = value.strip()
    if text in ("auto", "-1"):
        return None
    scale = {"k": 1000, "K": 1024, "m": 1_000_000, "M": 1 << 20}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    try:
        n = int(float(digits) * scale)
    except (ValueError, OverflowError):  # "inf" and "nan" are floats, but no count
        raise ValueError(f"{flag} {value!r} is not a token count.") from None
    if n <= 0:
        raise ValueError(f"{flag} {value!r} must be positive.")
    return n


def read(argv: Sequence[str], defaults: PlanSettings) -> Request:
    """`vllm serve REPO [flags]` → the repository, the settings and the exact layout."""
    args = list(argv)
    if args[:1] and args[0].rsplit("/", 1)[-1] == "vllm":
        args = args[1:]
    if args[:1] != ["serve"]:
        raise ValueError("a vLLM command to check starts `vllm serve REPO`.")
    words = scan(args[1:], VALUED, SWITCHES, LAUNCH_ONLY, LAUNCH_SWITCHES)
    got, on, ignored, positional = words.got, words.on, words.ignored, words.positional
    repo = got.get("model") or (positional[0] if positional else None)
    if not repo:
        raise ValueError("the vLLM command names no model: vllm serve REPO ….")
    if len(positional) > 1:
        ignored += positional[1:]
    kv = got.get("kv_cache_dtype", "auto")
    quant = got.get("quantization")
    precision = "stored"
    if quant in ("fp8", "fp8_per_tensor"):
        precision = "fp8"
    elif quant is not None:
        ignored.append(f"--quantization {quant}")
    gmu = defaults.gpu_memory_utilization
    if "gpu_memory_utilization" in got:
        gmu = number("--gpu-memory-utilization", got["gpu_memory_utilization"])
        if not 0 < gmu <= 1:
            raise ValueError(f"--gpu-memory-utilization {gmu:g} must be in (0, 1].")
    pins = Pins(
        tp=whole("--tensor-parallel-size", got.get("tp", "1")),
        pp=whole("--pipeline-parallel-size", got.get("pp", "1")),
        dp=whole("--data-parallel-size", got.get("dp", "1")),
        ep="ep" in on,
    )
    lora = "lora" in on
    vllm = vllm_options(
        version=defaults.vllm.version,
        max_num_batched_tokens=(
            whole("--max-num-batched-tokens", got["max_num_batched_tokens"])
            if "max_num_batched_tokens" in got
            else None
        ),
        max_num_seqs=whole("--max-num-seqs", got["max_num_seqs"])
        if "max_num_seqs" in got
        else None,
        enforce_eager="enforce_eager" in on,
        enable_prefix_caching=(
            True if "prefix_on" in on else False if "prefix_off" in on else None
        ),
        # vLLM's own defaults for a LoRA launch: one adapter slot of rank 16 (LoRAConfig).
        max_loras=whole("--max-loras", got.get("max_loras", "1")) if lora else 0,
        max_lora_rank=whole("--max-lora-rank", got.get("max_lora_rank", "16")) if lora else 0,
        speculative_config=got.get("speculative_config"),
        limit_mm_per_prompt=got.get("limit_mm_per_prompt"),
    )
    settings = replace(
        defaults,
        context=(
            _tokens("--max-model-len", got["max_model_len"]) if "max_model_len" in got else None
        ),
        gpu_memory_utilization=gmu,
        kv_cache_dtype={"auto": "auto", "bfloat16": "bfloat16", "bf16": "bfloat16"}.get(
            kv, "fp8" if kv.startswith("fp8") else kv
        ),
        precision=precision,
        pins=pins,
        engines=("vllm",),
        every_layout=True,
        vllm=vllm,
    )
    if settings.kv_cache_dtype not in ("auto", "bfloat16", "fp8"):
        raise ValueError(f"--kv-cache-dtype {kv!r} is not one llmfit plans (auto, bfloat16, fp8).")
    repo_at = repo + (f"@{got['revision']}" if "revision" in got else "")
    return Request(repo=repo_at, settings=settings, ignored=tuple(ignored))
