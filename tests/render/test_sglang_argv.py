"""Every `sglang serve` line llmfit prints parses with SGLang's own parser, as SGLang 0.5.23 defines
it.

fixtures/engines/sglang-0.5.23-server-args.json is that parser's options (their spellings, how many
values each takes, their choices and value types), dumped from SGLang itself by
fixtures/engines/dump_sglang_args.py; an argparse parser is rebuilt from it here, so the check
runs without SGLang installed. Prefixes are not accepted here (SGLang's parser takes them), so a
printed flag must be spelt in full, and none may be one SGLang has deprecated. (With SGLang 0.5.23
installed, the same commands, 329 of them: one node, replicas, data-parallel attention, pipeline
stages and attention ranks across nodes, what-ifs, and the Ray form's serve lines, were parsed by
the parser prepare_server_args builds, and each made a ServerArgs: all accepted.)
"""

from __future__ import annotations

import argparse
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_FLEET

SPEC = (
    Path(__file__).resolve().parents[2] / "fixtures" / "engines" / "sglang-0.5.23-server-args.json"
)


def _tokens(text: str) -> int:
    # sglang.srt.utils.common.human_readable_int: 25600, 25.6k, 1M (SI), 32Ki, 1Mi (IEC).
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", text.strip())
    if not m:
        return int(text)
    number, suffix = m.groups()
    if suffix.endswith("i"):
        return int(number) << {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[suffix]
    return int(Decimal(number) * {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[suffix])


TYPES = {"int": int, "float": float, "human_readable_int": _tokens}


def sglang_parser() -> argparse.ArgumentParser:
    spec = json.loads(SPEC.read_text())
    p = argparse.ArgumentParser(prog="sglang serve", add_help=False, allow_abbrev=False)
    for o in spec["options"]:
        if o["deprecated"]:
            continue  # llmfit must print the current spelling
        if o["kind"] in ("switch", "bool-optional"):
            off = [f for f in o["flags"] if f.startswith("--no-")] if o["kind"] != "switch" else []
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
    parser = sglang_parser()
    parser.error = lambda message: (_ for _ in ()).throw(Refused(message))  # type: ignore
    return parser.parse_args(argv)


CASES = [
    ("Qwen/Qwen3-235B-A22B", "--fleet", str(EXAMPLE_FLEET), "--all"),
    ("deepseek-ai/DeepSeek-V3", "--fleet", str(EXAMPLE_FLEET), "--all", "--ray"),
    ("deepseek-ai/DeepSeek-V3", "--fleet", "8xh200-141g", "--all", "--context", "32k"),
    ("deepseek-ai/DeepSeek-V3", "--fleet", "2x8xh100-80g@ib0", "--context", "8192", "--all"),
    ("deepseek-ai/DeepSeek-V3", "--fleet", "2x8xh100-80g@ib0", "--context", "8192", "--ray"),
    ("meta-llama/Meta-Llama-3.1-405B", "--fleet", "4x8xh100-80g@ib0", "--context", "8192", "--all"),
    ("meta-llama/Meta-Llama-3.1-405B", "--fleet", "4x8xh100-80g@ib0", "--context", "8k", "--ray"),
    ("Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--all", "--context", "100000"),
    ("meta-llama/Llama-3.1-8B-Instruct", "--fleet", str(EXAMPLE_FLEET), "--all",
     "--kv-cache-dtype", "fp8"),
    ("google/gemma-3-27b-it", "--fleet", str(EXAMPLE_FLEET), "--all"),
    ("Qwen/Qwen3-30B-A3B", "--fleet", "8xh100-80g", "--all", "--context", "16k"),
]  # fmt: skip


def test_the_rebuilt_parser_refuses_what_sglang_refuses():
    with pytest.raises(Refused):
        parse(["--model-path", "x", "--tp-sizes", "2"])
    with pytest.raises(Refused):
        parse(["--model-path", "x", "--tp-size", "two"])
    with pytest.raises(Refused):
        parse(["--model-path", "x", "--kv-cache-dtype", "fp8"])  # SGLang's are fp8_e4m3/_e5m2
    with pytest.raises(Refused):
        parse(["--model-path", "x", "--enable-dp-attention"])  # deprecated for --attn-dp-size
    ns = parse(["--model-path", "x", "--tensor-parallel-size", "2", "--context-length", "32Ki",
                "--trust-remote-code"])  # fmt: skip
    assert (ns.tp_size, ns.context_length, ns.trust_remote_code) == (2, 32768, True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: " ".join(c[:3]))
def test_every_printed_sglang_command_parses(run, case):
    code, out, err = run(*case, "--engine", "sglang", "--json")
    assert code == 0, err
    seen = 0
    for o in json.loads(out)["options"]:
        assert o["engine"] == "sglang"
        for cmd in o["commands"]:
            if cmd["argv"][:2] != ["sglang", "serve"]:
                assert cmd["argv"][:2] == ["ray", "start"]
                continue
            ns = parse(cmd["argv"][2:])
            assert ns.model_path == case[0]
            # --tp-size is the whole group: tp × dp with data-parallel attention (a MoE's ranks),
            # tp alone with replicas (a dense model's).
            moe_ranks = ns.attn_dp_size is not None and ns.attn_dp_size > 1
            assert ns.tp_size == (o["tp"] * o["dp"] if moe_ranks else o["tp"])
            assert (ns.dp_size or 1) == (1 if moe_ranks else o["dp"])
            assert (ns.pp_size or 1) == o["pp"]
            if o["nodes"] > 1:
                assert ns.nnodes == o["nodes"]
            seen += 1
    assert seen
