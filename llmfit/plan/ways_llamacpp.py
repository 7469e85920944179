"""The ways llama-server could run a GGUF file: CPU, cards, part in RAM, RPC, and its KV what-if."""

from __future__ import annotations

from dataclasses import replace

from llmfit.plan.artifact import Artifact, GgufLayout
from llmfit.plan.engines import llamacpp
from llmfit.plan.fleet import GIB, Fleet, PoolNode, is_mig
from llmfit.plan.model import Model
from llmfit.plan.options import Option, PerCard, Rejection
from llmfit.plan.pools import ClassPool, Host, first_ids, host_count
from llmfit.plan.settings import PlanSettings


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


def llamacpp_options(
    art: Artifact,
    model: Model,
    fleet: Fleet,
    pools: list[ClassPool],
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

    def ram_have(h: Host | PoolNode) -> int:
        ram = h.ram if isinstance(h, Host) else h.ram_bytes
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
                hosts=sum(nd.count for nd in fitting),  # counts (issue 17): was len(fitting)
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
                    hosts=host_count(hosts),  # counts (issue 17): was len(hosts)
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
                        hosts=host_count(with_ram),  # counts (issue 17): was len(with_ram)
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
            # Counts (issue 17): host_count(x) is what len(x) was, first_ids(x, m) x[:m]'s ids.
            # A pool of 10**12 nodes must not be tried node by node: past ceil((n + 1) / k) nodes
            # every card holds at most one layer, so each further node adds only cards that hold
            # nothing and the worst card stays as it was; nothing fits there that did not before.
            if not fabric or host_count(group) < 2:
                continue
            for m in range(2, min(host_count(group), -(-(n + 1) // k)) + 1):
                placement = llamacpp.Placement(n + 1, m * k, kv_type=kv_type)
                e = llamacpp.estimate(layout, placement, context, extra)
                worst = e.worst_card()
                assert worst is not None
                if worst.total > have:
                    continue
                ready = [h for h in group if h.free >= k]
                chosen = first_ids(ready if host_count(ready) >= m else group, m)
                out.append(
                    option(
                        placement,
                        e,
                        have=have,
                        gpu_class=pool.gpu_class,
                        fabric=fabric,
                        gpus_per_node=k,
                        nodes=m,
                        hosts=host_count(group),
                        free_now=host_count(ready) >= m,
                        node_ids=chosen,
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


def llamacpp_ways(
    art: Artifact,
    model: Model,
    fleet: Fleet,
    pools: list[ClassPool],
    context: int,
    settings: PlanSettings,
    rejected: list[Rejection],
) -> list[Option]:
    """Every way llama-server could run the file, with its f16 cache and its q8_0 what-if; the
    refusals, each tagged with the what-if it was refused for, go to `rejected`."""
    found: list[Option] = []
    for kv_type, what_if, flags in llamacpp_variants(settings):
        refused: list[Rejection] = []
        opts = llamacpp_options(art, model, fleet, pools, context, settings, refused, kv_type)
        rejected.extend(replace(r, what_if=what_if) for r in refused)
        found += [
            replace(o, what_if=what_if, engine_flags=flags, changes=int(bool(what_if)))
            for o in opts
        ]
    return found
