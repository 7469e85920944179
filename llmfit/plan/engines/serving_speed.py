"""vLLM's and SGLang's speed constants: the share of a card's peaks each reaches, and its fixed
costs, fitted per engine and card architecture (plan/speed.py says what each constant means).

The constants are data: llmfit/data/serving_speed.toml, each architecture's row with its
provenance ("fitted" or "prior"), read and checked here (every share of a datasheet figure in
(0, 1]). FITTED by benchmarks/accuracy_load.py --fit to fixtures/calibration/load.jsonl and the
serving runs of speed.jsonl (copies of ../shared/calibration/): the 180 runs the model prices
(vLLM 65, SGLang 115; H100, H200, H800, B200, A100, MI300X, MI350X), each planned as `llmfit`
plans it with the run's layout, engine release and launch flags, compared at its load; least
squares on
the log errors of output tokens a second a GPU, TPOT and TTFT (TTFT at half weight), a saturating
loss (Cauchy), every publisher weighted alike, each constant held loosely to a prior and bounded
to a physical range (accuracy_load.py SHARED, ARCH_PRIOR); rounded to two or three figures. An
architecture whose runs come from one publisher, or none, keeps its prior.

Scored on runs the fit never saw (each publisher's runs priced by a fit without that publisher
nor any run of the same model × card family; docs/accuracy.md "Serving under load" has the split
by MoE and dense, tuned and default flags, and the model before this one scored the same way):

| | output tok/s a GPU | TPOT | TTFT |
|---|---|---|---|
| dense models (52 runs) | 8.7 % | 9.1 % | 13.4 % |
| MoE models (128 runs) | 17.8 % | 18.6 % | 27.2 % |
| all 180 | 15.1 % | 14.9 % | 25.6 % |
| these constants, fitted to all 180 | 12.0 % | 13.4 % | 22.8 % |

A MoE's routed experts are priced by the card's measured grouped GEMM (plan/curves.py, from
aiconfigurator 0.12's tables) where a table covers the card, at the engine's share of it (vLLM
0.425, SGLang 0.555), with a routing cost a MoE layer (10.9 µs, 39.7 µs); vLLM's by the kernel
vLLM 0.34 runs (data/moe_kernels.toml). AMD cards, and MXFP4 experts before Blackwell, keep the
expert shares, each the kernel's that runs: on NVIDIA cards vLLM's 0.80, SGLang's too (the same
kernel), on AMD cards SGLang's fitted 0.371.
vLLM streams a Hopper card's weights at 93 % of its bandwidth with 70.5 µs a graphed layer,
prefills at 93 % of the dense tensor rate; its CPU work (0.47 ms a step, 29 µs a sequence)
overlaps the GPU's from 0.14; its API server takes a burst's requests one after another, 23.6 ms
each (`serial_frontend`). SGLang streams at 95 % of a Hopper card's bandwidth (85 % of a B200's,
74 % of an A100's, 56 % of an MI300X's), 89 µs a layer, prefills at 59 %.

Not fitted (no run of it): --enforce-eager's launches a layer, 510 µs, from the one eager run of
speed.jsonl (vllm#20469: Qwen3-14B-AWQ on an A100 decoding at 20.9 ms a token, 6.6 ms of it its
bytes, 40 layers); a pipeline hand-off, llama.cpp's 30 µs; an all-to-all's latency, NCCL's ~25 µs
over a fabric.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

from llmfit.plan import cards, package_data
from llmfit.plan.speed import Constants, pick

# Architectures an engine's efficiencies are looked up by (the card table's `architecture`):
# cards of one architecture run the same kernels (MI355X is CDNA 4, not the MI300X's CDNA 3; B300
# is Blackwell Ultra, priced as Blackwell). A card of none of these takes its family's row
# (plan/cards.py FAMILIES), else its vendor's, else "default"; its own peaks and bandwidth are
# always the card table's.
ARCHITECTURES: tuple[tuple[str, str], ...] = (
    ("hopper", "nvidia-hopper"),
    ("blackwell", "nvidia-blackwell"),
    ("blackwell-ultra", "nvidia-blackwell"),
    ("ampere", "nvidia-ampere"),
    ("cdna3", "amd-cdna3"),
    ("cdna4", "amd-cdna4"),
)
_BY_ARCH = dict(ARCHITECTURES)


def architecture(key: str) -> str:
    """The architecture a card class's efficiencies are looked up by, else its family."""
    card = cards.spec(key)
    found = _BY_ARCH.get(card.architecture) if card is not None else None
    return found or cards.family(key)


DATA_FILE = "data/serving_speed.toml"
# Fields of Constants that are shares of a card's datasheet figure: each in (0, 1].
_SHARES = frozenset(
    {"weight_efficiency", "kv_efficiency", "prefill_efficiency", "quant_prefill_efficiency",
     "attention_efficiency", "expert_efficiency", "expert_prefill_efficiency",
     "quant_weight_efficiency"}
)  # fmt: skip
_FIELDS = frozenset(f.name for f in fields(Constants))


def _values(table: dict[str, object], where: str) -> dict[str, object]:
    """A table's Constants fields, each checked: a known field, a finite number not below 0, a
    share of a datasheet figure at most 1."""
    out: dict[str, object] = {}
    for name, value in table.items():
        if name == "provenance":
            continue
        if name not in _FIELDS:
            raise ValueError(f"{DATA_FILE}: {where}.{name} is not a speed constant")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if name in ("decode_pipelined", "expert_curves", "serial_frontend") and isinstance(
                value, bool
            ):
                out[name] = value
                continue
            raise ValueError(f"{DATA_FILE}: {where}.{name} = {value!r} is not a number")
        if not math.isfinite(value) or value < 0 or (name in _SHARES and not 0 < value <= 1):
            raise ValueError(f"{DATA_FILE}: {where}.{name} = {value!r} is out of its range")
        out[name] = int(value) if name == "prefill_chunk" else float(value)
    return out


def _load() -> tuple[Constants, dict[str, dict[str, Constants]]]:
    doc = package_data.read_toml(DATA_FILE)
    base = Constants(**_values(doc["base"], "base"))  # type: ignore[arg-type]
    tables: dict[str, dict[str, Constants]] = {}
    for engine in ("vllm", "sglang"):
        shared = dict(doc[engine])
        archs = shared.pop("architectures")
        common = replace(base, **_values(shared, engine))  # type: ignore[arg-type]
        rows: dict[str, Constants] = {}
        for arch, row in archs.items():
            own = _values(row, f"{engine}.architectures.{arch}")
            # The KV cache streams at the weights' share (flash attention: times
            # attention_efficiency).
            own.setdefault("kv_efficiency", own["weight_efficiency"])
            rows[arch] = replace(common, **own)  # type: ignore[arg-type]
        if "default" not in rows:
            raise ValueError(f"{DATA_FILE}: {engine} has no default architecture row")
        tables[engine] = rows
    return base, tables


# The priors the fit starts from (benchmarks/accuracy_load.py), and each engine's table.
BASE, TABLES = _load()
VLLM: dict[str, Constants] = TABLES["vllm"]
SGLANG: dict[str, Constants] = TABLES["sglang"]


def for_card(table: dict[str, Constants], key: str) -> Constants:
    """An engine's fitted constants (`table`, its rows by architecture) on a card class (or a
    family)."""
    # A key that is no card is taken for an architecture or family itself ("nvidia-hopper").
    return pick(table, architecture(key) if cards.spec(key) is not None else key)


def constants(engine: str, key: str) -> Constants:
    """The fitted constants of the table named `engine` ("vllm" or "sglang") on a card class."""
    return for_card(TABLES[engine], key)
