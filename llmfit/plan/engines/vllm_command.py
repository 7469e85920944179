"""A `vllm serve` line read back into a plan request (`llmfit check -- vllm serve …`), as the
release checked reads it (0.34's parser, or 0.33's for `--vllm-version 0.33` and older).

vLLM's FlexibleArgumentParser (vllm/utils/argparse_utils.py) first rewrites the words: `--model X`
moves to the front as the model tag, underscores in a flag's name become dashes
(`--tensor_parallel_size=2`), `-O3` becomes `--optimization-level 3`, and dotted keys
(`--speculative-config.method mtp`) gather into one JSON value; then argparse reads them by the
flags `vllm serve` defines (vllm_grammar.py, dumped from vLLM itself), so the last of a flag wins,
a negation (`--no-enforce-eager`, `--disable-expert-parallel`) turns its switch off, a unique
prefix of a long flag is that flag, and a flag vLLM does not define is refused. What vLLM's own
checks refuse (a LoRA rank it does not take, fewer batched tokens than sequences) is refused in
its words. Each flag that changes memory or speed is read; every other flag vLLM takes is kept
as read but not modelled, and said so.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

from llmfit.plan.credentials import Vault
from llmfit.plan.engines import NO_ENV, Request, knobs, vllm_033_grammar, vllm_grammar
from llmfit.plan.engines.grammar import Beyond, Grammar, number, positive, said, whole
from llmfit.plan.engines.vllm_options import VllmOptions, human_readable_int
from llmfit.plan.engines.vllm_versions import NEWEST, VllmVersion
from llmfit.plan.settings import Pins, PlanSettings

# Flags that shape a launch but not a card's memory: read, and not reported as unmodelled.
LAUNCH_ONLY = {
    "host", "port", "served_model_name", "trust_remote_code", "nnodes", "node_rank",
    "master_addr", "master_port", "headless", "data_parallel_size_local",
    "data_parallel_address", "data_parallel_rpc_port", "data_parallel_start_rank",
    "data_parallel_backend", "distributed_executor_backend", "api_key", "hf_token",
    "uvicorn_log_level", "disable_log_requests", "disable_log_stats", "enable_log_requests",
}  # fmt: skip
# The variable a launch takes a credential flag's value from, where the engine or the Hub names
# one (any other flag whose name says it is a credential is read from VLLM_<ITS NAME>, see
# llmfit/plan/credentials.py): vLLM reads
# VLLM_API_KEY itself when --api-key is absent (vllm/entrypoints/serve/middleware/register.py),
# huggingface_hub reads HF_TOKEN.
SECRETS = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}
# The dests of the settings every engine has, in vLLM's spelling.
NEUTRAL = {
    "model", "revision", "tensor_parallel_size", "pipeline_parallel_size",
    "data_parallel_size", "enable_expert_parallel", "max_model_len", "gpu_memory_utilization",
    "kv_cache_dtype", "quantization",
}  # fmt: skip


def _optional(read: Callable[[str], Any]) -> Callable[[str], Any]:
    """vLLM's optional_type: "" and "None" are no value."""

    def optional(text: str) -> Any:
        return None if text in ("", "None") else read(text)

    return optional


def _hri(text: str, what: str = "token count") -> int:
    try:
        return human_readable_int("", text, what)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a {what}") from None


def _bytes(text: str) -> int:
    return _hri(text, "byte count")


def _hri_or_auto(text: str) -> int:
    # human_readable_int_or_auto: -1 and auto (any case) are the model's own length.
    return -1 if text.strip() == "-1" or text.strip().lower() == "auto" else _hri(text)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not JSON") from None


TYPES: dict[str, Callable[[str], Any]] = {
    "int": whole, "float": number, "str": str, "loads": _json,
    "human_readable_int": _hri, "human_readable_int_or_auto": _hri_or_auto,
    "_optional_type": _optional(str),
}  # fmt: skip
# Readers the dump cannot name (optional_type of what): vllm/engine/arg_utils.py add_cli_args.
BY_DEST: dict[str, Callable[[str], Any]] = {
    "speculative_config": _optional(_json),
    # 0.34: optional_type(float), None leaving the share to vLLM's resolution.
    "gpu_memory_utilization": _optional(number),
    # optional_type(human_readable_int) (arg_utils.py get_kwargs' human_readable_int_args).
    "kv_cache_memory_bytes": _optional(_bytes),
    "num_gpu_blocks_override": _optional(whole),
}


def _hidden(flag: str) -> list[str]:
    """EnableDisableAction and BooleanOptionalAction accept `--no-X` for every `--X`, hidden
    from help and so from the dump (vllm/utils/argparse_utils.py EnableDisableAction)."""
    return ["--no-" + flag[2:]] if flag.startswith("--") and not flag.startswith("--no-") else []


@cache
def grammar(version: VllmVersion = NEWEST) -> Grammar:
    """The flags of `version`'s `vllm serve`: 0.34's parser from 0.34, 0.33's before (the
    releases whose parsers were dumped; 0.34 adds flags and removes none)."""
    g = vllm_grammar if version.minor >= 34 else vllm_033_grammar
    return Grammar(g.FLAGS, TYPES, g.POSITIONAL, hidden_negations=_hidden, by_dest=BY_DEST)


