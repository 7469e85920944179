"""The version-1 JSON document (DESIGN.md): sizes in bytes, unknowns as null, keys sorted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmfit.plan.advice import Advice
from llmfit.plan.credentials import FROM_CALLER
from llmfit.plan.engines import engine, field_names
from llmfit.plan.options import Option
from llmfit.render.commands import commands
from llmfit.render.safe import safe_dumps
from llmfit.render.sentences import describe, label, rejection_reason, unplaced_reason
from llmfit.render.serving import ceiling_document, workload_document
from llmfit.render.serving import document as serving_document

SCHEMA = 1


def _bits(b: float | None) -> float | None:
    return round(b, 2) if b else None


def _speed(o: Option) -> dict[str, Any] | None:
    s = o.speed
    if s is None:
        return None
    return {
        "decode_tokens_per_s": round(s.decode_tokens_per_s, 2),
        "decode_tokens_per_s_total": round(s.decode_tokens_per_s_total, 2),
        "prefill_tokens_per_s": (
            round(s.prefill_tokens_per_s, 1) if s.prefill_tokens_per_s is not None else None
        ),
        "ttft_s": round(s.ttft_s, 4) if s.ttft_s is not None else None,
        "bound": s.bound,
        "bound_total": s.bound_total,
        "bound_prefill": s.bound_prefill,
        "assumptions": list(s.assumptions),
    }


def _option(rank: int, o: Option, advice: Advice, ray: bool) -> dict[str, Any]:
    repo = advice.repo
    lay = o.layout
    doc = {
        "rank": rank,
        "artifact": o.artifact.name,
        "engine": o.engine,
        "label": label(o),
        "describe": describe(o),
        "cpu": o.cpu,
        "gpu_class": o.gpu_class,
        "fabric": o.fabric,
        "gpus_per_node": o.gpus_per_node,
        "nodes": o.nodes,
        "gpus": o.gpus,
        # The layout (added to version 1): tensor, pipeline and data parallel sizes, expert
        # parallelism, the independent copies of the model it runs, and the cards each takes.
        "tp": lay.tp,
        "pp": lay.pp,
        "dp": lay.dp,
        "ep": lay.ep,
        "replicas": lay.replicas,
        "cards_per_replica": 0 if o.cpu else lay.cards_per_replica,
        "per_card": {
            "weights": o.per_card.weights,
            "kv_cache": o.per_card.cache,
            "overhead": o.per_card.overhead,
            "need": o.per_card.need,
            "have": o.have,
            # Added to version 1 (issue 35): the parts by the one vocabulary every engine fills,
            # the card's total and the share of it the engine may use (have = total × share).
            "parts": o.per_card.named(),
            "total": o.total,
            "share": o.share,
        },
        "hosts": o.hosts,
        "free_now": o.free_now,
        "bits_per_weight": _bits(o.bits_per_weight),
        "max_context": o.max_context,
        "concurrency": o.held,
        "what_if": o.what_if,
        # Added to version 1: how fast it runs (null where the card's speed is not known).
        "speed": _speed(o),
        # Added to version 1: how it serves the plan's workload (null where not known).
        "serving": serving_document(o.serving, o),
        # Added to version 1: the command that measures the serving figure (null: none).
        "benchmark": _benchmark(o, repo.id),
        # Added to version 1: copies of the option its launch starts (the replicas the named
        # load needs, or --replicas), and so how many of each command.
        "launch_replicas": o.launched,
        "commands": [
            {"role": c.role, "argv": list(c.argv), "shell": c.shell, "count": o.launched}
            | ({"node": c.node} if c.node else {})
            | ({"env": {k: f"${k}" if v == FROM_CALLER else v for k, v in c.env}} if c.env else {})
            # Added to version 1: the variables of `env` that are credentials, passed from the
            # caller's environment by name (their value above is "$NAME", never the credential).
            | (
                {"env_secrets": [k for k, v in c.env if v == FROM_CALLER]}
                if any(v == FROM_CALLER for _, v in c.env)
                else {}
            )
            | ({"secrets": [{"index": i, "env": v} for i, v in c.secrets]} if c.secrets else {})
            for c in commands(o, repo.id, repo.revision, ray)
        ],
    }
    # Each engine's own fields, null on the options of the others.
    doc |= dict.fromkeys(field_names())
    doc |= engine(o.engine).values(o)
    return doc


def _benchmark(o: Option, repo_id: str) -> dict[str, Any] | None:
    """The benchmark that checks an option's serving figure (plan/engines/bench.py), as docs/json.md
    documents it."""
    from llmfit.plan.engines.bench import bench

    b = bench(o, repo_id)
    if b is None:
        return None
    return {
        "argv": list(b.command.argv),
        "shell": b.line,
        "result_file": b.result_file,
        "stdout": b.stdout,
        "load": b.load_kind,
        "value": b.load,
        "prompts": b.prompts,
        "input_len": b.input_len,
        "output_len": b.output_len,
    }


def document(advice: Advice, ray: bool = False, limit: int | None = None) -> dict[str, Any]:
    repo, plan, fleet = advice.repo, advice.plan, advice.fleet
    m = repo.model
    return {
        "schema": SCHEMA,
        "repo": {
            "id": repo.id,
            "revision": repo.revision,
            "commit": repo.commit,
            "source": repo.source,
        },
        "model": {
            "architecture": m.architecture,
            "model_type": m.model_type,
            "params": m.params,
            "active_params": m.active_params,
            "layers": m.layers,
            "attention_heads": m.attention_heads,
            "kv_heads": m.kv_heads,
            "head_dim": m.head_dim,
            "experts": m.experts,
            "experts_active": m.experts_active,
            "max_context": m.max_context,
            "kv_bytes_per_token": plan.kv_bytes_per_token,
            "dtype": m.dtype,
            "quantization": m.quantization,
            # Added to version 1: each kind of layer and how its cache was charged.
            "attention": [
                {
                    "kind": a.kind,
                    "layers": a.layers,
                    "window": a.window,
                    "bytes_per_token": a.bytes_per_token,
                    "bytes_per_sequence": a.bytes_per_sequence,
                    "how": a.how,
                }
                for a in plan.attention
            ],
            # Added to version 1: config keys that change what the engine holds and that llmfit
            # does not model; where any is named, every memory figure is an estimate.
            "unmodelled": list(m.unmodelled),
        },
        "context": plan.context,
        # Added to version 1: the workload the options were judged at, and their order.
        "workload": workload_document(plan.workload),
        "rank_by": plan.rank,
        "fleet": {"source": fleet.source, "nodes": fleet.node_count, "gpus": fleet.gpus},
        "artifacts": [
            {
                "name": a.name,
                "format": a.format,
                "bytes": a.bytes,
                "shards": a.shards,
                "quant": a.quant,
                "bits_per_weight": _bits(a.bits_per_weight(m.params)),
                # Added to version 1 (issue 34): true where `bytes` is the config's parameters
                # at its dtype, the repository holding no checkpoint's sizes.
                "estimated": a.estimated,
            }
            for a in repo.artifacts
        ],
        "options": [_option(i, o, advice, ray) for i, o in enumerate(plan.options[:limit], 1)],
        # Added to version 1 (issue 34): what the fleet's free cards serve at most of a named
        # load that no one option's replicas fit them for; null where one does.
        "ceiling": ceiling_document(plan.ceiling, plan.options),
        "unplaced": [
            {
                "artifact": u.artifact,
                "reason": unplaced_reason(u),
                "fits_at": u.fits_at or None,
                # Where pins left nothing: the nearest layout that fits without them.
                "nearest": {"label": label(u.nearest), "pins": u.nearest_pins}
                if u.nearest is not None
                else None,
            }
            for u in plan.unplaced
        ],
        "rejected": [
            {
                "artifact": r.artifact,
                "what_if": r.what_if,
                "engine": r.engine,
                "where": r.where,
                "reason": rejection_reason(r),
                # Added to version 1: the bytes a sentence states (null where it states none).
                "need": r.need or None,
                "have": r.have or None,
                "kind": r.kind or None,
            }
            for r in plan.rejected
        ],
        "notes": list(plan.notes + repo.warnings),
    } | _disaggregated(advice)


def _disaggregated(advice: Advice) -> dict[str, object]:
    """Added to version 1 (issue 37): the disaggregated prefill/decode options, present only
    where the plan lists one (--disagg auto where it wins, on), so that a plan without one is
    the same document as before."""
    from llmfit.render.disagg import document as disagg_document

    plan = advice.plan
    if not plan.disaggregated:
        return {}
    return {"disaggregated": disagg_document(advice, plan.disaggregated, plan.workload)}


def render_json(advice: Advice, ray: bool = False, limit: int | None = None) -> str:
    return safe_dumps(document(advice, ray, limit))


def pair_document(
    rules: Sequence[tuple[str, bool | None, str | None]],
    refusal: str | None,
    prefill: Advice,
    decode: Advice,
) -> dict[str, Any]:
    """`llmfit check --json -- <prefill command> -- <decode command>` (docs/json.md): each
    role's check as one command's document, and the rules the pair keeps or breaks."""
    fits = bool(prefill.plan.options) and bool(decode.plan.options)
    return {
        "schema": SCHEMA,
        "pair": {
            "launches": refusal is None,
            "fits": fits,
            "refusal": refusal,
            "rules": [{"rule": r, "holds": h, "why": w} for r, h, w in rules],
        },
        "roles": {"prefill": document(prefill, limit=1), "decode": document(decode, limit=1)},
    }


def render_pair_json(
    rules: Sequence[tuple[str, bool | None, str | None]],
    refusal: str | None,
    prefill: Advice,
    decode: Advice,
) -> str:
    return safe_dumps(pair_document(rules, refusal, prefill, decode))
