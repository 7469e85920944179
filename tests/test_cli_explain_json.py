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