# vllm/model_executor/layers/quantization/__init__.py QuantizationMethods of the releases whose
# parsers were dumped: 0.34 adds w4afp8, lut_b_moe and mxfp4_hadamard32 and removes fp_quant.
# vLLM refuses any other name (vllm/config/model.py ModelConfig._verify_quantization).
QUANTIZATION_033 = (
    "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4",
    "modelopt_mxfp8", "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin",
    "humming", "compressed-tensors", "experts_int8", "quark", "moe_wna16", "torchao", "inc",
    "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "online", "fp8_per_tensor", "fp8_per_block",
    "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8",
)  # fmt: skip
QUANTIZATION_034 = (
    "awq", "auto_awq", "fp8", "w4afp8", "fbgemm_fp8", "modelopt", "modelopt_fp4",
    "modelopt_mxfp8", "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin",
    "humming", "compressed-tensors", "experts_int8", "quark", "moe_wna16", "torchao", "inc",
    "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "online", "fp8_per_tensor", "fp8_per_block",
    "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8", "lut_b_moe",
    "mxfp4_hadamard32",
)  # fmt: skip


def quantization_methods(version: VllmVersion) -> tuple[str, ...] | None:
    """The --quantization names `version` takes; None for a release whose list was not read."""
    if version.minor >= 34:
        return QUANTIZATION_034
    return QUANTIZATION_033 if version.minor == 33 else None


_DASHES = re.compile(r"(?<=--)[^.]*")


def _spell(flag: str) -> str:
    """A flag's name as FlexibleArgumentParser respells it: underscores before any dot dashed."""
    return _DASHES.sub(lambda m: m.group(0).replace("_", "-"), flag, count=1)


def flexible(args: Sequence[str]) -> list[str]:
    """The words as FlexibleArgumentParser.parse_args hands them to argparse (after `serve`)."""
    args = list(args)
    # `--model X` anywhere is the model tag (it warns, and moves it to the front).
    for i, a in enumerate(args):
        if a == "--model" and i + 1 < len(args):
            args = [args[i + 1], *args[:i], *args[i + 2 :]]
            break
        if a.startswith("--model="):
            args = [a.removeprefix("--model="), *args[:i], *args[i + 1 :]]
            break
    out: list[str] = []
    for i, a in enumerate(args):
        if a.startswith("--"):
            key, eq, value = a.partition("=")
            key = _spell(key)
            out.append(f"{key}={value}" if eq else key)
        elif a.startswith("-O") and a != "-O":
            out += ["--optimization-level", a[3:] if a[2:3] == "=" else a[2:]]
        elif a == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(a)
    return _dotted(out)


def _dotted(args: list[str]) -> list[str]:
    """`--json-arg.key value` (and `--json-arg.key+ a,b`) gathered into `--json-arg JSON`."""
    gathered: dict[str, dict[str, Any]] = {}
    out: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if not (a.startswith("-") and "." in a.split("=", 1)[0]):
            out.append(a)
            continue
        name, eq, text = a.partition("=")
        if not eq:
            if i + 1 >= len(args):
                raise ValueError(f"{name} needs a value.")
            text, skip = args[i + 1], True
        if name.endswith("+"):
            name, text = name[:-1], json.dumps(text.split(","))
        key, *path = name.split(".")
        try:
            value: Any = json.loads(text)
        except (ValueError, RecursionError):
            try:
                value = _hri(text)
            except argparse.ArgumentTypeError:
                value = text
        node = gathered.setdefault(key, {})
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = value
    for key, value in gathered.items():
        out += [key, json.dumps(value)]
    return out


def _config_args(config: dict[Any, Any], g: Grammar) -> list[str]:
    """A --config file's flags as vLLM writes them out (FlexibleArgumentParser.
    load_config_file, vllm/utils/argparse_utils.py, the same in 0.33 and 0.34): `--key value`; a
    true switch `--key`, a false one `--no-key` where the parser takes it (else nothing); a list
    its items; a mapping its JSON."""
    out: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if value:
                out.append(f"--{key}")
            elif g.takes(f"--no-{key}"):
                out.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                out += [f"--{key}", *(str(v) for v in value)]
        elif isinstance(value, dict):
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", str(value)]
    return out


