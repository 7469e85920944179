"""An SGLang launch read back into a plan request (`llmfit check -- sglang serve …`).

Both launchers are read: `sglang serve [REPO] --model-path REPO …`, which SGLang 0.5.23 names as
its entrypoint (sglang/cli/serve.py also takes the model as the first word), and `python -m
sglang.launch_server --model-path REPO …`. Their flags are one parser's (sglang/srt/server_args.py
ServerArgs.add_cli_args), spelt as in fixtures/engines/sglang-0.5.23-server-args.json; argparse
takes a unique prefix of a flag too, which is how SGLang's own docs write `--tp 8`. Each flag that
changes memory is read; every other is kept as read but not modelled, and said so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llmfit.plan.engines import Request, knobs
from llmfit.plan.engines.argv import scan, whole
from llmfit.plan.engines.sglang_options import SglangOptions, human_readable_int
from llmfit.plan.settings import Pins, PlanSettings

# Flags that take a value, by every spelling SGLang accepts (and the unique prefixes its docs
# use), → what they set.
VALUED = {
    "--model-path": "model", "--model": "model",
    "--revision": "revision",
    "--tp-size": "tp", "--tensor-parallel-size": "tp", "--tp": "tp",
    "--pp-size": "pp", "--pipeline-parallel-size": "pp",
    "--dp-size": "dp", "--data-parallel-size": "dp", "--dp": "dp",
    "--attn-dp-size": "attn_dp", "--attention-data-parallel-size": "attn_dp",
    "--ep-size": "ep", "--expert-parallel-size": "ep", "--ep": "ep",
    "--context-length": "context",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--quantization": "quantization",
}  # fmt: skip
# `--dp-size N --enable-dp-attention`: the spelling before --attn-dp-size (still accepted,
# deprecated: server_args.py).
SWITCHES = {"--enable-dp-attention": "dp_attention"}
# Flags that shape a launch but not a card's memory: read, and not reported as ignored.
LAUNCH_ONLY = {
    "--host", "--port", "--served-model-name", "--trust-remote-code", "--nnodes", "--node-rank",
    "--dist-init-addr", "--nccl-init-addr", "--use-ray", "--api-key", "--log-level",
    "--tool-call-parser", "--reasoning-parser", "--chat-template", "--tokenizer-path",
}  # fmt: skip
LAUNCH_SWITCHES = {"--trust-remote-code", "--use-ray"}
_KNOBS = knobs.tables(SglangOptions)
# KV dtypes as SGLang spells them → what llmfit plans.
KV_DTYPES = {
    "auto": "auto", "bf16": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}  # fmt: skip


def _strip_launcher(argv: Sequence[str]) -> list[str]:
    """The flags after `sglang serve` or `python -m sglang.launch_server`."""
    args = list(argv)
    first = args[0].rsplit("/", 1)[-1] if args else ""
    if first.startswith("python") and args[1:3] == ["-m", "sglang.launch_server"]:
        return args[3:]
    if first == "sglang" and args[1:2] == ["serve"]:
        return args[2:]
    raise ValueError(
        "an SGLang command to check starts `sglang serve --model-path REPO` or "
        "`python -m sglang.launch_server --model-path REPO`."
    )


def read(argv: Sequence[str], defaults: PlanSettings) -> Request:
    """An SGLang launch → the repository, the settings and the exact layout."""
    words = scan(
        _strip_launcher(argv), {**VALUED, **_KNOBS.valued}, {**SWITCHES, **_KNOBS.switches},
        LAUNCH_ONLY, LAUNCH_SWITCHES,
    )  # fmt: skip
    got, on, ignored, positional = words.got, words.on, words.ignored, words.positional
    # `sglang serve REPO` takes the first word as the model (cli/serve.py
    # _normalize_positional_model_path).
    repo = got.get("model") or (positional[0] if positional else None)
    if not repo:
        raise ValueError("the SGLang command names no model: sglang serve --model-path REPO ….")
    ignored += positional[1:] if not got.get("model") else positional
    tp = whole("--tp-size", got.get("tp", "1"))
    dp = whole("--dp-size", got.get("dp", "1"))
    attn_dp = whole("--attn-dp-size", got.get("attn_dp", "1"))
    ep = whole("--ep-size", got.get("ep", "1"))
    if "dp_attention" in on and attn_dp == 1:
        attn_dp, dp = dp, 1
    if attn_dp > 1:
        # Data-parallel attention: one --tp-size group of attention groups (llmfit's tp × dp,
        # the MoE recipe). Without --ep-size the experts are sharded over the group by tensor
        # parallelism instead: the same bytes a card, so expert parallelism is left free.
        if tp % attn_dp:
            raise ValueError(f"--tp-size {tp} must be divisible by --attn-dp-size {attn_dp}.")
        pins = Pins(tp=tp // attn_dp, pp=1, dp=attn_dp, ep=True if ep > 1 else None)
    else:
        pins = Pins(
            tp=tp,
            pp=whole("--pp-size", got.get("pp", "1")),
            dp=dp,
            ep=ep > 1,
        )
    kv = got.get("kv_cache_dtype", "auto")
    if kv not in KV_DTYPES:
        raise ValueError(
            f"--kv-cache-dtype {kv!r} is not one llmfit plans ({', '.join(sorted(KV_DTYPES))})."
        )
    quant = got.get("quantization")
    precision = "stored"
    if quant == "fp8":
        precision = "fp8"
    elif quant is not None:
        ignored.append(f"--quantization {quant}")
    mine = {k: v for k, v in got.items() if k in _KNOBS.valued.values()}
    # SGLang's switch knobs (--enable-dp-lm-head), as the declaration's switches read them.
    switched = {k: v for k, v in on.items() if k in {n for n, _ in _KNOBS.switches.values()}}
    options = knobs.build(SglangOptions, knobs.read(SglangOptions, mine, switched))
    settings = replace(
        defaults,
        context=(
            human_readable_int("--context-length", got["context"]) if "context" in got else None
        ),
        kv_cache_dtype=KV_DTYPES[kv],
        precision=precision,
        pins=pins,
        engines=("sglang",),
        every_layout=True,
    ).with_options(options)
    repo_at = repo + (f"@{got['revision']}" if "revision" in got else "")
    return Request(repo=repo_at, settings=settings, ignored=tuple(ignored))
