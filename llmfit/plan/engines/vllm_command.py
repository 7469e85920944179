"""A `vllm serve` line read back into a plan request (`llmfit check -- vllm serve …`).

Flag spellings are vLLM 0.33's (vllm/engine/arg_utils.py EngineArgs.add_cli_args and
vllm/entrypoints/openai/cli_args.py): each flag that changes memory is read; every other flag is
kept as read but not modelled, and said so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from llmfit.plan.engines import NO_ENV, Request, knobs
from llmfit.plan.engines.argv import number, scan, whole
from llmfit.plan.engines.vllm_options import VllmOptions, human_readable_int
from llmfit.plan.settings import Pins, PlanSettings

# vLLM's knobs (vllm_options.py) are read by their declaration; these are the flags of settings
# every engine has, in vLLM's spelling (the model, the layout, the context, the KV dtype and
# precision, the card's share), → what they set.
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
}
SWITCHES: dict[str, str | tuple[str, bool]] = {
    "--enable-expert-parallel": "ep",
    "-ep": "ep",
    "--disable-expert-parallel": ("ep", False),
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
_KNOBS = knobs.tables(VllmOptions)


def _tokens(flag: str, value: str) -> int | None:
    """--max-model-len: a count, with vLLM's k/K/m/M suffixes (1k = 1000, 1K = 1024), or auto."""
    text = value.strip()
    # human_readable_int_or_auto (vllm/utils/argparse_utils.py): the model's own length.
    if text == "-1" or text.lower() == "auto":
        return None
    n = human_readable_int(flag, text)
    if n <= 0:
        raise ValueError(f"{flag} {value!r} must be positive.")
    return n


def read(argv: Sequence[str], defaults: PlanSettings, env: Mapping[str, str] = NO_ENV) -> Request:
    """`vllm serve REPO [flags]` → the repository, the settings and the exact layout."""
    args = list(argv)
    if args[:1] and args[0].rsplit("/", 1)[-1] == "vllm":
        args = args[1:]
    if args[:1] != ["serve"]:
        raise ValueError("a vLLM command to check starts `vllm serve REPO`.")
    words = scan(
        args[1:], {**VALUED, **_KNOBS.valued}, {**SWITCHES, **_KNOBS.switches}, LAUNCH_ONLY,
        LAUNCH_SWITCHES,
    )  # fmt: skip
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
        ep=on.get("ep", False),
    )
    asked = defaults.options(VllmOptions)
    mine = {k: v for k, v in got.items() if k in _KNOBS.valued.values()}
    values = knobs.read(VllmOptions, mine, {k: v for k, v in on.items() if k != "ep"})
    # The release modelled is llmfit's own setting (`llmfit check --vllm-version`), no flag's.
    options = knobs.build(VllmOptions, {"version": asked.version, **values})
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
    ).with_options(options)
    if settings.kv_cache_dtype not in ("auto", "bfloat16", "fp8"):
        raise ValueError(f"--kv-cache-dtype {kv!r} is not one llmfit plans (auto, bfloat16, fp8).")
    repo_at = repo + (f"@{got['revision']}" if "revision" in got else "")
    return Request(repo=repo_at, settings=settings, ignored=tuple(ignored))
