"""No figure a plan prints implies more than its card's datasheet peak for the precision it runs.

Every rate is held against a lower bound of its work: a token of prefill, of decode or of serving
multiplies at least two FLOPs a parameter it uses (the embedding is looked up, not multiplied;
attention's FLOPs come on top), so rate × 2 × parameters must not pass the peak of the cards that
run it. Over the whole card table (the step model directly, every engine's constants, and
constants deliberately past 1), and over the example fleets (the CLI's own plans, read as JSON).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from llmfit.plan.cards import BY_KEY, CARDS, CardSpec
from llmfit.plan.engines import llamacpp_speed, serving_speed
from llmfit.plan.speed import Constants, estimate, inputs_for
from tests.plan.test_speed import (
    LLAMA8B,
    LLAMA8B_KV,
    LLAMA8B_MODEL,
    QWEN30B,
    QWEN30B_MODEL,
)

ROOT = Path(__file__).resolve().parents[2]

# Parameters a token multiplies (test_speed.py works them out): Llama-3.1-8B's 8,030,261,248 less
# its embedding's 525,336,576; Qwen3-30B-A3B's active 3,345,000,000 less its 311,166,976.
LLAMA8B_MULTIPLIED = 7_504_924_672
QWEN30B_MULTIPLIED = 3_345_000_000 - 311_166_976

GREEDY = replace(
    serving_speed.constants("vllm", "h100-80g"),
    weight_efficiency=1.4, prefill_efficiency=1.6, quant_prefill_efficiency=1.6,
    attention_efficiency=1.5, expert_efficiency=1.3, expert_prefill_efficiency=3.0,
    gemm_rows=0.0, expert_rows=0.0, layer_s=0.0, step_s=0.0, sequence_s=0.0, ttft_s=0.0,
)  # fmt: skip


def _peak(card: CardSpec, dtype: str) -> float | None:
    return {"bf16": card.bf16_flops, "fp8": card.fp8_flops, "int8": card.int8_ops}[dtype]


CONSTANTS: tuple[tuple[str, Constants], ...] = (
    ("greedy", GREEDY),
    ("llama.cpp", llamacpp_speed.constants("default")),
)


@pytest.mark.parametrize("card", [c for c in CARDS if c.bf16_flops and c.memory_bandwidth],
                         ids=lambda c: c.key)  # fmt: skip
def test_no_rate_passes_the_card_peak_over_the_card_table(card: CardSpec) -> None:
    tables = (*CONSTANTS, *((e, serving_speed.constants(e, card.key)) for e in ("vllm", "sglang")))
    for _, k in tables:
        for model, layout, kv, multiplied in (
            (LLAMA8B_MODEL, LLAMA8B, LLAMA8B_KV, LLAMA8B_MULTIPLIED),
            (QWEN30B_MODEL, QWEN30B, 98_304, QWEN30B_MULTIPLIED),
        ):
            for dtype in ("bf16", "fp8"):
                for tp, overlap in ((1, False), (2, True), (8, True)):
                    inp = inputs_for(
                        model, layout, card, constants=k, context=4096, kv_bytes_per_token=kv,
                        tp=tp, batch=256, prompt_tokens=8192, compute_dtype=dtype,
                    )  # fmt: skip
                    inp = replace(inp, overlap=overlap)
                    s = estimate(inp)
                    peak = _peak(card, inp.compute_dtype)
                    assert peak is not None and s.prefill_tokens_per_s is not None
                    cards = inp.cards
                    assert s.prefill_tokens_per_s * 2 * multiplied <= peak * cards
                    assert s.decode_tokens_per_s_total * 2 * multiplied <= peak * cards
                    # One sequence alone reads at least the dense weights a card holds.
                    per_card = inp.stages[0].dense_bytes
                    assert s.decode_tokens_per_s * per_card <= card.memory_bandwidth


def _figures(option: dict) -> list[tuple[str, float, int]]:
    """(what, tokens a second, cards that make them) for an option's figures."""
    out = []
    speed, serving = option.get("speed"), option.get("serving")
    cards = option["cards_per_replica"]
    if speed:
        if speed.get("prefill_tokens_per_s"):
            out.append(("prefill", speed["prefill_tokens_per_s"], cards))
        out.append(("decode", speed["decode_tokens_per_s_total"], cards * option["replicas"]))
    if serving:
        out.append(("serving a GPU", serving["output_tokens_per_s_per_gpu"], 1))
    return out


@pytest.mark.parametrize("fleet", sorted(p.name for p in (ROOT / "examples").glob("*.toml")))
@pytest.mark.parametrize(
    "repo, multiplied",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", LLAMA8B_MULTIPLIED),
        # Qwen3-30B-A3B: test_load.py's 3,041,658,880 parameters a token (its active ones less
        # the embedding), from its config.
        ("Qwen/Qwen3-30B-A3B", 3_041_658_880),
    ],
)
@pytest.mark.parametrize("precision", ["stored", "fp8"])
def test_no_plan_figure_passes_the_card_peak_on_the_example_fleets(
    run, fleet: str, repo: str, multiplied: int, precision: str
) -> None:
    code, out, _ = run(repo, "--fleet", str(ROOT / "examples" / fleet), "--json",
                       "--precision", precision, "--all")  # fmt: skip
    assert code == 0
    options = json.loads(out)["options"]
    assert options
    for o in options:
        if o["cpu"] or not o.get("speed"):
            continue
        card = BY_KEY[re.sub(r"-mig-.*$", "", o["gpu_class"])]
        rate = re.search(r"(\w+) tensor rate", " ".join(o["speed"]["assumptions"]))
        assert rate is not None
        peak = _peak(card, rate.group(1))
        assert peak is not None
        for what, tokens, cards in _figures(o):
            assert tokens * 2 * multiplied <= peak * cards, (o["label"], what, tokens)
