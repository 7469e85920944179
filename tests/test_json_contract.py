"""The version-1 JSON document's contract (docs/json.md): the keys every document, option, card and
command carries, and the type of each, for every engine and every kind of plan.

This is the contract a script relies on: fields may be added, none renamed or removed without
bumping `schema`. It replaces whole-document goldens, which pinned every number of every option
and broke on any change to the ranking; the numbers are worked out by hand in the tests beside
the code that computes them (tests/plan, tests/test_cli.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmfit.plan.engines import field_names
from tests.conftest import EXAMPLE_FLEET

INT, FLOAT, STR, BOOL, LIST, DICT, NONE = int, float, str, bool, list, dict, type(None)
NUM = (int, float)

DOCUMENT = {
    "schema": INT, "repo": DICT, "model": DICT, "context": INT, "fleet": DICT, "artifacts": LIST,
    "options": LIST, "unplaced": LIST, "rejected": LIST, "notes": LIST, "workload": DICT,
    "rank_by": STR, "ceiling": (DICT, NONE),
}  # fmt: skip
WORKLOAD = {
    "name": STR, "named": BOOL, "input_len": INT, "output_len": INT, "concurrency": (NUM, NONE),
    "rate": (NUM, NONE), "requests": (INT, NONE), "load": (STR, NONE), "cut_from": (DICT, NONE),
    "ttft_s": (NUM, NONE), "tpot_s": (NUM, NONE),
}  # fmt: skip
SERVING = {
    "meets": BOOL, "misses": LIST, "replicas": (INT, NONE), "cards": (INT, NONE),
    "concurrency": (NUM, NONE), "rate": (NUM, NONE), "output_tokens_per_s": (NUM, NONE),
    "output_tokens_per_s_per_gpu": (NUM, NONE), "tpot_s": (NUM, NONE), "ttft_s": (NUM, NONE),
    "e2e_s": (NUM, NONE), "makespan_s": (NUM, NONE), "batch": (NUM, NONE),
    "capacity_rate": (NUM, NONE),
    "capacity_concurrency": (NUM, NONE), "cards_per_load": (NUM, NONE),
    "price_per_gpu_hour": (NUM, NONE), "cost_per_hour": (NUM, NONE), "free_replicas": INT,
    "cost_per_million_output_tokens": (NUM, NONE),
    "fleet_replicas": INT, "decode_step": DICT, "prefill": DICT, "bound": (STR, NONE),
    "assumptions": LIST,
}  # fmt: skip
REPO = {"id": STR, "revision": (STR, NONE), "commit": (STR, NONE), "source": STR}
MODEL = {
    "architecture": (STR, NONE), "model_type": (STR, NONE), "params": (INT, NONE),
    "active_params": (INT, NONE), "layers": INT, "attention_heads": (INT, NONE),
    "kv_heads": (INT, NONE), "head_dim": (INT, NONE), "experts": (INT, NONE),
    "experts_active": (INT, NONE), "max_context": (INT, NONE), "kv_bytes_per_token": INT,
    "dtype": (STR, NONE), "quantization": (STR, NONE), "attention": LIST, "unmodelled": LIST,
}  # fmt: skip
FLEET = {"source": STR, "nodes": INT, "gpus": INT}
ARTIFACT = {
    "name": STR, "format": STR, "bytes": INT, "shards": INT, "quant": (STR, NONE),
    "bits_per_weight": (NUM, NONE), "estimated": BOOL,
}  # fmt: skip
OPTION = {
    "rank": INT, "artifact": STR, "engine": STR, "label": STR, "describe": STR, "cpu": BOOL,
    "gpu_class": (STR, NONE), "fabric": (STR, NONE), "gpus_per_node": INT, "nodes": INT,
    "gpus": INT, "per_card": DICT, "hosts": INT, "free_now": BOOL, "bits_per_weight": (NUM, NONE),
    "max_context": INT, "concurrency": NUM, "commands": LIST, "what_if": (STR, NONE), "tp": INT,
    "pp": INT, "dp": INT, "ep": BOOL, "replicas": INT, "cards_per_replica": INT,
    "speed": (DICT, NONE), "serving": (DICT, NONE), "launch_replicas": INT,
    "benchmark": (DICT, NONE),
}  # fmt: skip
BENCHMARK = {
    "argv": LIST, "shell": STR, "result_file": STR, "stdout": BOOL, "load": STR, "value": NUM,
    "prompts": INT, "input_len": INT, "output_len": INT,
}  # fmt: skip
PER_CARD = {
    "weights": INT, "kv_cache": INT, "overhead": INT, "need": INT, "have": INT,
    # Added (issue 35): the named parts, the card's total and the share the engine may use.
    "parts": DICT, "total": INT, "share": (FLOAT, INT),
}  # fmt: skip
# The one vocabulary every engine fills, each part 0 where it has none.
PARTS = {name: INT for name in (
    "weights", "kv_cache", "states", "activations", "graphs", "runtime", "reserve",
)}  # fmt: skip
COMMAND = {"role": STR, "argv": LIST, "shell": STR, "count": INT}
OPTIONAL_COMMAND = {"env": DICT, "node": (STR, NONE)}
REJECTED = {
    "artifact": STR, "what_if": (STR, NONE), "engine": STR, "where": STR, "reason": STR,
    "need": (INT, NONE), "have": (INT, NONE), "kind": (STR, NONE),
}  # fmt: skip

CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", "--context", "32k"),
    ("Qwen/Qwen3-235B-A22B",),
    ("deepseek-ai/DeepSeek-V3", "--engine", "vllm", "--engine", "sglang"),
    ("llmfit-fixtures/Tiny-Llama-GGUF", "--context", "4096", "--fleet", "cpu:64g,8xrtx4090-24g"),
    ("meta-llama/Meta-Llama-3.1-405B", "--fleet", "4x8xh100-80g@ib0", "--precision", "stored"),
]


def has(obj: dict, keys: dict, where: str, optional: dict | None = None) -> None:
    """`obj` carries exactly `keys` (and any of `optional`), each of its type."""
    extra = set(obj) - set(keys) - set(optional or {})
    missing = set(keys) - set(obj)
    assert not missing and not extra, f"{where}: missing {sorted(missing)}, extra {sorted(extra)}"
    for k, t in {**keys, **(optional or {})}.items():
        if k in obj:
            # bool is an int to Python; a count must not be a bool, nor a flag a number.
            ok = isinstance(obj[k], t) and not (t in (INT, NUM) and isinstance(obj[k], bool))
            assert ok, f"{where}.{k} is {obj[k]!r}, not {t}"


@pytest.mark.parametrize("args", CASES, ids=lambda a: a[0])
def test_every_document_keeps_the_contract(run, args):
    fleet = [] if "--fleet" in args else ["--fleet", str(EXAMPLE_FLEET)]
    code, out, err = run(*args, *fleet, "--json")
    assert code == 0, err
    doc = json.loads(out)
    has(doc, DOCUMENT, "document")
    assert doc["schema"] == 1
    has(doc["repo"], REPO, "repo")
    has(doc["model"], MODEL, "model")
    has(doc["fleet"], FLEET, "fleet")
    has(doc["workload"], WORKLOAD, "workload")
    for a in doc["artifacts"]:
        has(a, ARTIFACT, "artifact")
        assert a["format"] in ("safetensors", "gguf")
    engine_fields = {k: object for k in field_names()}
    assert doc["options"]
    for i, o in enumerate(doc["options"], 1):
        has(o, {**OPTION, **engine_fields}, f"options[{i}]")
        assert o["rank"] == i
        has(o["per_card"], PER_CARD, f"options[{i}].per_card")
        c = o["per_card"]
        has(c["parts"], PARTS, f"options[{i}].per_card.parts")
        # need is the parts' sum; have the card's total × the share the engine may use (as the
        # engine rounds it: vLLM up, the others down).
        assert sum(c["parts"].values()) == c["need"]
        assert abs(c["have"] - c["total"] * c["share"]) <= 1
        if o["serving"] is not None:
            has(o["serving"], SERVING, f"options[{i}].serving")
        if o["benchmark"] is not None:
            has(o["benchmark"], BENCHMARK, f"options[{i}].benchmark")
            # A benchmark checks a serving figure: none without one.
            assert o["serving"] is not None and o["serving"]["replicas"] is not None
        p = o["per_card"]
        assert p["need"] == p["weights"] + p["kv_cache"] + p["overhead"]
        assert o["commands"]
        for c in o["commands"]:
            has(c, COMMAND, f"options[{i}].commands", OPTIONAL_COMMAND)
            assert all(isinstance(w, str) for w in c["argv"])
        if o["cpu"]:
            assert (o["gpus"], o["gpu_class"]) == (0, None)
        else:
            assert o["gpus"] == o["gpus_per_node"] * o["nodes"]
            assert o["gpus"] == o["tp"] * o["pp"] * o["dp"]
    for r in doc["rejected"]:
        has(r, REJECTED, "rejected")


def test_engine_fields_are_null_on_the_other_engines_options(run):
    code, out, _ = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "8xrtx4090-24g", "--json")
    assert code == 0
    for o in json.loads(out)["options"]:
        assert o["engine"] == "llama.cpp"
        assert o["vllm_version"] is None
        assert isinstance(o["gpu_layers"], int)


def test_a_plan_names_the_keys_it_does_not_model(run, tmp_path):
    # Gemma 4 31B's config gives attention_k_eq_v: true (vllm/model_executor/models/gemma4.py
    # _gemma4_layer_weights_mapper loads K into the V slot too, weight llmfit does not count);
    # Llama-3.1-8B's gives nothing of the kind.
    root = Path(__file__).resolve().parent.parent / "fixtures"
    (tmp_path / "config.json").write_text(
        (root / "calibration" / "configs" / "google--gemma-4-31B-it.json").read_text()
    )
    # A folder with a config and no weights: planned at the config's estimate (issue 34), the
    # 31B's 62 GB of bf16 weights on one H200.
    code, out, err = run(str(tmp_path), "--fleet", "1xh200-141g", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [a["estimated"] for a in doc["artifacts"]] == [True]
    assert doc["model"]["unmodelled"] == ["attention_k_eq_v"]
    assert (
        "The config's attention_k_eq_v changes what the engine keeps, which llmfit does not "
        "model: the memory figures are estimates."
    ) in doc["notes"]
    code, out, err = run("meta-llama/Llama-3.1-8B-Instruct", "--fleet", "1xh200-141g", "--json")
    assert code == 0, err
    assert json.loads(out)["model"]["unmodelled"] == []