def _pull_config(
    args: list[str], g: Grammar, load: Callable[[str], Any] | None, version: object
) -> list[str]:
    """`serve …` with a `--config FILE`'s flags in place, as vLLM `version` reads them before
    argparse (FlexibleArgumentParser._pull_args_from_config, the same in 0.33 and 0.34): right
    after the model named in front (or after `serve` where the file names it), so that a flag on
    the command line wins over the file's. Only the word `--config` itself is pulled (vLLM tests
    `"--config" in args`)."""
    if "--config" not in args:
        return args
    if args.count("--config") > 1:
        raise ValueError(f"vLLM {version} refuses it: more than one --config file.")
    index = args.index("--config")
    if index == len(args) - 1:
        raise ValueError(f"vLLM {version} refuses it: --config names no file.")
    path = args[index + 1]
    extension = path.split(".")[-1]
    if extension not in ("yaml", "yml"):
        raise ValueError(
            f"vLLM {version} refuses it: its --config file must be .yaml or .yml, not .{extension}."
        )
    if load is None:
        raise ValueError(f"its --config file {path!r} cannot be read here.")
    config = load(path)
    if not isinstance(config, dict):
        raise ValueError(f"its --config file {path!r} is not a mapping of flags to values.")
    pulled = _config_args(config, g)
    model_in_cli = len(args) > 1 and not args[1].startswith("-")
    if not model_in_cli and "--model" not in pulled:
        raise ValueError("the vLLM command names no model: vllm serve REPO ….")
    if model_in_cli:
        return [*args[:2], *pulled, *args[2:index], *args[index + 2 :]]
    return [*args[:1], *pulled, *args[1:index], *args[index + 2 :]]


def read(
    argv: Sequence[str],
    defaults: PlanSettings,
    env: Mapping[str, str] = NO_ENV,
    vault: Vault | None = None,
    load: Callable[[str], Any] | None = None,
) -> Request:
    """`vllm serve REPO [flags]` → the repository, the settings and the exact layout."""
    args = list(argv)
    if args[:1] and args[0].rsplit("/", 1)[-1] == "vllm":
        args = args[1:]
    if args[:1] != ["serve"]:
        raise ValueError("a vLLM command to check starts `vllm serve REPO`.")
    asked = defaults.options(VllmOptions).version
    version = VllmVersion.parse(asked) if asked else NEWEST
    g = grammar(version)
    pulled = _pull_config(args, g, load, version)
    try:
        parsed = g.parse(flexible(pulled[1:]))
    except Beyond:
        raise
    except ValueError as e:
        raise ValueError(f"vLLM {version} refuses it: {e}") from None
    got = parsed.values
    repo = parsed.positional.get("model_tag") or got.get("model")
    if not repo:
        raise ValueError("the vLLM command names no model: vllm serve REPO ….")
    kv = got.get("kv_cache_dtype") or "auto"
    quant = got.get("quantization")
    methods = quantization_methods(version)
    if quant is not None and methods is not None and quant not in methods:
        raise ValueError(
            f"vLLM {version} refuses it: Unknown quantization method: {quant}. Must be one of "
            f"{list(methods)}."
        )
    ignored: list[str] = []
    precision = "stored"
    if quant in ("fp8", "fp8_per_tensor"):
        precision = "fp8"
    elif quant is not None:
        ignored.append(f"--quantization {quant}")
    named = got.get("gpu_memory_utilization") is not None
    gmu = float(got["gpu_memory_utilization"]) if named else defaults.gpu_memory_utilization
    if not 0 < gmu <= 1:
        raise ValueError(f"--gpu-memory-utilization {gmu:g} must be in (0, 1].")
    pins = Pins(
        tp=positive("--tensor-parallel-size", got.get("tensor_parallel_size", 1)),
        pp=positive("--pipeline-parallel-size", got.get("pipeline_parallel_size", 1)),
        dp=positive("--data-parallel-size", got.get("data_parallel_size", 1)),
        ep=bool(got.get("enable_expert_parallel", False)),
    )
    values: dict[str, Any] = {}
    mine: set[str] = set()
    for d in knobs.declared(VllmOptions):
        dest = g.dest(d.knob.flags[0]) if d.knob.flags else None
        if dest is None:
            continue
        mine.add(dest)
        if dest in got:
            value = got[dest]
            if d.knob.kind == "json" and value is not None and not isinstance(value, str):
                value = json.dumps(value)
            values[d.name] = value
    # The release modelled is llmfit's own setting (`llmfit check --vllm-version`), no flag's.
    options = knobs.build(VllmOptions, {"version": defaults.options(VllmOptions).version, **values})
    program = list(argv[: len(argv) - len(args) + 1])
    # A --config file's flags are launched in its place, as vLLM pulls them in: the file is not
    # in the container or pod the launch starts, its flags are (and a credential in it is a
    # reference like any other).
    masked = g.mask(program, pulled[1:], vault or Vault(), SECRETS, "VLLM", _spell)
    for dest, value in got.items():
        if dest in masked.held:
            # A credential's flag is named, its value never: the variable it is launched from.
            if dest not in LAUNCH_ONLY:
                ignored.append(f"{g.spelling(dest)} (a credential: ${masked.held[dest]})")
        elif dest not in NEUTRAL | LAUNCH_ONLY | mine and not g.secret(dest):
            ignored.append(said(g.spelling(dest), value))
    length = got.get("max_model_len", -1)
    settings = replace(
        defaults,
        context=None if length == -1 else positive("--max-model-len", length),
        gpu_memory_utilization=gmu,
        utilization_given=named,
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
    revision = got.get("revision")
    return Request(
        repo=repo + (f"@{revision}" if revision else ""),
        settings=settings,
        ignored=tuple(ignored),
        argv=masked.argv,
        secrets=masked.secrets,
    )
