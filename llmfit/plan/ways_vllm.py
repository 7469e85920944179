"""The ways vLLM could serve a safetensors checkpoint: widths, nodes and what-ifs, with refusals."""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmfit.plan.artifact import Artifact
from llmfit.plan.engines import vllm
from llmfit.plan.fleet import is_mig
from llmfit.plan.model import Model, Shape
from llmfit.plan.options import Option, PerCard, Rejection
from llmfit.plan.pools import ClassPool, Host, first_ids, host_count
from llmfit.plan.settings import PlanSettings


@dataclass(frozen=True)
class Variant:
    """The checkpoint as stored, or what an engine flag would make of it."""

    weight_bytes: int
    quant: str | None
    kv_dtype: str
    what_if: str | None = None
    flags: tuple[str, ...] = ()
    changes: int = 0


def vllm_variants(
    art: Artifact, model: Model, kv_dtype: str, settings: PlanSettings
) -> list[Variant]:
    """The checkpoint as stored and, for a 16-bit one, what vLLM's flags would make of it.

    `--quantization fp8` quantises the linear layers on load and keeps the embedding and the
    output head at 16 bits (vLLM's Fp8LinearMethod covers Linear layers only), so the what-if
    weighs half of everything else; without a vocabulary and hidden size the two are taken as
    nothing, which would flatter the what-if, so then none is offered. `--kv-cache-dtype fp8`
    halves a 16-bit cache.
    """
    stored = Variant(art.bytes, art.quant, kv_dtype)
    if settings.precision == "stored":
        return [stored]
    out = [stored] if settings.precision == "all" else []
    sixteen = model.dtype in ("bfloat16", "float16", "float32") and not model.quantization
    fp8_weights = None
    if sixteen and model.vocab_size and model.hidden_size:
        head = 2 * model.vocab_size * model.hidden_size * 2
        if art.bytes > head:
            fp8_weights = (art.bytes - head) // (4 if model.dtype == "float32" else 2) + head
    kv16 = kv_dtype in ("bfloat16", "float16") and settings.kv_cache_dtype == "auto"
    kv_flag = ("--kv-cache-dtype", "fp8")
    q_flag = ("--quantization", "fp8")
    if settings.precision in ("all", "kv-fp8") and kv16:
        out.append(Variant(art.bytes, art.quant, "fp8", "fp8 KV cache", kv_flag, 1))
    if settings.precision in ("all", "fp8") and fp8_weights:
        out.append(Variant(fp8_weights, "fp8", kv_dtype, "fp8 weights", q_flag, 1))
        if settings.precision == "all" and kv16:
            out.append(
                Variant(fp8_weights, "fp8", "fp8", "fp8 weights and KV cache", q_flag + kv_flag, 2)
            )
    return out or [stored]


def _engine_kv_dtype(model: Model, settings: PlanSettings) -> str | None:
    """The --kv-cache-dtype the plan relied on, in vLLM's spelling; None where auto gives it."""
    chosen = settings.kv_cache_dtype if settings.kv_cache_dtype != "auto" else model.kv_cache_dtype
    if not chosen:
        return None
    return "fp8" if chosen.startswith(("fp8", "float8")) else chosen


