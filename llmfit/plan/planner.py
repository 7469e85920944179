"""plan(): every way each artifact could run on the fleet, ranked, with what was refused and why."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from llmfit.plan.artifact import Artifact, GgufLayout
from llmfit.plan.engines import llamacpp, vllm
from llmfit.plan.fleet import GIB, Fleet, PoolNode, is_mig
from llmfit.plan.model import AttentionCharge, Model, Shape
from llmfit.plan.options import Option, PerCard, Rejection, rank


@dataclass(frozen=True)
class PlanSettings:
    # The token pool planned for; None plans the model's trained context.
    context: int | None = None
    gpu_memory_utilization: float = 0.90
    # The share of a host's RAM one replica may be planned to use: the system keeps the rest.
    host_share: float = 0.85
    # "auto" keeps the model's own dtype for the cache (or the one its checkpoint was calibrated
    # for); else "bfloat16" or "fp8".
    kv_cache_dtype: str = "auto"
    # Which precisions to offer: "all" (as stored, and the what-ifs an engine flag makes of a
    # 16-bit checkpoint), "stored", "fp8" (weights quantised on load) or "kv-fp8" (an fp8 cache).
    precision: str = "all"


PRECISIONS = ("all", "stored", "fp8", "kv-fp8")


@dataclass(frozen=True)
class Unplaced:
    """An artifact with no option at all, and the nearest it came."""

    artifact: str
    # Why nothing was placed, when it is not simply that nothing fits.
    reason: str = ""
    # The nearest miss: where, and what one card would need of what it offers.
    where: str = ""
    need: int = 0
    have: int = 0
    # The longest context at which something would fit, and where (0 and "" when nothing would).
    fits_at: int = 0
    fits_where: str = ""


@dataclass(frozen=True)
class Variant:
    """The checkpoint as stored, or what an engine flag would make of it."""

    weight_bytes: int
    quant: str | None
    kv_dtype: str
    what_if: str | None = None
    flags: tuple[str, ...] = ()
    changes: int = 0


@dataclass(frozen=True)
class Plan:
    model: Model
    context: int
    options: tuple[Option, ...]
    rejected: tuple[Rejection, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # One token of context for the whole model at the planned KV dtype (tp = pp = 1).
    kv_bytes_per_token: int = 0
    # Each kind of layer and how its cache was charged.
    attention: tuple[AttentionCharge, ...] = ()


@dataclass
class _Host:
    node_id: str
    fabric: str
    gpus: int  # healthy cards of this class (one, for MIG instances)
    free: int
    ram: int = 0
    free_ram: int = 0


@dataclass
class _ClassPool:
    gpu_class: str
    card_bytes: int
    hosts: list[_Host]

    @property
    def max_gpus(self) -> int:
        return max((h.gpus for h in self.hosts), default=0)

    def fabrics(self) -> dict[str, list[_Host]]:
        out: dict[str, list[_Host]] = {}
        for h in self.hosts:
            out.setdefault(h.fabric, []).append(h)
        return out


def _pools(fleet: Fleet) -> list[_ClassPool]:
    """GPU nodes grouped by card class: a node with devices of several classes is in each pool,
    as the node it is for that class (its devices of that class and no others)."""
    by: dict[tuple[str, int], _ClassPool] = {}
    for node in fleet.nodes:
        for k in node.kinds:
            if k.healthy <= 0 or k.card_bytes <= 0:
                continue
            gpus, free = k.healthy, min(k.free_gpus, k.healthy)
            if is_mig(k.gpu_class):
                # One instance a replica, however many the node has.
                gpus, free = 1, min(free, 1)
            key = (k.gpu_class, k.card_bytes)
            pool = by.setdefault(key, _ClassPool(k.gpu_class, k.card_bytes, []))
            pool.hosts.append(
                _Host(node.id, node.fabric, gpus, free, node.ram_bytes, node.free_ram_bytes)
            )
    return [by[k] for k in sorted(by)]


def plan(model: Model, artifacts: Iterable[Artifact], fleet: Fleet, settings: PlanSettings) -> Plan:
    context = settings.context or model.max_context
    if not context or context <= 0:
        raise ValueError("a context is needed: the model states none, so it must be given")
    kv_dtype = None if settings.kv_cache_dtype == "auto" else settings.kv_cache_dtype
    shape = Shape.of(model, kv_dtype)
    pools = _pools(fleet)
    options: list[Option] = []
    rejected: list[Rejection] = []
    unplaced: list[Unplaced] = []
    for art in artifacts:
        if art.format == "safetensors":
            found = []
            for v in vllm_variants(art, model, shape.kv_dtype, settings):
                v_art = replace(art, bytes=v.weight_bytes, quant=v.quant)
                v_shape = replace(shape, kv_dtype=v.kv_dtype)
                refused: list[Rejection] = []
                v_opts = _vllm_options(v_art, model, v_shape, pools, context, settings, refused)
                rejected.extend(replace(r, what_if=v.what_if) for r in refused)
                for o in v_opts:
                    found.append(
                        replace(o, what_if=v.what_if, engine_flags=v.flags, changes=v.changes)
                    )
            if any(n.is_cpu for n in fleet.nodes):
                rejected.append(
                    Rejection(
                        art.name,
                        "vllm",
                        "CPU nodes",
                        "safetensors weights are planned for vLLM on GPUs; a CPU node runs "
                        "GGUF files with llama.cpp",
                    )
                )
        elif art.layout is not None:
            found = []
            for kv_type, what_if, flags in llamacpp_variants(settings):
                refused: list[Rejection] = []
                opts = _llamacpp_options(
                    art, model, fleet, pools, context, settings, refused, kv_type
                )
                rejected.extend(replace(r, what_if=what_if) for r in refused)
                found += [
                    replace(o, what_if=what_if, engine_flags=flags, changes=int(bool(what_if)))
                    for o in opts
                ]
        else:
            found = []
            rejected.append(Rejection(art.name, "llama.cpp", "any", "its header was not read"))
        if found:
            options.extend(found)
        else:
            unplaced.append(_nearest(art, rejected, pools))
    return Plan(
        model=model,
        context=context,
        options=tuple(rank(options)),
        rejected=tuple(rejected),
        unplaced=tuple(unplaced),
        notes=model.notes + fleet.notes + _context_notes(model, context),
        kv_bytes_per_token=shape.kv_bytes_per_token(),
        attention=vllm.attention_charges(shape, context),
    )


def _engine_kv_dtype(model: Model, settings: PlanSettings) -> str | None:
    """The --kv-cache-dtype the plan relied on, in vLLM's spelling; None where auto gives it."""
    chosen = settings.kv_cache_dtype if settings.kv_cache_dtype != "auto" else model.kv_cache_dtype
    if not chosen:
        return None
    return "fp8" if chosen.startswith(("fp8", "float8")) else chosen


