"""Disaggregated prefill and decode, in words and as JSON: the plan's disaggregated options
(plan/disagg.py `Offer`), each pool's cards, workers, batch and latencies, and their launch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmfit.plan.advice import Advice
from llmfit.plan.disagg import Offer
from llmfit.plan.engines import pair_commands
from llmfit.plan.launch import Command
from llmfit.plan.settings import Workload
from llmfit.render.sentences import label
from llmfit.render.serving import seconds, targets

# The heading of the disaggregated block, which --disagg off leaves out (and nothing else).
HEADING = "Disaggregated prefill and decode"


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} kB"


def _rate(x: float) -> str:
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def name(i: int) -> str:
    """How the table and the text call disaggregated option `i` (from 1): "D1"."""
    return f"D{i}"


def _option_number(advice: Advice, o: Any) -> int | None:
    for i, x in enumerate(advice.plan.options, 1):
        if x is o:
            return i
    return None


def gain_words(advice: Advice, offer: Offer) -> str:
    """ "22 % more output a card than option 3 (8 × h200-141g (dp8+ep))", within the same
    targets, or that no aggregated option on those cards meets them."""
    if offer.aggregated is None or offer.gain is None:
        return "no aggregated option on these cards meets the targets"
    n = _option_number(advice, offer.aggregated)
    which = f"option {n}" if n is not None else "the best aggregated option"
    more = "more" if offer.gain >= 0 else "less"
    return (
        f"{abs(offer.gain):.0%} {more} output a card than {which} ({label(offer.aggregated)}) "
        "within the same targets"
    ).replace("%", " %", 1)


def summary(advice: Advice, i: int, offer: Offer) -> str:
    """One line for the list of disaggregated options: its name, engine and xPyD, both pools,
    the link, what it serves and how it compares."""
    r, w = offer.result, advice.plan.workload
    unit = r.unit
    what = f" ({offer.prefill.what_if})" if offer.prefill.what_if else ""
    return (
        f"{name(i)} {offer.prefill.engine}{what} {unit.label}: "
        f"prefill {unit.prefill_workers} × "
        f"{label(offer.prefill)}, decode {unit.decode_workers} × {label(offer.decode)}, "
        f"{unit.cards} cards, KV over {r.transfer.link.name} · {_rate(unit.rate)} requests a "
        f"second, {r.output_tokens_per_s_per_gpu(w):,.0f} tok/s/GPU · {gain_words(advice, offer)}"
    )


def detail(advice: Advice, i: int, offer: Offer) -> list[str]:
    """Both pools of a disaggregated option: cards, workers, batch, TTFT with its transfer part,
    TPOT, and what each pool's capacity is."""
    r, w = offer.result, advice.plan.workload
    unit, p, d, x = r.unit, r.prefill, r.decode, r.transfer
    rest = p.ttft_s - p.service_s - p.wait_s - x.seconds
    pool = r.decode_holds
    lines = [
        f"{name(i)}: {unit.label}, {unit.cards} cards, serves up to {_rate(unit.rate)} requests a "
        f"second within {targets(w)}: {r.output_tokens_per_s_per_gpu(w):,.0f} output tok/s a card"
        f", {gain_words(advice, offer)}",
        f"  prefill: {unit.prefill_workers} worker{'s' if unit.prefill_workers != 1 else ''} of "
        f"{label(offer.prefill)}, each up to {_rate(r.prefill_capacity)} requests a second "
        f"within the TTFT; TTFT {seconds(p.ttft_s)} = {seconds(p.service_s)} prefill + "
        f"{seconds(p.wait_s)} queued + {seconds(x.seconds)} KV transfer ({_mb(x.bytes)} over "
        f"{x.link.name}) + {seconds(rest)} fixed and decode's next step",
        f"  decode: {unit.decode_workers} worker{'s' if unit.decode_workers != 1 else ''} of "
        f"{label(offer.decode)}, each up to {_rate(r.decode_capacity)} requests a second within "
        f"the TPOT; batch {d.batch:,.0f}, TPOT {seconds(d.tpot_s)}; its KV pool holds "
        f"{pool:,.0f} requests at once",
    ]
    if r.units and r.units > 1:
        lines.append(f"  the load named needs {r.units} such units ({r.units * unit.cards} cards)")
    return lines


