"""A `llama-server` line read back into a plan request (`llmfit check -- llama-server …`).

Flag spellings are llama.cpp's (common/arg.cpp, tools/server/README.md; ENGINES.md f): each flag
that changes memory is read; every other flag is kept as read but not modelled, and said so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llmfit.plan.engines import Request
from llmfit.plan.engines.argv import scan, whole
from llmfit.plan.settings import LlamaCppOptions, Pins, PlanSettings

VALUED = {
    "-m": "model", "--model": "model",
    "-hf": "hf", "-hfr": "hf", "--hf-repo": "hf",
    "-c": "ctx", "--ctx-size": "ctx",
    "-ngl": "ngl", "--gpu-layers": "ngl", "--n-gpu-layers": "ngl",
    "-np": "parallel", "--parallel": "parallel",
    "-ub": "ubatch", "--ubatch-size": "ubatch",
    "-b": "batch", "--batch-size": "batch",
    "-fa": "flash_attn", "--flash-attn": "flash_attn",
    "-ncmoe": "n_cpu_moe", "--n-cpu-moe": "n_cpu_moe",
    "-ctk": "cache_k", "--cache-type-k": "cache_k",
    "-ctv": "cache_v", "--cache-type-v": "cache_v",
    "-ts": "tensor_split", "--tensor-split": "tensor_split",
    "--rpc": "rpc",
    "--mmproj": "mmproj",
}  # fmt: skip
SWITCHES = {"-cmoe": "cpu_moe", "--cpu-moe": "cpu_moe"}
LAUNCH_ONLY = {"--host", "--port", "-a", "--alias", "--api-key", "-t", "--threads", "--jinja",
               "--no-jinja", "--metrics", "--offline"}  # fmt: skip
LAUNCH_SWITCHES = {"--jinja", "--no-jinja", "--metrics", "--offline"}
CACHE_TYPES = ("f16", "q8_0")


def read(argv: Sequence[str], defaults: PlanSettings) -> Request:
    """`llama-server (-m FILE | -hf REPO[:QUANT]) [flags]` → the repository or file, the quant,
    the settings and the exact placement."""
    args = list(argv[1:]) if argv and argv[0].rsplit("/", 1)[-1] == "llama-server" else list(argv)
    # The model is named by -m or -hf only: a bare word is read as any unknown flag is.
    words = scan(args, VALUED, SWITCHES, LAUNCH_ONLY, LAUNCH_SWITCHES, positional=False)
    got, on, ignored = words.got, words.on, words.ignored
    path = got.get("model")
    hf = got.get("hf")
    if not path and not hf:
        raise ValueError("the llama-server command names no model: give -m FILE or -hf REPO:QUANT.")
    repo, quant = (hf.partition(":")[0], hf.partition(":")[2] or None) if hf else (path or "", None)
    ngl = got.get("ngl")
    gpu_layers: int | None
    if ngl in ("all", "999", "-1"):
        gpu_layers = 1 << 30  # every layer and the output layer
    elif ngl in (None, "auto"):
        gpu_layers = None
    else:
        gpu_layers = whole("--n-gpu-layers", ngl, zero=True)
    cache = {got.get("cache_k", "f16"), got.get("cache_v", "f16")}
    if len(cache) > 1 or not cache <= set(CACHE_TYPES):
        raise ValueError(
            "llmfit plans --cache-type-k and --cache-type-v both f16 or both q8_0; "
            f"this command gives {got.get('cache_k', 'f16')} and {got.get('cache_v', 'f16')}."
        )
    fa = got.get("flash_attn", "on")
    if fa in ("off", "0"):
        ignored.append(f"--flash-attn {fa} (planned with flash attention on)")
    split: tuple[float, ...] = ()
    if "tensor_split" in got:
        try:
            split = tuple(float(x) for x in got["tensor_split"].split(","))
        except ValueError:
            raise ValueError(f"--tensor-split {got['tensor_split']!r} is not numbers.") from None
        if any(x < 0 for x in split) or not any(split):
            raise ValueError(f"--tensor-split {got['tensor_split']!r} must be shares of the cards.")
        if len(set(split)) > 1:
            ignored.append(f"--tensor-split {got['tensor_split']} (planned as an equal split)")
    rpc = tuple(h for h in got.get("rpc", "").split(",") if h)
    opts = LlamaCppOptions(
        n_gpu_layers=gpu_layers,
        parallel=whole("--parallel", got["parallel"]) if "parallel" in got else None,
        ubatch=whole("--ubatch-size", got["ubatch"]) if "ubatch" in got else None,
        n_cpu_moe=(
            1 << 30
            if "cpu_moe" in on
            else whole("--n-cpu-moe", got["n_cpu_moe"], zero=True)
            if "n_cpu_moe" in got
            else None
        ),  # fmt: skip
        cache_type=cache.pop(),
        tensor_split=split,
        rpc=rpc,
    )
    ctx = whole("--ctx-size", got["ctx"], zero=True) if "ctx" in got else None
    settings = replace(
        defaults,
        context=ctx or None,
        precision="stored",
        pins=Pins(gpus=len(split) if split else None),
        engines=("llama.cpp",),
        every_layout=True,
        local_paths=path is not None,
        llamacpp=opts,
    )
    return Request(repo=repo, settings=settings, quant=quant, path=path, ignored=tuple(ignored))
