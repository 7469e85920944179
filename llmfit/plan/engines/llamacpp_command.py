"""A `llama-server` line read back into a plan request (`llmfit check -- llama-server …`).

Flag spellings are llama.cpp's (common/arg.cpp, tools/server/README.md; ENGINES.md f): each flag
that changes memory is read; every other flag is kept as read but not modelled, and said so.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from llmfit.plan.credentials import Vault
from llmfit.plan.engines import NO_ENV, Request, knobs
from llmfit.plan.engines.argv import mask, scan, whole
from llmfit.plan.engines.llamacpp_flags import SWITCHES as ALL_SWITCHES
from llmfit.plan.engines.llamacpp_flags import VALUED as ALL_VALUED
from llmfit.plan.engines.llamacpp_options import LlamaCppOptions
from llmfit.plan.settings import Pins, PlanSettings

# llama.cpp's knobs (llamacpp_options.py) are read by their declaration; these are the flags of
# settings every engine has, in llama-server's spelling (the model and the context).
VALUED = {
    "-m": "model", "--model": "model",
    "-hf": "hf", "-hfr": "hf", "--hf-repo": "hf",
    "-c": "ctx", "--ctx-size": "ctx",
    "--mmproj": "mmproj",
}  # fmt: skip
LAUNCH_ONLY = {"--host", "--port", "-a", "--alias", "--api-key", "-t", "--threads", "--jinja",
               "--no-jinja", "--metrics", "--offline", "-hft", "--hf-token"}  # fmt: skip
# The flags whose values are credentials, and the variable each is read from instead: llama.cpp
# reads LLAMA_API_KEY when --api-key is absent (common/arg.cpp, set_env), and HF_TOKEN.
SECRETS = {"--api-key": "LLAMA_API_KEY", "-hft": "HF_TOKEN", "--hf-token": "HF_TOKEN"}
LAUNCH_SWITCHES = {"--jinja", "--no-jinja", "--metrics", "--offline"}
_KNOBS = knobs.tables(LlamaCppOptions)
# The variable that shows a process some of a node's cards.
VISIBLE = "CUDA_VISIBLE_DEVICES"
# Switches of earlier builds that this build's table replaced with --load-mode (PR #20834): a
# command written for them is not refused (ENGINES.md, llama.cpp: memory pinning and mmap).
EARLIER_SWITCHES = frozenset(("--mlock", "--no-mmap", "--mmap", "-dio", "--direct-io"))
# llama-server's -hf picks this quant when the tag names none (common/arg.cpp).
DEFAULT_QUANT = "Q4_K_M"


def read(
    argv: Sequence[str],
    defaults: PlanSettings,
    env: Mapping[str, str] = NO_ENV,
    vault: Vault | None = None,
    load: Callable[[str], Any] | None = None,
) -> Request:
    """`llama-server (-m FILE | -hf REPO[:QUANT]) [flags]` → the repository or file, the quant,
    the settings and the exact placement."""
    args = list(argv[1:]) if argv and argv[0].rsplit("/", 1)[-1] == "llama-server" else list(argv)
    refuse_unknown(args)
    # The model is named by -m or -hf only: a bare word is read as any unknown flag is.
    words = scan(
        args, {**VALUED, **_KNOBS.valued}, _KNOBS.switches, LAUNCH_ONLY, LAUNCH_SWITCHES,
        positional=False,
    )  # fmt: skip
    got, on = words.got, words.on
    program = list(argv[: len(argv) - len(args)])
    launched, refs = mask(program, args, vault or Vault(), SECRETS, "LLAMA")
    # What is listed as not modelled is read from the words as launched: a credential's value
    # is never in it.
    ignored = scan(
        list(launched[len(program) :]), {**VALUED, **_KNOBS.valued}, _KNOBS.switches,
        LAUNCH_ONLY, LAUNCH_SWITCHES, positional=False,
    ).ignored  # fmt: skip
    path = got.get("model")
    hf = got.get("hf")
    if not path and not hf:
        raise ValueError("the llama-server command names no model: give -m FILE or -hf REPO:QUANT.")
    repo, quant = (hf.partition(":")[0], hf.partition(":")[2] or None) if hf else (path or "", None)
    mine = {k: v for k, v in got.items() if k in _KNOBS.valued.values()}
    opts = knobs.build(LlamaCppOptions, knobs.read(LlamaCppOptions, mine, on))
    if opts.flash_attn == "off":
        ignored.append("--flash-attn off (planned with flash attention on)")
    if len(set(opts.split)) > 1:
        ignored.append(f"--tensor-split {opts.tensor_split} (planned as an equal split)")
    ctx = whole("--ctx-size", got["ctx"], zero=True) if "ctx" in got else None
    # The cards the server sees: those its --tensor-split names, else those CUDA_VISIBLE_DEVICES
    # shows it, else every card of its node.
    visible = [c for c in env.get(VISIBLE, "").split(",") if c.strip()]
    cards = len(opts.split) or len(visible) or None
    settings = replace(
        defaults,
        context=ctx or None,
        precision="stored",
        pins=Pins(gpus=cards),
        engines=("llama.cpp",),
        every_layout=True,
        local_paths=path is not None,
    ).with_options(opts)
    if hf and quant is None:
        quant = DEFAULT_QUANT
    return Request(
        repo=repo, settings=settings, quant=quant, path=path, ignored=tuple(ignored),
        argv=launched, secrets=refs,
        # Layers named for the cards (-ngl N), or RPC servers: the CPU alone is not this command.
        on_cards=(opts.n_gpu_layers or 0) > 0 or bool(opts.rpc_hosts),
    )  # fmt: skip


def refuse_unknown(args: Sequence[str]) -> None:
    """ValueError for the first flag llama-server does not take, as it refuses it
    (common/arg.cpp, common_params_parse_ex: "error: invalid argument"), with the flag it is
    nearest to where one is near (issue 34: a misspelt flag was listed as not modelled),
    named without its value (issue 33). Its
    flags are its README's (llamacpp_flags.py); a value is passed over by its flag, so that
    `--temp -1` is a value, not a flag."""
    i = 0
    while i < len(args):
        word = args[i]
        name, eq, _ = word.partition("=")
        # llama-server reads "_" in a long flag as "-" (common_params_parse_ex).
        flag = name.replace("_", "-") if name.startswith("--") else name
        if flag in ALL_VALUED:
            i += 1 if eq else 2
            continue
        if not word.startswith("-") or flag in ALL_SWITCHES | EARLIER_SWITCHES:
            i += 1
            continue
        close = difflib.get_close_matches(flag, sorted(ALL_VALUED | ALL_SWITCHES), n=1, cutoff=0.8)
        near = f"; did you mean {close[0]}?" if close else "."
        # The flag alone, never the words after it: a misspelt flag's value may be a credential
        # (issue 33).
        raise ValueError(f"llama-server refuses it: {flag}: not one of its flags{near}")
