"""`--explain --json` (docs/json.md "`--explain --json`"): the shown option's card as data, from
the same parts the text `--explain` prints."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.registered import toy_registered

GIB = 1 << 30


@pytest.fixture
def toy() -> Iterator[str]:
    with toy_registered() as key:
        yield key


def test_the_toy_engine_s_card_part_by_part(run, toy):
    # Qwen3-8B on one H100 at --kv-fraction 0.5 (tests/plan/toy_engine.py): weights
    # 16,381,470,720 B (the index's total); KV 36 layers × 8 KV heads × 128 × 2 (K and V) × 2 B =
    # 147,456 B a token × 40,960 tokens = 6,039,797,760 B; 1 GiB of runtime. Need:
    # 16,381,470,720 + 6,039,797,760 + 1,073,741,824 = 23,495,010,304 B, of 85,045,477,376 ×
    # 0.5 = 42,522,738,688 B: 19,027,728,384 B free.
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "toy",
                         "--kv-fraction", "0.5", "--explain", "--json")  # fmt: skip
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["explain"] == {
        "option": 1,
        "engine": "toy",
        "cpu": False,
        "share": 0.5,
        "parts": [
            {"name": "weights", "bytes": 16_381_470_720, "why": "1/1 of the checkpoint"},
            {"name": "KV cache", "bytes": 6_039_797_760, "why": "one sequence of 40,960 tokens"},
            {"name": "overhead", "bytes": GIB, "why": "one GiB of runtime"},
            {"name": "free", "bytes": 19_027_728_384, "why": "left of what is counted on"},
        ],
        "need": 23_495_010_304,
        "have": 42_522_738_688,
        "assumes": "the toy engine's arithmetic",
        # The H100's total, of which the toy counts on half; nothing beside the card, no KV
        # heads split, no settings told.
        "total": 85_045_477_376,
        "beside": [],
        "kv_heads": None,
        "settings": [],
    }
    # The plan's document is all there too.
    assert doc["options"][0]["per_card"]["need"] == 23_495_010_304


@pytest.mark.parametrize(
    ("repo", "fleet", "option"),
    [
        ("Qwen/Qwen3-8B", "1xh100-80g", "1"),
        ("Qwen/Qwen3-30B-A3B", "8xh100-80g", "2"),
        ("llmfit-fixtures/Tiny-Llama-GGUF", "1xrtx4090-24g", "1"),
    ],
)
def test_the_json_parts_are_the_text_s(run, repo, fleet, option):
    base = (repo, "--fleet", fleet, "--precision", "stored", "--explain", "--option", option)
    code, out, _ = run(*base, "--json")
    assert code == 0
    told = json.loads(out)["explain"]
    code, text, _ = run(*base)
    assert code == 0
    # Each part's line: its name, then its size in GiB as the text rounds it, in the same order.
    shown = re.findall(r"^    (\S+(?: cache)?)\s+([\d.]+) GiB", text, re.MULTILINE)
    parts = [(p["name"], f"{p['bytes'] / GIB:.1f}") for p in told["parts"]]
    assert shown[: len(parts)] == parts
    # The parts but `free` are what the card needs; need and free make what it offers.
    assert sum(p["bytes"] for p in told["parts"][:-1]) == told["need"]
    assert told["need"] + told["parts"][-1]["bytes"] == told["have"]


def test_without_explain_the_document_has_no_such_key(run):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--json")
    assert code == 0
    assert "explain" not in json.loads(out)


def test_sglang_s_card_is_the_whole_card_its_static_share_a_split_within_it(run):
    # Qwen3-8B on one H100 (CUDA's 85,045,477,376 B), SGLang's default static share 0.830
    # (tests/plan/test_sglang_plan.py works it from nvidia-smi's total). The process holds
    # int(0.6 GiB) = 644,245,094 B before SGLang measures the card (runtime); of the rest,
    # 84,401,232,282 B, the static share is int(× 0.83) = 70,053,022,794 B, and what it leaves,
    # 14,348,209,488 B, is the reserve for activations and CUDA graphs. Weights: the index's
    # 16,381,470,720 B + the fp32 rotary cache 40,960 × 128 × 4 = 20,971,520 B. KV: 40,960 tokens
    # × 147,456 B = 6,039,797,760 B. Free: 70,053,022,794 − 16,402,442,240 − 6,039,797,760 =
    # 47,610,782,794 B, what the static share has left, as SGLang reckons it.
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--engine", "sglang",
                       "--precision", "stored", "--explain", "--json")  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    told = doc["explain"]
    assert [(p["name"], p["bytes"]) for p in told["parts"]] == [
        ("weights", 16_402_442_240),
        ("KV cache", 6_039_797_760),
        ("runtime", 644_245_094),
        ("reserve", 14_348_209_488),
        ("free", 47_610_782_794),
    ]
    assert (told["share"], told["total"], told["have"]) == (1.0, 85_045_477_376, 85_045_477_376)
    assert told["need"] == 85_045_477_376 - 47_610_782_794 == 37_434_694_582
    card = doc["options"][0]["per_card"]
    assert card["parts"] == {
        "weights": 16_402_442_240, "kv_cache": 6_039_797_760, "states": 0, "activations": 0,
        "graphs": 0, "runtime": 644_245_094, "reserve": 14_348_209_488,
    }  # fmt: skip
    assert (card["need"], card["have"]) == (told["need"], told["have"])
    assert told["settings"][:2] == [
        {"flag": "--context-length", "value": "40960", "source": "plan"},
        {"flag": "--mem-fraction-static", "value": "0.830", "source": "default"},
    ]


def test_a_cpu_option_counts_on_its_node_s_ram_share(run):
    # The host's share of a CPU node's RAM is 0.85: int(64 GiB × 0.85) = 58,411,555,225 B.
    code, out, _ = run("llmfit-fixtures/Tiny-Llama-GGUF", "--fleet", "cpu:64g", "--explain",
                       "--json")  # fmt: skip
    assert code == 0
    told = json.loads(out)["explain"]
    assert (told["cpu"], told["share"], told["total"]) == (True, 0.85, 64 * GIB)
    assert told["have"] == int(64 * GIB * 0.85) == 58_411_555_225


def test_the_settings_say_where_each_value_came_from(run):
    # Qwen3-8B on one H100 under vLLM 0.34: --max-num-seqs given; vLLM resolves its own
    # utilisation (1.0 with the extensible KV cache) and its batch of 8,192 tokens on the card;
    # the fp8 KV what-if's flag is the what-if's.
    base = ("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--max-num-seqs", "64", "--explain")
    code, out, _ = run(*base, "--precision", "stored", "--json")
    assert code == 0
    assert json.loads(out)["explain"]["settings"] == [
        {"flag": "--max-model-len", "value": "40960", "source": "plan"},
        {"flag": "--gpu-memory-utilization", "value": "1.00", "source": "default"},
        {"flag": "--kv-cache-dtype", "value": "auto", "source": "default"},
        {"flag": "--max-num-seqs", "value": "64", "source": "given"},
        {"flag": "--max-num-batched-tokens", "value": "8192", "source": "default"},
    ]
    code, text, _ = run(*base, "--precision", "stored")
    assert code == 0
    assert (
        "settings: --max-model-len 40960 (the plan's) · --gpu-memory-utilization 1.00 (vLLM's "
        "default) · --kv-cache-dtype auto (vLLM's default) · --max-num-seqs 64 (as given) · "
        "--max-num-batched-tokens 8192 (vLLM's default)" in " ".join(text.split())
    )
    code, out, _ = run(*base, "--precision", "kv-fp8", "--json")
    assert code == 0
    kv = [s for s in json.loads(out)["explain"]["settings"] if s["flag"] == "--kv-cache-dtype"]
    assert kv == [{"flag": "--kv-cache-dtype", "value": "fp8", "source": "what-if"}]


# The explanation's part names, each the vocabulary's key in per_card.parts.
VOCABULARY = {
    "weights": "weights", "KV cache": "kv_cache", "states": "states",
    "activations": "activations", "graphs": "graphs", "runtime": "runtime", "reserve": "reserve",
}  # fmt: skip


# vLLM's MoE (its graphs and workspace), SGLang's hybrid (its states apart) and vision model (its
# multimodal cache), llama.cpp's layer split.
@pytest.mark.parametrize(
    ("repo", "fleet", "engine"),
    [
        ("Qwen/Qwen3-30B-A3B", "8xh100-80g", "vllm"),
        ("Qwen/Qwen3-Next-80B-A3B-Thinking", "4xh100-80g", "sglang"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "1xh100-80g", "sglang"),
        ("llmfit-fixtures/Tiny-Llama-GGUF", "2xrtx4090-24g", "llama.cpp"),
    ],
)
def test_every_engine_explains_its_card_in_the_one_vocabulary(run, repo, fleet, engine):
    code, out, _ = run(repo, "--fleet", fleet, "--engine", engine, "--precision", "stored",
                       "--explain", "--json")  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    told, card = doc["explain"], doc["options"][0]["per_card"]
    *parts, free = told["parts"]
    # Each part the text and JSON show is the per-card part of its name, to the byte; the parts
    # left out are 0; need is their sum and have the card's total × the engine's share.
    shown = {VOCABULARY[p["name"]]: p["bytes"] for p in parts}
    assert {k: v for k, v in card["parts"].items() if v or k in shown} == shown
    assert sum(shown.values()) == card["need"] == told["need"]
    assert free["name"] == "free" and free["bytes"] == max(card["have"] - card["need"], 0)
    assert abs(card["have"] - card["total"] * card["share"]) <= 1
    from llmfit.plan.engines import SOURCES

    assert told["settings"] and {s["source"] for s in told["settings"]} <= set(SOURCES)