def vllm_options(
    art: Artifact,
    model: Model,
    shape: Shape,
    pools: list[ClassPool],
    context: int,
    settings: PlanSettings,
    rejected: list[Rejection],
) -> list[Option]:
    out: list[Option] = []
    bits = art.bits_per_weight(model.params)

    def option(pool: ClassPool, tp: int, pp: int, fabric: str, hosts: list[Host]) -> Option:
        have = int(pool.card_bytes * settings.gpu_memory_utilization)
        card = vllm.per_card(shape, art.bytes, tp, pp, context, _runtime(model, pool))
        ready = [h for h in hosts if h.free >= tp]
        # Counts (issue 17): host_count(x) is what len(x) was, first_ids(x, k) x[:k]'s ids.
        nodes = ready if host_count(ready) >= pp else hosts
        return Option(
            artifact=art,
            engine="vllm",
            per_card=card,
            have=have,
            gpu_class=pool.gpu_class,
            fabric=fabric or None,
            gpus_per_node=tp,
            nodes=pp,
            tp=tp,
            pp=pp,
            expert_parallel=model.is_moe and tp * pp > 1,
            hosts=host_count(hosts),
            free_now=host_count(ready) >= pp,
            bits_per_weight=bits,
            context=context,
            max_context=vllm.max_context(shape, card, have, tp, pp, model.max_context),
            concurrency=vllm.concurrency(shape, card, have, tp, pp, context),
            kv_per_token=shape.kv_bytes_per_token(tp, pp),
            batched_tokens=vllm.batched_tokens(pool.card_bytes, pool.gpu_class),
            node_ids=first_ids(nodes, pp) if pp > 1 else (),
            gpu_memory_utilization=settings.gpu_memory_utilization,
            kv_cache_dtype=_engine_kv_dtype(model, settings),
        )

    for pool in pools:
        have = int(pool.card_bytes * settings.gpu_memory_utilization)
        widest = pool.max_gpus
        runtime = _runtime(model, pool)
        # One node: the narrowest power of two that holds it. Powers of two only, because tensor
        # parallelism divides the attention heads, and a width the engine cannot divide them by
        # is a plan that fails at launch.
        single = None
        valid_widths: list[int] = []
        tp = 1
        while tp <= widest:
            refusal = vllm.width_refusal(shape, tp, expert_parallel=model.is_moe)
            where = f"{tp} × {pool.gpu_class}"
            if refusal:
                rejected.append(Rejection(art.name, "vllm", where, refusal))
            else:
                valid_widths.append(tp)
                card = vllm.per_card(shape, art.bytes, tp, 1, context, runtime)
                if card.need <= have:
                    hosts = [h for h in pool.hosts if h.gpus >= tp]
                    single = option(pool, tp, 1, "", hosts)
                    break
                rejected.append(_too_big(art, shape, model, where, card, have, tp, 1))
            tp *= 2
        # Several nodes only when no one node holds it: a replica on one node needs no fabric,
        # no pipeline bubbles and one command, which is worth more than the cards it may save.
        if single:
            out.append(single)
            continue
        # A MIG instance does not join others, on its node or across a fabric.
        if is_mig(pool.gpu_class):
            rejected.append(
                Rejection(
                    art.name,
                    "vllm",
                    f"several {pool.gpu_class}",
                    "a MIG instance cannot be joined with others, on its node or across nodes",
                )
            )
            continue
        if not valid_widths:
            continue
        # Several nodes, pipeline-parallel between them, in any number, and only within one
        # fabric: a replica across two would hang on its first all-reduce rather than fail to
        # start. Each width the fabric's nodes allow is tried, and the way with the fewest cards
        # kept: a single wider node must not hide the narrower nodes beside it (found by the
        # property that adding a node never takes a way away).
        for fabric, members in pool.fabrics().items():
            widest_here = max(h.gpus for h in members)
            widths = [w for w in valid_widths if w <= widest_here]
            if not widths:
                continue
            if not fabric:
                hosts = [h for h in members if h.gpus >= widths[-1]]
                if host_count(hosts) > 1:  # counts (issue 17): was len(hosts)
                    rejected.append(
                        Rejection(
                            art.name,
                            "vllm",
                            f"{host_count(hosts)} nodes × {widths[-1]} {pool.gpu_class}",
                            "these nodes have no fabric, so a replica cannot span them",
                        )
                    )
                continue
            best: tuple[int, int, list[Host]] | None = None
            nearest: Rejection | None = None
            # Widest first, so that of two ways with as many cards the one on fewer nodes stays.
            for tp in reversed(widths):
                hosts = [h for h in members if h.gpus >= tp]
                # Counts (issue 17): host_count(hosts) was len(hosts), here and below.
                for pp in range(2, min(host_count(hosts), shape.layers) + 1):
                    if best and tp * pp >= best[0] * best[1]:
                        break
                    card = vllm.per_card(shape, art.bytes, tp, pp, context, runtime)
                    if card.need <= have:
                        best = (tp, pp, hosts)
                        break
                else:
                    if host_count(hosts) > 1 and tp == widths[-1]:
                        pp = min(host_count(hosts), shape.layers)
                        card = vllm.per_card(shape, art.bytes, tp, pp, context, runtime)
                        where = f"{pp} nodes × {tp} {pool.gpu_class} on {fabric}"
                        nearest = _too_big(art, shape, model, where, card, have, tp, pp)
            if best:
                out.append(option(pool, best[0], best[1], fabric, best[2]))
            elif nearest:
                rejected.append(nearest)
    return out


def _runtime(model: Model, pool: ClassPool) -> vllm.Runtime | None:
    """vLLM's working-memory inputs on this card; None when the config lacks them."""
    if not (model.vocab_size and model.hidden_size):
        return None
    tokens = vllm.batched_tokens(pool.card_bytes, pool.gpu_class)
    return vllm.Runtime(tokens, model.vocab_size, model.hidden_size)


def _too_big(
    art: Artifact,
    shape: Shape,
    model: Model,
    where: str,
    card: PerCard,
    have: int,
    tp: int,
    pp: int,
) -> Rejection:
    longest = vllm.max_context(shape, card, have, tp, pp, model.max_context)
    return Rejection(art.name, "vllm", where, "", need=card.need, have=have, max_context=longest)


def vllm_ways(
    art: Artifact,
    model: Model,
    shape: Shape,
    pools: list[ClassPool],
    context: int,
    settings: PlanSettings,
    rejected: list[Rejection],
) -> list[Option]:
    """Every way vLLM could serve the checkpoint and each of its what-ifs; the refusals, each
    tagged with the what-if it was refused for, go to `rejected`."""
    found: list[Option] = []
    for v in vllm_variants(art, model, shape.kv_dtype, settings):
        v_art = replace(art, bytes=v.weight_bytes, quant=v.quant)
        v_shape = replace(shape, kv_dtype=v.kv_dtype)
        refused: list[Rejection] = []
        opts = vllm_options(v_art, model, v_shape, pools, context, settings, refused)
        rejected.extend(replace(r, what_if=v.what_if) for r in refused)
        found += [
            replace(o, what_if=v.what_if, engine_flags=v.flags, changes=v.changes) for o in opts
        ]
    return found
