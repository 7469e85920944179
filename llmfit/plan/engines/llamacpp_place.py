"""Where llama-server can run a GGUF file on a fleet, and what each device holds there.

On a CPU; every layer on 1…N cards of a node (split by layer count, which llama.cpp pipelines);
when a node's cards cannot hold it all, a MoE's experts (`--n-cpu-moe`, the fewest layers' worth)
or else the first layers (`-ngl`, the most that fit) kept in the node's RAM; every layer on the
cards of several nodes of one fabric over RPC; and, where the model fits fewer cards than a node
has, independent servers filling the node, each with its own cards and port. What each device
holds is llamacpp_sizes'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from llmfit.plan import speed as speeds
from llmfit.plan.artifact import GgufLayout
from llmfit.plan.engines import Job
from llmfit.plan.engines import llamacpp_sizes as sizes
from llmfit.plan.engines.llamacpp_launch import LlamaCppLaunch
from llmfit.plan.engines.llamacpp_options import LlamaCppOptions
from llmfit.plan.engines.llamacpp_serving import serving_of, speed_of, step_inputs
from llmfit.plan.engines.serving import pinned_cards, pinned_text, pinned_where
from llmfit.plan.fleet import GIB
from llmfit.plan.layout import Card, Layout
from llmfit.plan.model import Model
from llmfit.plan.options import NO_RAM, Option, PerCard, Rejection
from llmfit.plan.pools import ClassPool, Host
from llmfit.plan.settings import Pins, PlanSettings

# How an option of a placement is made (LlamaCpp._options' `option`).
_Make = Callable[..., "Option[LlamaCppLaunch]"]


def _longest(model: Model, context: int) -> int | None:
    """The longest --ctx-size an option may say it holds: the trained context, or the one asked
    past it, which the command runs (llama.cpp takes a --ctx-size past n_ctx_train with a
    warning). Capped at the trained one, an option said "max context 8,192" over a command of
    --ctx-size 65536 that it held."""
    return max(model.max_context, context) if model.max_context else None


def variants(settings: PlanSettings) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """The f16 cache llama-server keeps by default and, as a what-if, its 8-bit cache: q8_0 keys
    and values (a quantised V cache needs flash attention, which the command turns on)."""
    q8 = ("q8_0", "q8_0 KV cache", ("--cache-type-k", "q8_0", "--cache-type-v", "q8_0"))
    stored = ("f16", None, ())
    if settings.options(LlamaCppOptions).cache_type == "q8_0":
        return [q8]
    if settings.precision == "stored":
        return [stored]
    if settings.precision == "kv-fp8":
        return [q8]
    return [stored, q8] if settings.precision == "all" else [stored]


class Placing:
    """The placements of a job's GGUF file on its fleet, as llama-server runs them (the engine's
    planning half: LlamaCpp plans with it)."""

    key: str

    def _options(
        self, job: Job, rejected: list[Rejection], kv_type: str
    ) -> list[Option[LlamaCppLaunch]]:
        art, model, settings, context = job.artifact, job.model, job.settings, job.context
        longest_ctx = _longest(model, context)
        layout = art.layout
        assert layout is not None
        out: list[Option[LlamaCppLaunch]] = []
        bits = art.bits_per_weight(model.params)
        extra = art.projector_bytes
        share = settings.host_share
        est = _estimator(settings)

        def ram_have(h: Host) -> int:
            return int(h.ram * share)

        def option(
            p: sizes.Placement, e: sizes.Estimate, visible: int = 0, **kw: Any
        ) -> Option[LlamaCppLaunch]:
            card = e.worst_card()
            assert card is not None
            lay = kw.get("layout", Layout())
            # With -np N given, llama-server splits --ctx-size evenly over its N slots: a slot
            # holds n_ctx / n_seq tokens (llama_context's n_ctx_seq, the cache not unified). Its
            # own auto slots share one unified cache, where one sequence may take it all.
            slots = settings.options(LlamaCppOptions).parallel or 1
            if slots > 1 and "max_context" in kw:
                kw["max_context"] //= slots
            inputs = step_inputs(
                model, layout, kw["card"].spec, p, lay, context,
                card.kv_cache // sizes.pad(context), art.quant, est.n_ubatch,
            )  # fmt: skip
            kw["speed"] = speeds.estimate(inputs) if inputs else None
            kw["serving"] = serving_of(inputs, lay, est.n_seq, context, settings)
            return Option(
                artifact=art,
                engine=self.key,
                per_card=PerCard(
                    card.weights, card.kv_cache, runtime=card.overhead, activations=card.compute
                ),
                bits_per_weight=bits,
                context=context // slots,
                launch=LlamaCppLaunch(
                    ctx_size=context,
                    gpu_layers=p.gpu_layers,
                    tensor_split=(1,) * p.cards if p.cards > 1 else (),
                    cpu_moe_layers=p.cpu_moe,
                    cache_type=kv_type,
                    model_path=art.path if settings.local_paths else None,
                    options=settings.options(LlamaCppOptions),
                    visible=visible,
                    given=settings.given,
                ),
                share=settings.gpu_memory_utilization,
                kv_tokens=sizes.pad(context),
                # llama-server's pool is --ctx-size cells: one sequence of all of it, or one a
                # slot of its share, on each server.
                held=float(lay.replicas * slots),
                **kw,
            )

        # CPU: every node's RAM is a candidate, GPU nodes' too; not where pins ask for cards.
        pins = settings.pins
        # --tp 1 and --no-ep are every llama.cpp layout: only cards and servers narrow them.
        narrowed = bool(pins.pp or pins.dp or pins.gpus)
        on_cpu = not narrowed
        cpu = sizes.Placement(0, 0, kv_type=kv_type)
        e = est.estimate(layout, cpu, context, extra)
        need = e.host.total
        rams = [Host(nd, 0, 0) for nd in job.fleet.nodes if nd.ram_bytes > 0]
        fitting = [h for h in rams if need <= ram_have(h)]
        if fitting and on_cpu:
            # The roomiest node: its RAM × the host's share is what the plan counts on.
            host = max(fitting, key=lambda h: h.ram)
            have = ram_have(host)
            out.append(
                Option(
                    artifact=art,
                    engine=self.key,
                    layout=Layout(),
                    card=None,
                    per_card=PerCard(e.host.weights, e.host.kv_cache, activations=e.host.compute),
                    have=have,
                    share=share,
                    ram=host.ram,
                    launch=LlamaCppLaunch(
                        ctx_size=context,
                        gpu_layers=0,
                        cache_type=kv_type,
                        model_path=art.path if settings.local_paths else None,
                        options=settings.options(LlamaCppOptions),
                    ),
                    hosts=sum(h.count for h in fitting),
                    free_now=any(need <= h.free_ram for h in fitting),
                    bits_per_weight=bits,
                    context=context,
                    max_context=est.max_context(
                        layout, cpu, have, None, longest_ctx, cpu=True, extra=extra
                    ),
                    held=1.0,
                    speed=speed_of(
                        model,
                        layout,
                        None,
                        cpu,
                        Layout(),
                        context,
                        e.host.kv_cache // sizes.pad(context),
                        art.quant,
                        est.n_ubatch,
                    ),
                )
            )
        elif rams and on_cpu:
            have = max(ram_have(h) for h in rams)
            rejected.append(Rejection(art.name, self.key, "CPU", "", need=need, have=have))

        opts = settings.options(LlamaCppOptions)
        if opts.n_gpu_layers == 0 and not opts.rpc_hosts:
            return out  # the command runs on the CPU alone
        for pool in job.pools:
            refused: list[Rejection] = []
            if _exact(settings):
                out += self._exact(job, pool, refused, kv_type, option, ram_have, est)
            elif narrowed:
                out += self._pinned(job, pool, refused, kv_type, option, ram_have, est)
            else:
                out += self._on_pool(job, pool, refused, kv_type, option, ram_have, est)
            rejected += [replace(r, gpu_class=pool.gpu_class) for r in refused]
        return out

    def _on_pool(
        self,
        job: Job,
        pool: ClassPool,
        rejected: list[Rejection],
        kv_type: str,
        option: _Make,
        ram_have: Callable[[Host], int],
        est: _Estimator,
    ) -> list[Option[LlamaCppLaunch]]:
        art, model, settings, context = job.artifact, job.model, job.settings, job.context
        longest_ctx = _longest(model, context)
        layout = art.layout
        assert layout is not None  # plan() plans no GGUF whose header was not read
        n = layout.layers
        extra = art.projector_bytes
        # llama.cpp takes no share of a card as a flag: what the plan keeps back (10% by
        # default) is the margin, as --fit's own target of 1 GiB free a card is.
        have = int(pool.card_bytes * settings.gpu_memory_utilization)
        cls = pool.gpu_class
        card = Card(cls, pool.card_bytes, pool.override)
        out: list[Option[LlamaCppLaunch]] = []
        # Every layer and the output layer on k cards of one node, by layer count.
        full = None
        for k in range(1, pool.max_gpus + 1):
            placement = sizes.Placement(n + 1, k, kv_type=kv_type)
            e = est.estimate(layout, placement, context, extra)
            worst = e.worst_card()
            assert worst is not None
            if worst.total <= have:
                full = (placement, e)
                break
            rejected.append(
                Rejection(art.name, self.key, f"{k} × {cls}", "", need=worst.total, have=have)
            )
        if full:
            placement, e = full
            k = placement.cards
            longest = est.max_context(layout, placement, have, None, longest_ctx, extra=extra)
            where_ = pool.seats(k, 1)
            out.append(
                option(
                    placement, e, layout=Layout(1, k, 1, False, 1, 1), card=card, have=have,
                    hosts=where_.hosts, free_now=where_.free_now(1), max_context=longest,
                    visible=k if k < pool.max_gpus and not pool.mig else 0,
                )
            )  # fmt: skip
            servers = pool.max_gpus // k
            if servers > 1:
                # Independent servers filling the node, each on its own cards and port.
                fill = pool.seats(k * servers, 1)
                out.append(
                    option(
                        placement, e, layout=Layout(1, k, servers, False, 1, servers), card=card,
                        have=have, hosts=fill.hosts, free_now=fill.free_now(1),
                        max_context=longest,
                    )
                )  # fmt: skip
            return out
        k = pool.max_gpus
        hosts = [h for h in pool.hosts if h.gpus >= k]
        # Part on the cards, the rest in the node's RAM.
        partial = _partial(layout, n, k, have, context, extra, kv_type, est)
        if partial:
            placement, e = partial
            with_ram = [h for h in hosts if e.host.total <= ram_have(h)]
            if with_ram:
                host_have = min(ram_have(h) for h in with_ram)
                out.append(
                    option(
                        placement,
                        e,
                        layout=Layout(1, k, 1, False, 1, 1),
                        card=card,
                        have=have,
                        hosts=sum(h.count for h in with_ram),
                        free_now=any(h.free >= k and e.host.total <= h.free_ram for h in with_ram),
                        host_bytes=e.host.total,
                        max_context=est.max_context(
                            layout,
                            placement,
                            have,
                            host_have,
                            longest_ctx,
                            extra=extra,
                        ),
                    )
                )
            elif hosts:
                if any(h.ram for h in hosts):
                    why = (
                        f"the part in RAM needs {e.host.total / GIB:.1f} GiB, more than "
                        f"{settings.host_share:.0%} of any {cls} node's RAM"
                    )
                else:
                    why = NO_RAM
                rejected.append(
                    Rejection(art.name, self.key, f"{k} × {cls} with the rest in RAM", why)
                )
        if pool.mig:
            return out
        # Every layer on the cards of several nodes of one fabric, over RPC: the fewest nodes
        # that hold it, tried up to one node a layer (never a node at a time over a whole fleet).
        for fabric in pool.fabrics():
            if not fabric:
                continue
            total = pool.seats(k, 1, fabric).hosts
            if total < 2:
                continue
            for m in range(2, min(total, n + 1) + 1):
                placement = sizes.Placement(n + 1, m * k, kv_type=kv_type)
                e = est.estimate(layout, placement, context, extra)
                worst = e.worst_card()
                assert worst is not None
                if worst.total > have:
                    continue
                where_ = pool.seats(k, m, fabric)
                out.append(
                    option(
                        placement,
                        e,
                        layout=Layout(1, m * k, 1, False, m, 1),
                        card=card,
                        have=have,
                        fabric=fabric,
                        hosts=where_.hosts,
                        free_now=where_.free_now(m),
                        node_ids=where_.node_ids,
                        max_context=est.max_context(
                            layout, placement, have, None, longest_ctx, extra=extra
                        ),
                    )
                )
                break
        return out

    def _pinned(
        self,
        job: Job,
        pool: ClassPool,
        rejected: list[Rejection],
        kv_type: str,
        option: _Make,
        ram_have: Callable[[Host], int],
        est: _Estimator,
    ) -> list[Option[LlamaCppLaunch]]:
        """The layouts the pins name, as llama.cpp means each: --pp and --gpus are the cards a
        server's layers are split over (its layer split is its pipeline), --dp the independent
        servers on a node, each on its own cards and port; a server on more cards than a node
        has spans the nodes of a fabric over RPC. Each pinned split is sized whole on its cards,
        and, where that does not fit a single server, with the rest in the node's RAM."""
        art, model, settings, context = job.artifact, job.model, job.settings, job.context
        longest_ctx = _longest(model, context)
        pins = settings.pins
        layout = art.layout
        assert layout is not None
        n = layout.layers
        extra = art.projector_bytes
        have = int(pool.card_bytes * settings.gpu_memory_utilization)
        cls, width = pool.gpu_class, pool.max_gpus
        card = Card(cls, pool.card_bytes, pool.override)
        before = len(rejected)
        out: list[Option[LlamaCppLaunch]] = []
        # (cards a server, servers) on one node, as the pins allow.
        shapes = [
            (k, servers)
            for k in range(1, width + 1)
            for servers in range(1, width // k + 1)
            if pins.allows(Layout(1, k, servers, False, 1, servers))
        ]
        for k in sorted({k for k, _ in shapes}):
            placement = sizes.Placement(n + 1, k, kv_type=kv_type)
            e = est.estimate(layout, placement, context, extra)
            worst = e.worst_card()
            assert worst is not None
            if worst.total > have:
                rejected.append(
                    Rejection(art.name, self.key, f"{k} × {cls}{Layout(1, k).label()}", "",
                              need=worst.total, have=have)
                )  # fmt: skip
                if (k, 1) in shapes and not pool.mig:
                    out += self._partial_on(job, pool, k, have, rejected, kv_type, option,
                                            ram_have, est)  # fmt: skip
                continue
            longest = est.max_context(layout, placement, have, None, longest_ctx, extra=extra)
            for servers in sorted(s for kk, s in shapes if kk == k):
                seats = pool.seats(k * servers, 1)
                out.append(
                    option(
                        placement, e, layout=Layout(1, k, servers, False, 1, servers), card=card,
                        have=have, hosts=seats.hosts, free_now=seats.free_now(1),
                        max_context=longest,
                    )
                )  # fmt: skip
        # One server over the cards of several nodes of a fabric (RPC), every card of each.
        for fabric in pool.fabrics() if not pool.mig and width else ():
            if not fabric:
                continue
            total = pool.seats(width, 1, fabric).hosts
            for m in range(2, min(total, n + 1) + 1):
                lay = Layout(1, m * width, 1, False, m, 1)
                if not pins.allows(lay):
                    continue
                placement = sizes.Placement(n + 1, m * width, kv_type=kv_type)
                e = est.estimate(layout, placement, context, extra)
                worst = e.worst_card()
                assert worst is not None
                if worst.total > have:
                    rejected.append(
                        Rejection(art.name, self.key, f"{m} nodes × {width} {cls} on {fabric}"
                                  f"{lay.label()}", "", need=worst.total, have=have, nodes=m)
                    )  # fmt: skip
                    continue
                seats = pool.seats(width, m, fabric)
                out.append(
                    option(
                        placement, e, layout=lay, card=card, have=have, fabric=fabric,
                        hosts=seats.hosts, free_now=seats.free_now(m), node_ids=seats.node_ids,
                        max_context=est.max_context(layout, placement, have, None,
                                                    longest_ctx, extra=extra),
                    )
                )  # fmt: skip
        if not out and len(rejected) == before:
            rejected.append(
                Rejection(art.name, self.key, pinned_where(pins, cls), _pin_rule(pins, pool, n))
            )
        return out

    def _partial_on(
        self, job: Job, pool: ClassPool, k: int, have: int, rejected: list[Rejection],
        kv_type: str, option: _Make, ram_have: Callable[[Host], int], est: _Estimator,
    ) -> list[Option[LlamaCppLaunch]]:  # fmt: skip
        """A server on k cards of a node with what they cannot hold in the node's RAM (the
        experts of the first layers, else the first layers), where a node has the RAM."""
        art, model, settings, context = job.artifact, job.model, job.settings, job.context
        longest_ctx = _longest(model, context)
        layout = art.layout
        assert layout is not None
        n = layout.layers
        partial = _partial(layout, n, k, have, context, art.projector_bytes, kv_type, est)
        if not partial:
            return []
        placement, e = partial
        hosts = [h for h in pool.hosts if h.gpus >= k]
        with_ram = [h for h in hosts if e.host.total <= ram_have(h)]
        if not with_ram:
            why = NO_RAM if not any(h.ram for h in hosts) else (
                f"the part in RAM needs {e.host.total / GIB:.1f} GiB, more than "
                f"{settings.host_share:.0%} of any {pool.gpu_class} node's RAM"
            )  # fmt: skip
            rejected.append(
                Rejection(art.name, self.key, f"{k} × {pool.gpu_class} with the rest in RAM", why)
            )
            return []
        host_have = min(ram_have(h) for h in with_ram)
        return [
            option(
                placement, e, layout=Layout(1, k, 1, False, 1, 1),
                card=Card(pool.gpu_class, pool.card_bytes, pool.override), have=have,
                hosts=sum(h.count for h in with_ram),
                free_now=any(h.free >= k and e.host.total <= h.free_ram for h in with_ram),
                host_bytes=e.host.total,
                max_context=est.max_context(layout, placement, have, host_have, longest_ctx,
                                            extra=art.projector_bytes),
            )
        ]  # fmt: skip

    def _exact(
        self,
        job: Job,
        pool: ClassPool,
        rejected: list[Rejection],
        kv_type: str,
        option: _Make,
        ram_have: Callable[[Host], int],
        est: _Estimator,
    ) -> list[Option[LlamaCppLaunch]]:
        """The one placement a command names, on each node of the class that could take it:
        llama-server uses every card it sees unless --tensor-split says how many."""
        art, model, settings, context = job.artifact, job.model, job.settings, job.context
        longest_ctx = _longest(model, context)
        opts = settings.options(LlamaCppOptions)
        layout = art.layout
        assert layout is not None  # plan() plans no GGUF whose header was not read
        n = layout.layers
        nodes = 1 + len(opts.rpc_hosts)
        per_node = (settings.pins.gpus or 0) // nodes or pool.max_gpus
        if pool.mig:
            per_node = 1
        ngl = n + 1 if opts.n_gpu_layers is None else min(opts.n_gpu_layers, n + 1)
        # --n-cpu-moe keeps a layer's experts in RAM; a dense model has none to keep.
        cpu_moe = min(opts.n_cpu_moe or 0, n) if any(layout.expert_bytes) else 0
        placement = sizes.Placement(ngl, per_node * nodes, cpu_moe, kv_type)
        e = est.estimate(layout, placement, context, art.projector_bytes)
        worst = e.worst_card()
        assert worst is not None
        have = int(pool.card_bytes * settings.gpu_memory_utilization)
        lay = Layout(1, per_node * nodes, 1, False, nodes, 1)
        fabric = next((f for f in pool.fabrics() if f), "") if nodes > 1 else ""
        members = pool.fabrics()[fabric] if fabric else pool.hosts
        where_ = pool.seats(per_node, nodes, fabric or None)
        host_part = e.host.total if ngl <= n or cpu_moe else 0
        able = [h for h in members if h.gpus >= per_node and host_part <= ram_have(h)]
        fits = worst.total <= have and where_.hosts >= nodes and (not host_part or able)
        if not fits:
            here = (
                f"{nodes} nodes × {per_node} {pool.gpu_class}"
                if nodes > 1
                else (f"{per_node} × {pool.gpu_class}")
            )
            rejected.append(
                Rejection(art.name, self.key, here, "", need=worst.total, have=have,
                          max_context=est.max_context(layout, placement, have, None,
                                                      longest_ctx, extra=art.projector_bytes),
                          nodes=nodes)
            )  # fmt: skip
            return []
        return [
            option(
                placement, e, layout=lay, have=have,
                card=Card(pool.gpu_class, pool.card_bytes, pool.override),
                fabric=fabric or None, hosts=where_.hosts, free_now=where_.free_now(nodes),
                node_ids=where_.node_ids if nodes > 1 else (), host_bytes=host_part,
                max_context=est.max_context(layout, placement, have,
                                            min(ram_have(h) for h in able) if host_part else None,
                                            longest_ctx, extra=art.projector_bytes),
                visible=per_node if nodes == 1 and not opts.split and per_node < pool.max_gpus
                else 0,
            )
        ]  # fmt: skip


def pin_refusal(pins: Pins) -> str | None:
    """A pin llama.cpp has no meaning for, refused in one sentence; None for those it has."""
    if pins.tp is not None and pins.tp > 1:
        return (
            f"--tp {pins.tp}: llama.cpp splits a GGUF file over cards by layers (--tensor-split), "
            f"not by tensor parallelism; --gpus {pins.tp} (or --pp {pins.tp}) puts its layers on "
            f"{pins.tp} cards"
        )
    if pins.ep:
        return (
            "--ep: llama.cpp has no expert parallelism; a mixture of experts' experts are split "
            "over cards by layer with the rest, or kept in RAM (--n-cpu-moe)"
        )
    return None


def _pin_rule(pins: Pins, pool: ClassPool, layers: int) -> str:
    """Why no llama.cpp layout on this class of cards has the pinned sizes."""
    need = pinned_cards(pins)
    width = pool.max_gpus
    if pins.pp and pins.pp > layers + 1:
        return f"{pins.pp} cards are more than the model's {layers} layers and its output layer"
    if pool.mig and need > 1:
        return "a MIG instance cannot be joined with others, on its node or across nodes"
    if need > width:
        if not any(f and sum(h.count for h in hs) > 1 for f, hs in pool.fabrics().items()):
            return (
                f"{need} cards are more than a {pool.gpu_class} node's {width}, and these nodes "
                "have no fabric for llama.cpp's RPC across nodes: give them one (fabric = "
                '"ib0" in a fleet file; inline, @ib0 as in 2x8xh100-80g@ib0)'
            )
        return (
            f"{need} cards are more than a {pool.gpu_class} node's {width}; across nodes "
            "llama.cpp runs one server over every card of each node (RPC), not servers"
        )
    return f"no llama.cpp layout on {pool.gpu_class} is {pinned_text(pins)}"


def _partial(
    layout: GgufLayout,
    n: int,
    k: int,
    have: int,
    context: int,
    extra: int,
    kv_type: str,
    est: _Estimator,
) -> tuple[sizes.Placement, sizes.Estimate] | None:
    """A MoE: every layer on the cards but the experts of the first K layers in RAM, the fewest
    K that fits (attention and the shared weights stay on the cards, where they are read every
    token). Otherwise, or when even all experts in RAM do not fit: the last N layers on the
    cards and the rest in RAM, the most N that fits."""

    def ok(p: sizes.Placement) -> sizes.Estimate | None:
        e = est.estimate(layout, p, context, extra)
        worst = e.worst_card()
        return e if worst is not None and worst.total <= have else None

    if any(layout.expert_bytes):
        for cpu_moe in range(1, n + 1):
            p = sizes.Placement(n + 1, k, cpu_moe, kv_type)
            e = ok(p)
            if e:
                return p, e
    for ngl in range(n, 0, -1):
        p = sizes.Placement(ngl, k, kv_type=kv_type)
        e = ok(p)
        if e:
            return p, e
    return None


@dataclass(frozen=True)
class _Estimator:
    """llamacpp_sizes' estimate and max_context at the slots and ubatch a plan is for."""

    n_seq: int
    n_ubatch: int
    # One cache the slots share (llama-server's auto slots), or one each (--parallel given).
    unified: bool = True

    def estimate(
        self, layout: GgufLayout, placement: sizes.Placement, context: int, extra: int = 0
    ) -> sizes.Estimate:
        return sizes.estimate(
            layout, placement, context, extra, n_seq=self.n_seq, n_ubatch=self.n_ubatch,
            unified=self.unified,
        )  # fmt: skip

    def max_context(
        self,
        layout: GgufLayout,
        placement: sizes.Placement,
        card_have: int,
        host_have: int | None,
        trained: int | None,
        cpu: bool = False,
        extra: int = 0,
    ) -> int:
        return sizes.max_context(
            layout, placement, card_have, host_have, trained, cpu, extra,
            n_seq=self.n_seq, n_ubatch=self.n_ubatch, unified=self.unified,
        )  # fmt: skip


def _estimator(settings: PlanSettings) -> _Estimator:
    opts = settings.options(LlamaCppOptions)
    return _Estimator(
        opts.parallel or sizes.N_SEQ, opts.ubatch or sizes.N_UBATCH, opts.parallel is None
    )


def _exact(settings: PlanSettings) -> bool:
    """Whether a command fixed the placement (`llmfit check`): its -ngl, -ts, --n-cpu-moe, --rpc."""
    o = settings.options(LlamaCppOptions)
    return o.n_gpu_layers is not None or o.n_cpu_moe is not None or bool(o.split or o.rpc_hosts)
