"""llama.cpp, the engine: the ways llama-server can run a GGUF file, and the lines that start it.

On a CPU; every layer on 1…N cards of a node (split by layer count, which llama.cpp pipelines);
when a node's cards cannot hold it all, a MoE's experts (`--n-cpu-moe`, the fewest layers' worth)
or else the first layers (`-ngl`, the most that fit) kept in the node's RAM; every layer on the
cards of several nodes of one fabric over RPC; and, where the model fits fewer cards than a node
has, independent servers filling the node, each with its own cards and port. What each device
holds is llamacpp_sizes'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llmfit.plan import cards, load
from llmfit.plan import speed as speeds
from llmfit.plan.artifact import Artifact, GgufLayout
from llmfit.plan.credentials import Vault
from llmfit.plan.engines import (
    NO_ENV,
    Explanation,
    Found,
    Image,
    Job,
    Part,
    Request,
    knobs,
    llamacpp_speed,
)
from llmfit.plan.engines import llamacpp_sizes as sizes
from llmfit.plan.engines.llamacpp_options import LlamaCppOptions
from llmfit.plan.engines.serving import pinned_cards, pinned_text, pinned_where
from llmfit.plan.fleet import GIB
from llmfit.plan.launch import Command, Given
from llmfit.plan.layout import Card, Layout, LayoutSpace
from llmfit.plan.model import AttentionCharge, Model, Shape
from llmfit.plan.options import NO_RAM, Option, PerCard, Rejection
from llmfit.plan.pools import ClassPool, Host
from llmfit.plan.settings import Pins, PlanSettings

RPC_PORT = 50052  # rpc-server's default port (tools/rpc/README.md)
PORT = 8080  # llama-server's default; each further server on a node takes the next one
# llama.cpp's server images (docs/docker.md, .devops/cuda.Dockerfile and cpu.Dockerfile, target
# `server`): ENTRYPOINT /app/llama-server, a HEALTHCHECK on :8080/health. They hold llama-server
# only, built without GGML_RPC, so the RPC launch across nodes has no image. llmfit does not model
# llama.cpp releases, so the floating tags are named.
IMAGE_CUDA = "ghcr.io/ggml-org/llama.cpp:server-cuda"
IMAGE_CPU = "ghcr.io/ggml-org/llama.cpp:server"


@dataclass(frozen=True)
class LlamaCppLaunch:
    """What a llama-server line of an option is made of, beside its layout."""

    ctx_size: int
    # --n-gpu-layers (n_layer + 1 is every layer and the output layer), 0 on a CPU.
    gpu_layers: int
    # The equal --tensor-split across a server's cards (empty on one card).
    tensor_split: tuple[int, ...] = ()
    cpu_moe_layers: int = 0
    # --cache-type-k/-v: "f16" (the default) or "q8_0".
    cache_type: str = "f16"
    # The file on this machine to pass as -m, where a local path was asked for (--local-paths,
    # or a repository that is a local directory); None: -hf REPO:QUANT, which works on any node.
    model_path: str | None = None
    # The knobs the user set (llamacpp_options.py); those not printed from the placement are
    # passed on as given.
    options: LlamaCppOptions = LlamaCppOptions()
    # A command being checked, which the launch runs as given (llmfit check).
    given: Given | None = None
    # How many cards one server may see, where its node may have more: llama-server spreads the
    # layers over every card it sees, so a server planned on k cards of a wider node is shown
    # only its own (CUDA_VISIBLE_DEVICES); 0 where it takes every card of its node.
    visible: int = 0


# The variable that shows a process only some of a node's cards (CUDA's; ROCm's HIP runtime
# honours it too).
_VISIBLE = "CUDA_VISIBLE_DEVICES"


# How an option of a placement is made (LlamaCpp._options' `option`).
_Make = Callable[..., "Option[LlamaCppLaunch]"]


def _longest(model: Model, context: int) -> int | None:
    """The longest --ctx-size an option may say it holds: the trained context, or the one asked
    past it, which the command runs (llama.cpp takes a --ctx-size past n_ctx_train with a
    warning). Capped at the trained one, an option said "max context 8,192" over a command of
    --ctx-size 65536 that it held."""
    return max(model.max_context, context) if model.max_context else None


def _cards(first: int, count: int) -> str:
    """ "0,1": the indices of `count` cards from `first`."""
    return ",".join(str(c) for c in range(first, first + count))


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


def in_ram(o: Option[LlamaCppLaunch]) -> str:
    """What an option keeps in the host's RAM: " + experts of 19 layers in RAM"."""
    launch = o.launch
    layout = o.artifact.layout
    if launch.cpu_moe_layers:
        return f" + experts of {launch.cpu_moe_layers} layers in RAM"
    if layout and launch.gpu_layers == layout.layers:
        # Every repeating layer on the card, only the output layer in RAM: "+ 0 of 32 layers in
        # RAM" read as if none were on the card (issue 34).
        return f", all {layout.layers} layers on the card"
    if layout and 0 < launch.gpu_layers < layout.layers:
        return f" + {layout.layers - launch.gpu_layers} of {layout.layers} layers in RAM"
    return ""


