"""Every `vllm serve` line llmfit prints parses with vLLM's own parser, as vLLM 0.34 defines it.

fixtures/engines/vllm-0.34.0-serve-args.json is that parser's options (their spellings, how many
values each takes, their choices and value types), dumped from vLLM itself by
fixtures/engines/dump_vllm_args.py; an argparse parser is rebuilt from it here, so the check runs
without vLLM installed. (With vLLM 0.33 installed, the same commands were parsed by
make_arg_parser itself: 195 of them, single-node, pipeline across nodes, data-parallel across
nodes, and their Ray forms, all accepted.)
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_FLEET

SPEC = Path(__file__).resolve().parents[2] / "fixtures" / "engines" / "vllm-0.34.0-serve-args.json"


def _tokens(text: str) -> int:
    # vllm.utils.argparse_utils.human_readable_int: 25600, 25.6k, 32K (binary), 1M …, or auto.
    if text in ("auto", "-1"):
        return -1
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG]?)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a token count: {text!r}")
    return int(float(m.group(1)) * {"": 1, "k": 1e3, "K": 1 << 10, "m": 1e6, "M": 1 << 20}.get(
        m.group(2), 1e9))  # fmt: skip


TYPES = {"int": int, "float": float, "human_readable_int": _tokens,
         "human_readable_int_or_auto": _tokens}  # fmt: skip


def vllm_parser() -> argparse.ArgumentParser:
    spec = json.loads(SPEC.read_text())
    p = argparse.ArgumentParser(prog="vllm serve", add_help=False, allow_abbrev=False)
    p.add_argument("model_tag")
    for o in spec["options"]:
        if o["kind"] in ("switch", "bool-optional"):
            off = [f for f in o["flags"] if f.startswith(("--no-", "--disable-"))]
            on = [f for f in o["flags"] if f not in off]
            p.add_argument(*on, dest=o["dest"], action="store_true")
            if off:
                p.add_argument(*off, dest=o["dest"], action="store_false")
            continue
        kw: dict = {"type": TYPES.get(o["type"] or "", str)}
        if o["nargs"] is not None:
            kw["nargs"] = o["nargs"]
        if o["choices"]:
            kw["choices"] = (
                [kw["type"](c) for c in o["choices"]] if kw["type"] is not str else (o["choices"])
            )
        p.add_argument(*o["flags"], dest=o["dest"], **kw)
    return p


class Refused(Exception):
    pass


def parse(argv: list[str]) -> argparse.Namespace:
    parser = vllm_parser()
    parser.error = lambda message: (_ for _ in ()).throw(Refused(message))  # type: ignore
    return parser.parse_args(argv)


CASES = [
    ("Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET), "--all"),
    ("deepseek-ai/DeepSeek-V3", "--fleet", str(EXAMPLE_FLEET), "--all", "--ray"),
    ("meta-llama/Meta-Llama-3.1-405B", "--fleet", "4x8xh100-80g@ib0", "--context", "8192", "--all"),
    ("meta-llama/Meta-Llama-3.1-405B", "--fleet", "4x8xh100-80g@ib0", "--context", "8k", "--ray"),
    ("Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--all", "--context", "100000"),
    ("deepseek-ai/DeepSeek-V3", "--fleet", "2x8xh100-80g@ib0", "--context", "8192", "--all"),
    ("deepseek-ai/DeepSeek-V3", "--fleet", "2x8xh100-80g@ib0", "--context", "8192", "--ray"),
]  # fmt: skip


def test_the_rebuilt_parser_refuses_what_vllm_refuses():
    with pytest.raises(Refused):
        parse(["Qwen/Qwen3-8B", "--tensor-parallel-sizes", "2"])
    with pytest.raises(Refused):
        parse(["Qwen/Qwen3-8B", "--tensor-parallel-size", "two"])
    ns = parse(["Qwen/Qwen3-8B", "-tp", "2", "--max-model-len", "32K", "-ep"])
    assert (ns.tensor_parallel_size, ns.max_model_len, ns.enable_expert_parallel) == (
        2,
        32768,
        True,
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: " ".join(c[:3]))
def test_every_printed_vllm_command_parses(run, case):
    code, out, err = run(*case, "--json")
    assert code == 0, err
    seen = 0
    for o in json.loads(out)["options"]:
        for cmd in o["commands"]:
            if cmd["argv"][:2] == ["vllm", "serve"]:
                ns = parse(cmd["argv"][2:])
                assert ns.model_tag == case[0]
                assert ns.tensor_parallel_size == o["tp"]
                seen += 1
    assert seen