def llamacpp_variants(settings: PlanSettings) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """The f16 cache llama-server keeps by default and, as a what-if, its 8-bit cache: q8_0 keys
    and values (a quantised V cache needs flash attention, which the command turns on)."""
    q8 = ("q8_0", "q8_0 KV cache", ("--cache-type-k", "q8_0", "--cache-type-v", "q8_0"))
    stored = ("f16", None, ())
    if settings.precision == "stored":
        return [stored]
    if settings.precision == "kv-fp8":
        return [q8]
    return [stored, q8] if settings.precision == "all" else [stored]


def _context_notes(model: Model, context: int) -> tuple[str, ...]:
    if model.max_context and context > model.max_context:
        return (
            f"a context of {context:,} is past the {model.max_context:,} the model was trained "
            "for: vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set",
        )
    return ()


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


def _nearest(art: Artifact, rejected: list[Rejection], pools: list[_ClassPool]) -> Unplaced:
    if not pools and art.format == "safetensors":
        return Unplaced(art.name, "the fleet has no GPU that vLLM could use")
    sized = [r for r in rejected if r.artifact == art.name and r.need and not r.what_if]
    if not sized:
        reasons = [r.reason for r in rejected if r.artifact == art.name]
        return Unplaced(art.name, reasons[-1] if reasons else "no way to place it was found")
    best = min(sized, key=lambda r: r.need / r.have)
    # Where the weights fit and only the context does not, the longest context that would.
    shorter = max(sized, key=lambda r: r.max_context)
    return Unplaced(
        art.name,
        where=best.where,
        need=best.need,
        have=best.have,
        fits_at=shorter.max_context,
        fits_where=shorter.where if shorter.max_context else "",
    )


