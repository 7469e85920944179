"""An SGLang launch read back into a plan request (`llmfit check -- sglang serve …`).

Both launchers are read: `sglang serve [REPO] --model-path REPO …`, which SGLang 0.5.23 names as
its entrypoint (sglang/cli/serve.py also takes the model as the first word), and `python -m
sglang.launch_server --model-path REPO …`. Their flags are one parser's (sglang/srt/server_args.py
ServerArgs.add_cli_args), spelt as in fixtures/engines/sglang-0.5.23-server-args.json; argparse
takes a unique prefix of a flag too, which is how SGLang's own docs write `--tp 8`. Each flag that
changes memory is read; every other is kept as read but not modelled, and said so.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

from llmfit.plan.credentials import Vault
from llmfit.plan.engines import NO_ENV, Request, knobs
from llmfit.plan.engines.grammar import Beyond, Grammar, number, positive, said, whole
from llmfit.plan.engines.sglang_grammar import FLAGS, POSITIONAL
from llmfit.plan.engines.sglang_options import SglangOptions, human_readable_int
from llmfit.plan.settings import Pins, PlanSettings

# Flags that shape a launch but not a card's memory: read, and not reported as unmodelled.
LAUNCH_ONLY = {
    "host", "port", "served_model_name", "trust_remote_code", "nnodes", "node_rank",
    "dist_init_addr", "use_ray", "api_key", "log_level", "tool_call_parser",
    "reasoning_parser", "chat_template", "tokenizer_path",
}  # fmt: skip
# The variable a launch takes a credential flag's value from, where one is named (any other flag
# whose name says it is a credential is read from SGLANG_<ITS NAME>: llmfit/plan/credentials.py;
# SGLang reads none itself: the command refers to it, and a shell or Kubernetes expands it).
SECRETS = {
    "api_key": "SGLANG_API_KEY", "admin_api_key": "SGLANG_ADMIN_API_KEY", "hf_token": "HF_TOKEN",
}  # fmt: skip
# The dests of the settings every engine has, in SGLang's spelling.
NEUTRAL = {
    "model_path", "revision", "tp_size", "pp_size", "dp_size", "attn_dp_size",
    "enable_dp_attention", "ep_size", "context_length", "kv_cache_dtype", "quantization",
}  # fmt: skip
# KV dtypes as SGLang spells them → what llmfit plans.
KV_DTYPES = {
    "auto": "auto", "bf16": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}  # fmt: skip


def _hri(text: str) -> int:
    try:
        return human_readable_int("", text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a token count") from None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not JSON") from None


TYPES: dict[str, Callable[[str], Any]] = {
    "int": whole, "float": number, "str": str, "loads": _json, "human_readable_int": _hri,
    "json_list_type": _json,
}  # fmt: skip


@cache
def grammar() -> Grammar:
    return Grammar(FLAGS, TYPES, POSITIONAL)


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


def read(
    argv: Sequence[str],
    defaults: PlanSettings,
    env: Mapping[str, str] = NO_ENV,
    vault: Vault | None = None,
    load: Callable[[str], Any] | None = None,
) -> Request:
    """An SGLang launch → the repository, the settings and the exact layout."""
    words = _strip_launcher(argv)
    given = list(words)
    # `sglang serve REPO` takes the first word as the model (cli/serve.py
    # _normalize_positional_model_path).
    if words and not words[0].startswith("-"):
        words = ["--model-path", words[0], *words[1:]]
    g = grammar()
    try:
        got = g.parse(words).values
    except Beyond:
        raise
    except ValueError as e:
        raise ValueError(f"SGLang 0.5.23 refuses it: {e}") from None
    repo = got.get("model_path")
    if not repo:
        raise ValueError("the SGLang command names no model: sglang serve --model-path REPO ….")
    tp = positive("--tp-size", got.get("tp_size", 1))
    dp = positive("--dp-size", got.get("dp_size", 1))
    attn_dp = positive("--attn-dp-size", got.get("attn_dp_size", 1))
    ep = positive("--ep-size", got.get("ep_size", 1))
    if got.get("enable_dp_attention") and attn_dp == 1:
        # `--dp-size N --enable-dp-attention`: the spelling before --attn-dp-size (still
        # accepted, deprecated: server_args.py).
        attn_dp, dp = dp, 1
    if attn_dp > 1:
        # Data-parallel attention: one --tp-size group of attention groups (llmfit's tp × dp,
        # the MoE recipe). Without --ep-size the experts are cut over the whole group by tensor
        # parallelism (moe_tp_size = tp_size // ep_size), which is planned as such: the same
        # bytes a card, each expert's quantisation blocks split tp × dp ways
        # (serving.experts_refusal).
        if tp % attn_dp:
            raise ValueError(f"--tp-size {tp} must be divisible by --attn-dp-size {attn_dp}.")
        pins = Pins(tp=tp // attn_dp, pp=1, dp=attn_dp, ep=ep > 1)
    else:
        pins = Pins(tp=tp, pp=positive("--pp-size", got.get("pp_size", 1)), dp=dp, ep=ep > 1)
    kv = got.get("kv_cache_dtype") or "auto"
    if kv not in KV_DTYPES:
        raise ValueError(
            f"--kv-cache-dtype {kv!r} is not one llmfit plans ({', '.join(sorted(KV_DTYPES))})."
        )
    ignored: list[str] = []
    quant = got.get("quantization")
    precision = "stored"
    if quant == "fp8":
        precision = "fp8"
    elif quant is not None:
        ignored.append(f"--quantization {quant}")
    values: dict[str, Any] = {}
    mine: set[str] = set()
    for d in knobs.declared(SglangOptions):
        dest = g.dest(d.knob.flags[0]) if d.knob.flags else None
        if dest is not None:
            mine.add(dest)
            if dest in got:
                values[d.name] = got[dest]
    options = knobs.build(SglangOptions, values)
    program = list(argv[: len(argv) - len(given)])
    masked = g.mask(program, given, vault or Vault(), SECRETS, "SGLANG")
    for dest, value in got.items():
        if dest in masked.held:
            # A credential's flag is named, its value never: the variable it is launched from.
            if dest not in LAUNCH_ONLY:
                ignored.append(f"{g.spelling(dest)} (a credential: ${masked.held[dest]})")
        elif dest not in NEUTRAL | LAUNCH_ONLY | mine and not g.secret(dest):
            ignored.append(said(g.spelling(dest), value))
    context = got.get("context_length")
    settings = replace(
        defaults,
        context=context,
        kv_cache_dtype=KV_DTYPES[kv],
        precision=precision,
        pins=pins,
        engines=("sglang",),
        every_layout=True,
    ).with_options(options)
    revision = got.get("revision")
    return Request(
        repo=repo + (f"@{revision}" if revision else ""),
        settings=settings,
        ignored=tuple(ignored),
        argv=masked.argv,
        secrets=masked.secrets,
    )
