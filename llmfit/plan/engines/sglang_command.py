"""An SGLang launch read back into a plan request (`llmfit check -- sglang serve …`).

Both launchers are read: `sglang serve [REPO] --model-path REPO …`, which SGLang 0.5.23 names as
its entrypoint (sglang/cli/serve.py also takes the model as the first word), and `python -m
sglang.launch_server --model-path REPO …`. Their flags are one parser's (sglang/srt/server_args.py
ServerArgs.add_cli_args), spelt as in fixtures/engines/sglang-0.5.23-server-args.json; argparse
takes a unique prefix of a flag too, which is how SGLang's own docs write `--tp 8`. Each flag that
changes memory is read; every other is kept as read but not modelled, and said so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal, InvalidOperation

from llmfit.plan.engines import Request
from llmfit.plan.engines.argv import number, scan, whole
from llmfit.plan.settings import Pins, PlanSettings, SglangOptions

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
    "--mem-fraction-static": "mem_fraction_static",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--quantization": "quantization",
    "--max-running-requests": "max_running_requests",
    "--chunked-prefill-size": "chunked_prefill_size",
    "--max-total-tokens": "max_total_tokens",
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
# KV dtypes as SGLang spells them → what llmfit plans.
KV_DTYPES = {
    "auto": "auto", "bf16": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}  # fmt: skip


def _tokens(flag: str, value: str) -> int:
    """A token count as SGLang's human_readable_int reads it (utils/common.py): an integer, or
    one with an SI suffix (1k = 1000, 1M, 25.6k) or an IEC one (1Ki = 1024, 1Mi), case-sensitive."""
    text = value.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", text)
    try:
        if m:
            number, suffix = m.groups()
            if suffix.endswith("i"):
                if "." in number:
                    raise ValueError
                n = int(number) << {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[suffix]
            else:
                n = int(Decimal(number) * {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[suffix])
        else:
            n = int(text)
    except (ValueError, InvalidOperation):
        raise ValueError(f"{flag} {value!r} is not a token count.") from None
    if n <= 0:
        raise ValueError(f"{flag} {value!r} must be positive.")
    return n


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
    words = scan(_strip_launcher(argv), VALUED, SWITCHES, LAUNCH_ONLY, LAUNCH_SWITCHES)
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
    share = None
    if "mem_fraction_static" in got:
        share = number("--mem-fraction-static", got["mem_fraction_static"])
        if not 0 < share < 1:
            raise ValueError(f"--mem-fraction-static {share:g} must be between 0 and 1.")
    options = SglangOptions(
        mem_fraction_static=share,
        max_running_requests=(
            whole("--max-running-requests", got["max_running_requests"])
            if "max_running_requests" in got
            else None
        ),
        chunked_prefill_size=(
            whole("--chunked-prefill-size", got["chunked_prefill_size"])
            if "chunked_prefill_size" in got
            else None
        ),
        max_total_tokens=(
            _tokens("--max-total-tokens", got["max_total_tokens"])
            if "max_total_tokens" in got
            else None
        ),
    )
    settings = replace(
        defaults,
        context=_tokens("--context-length", got["context"]) if "context" in got else None,
        kv_cache_dtype=KV_DTYPES[kv],
        precision=precision,
        pins=pins,
        engines=("sglang",),
        every_layout=True,
        sglang=options,
    )
    repo_at = repo + (f"@{got['revision']}" if "revision" in got else "")
    return Request(repo=repo_at, settings=settings, ignored=tuple(ignored))