def _vllm_options(
    art: Artifact,
    model: Model,
    shape: Shape,
    pools: list[_ClassPool],
    context: int,
    settings: PlanSettings,
    rejected: list[Rejection],
) -> list[Option]:
    out: list[Option] = []
    bits = art.bits_per_weight(model.params)

    def option(pool: _ClassPool, tp: int, pp: int, fabric: str, hosts: list[_Host]) -> Option:
        have = int(pool.card_bytes * settings.gpu_memory_utilization)
        card = vllm.per_card(shape, art.bytes, tp, pp, context, _runtime(model, pool))
        ready = [h for h in hosts if h.free >= tp]
        nodes = ready if len(ready) >= pp else hosts
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
            hosts=len(hosts),
            free_now=len(ready) >= pp,
            bits_per_weight=bits,
            context=context,
            max_context=vllm.max_context(shape, card, have, tp, pp, model.max_context),
            concurrency=vllm.concurrency(shape, card, have, tp, pp, context),
            kv_per_token=shape.kv_bytes_per_token(tp, pp),
            batched_tokens=vllm.batched_tokens(pool.card_bytes, pool.gpu_class),
            node_ids=tuple(h.node_id for h in nodes[:pp]) if pp > 1 else (),
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
                if len(hosts) > 1:
                    rejected.append(
                        Rejection(
                            art.name,
                            "vllm",
                            f"{len(hosts)} nodes × {widths[-1]} {pool.gpu_class}",
                            "these nodes have no fabric, so a replica cannot span them",
                        )
                    )
                continue
            best: tuple[int, int, list[_Host]] | None = None
            nearest: Rejection | None = None
            # Widest first, so that of two ways with as many cards the one on fewer nodes stays.
            for tp in reversed(widths):
                hosts = [h for h in members if h.gpus >= tp]
                for pp in range(2, min(len(hosts), shape.layers) + 1):
                    if best and tp * pp >= best[0] * best[1]:
                        break
                    card = vllm.per_card(shape, art.bytes, tp, pp, context, runtime)
                    if card.need <= have:
                        best = (tp, pp, hosts)
                        break
                else:
                    if len(hosts) > 1 and tp == widths[-1]:
                        pp = min(len(hosts), shape.layers)
                        card = vllm.per_card(shape, art.bytes, tp, pp, context, runtime)
                        where = f"{pp} nodes × {tp} {pool.gpu_class} on {fabric}"
                        nearest = _too_big(art, shape, model, where, card, have, tp, pp)
            if best:
                out.append(option(pool, best[0], best[1], fabric, best[2]))
            elif nearest:
                rejected.append(nearest)
    return out


def _runtime(model: Model, pool: _ClassPool) -> vllm.Runtime | None:
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