def explain(advice: Advice, i: int, offer: Offer) -> list[str]:
    """--explain's split of a disaggregated option: each pool's capacity worked out, and the
    transfer."""
    r, w = offer.result, advice.plan.workload
    x, p = r.transfer, r.prefill
    per_token = x.bytes / max(w.input_len, 1)
    return [
        f"{name(i)} worked out: prefill and decode on separate workers ({offer.transport})",
        f"  prefill worker: one prompt of {w.input_len:,} tokens takes {seconds(p.service_s)}; "
        f"prompts that queue are packed into batches at {p.tokens_per_s:,.0f} prompt tokens a "
        f"second; they wait as an M/D/1 queue, and the TTFT target leaves it busy "
        f"{_pct(p.busy)} of the time: Rp = {_rate(r.prefill_capacity)} requests a second",
        f"  decode worker: a step of B sequences at {w.input_len + w.output_len / 2:,.0f} tokens "
        f"of context, the largest B whose step meets the TPOT and that its batch and KV pool "
        f"hold: Rd = B / ({w.output_len - 1:,} × TPOT) = {_rate(r.decode_capacity)} requests a "
        "second",
        f"  {r.unit.label}: {r.unit.prefill_workers} × {_rate(r.prefill_capacity)} and "
        f"{r.unit.decode_workers} × {_rate(r.decode_capacity)}: the unit serves the lesser, "
        f"{_rate(r.unit.rate)} requests a second (without --xpyd, the worker counts, up to 8 "
        "each, that serve the most a card)",
        f"  KV transfer: {w.input_len:,} prompt tokens × {per_token:,.0f} B a token of the "
        f"layers moved = {_mb(x.bytes)}; a decode card receives {_mb(x.per_decode_card)}, the "
        f"busiest prefill card sends {_mb(x.per_prefill_card)}, over {x.link.name} at "
        f"{x.link.bandwidth / 1e9:,.1f} GB/s a card, plus {seconds(x.link.latency_s)}: "
        f"{seconds(x.seconds)}",
    ]


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def lines(advice: Advice) -> list[str]:
    """The disaggregated block: the options listed, the first in detail (its launch follows)."""
    offers = advice.plan.disaggregated
    if not offers:
        return []
    out = [
        f"{HEADING} (--disagg off leaves it out): the KV cache of each request moves from a "
        "prefill worker to a decode worker",
    ]
    out += [f"  {summary(advice, i, o)}" for i, o in enumerate(offers, 1)]
    out += detail(advice, 1, offers[0])
    return out


def commands(advice: Advice, offer: Offer) -> list[Command]:
    repo = advice.repo
    return pair_commands(offer, repo.id, repo.revision)


def command_lines(advice: Advice, offer: Offer) -> list[str]:
    """The launch of a disaggregated option, each role under a comment naming it."""
    unit = offer.result.unit
    if offer.result.transfer.link.kind == "node":
        out = [f"# all on one node of {unit.cards} cards or more, each worker on its own cards"]
    else:
        out = [
            "# each worker on a node of its own, reached at its name (prefill-1, decode-1, …: "
            "the node's address)"
        ]
    for c in commands(advice, offer):
        out.append(f"# {c.node}" if c.role != "router" else "# router, in front of them")
        out.append(c.shell)
    return out


def document(advice: Advice, offers: Sequence[Offer], w: Workload) -> list[dict[str, object]]:
    """The JSON of the disaggregated options (docs/json.md)."""
    out: list[dict[str, object]] = []
    for i, offer in enumerate(offers, 1):
        r = offer.result
        x = r.transfer
        agg = offer.aggregated
        roles: list[dict[str, object]] = []
        for role, o, workers, cap in (
            ("prefill", offer.prefill, r.unit.prefill_workers, r.prefill_capacity),
            ("decode", offer.decode, r.unit.decode_workers, r.decode_capacity),
        ):
            roles.append({
                "role": role, "workers": workers, "gpu_class": o.gpu_class,
                "gpus_per_worker": o.gpus, "tp": o.tp, "pp": o.pp, "dp": o.dp,
                "expert_parallel": o.expert_parallel, "capacity_rate": cap,
                "option": _option_number(advice, o),
            })  # fmt: skip
        roles[0].update(ttft_s=r.prefill.ttft_s, prefill_s=r.prefill.service_s,
                        queue_s=r.prefill.wait_s)  # fmt: skip
        roles[1].update(batch=r.decode.batch, tpot_s=r.decode.tpot_s,
                        kv_pool_requests=r.decode_holds)  # fmt: skip
        out.append({
            "name": name(i),
            "engine": offer.prefill.engine,
            "artifact": offer.prefill.artifact.name,
            "xpyd": r.unit.label,
            "gpus": r.unit.cards,
            "rate": r.unit.rate,
            "output_tokens_per_s_per_gpu": r.output_tokens_per_s_per_gpu(w),
            "ttft_s": r.ttft_s,
            "tpot_s": r.tpot_s,
            "units": r.units,
            "kv_transfer": {"bytes": x.bytes, "per_decode_card": x.per_decode_card,
                            "per_prefill_card": x.per_prefill_card, "link": x.link.kind,
                            "bandwidth": x.link.bandwidth, "latency_s": x.link.latency_s,
                            "seconds": x.seconds, "transport": offer.transport},  # fmt: skip
            "aggregated_option": _option_number(advice, agg) if agg is not None else None,
            "gain": offer.gain,
            "roles": roles,
            "commands": [
                {"role": c.role, "node": c.node, "argv": list(c.argv), "shell": c.shell,
                 "env": dict(c.env)}
                for c in commands(advice, offer)
            ],
        })  # fmt: skip
    return out