def where(o: Option[LlamaCppLaunch]) -> str:
    """Where it runs, in the grammar of every label (Layout.short): llama.cpp's layer split over
    k cards is its pipeline ("pp4"; llama.cpp logs "pipeline parallelism enabled"), its
    independent servers data-parallel copies ("dp4"), then what stays in the host's RAM."""
    if o.cpu:
        return "CPU"
    lay = o.layout
    if lay.nodes > 1:
        return f"{lay.nodes} nodes × {lay.cards_per_node} {o.gpu_class} on {o.fabric}{lay.label()}"
    return f"{lay.cards} × {o.gpu_class}{lay.label()}{in_ram(o)}"


class LlamaCpp:
    key = "llama.cpp"
    name = "llama.cpp"
    programs = ("llama-server",)
    # The layer split over a node's cards is a pipeline (--tensor-split splits layers, not a
    # layer: llama.cpp's default split mode), its servers side by side are copies (each its own
    # process, cards and port), and over nodes the split reaches rpc-servers (--rpc). It has no
    # tensor or expert parallelism to launch.
    # llama-server takes any --ctx-size (its slots share it), past the trained one too.
    long_context_env: tuple[tuple[str, str], ...] = ()
    layouts = LayoutSpace(
        pipeline=True, data=True, replicas=True, across_nodes=frozenset({"pipeline"}), cpu=True
    )

    def runs(self, artifact: Artifact) -> bool:
        return artifact.format == "gguf"

    def plan(self, job: Job) -> Found:
        found = Found()
        if job.artifact.layout is None:
            found.rejected.append(
                Rejection(job.artifact.name, self.key, "any", "its header was not read")
            )
            return found
        refusal = pin_refusal(job.settings.pins)
        if refusal:
            found.rejected.append(Rejection(job.artifact.name, self.key, "any", refusal))
            return found
        for kv_type, what_if, flags in variants(job.settings):
            refused: list[Rejection] = []
            options = self._options(job, refused, kv_type)
            found.rejected += [replace(r, what_if=what_if) for r in refused]
            found.options += [
                replace(o, what_if=what_if, engine_flags=flags, changes=int(bool(what_if)))
                for o in options
            ]
        if any(o.nodes > 1 for o in found.options):
            # rpc-server has no authentication and runs what it is sent (tools/rpc/README.md:
            # "never run the RPC server on an open network"): issue 34 asked who can reach it.
            found.notes.append(
                f"llama.cpp across nodes: each worker's rpc-server -H 0.0.0.0 listens on every "
                f"address, with no authentication, and runs what it is sent: let only the head "
                f"reach port {RPC_PORT} (a firewall, or -H the worker's fabric address)"
            )
        return found

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
            inputs = _inputs(
                model, layout, kw["card"].spec, p, lay, context,
                card.kv_cache // sizes.pad(context), art.quant, est.n_ubatch,
            )  # fmt: skip
            kw["speed"] = speeds.estimate(inputs) if inputs else None
            kw["serving"] = _serving(inputs, lay, est, context, settings)
            return Option(
                artifact=art,
                engine=self.key,
                per_card=PerCard(card.weights, card.kv_cache, card.compute + card.overhead),
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
            have = max(ram_have(h) for h in fitting)
            out.append(
                Option(
                    artifact=art,
                    engine=self.key,
                    layout=Layout(),
                    card=None,
                    per_card=PerCard(e.host.weights, e.host.kv_cache, e.host.compute),
                    have=have,
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
                    speed=_speed(
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

    # -- launching ------------------------------------------------------------------------------

    def commands(
        self,
        option: Option[LlamaCppLaunch],
        repo_id: str,
        revision: str | None,
        *,
        ray: bool = False,
    ) -> list[Command]:
        o = option
        launch = o.launch
        art = o.artifact
        argv = ["llama-server"]
        if launch.model_path:
            # The first part of a split file: llama.cpp opens the others from its directory.
            argv += ["-m", launch.model_path]
            if art.projector:
                argv += ["--mmproj", art.projector]
        else:
            # By its tag, llama.cpp fetches the quant (every part, and the mmproj) into its own
            # cache on the node that runs it: a path of this machine's cache means nothing there.
            argv += ["-hf", f"{repo_id}:{art.quant}" if art.quant else repo_id]
        # Every value the plan relied on is explicit, so that llama.cpp's --fit (on by default)
        # and its defaults (ctx 0 = the trained context, -ngl auto) cannot change the plan.
        argv += ["--ctx-size", str(launch.ctx_size), "--n-gpu-layers", str(launch.gpu_layers)]
        if launch.tensor_split:
            argv += ["--tensor-split", ",".join(map(str, launch.tensor_split))]
        if launch.cpu_moe_layers:
            argv += ["--n-cpu-moe", str(launch.cpu_moe_layers)]
        lay = o.layout
        workers = o.node_ids[1:] if lay.nodes > 1 else ()
        if lay.nodes > 1:
            hosts = workers or tuple(f"<worker-{i}>" for i in range(1, lay.nodes))
            argv += ["--rpc", ",".join(f"{h}:{RPC_PORT}" for h in hosts)]
        argv += o.engine_flags
        argv += knobs.argv(launch.options)
        argv += ["--flash-attn", "on", "--host", "0.0.0.0"]
        if lay.replicas > 1:
            # One server a set of cards, each seeing only its own and listening on its own port.
            per = lay.pp
            return [
                Command(
                    "replica",
                    (*argv, "--port", str(PORT + i)),
                    env=((_VISIBLE, _cards(i * per, per)),),
                )
                for i in range(lay.replicas)
            ]
        argv += ["--port", str(PORT)]
        env: tuple[tuple[str, str], ...] = (
            ((_VISIBLE, _cards(0, launch.visible)),) if launch.visible else ()
        )
        secrets: tuple[tuple[int, str], ...] = ()
        if launch.given is not None:
            # A checked command is launched as the user wrote it (its -ngl, its --rpc hosts).
            argv, env, secrets = list(launch.given.argv), launch.given.env, launch.given.secrets
        if lay.nodes <= 1:
            return [Command("all", tuple(argv), env=env, secrets=secrets)]
        # The workers first: the head connects to them as it starts.
        rpc = ("rpc-server", "-H", "0.0.0.0", "-p", str(RPC_PORT))
        out = [Command("worker", rpc, h) for h in workers]
        out.append(
            Command("head", tuple(argv), o.node_ids[0] if o.node_ids else None, env, secrets)
        )
        return out

    def image(self, option: Option[LlamaCppLaunch]) -> Image:
        return Image(
            name=IMAGE_CPU if option.cpu else IMAGE_CUDA,
            entrypoint=("llama-server",),
            port=PORT,
            health="/health",
            # -hf: common.cpp fs_get_cache_directory(), $LLAMA_CACHE else ~/.cache/llama.cpp.
            download_cache="LLAMA_CACHE",
            download_dir=".cache/llama.cpp",
        )

    # -- explaining -----------------------------------------------------------------------------

    def attention(self, shape: Shape, context: int) -> tuple[AttentionCharge, ...]:
        # The summary of the model's kinds of layer in vLLM's terms: llama.cpp's own per-layer
        # cache is llamacpp_sizes.layer_kv_bytes, charged in each option's cards.
        from llmfit.plan.engines.vllm_kv import attention_charges

        return attention_charges(shape, context)

    def explain(self, option: Option[LlamaCppLaunch], model: Model) -> Explanation:
        o, c = option, option.per_card
        launch = o.launch
        layout = o.artifact.layout
        n = layout.layers if layout else model.layers
        if o.cpu:
            placed = "every layer in RAM"
        else:
            cards = len(launch.tensor_split) or 1
            offloaded = (
                "every layer and the output layer"
                if launch.gpu_layers > n
                else f"the last {launch.gpu_layers} of {n} layers"
            )
            placed = f"{offloaded}, split by count over {cards} card{'s' if cards > 1 else ''}"
            if launch.cpu_moe_layers:
                placed += f", the experts of the first {launch.cpu_moe_layers} layers in RAM"
            placed += "; token_embd stays in RAM"
        size = f"{o.artifact.bytes / GIB:.1f} GiB of {o.artifact.quant or '?'}"
        parts = [
            Part("weights", c.weights, f"{size}: {placed}"),
            Part(
                "KV cache",
                c.kv_cache,
                f"{o.context:,} cells (padded to 256) of the layers it holds",
            ),
            Part("overhead", c.overhead, "compute buffer for one ubatch, and the runtime"),
        ]
        if o.host_bytes and not o.cpu:
            parts.append(
                Part("in RAM", o.host_bytes, "the host's part: its layers, their KV and compute")
            )
        assumes = (
            f"llama-server with {sizes.N_SEQ} slots sharing one pool of --ctx-size cells, "
            f"{launch.cache_type} KV cache, flash attention on, a {sizes.N_UBATCH}-token ubatch; "
            "every value is passed explicitly so llama.cpp's --fit changes nothing"
        )
        if o.layout.replicas > 1:
            assumes += (
                f"; {o.layout.replicas} independent servers, each on its own "
                f"{o.layout.pp} card{'s' if o.layout.pp > 1 else ''} and port"
            )
        return Explanation(tuple(parts), assumes)

    def where(self, option: Option[LlamaCppLaunch]) -> str:
        return where(option)

    # --n-gpu-layers, --n-cpu-moe, and what a card option keeps in the host's RAM beside its
    # cards (weights, KV and compute of the host's part).
    def values(self, option: Option[LlamaCppLaunch]) -> dict[str, object]:
        launch = option.launch
        return {
            "gpu_layers": launch.gpu_layers,
            "cpu_moe_layers": launch.cpu_moe_layers,
            "host_bytes": option.host_bytes,
        }

    # -- reading a command ----------------------------------------------------------------------

    def read_command(
        self,
        argv: Sequence[str],
        defaults: PlanSettings,
        env: Mapping[str, str] = NO_ENV,
        vault: Vault | None = None,
        load: Callable[[str], Any] | None = None,
    ) -> Request:
        from llmfit.plan.engines.llamacpp_command import read

        return read(argv, defaults, env, vault, load)


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


# A GGUF file's types that are plain floats; any other is a block quant the kernels dequantize.
FLOAT_QUANTS = ("F32", "F16", "BF16")


def _inputs(
    model: Model,
    layout: GgufLayout,
    spec: cards.CardSpec | None,
    p: sizes.Placement,
    lay: Layout,
    context: int,
    kv_per_token: int,
    quant: str | None,
    ubatch: int,
) -> speeds.SpeedInputs | None:
    """The step model's inputs for one llama-server (plan/speed.py): the layer split is a
    pipeline of one card a stage, the host runs what -ngl and --n-cpu-moe keep there; on a CPU
    alone, the host's RAM bandwidth is what a step streams at (the fleet states none, so
    speed.py's cautious default)."""
    if spec is None and p.cards:
        return None
    if spec is None:
        spec = cards.override(None, {"memory_bandwidth_gbs": speeds.DEFAULT_RAM_BANDWIDTH / 1e9},
                              key="cpu")  # fmt: skip
    n = layout.layers
    return speeds.inputs_for(
        model, layout, spec, constants=llamacpp_speed.constants(cards.family(spec.key)),
        context=context, kv_bytes_per_token=kv_per_token,
        tp=1, pp=max(p.cards, 1),
        replicas=lay.replicas, nodes=lay.nodes, batch=lay.replicas,
        gpu_layers=None if p.gpu_layers > n else p.gpu_layers, cpu_moe=p.cpu_moe,
        quantized=(quant or "").upper() not in FLOAT_QUANTS, ubatch=ubatch,
    )  # fmt: skip


def _speed(
    model: Model,
    layout: GgufLayout,
    spec: cards.CardSpec | None,
    p: sizes.Placement,
    lay: Layout,
    context: int,
    kv_per_token: int,
    quant: str | None,
    ubatch: int,
) -> speeds.Speed | None:
    """How fast llama-server runs the placement, one sequence and its servers together."""
    inputs = _inputs(model, layout, spec, p, lay, context, kv_per_token, quant, ubatch)
    return speeds.estimate(inputs) if inputs else None


def _serving(
    inputs: speeds.SpeedInputs | None,
    lay: Layout,
    est: _Estimator,
    context: int,
    settings: PlanSettings,
) -> load.Serving | None:
    """How the servers serve the plan's workload (plan/load.py): each of the `lay.replicas`
    servers runs its -np slots in one unified pool of --ctx-size cells, prompt tokens riding in
    the same batches as the slots' decode tokens (--batch-size 2,048 a step, computed in
    --ubatch-size passes). None where the card's FLOPs are not known (a CPU's prefill is not
    modelled)."""
    if inputs is None or not inputs.flops:
        return None
    r = load.Replica(
        inputs=inputs,
        copies=lay.replicas,
        max_batch=est.n_seq,
        kv_tokens=sizes.pad(context),
        budget=llamacpp_speed.N_BATCH,
        mixed=True,
    )
    return load.serve(r, settings.workload)


ENGINE = LlamaCpp()