def _llamacpp_options(
    art: Artifact,
    model: Model,
    fleet: Fleet,
    pools: list[_ClassPool],
    context: int,
    settings: PlanSettings,
    rejected: list[Rejection],
    kv_type: str = "f16",
) -> list[Option]:
    """llama-server's ways: on a CPU; every layer on 1…N cards of a node; when a node's cards
    cannot hold it all, a MoE's experts (--n-cpu-moe, the fewest layers' worth) or else the
    first layers (-ngl, the most that fit) kept in the node's RAM; or every layer on the cards of
    several nodes of one fabric over RPC."""
    layout = art.layout
    assert layout is not None
    n = layout.layers
    out: list[Option] = []
    bits = art.bits_per_weight(model.params)
    extra = art.projector_bytes
    share = settings.host_share

    def ram_have(h: _Host | PoolNode) -> int:
        ram = h.ram if isinstance(h, _Host) else h.ram_bytes
        return int(ram * share)

    def option(placement: llamacpp.Placement, e: llamacpp.Estimate, **kw) -> Option:
        card = e.worst_card()
        assert card is not None
        return Option(
            artifact=art,
            engine="llama.cpp",
            per_card=PerCard(card.weights, card.kv_cache, card.compute + card.overhead),
            bits_per_weight=bits,
            context=context,
            gpu_layers=placement.gpu_layers,
            tensor_split=(1,) * placement.cards if placement.cards > 1 else (),
            cpu_moe_layers=placement.cpu_moe,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            # llama-server's pool is --ctx-size cells, one sequence of `context` at most.
            concurrency=1.0,
            **kw,
        )

    # CPU: every node's RAM is a candidate, GPU nodes' too.
    cpu = llamacpp.Placement(0, 0, kv_type=kv_type)
    e = llamacpp.estimate(layout, cpu, context, extra)
    need = e.host.total
    rams = [nd for nd in fleet.nodes if nd.ram_bytes > 0]
    fitting = [nd for nd in rams if need <= ram_have(nd)]
    if fitting:
        have = max(ram_have(nd) for nd in fitting)
        out.append(
            Option(
                artifact=art,
                engine="llama.cpp",
                per_card=PerCard(e.host.weights, e.host.kv_cache, e.host.compute),
                have=have,
                cpu=True,
                hosts=len(fitting),
                free_now=any(need <= nd.free_ram_bytes for nd in fitting),
                bits_per_weight=bits,
                context=context,
                max_context=llamacpp.max_context(
                    layout, cpu, have, None, model.max_context, cpu=True, extra=extra
                ),
                gpu_layers=0,
                concurrency=1.0,
            )
        )
    elif rams:
        have = max(ram_have(nd) for nd in rams)
        rejected.append(Rejection(art.name, "llama.cpp", "CPU", "", need=need, have=have))

    for pool in pools:
        # llama.cpp takes no share of a card as a flag: what the plan keeps back (10% by
        # default) is the margin, as --fit's own target of 1 GiB free a card is.
        have = int(pool.card_bytes * settings.gpu_memory_utilization)
        where = pool.gpu_class
        # Every layer and the output layer on k cards of one node, by layer count.
        full = None
        for k in range(1, pool.max_gpus + 1):
            placement = llamacpp.Placement(n + 1, k, kv_type=kv_type)
            e = llamacpp.estimate(layout, placement, context, extra)
            worst = e.worst_card()
            assert worst is not None
            if worst.total <= have:
                full = (placement, e)
                break
            rejected.append(
                Rejection(art.name, "llama.cpp", f"{k} × {where}", "", need=worst.total, have=have)
            )
        if full:
            placement, e = full
            hosts = [h for h in pool.hosts if h.gpus >= placement.cards]
            out.append(
                option(
                    placement,
                    e,
                    have=have,
                    gpu_class=pool.gpu_class,
                    gpus_per_node=placement.cards,
                    hosts=len(hosts),
                    free_now=any(h.free >= placement.cards for h in hosts),
                    max_context=llamacpp.max_context(
                        layout, placement, have, None, model.max_context, extra=extra
                    ),
                )
            )
            continue
        k = pool.max_gpus
        hosts = [h for h in pool.hosts if h.gpus >= k]
        # Part on the cards, the rest in the node's RAM.
        partial = _partial(layout, n, k, have, context, extra, kv_type)
        if partial:
            placement, e = partial
            with_ram = [h for h in hosts if e.host.total <= ram_have(h)]
            if with_ram:
                host_have = min(ram_have(h) for h in with_ram)
                out.append(
                    option(
                        placement,
                        e,
                        have=have,
                        gpu_class=pool.gpu_class,
                        gpus_per_node=k,
                        hosts=len(with_ram),
                        free_now=any(h.free >= k and e.host.total <= h.free_ram for h in with_ram),
                        host_bytes=e.host.total,
                        max_context=llamacpp.max_context(
                            layout, placement, have, host_have, model.max_context, extra=extra
                        ),
                    )
                )
            elif hosts:
                if any(h.ram for h in hosts):
                    why = (
                        f"the part in RAM needs {e.host.total / GIB:.1f} GB, more than "
                        f"{settings.host_share:.0%} of any {where} node's RAM"
                    )
                else:
                    why = "the fleet file gives these nodes no ram_gb, so RAM cannot be counted on"
                rejected.append(
                    Rejection(art.name, "llama.cpp", f"{k} × {where} with the rest in RAM", why)
                )
        # Every layer on the cards of several nodes of one fabric, over RPC.
        if is_mig(pool.gpu_class):
            continue
        for fabric, members in pool.fabrics().items():
            group = [h for h in members if h.gpus >= k]
            if not fabric or len(group) < 2:
                continue
            for m in range(2, len(group) + 1):
                placement = llamacpp.Placement(n + 1, m * k, kv_type=kv_type)
                e = llamacpp.estimate(layout, placement, context, extra)
                worst = e.worst_card()
                assert worst is not None
                if worst.total > have:
                    continue
                ready = [h for h in group if h.free >= k]
                chosen = (ready if len(ready) >= m else group)[:m]
                out.append(
                    option(
                        placement,
                        e,
                        have=have,
                        gpu_class=pool.gpu_class,
                        fabric=fabric,
                        gpus_per_node=k,
                        nodes=m,
                        hosts=len(group),
                        free_now=len(ready) >= m,
                        node_ids=tuple(h.node_id for h in chosen),
                        max_context=llamacpp.max_context(
                            layout, placement, have, None, model.max_context, extra=extra
                        ),
                    )
                )
                break
    return out


def _partial(
    layout: GgufLayout, n: int, k: int, have: int, context: int, extra: int, kv_type: str = "f16"
) -> tuple[llamacpp.Placement, llamacpp.Estimate] | None:
    """A MoE: every layer on the cards but the experts of the first K layers in RAM, the fewest
    K that fits (attention and the shared weights stay on the cards, where they are read every
    token). Otherwise, or when even all experts in RAM do not fit: the last N layers on the
    cards and the rest in RAM, the most N that fits."""

    def ok(p: llamacpp.Placement) -> llamacpp.Estimate | None:
        e = llamacpp.estimate(layout, p, context, extra)
        worst = e.worst_card()
        return e if worst is not None and worst.total <= have else None

    if any(layout.expert_bytes):
        for cpu_moe in range(1, n + 1):
            p = llamacpp.Placement(n + 1, k, cpu_moe, kv_type)
            e = ok(p)
            if e:
                return p, e
    for ngl in range(n, 0, -1):
        p = llamacpp.Placement(ngl, k, kv_type=kv_type)
        e = ok(p)
        if e:
            return p, e
    return None
