"""What vLLM and SGLang share as llmfit plans them.

The two serve the same safetensors checkpoints on the same layouts (tensor × pipeline parallel
within a node or across the nodes of a fabric, data-parallel ranks, expert parallelism for a MoE),
quantise the same linear layers on load, and start across nodes the same way (a Ray cluster, or
the same command on every node by rank). What is written once here is what they do alike; each
engine keeps what is its own: the widths it refuses and its words for them, how it splits layers
over pipeline stages, its memory model (vllm_memory, sglang_sizes), its flags and their spelling.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from llmfit.plan import cards, curves, load
from llmfit.plan import speed as speeds
from llmfit.plan.artifact import Artifact, WeightLayout
from llmfit.plan.by_identity import ByIdentity
from llmfit.plan.engines import Found, Job, expert_kernels, serving_speed
from llmfit.plan.launch import Command
from llmfit.plan.layout import Card, Layout, LayoutSpace
from llmfit.plan.layouts import Sized, Space, Tried, powers_of_two, search, select
from llmfit.plan.model import Model, Shape
from llmfit.plan.options import Option, Rejection
from llmfit.plan.pools import ClassPool
from llmfit.plan.settings import Pins, PlanSettings

# The port a Ray cluster's head listens on (Ray's default), for both engines' --ray launches.
RAY_PORT = 6379


@dataclass(frozen=True)
class Variant:
    """The checkpoint as stored, or what an engine flag would make of it."""

    weight_bytes: int
    quant: str | None
    kv_dtype: str
    what_if: str | None = None
    flags: tuple[str, ...] = ()
    changes: int = 0


def variants(
    art: Artifact,
    model: Model,
    kv_dtype: str,
    settings: PlanSettings,
    *,
    fp8_weights: tuple[str, ...],
    fp8_kv: tuple[str, ...],
) -> list[Variant]:
    """The checkpoint as stored and, for a 16-bit one, what the engine's flags would make of it:
    `fp8_weights` and `fp8_kv`, as the engine spells them.

    Online fp8 quantises the linear layers on load and keeps the embedding and the output head at
    16 bits (both engines' Fp8LinearMethod covers Linear layers only), so the what-if weighs half
    of everything else; without a vocabulary and hidden size the two are taken as nothing, which
    would flatter the what-if, so then none is offered. An fp8 KV cache halves a 16-bit one.
    """
    stored = Variant(art.bytes, art.quant, kv_dtype)
    if settings.precision == "stored":
        return [stored]
    out = [stored] if settings.precision == "all" else []
    sixteen = model.dtype in ("bfloat16", "float16", "float32") and not model.quantization
    fp8_bytes = None
    if sixteen and model.vocab_size and model.hidden_size:
        head = 2 * model.vocab_size * model.hidden_size * 2
        if art.bytes > head:
            fp8_bytes = (art.bytes - head) // (4 if model.dtype == "float32" else 2) + head
    kv16 = kv_dtype in ("bfloat16", "float16") and settings.kv_cache_dtype == "auto"
    if settings.precision in ("all", "kv-fp8") and kv16:
        out.append(Variant(art.bytes, art.quant, "fp8", "fp8 KV cache", fp8_kv, 1))
    if settings.precision in ("all", "fp8") and fp8_bytes:
        out.append(Variant(fp8_bytes, "fp8", kv_dtype, "fp8 weights", fp8_weights, 1))
        if settings.precision == "all" and kv16:
            out.append(
                Variant(fp8_bytes, "fp8", "fp8", "fp8 weights and KV cache",
                        fp8_weights + fp8_kv, 2)
            )  # fmt: skip
    return out or [stored]


def split_refusal(
    shape: Shape, tp: int, expert_parallel: bool = False, experts_only: bool = False
) -> str | None:
    """Why a tensor-parallel width splits a layer the engine cannot split, in its words, or None.

    SGLang's linear layers and fp8 block checks are vLLM's (the same sentences in both engines'
    code), so the rule is one here; the attention heads each engine checks in its own words
    (vllm.width_refusal, sglang.width_refusal). With expert parallelism the routed experts
    stay whole on each rank, so their quantisation blocks are never split and their rule does not
    apply. `experts_only`: the routed experts' rules alone, at the width they are cut over (a
    MoE's data-parallel ranks without expert parallelism cut every expert over tp × dp cards,
    the rest of a layer over tp: `experts_refusal`).
    """
    for rule in shape.split_rules:
        if tp == 1 or (rule.experts and expert_parallel) or (experts_only and not rule.experts):
            continue
        if rule.size % tp:
            # distributed/utils.py ensure_divisibility.
            return f"{rule.size} is not divisible by {tp}"
        share = rule.size // tp
        if share % rule.multiple == 0:
            continue
        if rule.check == "block_fp8_moe":
            # Fp8MoEMethod.create_weights (layers/quantization/fp8.py).
            return (
                f"The output_size of gate's and up's weight = {share} is not divisible by "
                f"weight quantization block_n = {rule.multiple}."
            )
        if rule.check == "block_fp8":
            # validate_fp8_block_shape, the column-parallel gate_up_proj (fp8_utils.py).
            return (
                f"Weight output_partition_size = {share} is not divisible by "
                f"weight quantization block_n = {rule.multiple}."
            )
        # GPTQ/AWQ create_weights, the row-parallel down_proj (gptq.py, awq.py).
        return (
            "The input size is not aligned with the quantized weight shape. "
            "This can be caused by too large tensor parallel size."
        )
    return None


def experts_refusal(shape: Shape, layout: Layout) -> str | None:
    """Why the engine refuses a MoE layout's routed experts, in its words, or None: its
    data-parallel ranks without expert parallelism cut every expert over all tp × dp cards (vLLM:
    fused_moe/config.py FusedMoEParallelConfig.make flattens dp × tp into the MoE's tensor
    parallelism; SGLang: moe_tp_size = tp_size // ep_size over the whole --tp-size group), so
    the experts' quantisation blocks are split that many ways, not tp."""
    if layout.dp <= 1 or layout.ep:
        return None
    return split_refusal(shape, layout.tp * layout.dp, experts_only=True)


def dense_pins(pins: Pins, moe: bool) -> Pins:
    """The pins a layout search of a dense model takes: expert parallelism asked of one (`--ep`,
    or a checked command's --enable-expert-parallel, which vLLM accepts and ignores there) has no
    experts to spread, so it is left out rather than refuse every layout (the plan says so)."""
    return replace(pins, ep=None) if pins.ep and not moe else pins


def pinned_cards(pins: Pins) -> int:
    """The fewest cards the pins ask for: their card count, or tp × pp × dp of those given."""
    product = (pins.tp or 1) * (pins.pp or 1) * (pins.dp or 1)
    return max(product, pins.gpus or 0)


def pinned_sizes(pins: Pins) -> str:
    """The pinned sizes above 1 in the labels' grammar (Layout.short): "tp8×pp2", "tp3"; ""
    where none is."""
    sizes = (("tp", pins.tp), ("pp", pins.pp), ("dp", pins.dp))
    return "×".join(f"{n}{v}" for n, v in sizes if v and v > 1)


def pinned_text(pins: Pins) -> str:
    """The pins in words: their sizes ("tp8×pp2"), else their card count ("16 cards")."""
    cards = pinned_cards(pins)
    return pinned_sizes(pins) or f"{cards} card{'s' if cards != 1 else ''}"


def pinned_where(pins: Pins, gpu_class: str) -> str:
    """Where a pinned layout would have stood: "16 × h100-80g (tp8×pp2)", "3 × l40s-48g"."""
    sizes = pinned_sizes(pins)
    return f"{pinned_cards(pins)} × {gpu_class}" + (f" ({sizes})" if sizes else "")


def pin_rule(pins: Pins, pool: ClassPool, layers: int, moe: bool) -> str:
    """Why no layout the engines' shared search tries has the pinned sizes on this class of
    cards, in one sentence naming the rule (the sizes in the labels' grammar, not as flags: a
    checked command's were the engine's own)."""
    asked = pinned_text(pins)
    need = pinned_cards(pins)
    cls, width = pool.gpu_class, pool.max_gpus
    product = (pins.tp or 1) * (pins.pp or 1) * (pins.dp or 1)
    if pins.gpus and pins.tp and pins.pp and pins.dp and product != pins.gpus:
        return f"{asked} is {product} card{'s' if product > 1 else ''}, not the {pins.gpus} asked"
    if pins.pp and pins.pp > layers:
        return f"{pins.pp} pipeline stages are more than the model's {layers} layers"
    if (pins.dp or 1) > 1 and (pins.pp or 1) > 1:
        return (
            "data-parallel ranks are planned as one tensor-parallel group each, not as "
            "pipelines of stages (give the ranks or the stages, not both)"
        )
    if need > width:
        fabrics = {f: sum(h.count for h in hosts) for f, hosts in pool.fabrics().items() if f}
        nodes = -(-need // width) if width else 0
        if not fabrics or max(fabrics.values()) < 2:
            return (
                f"{need} cards are more than a {cls} node's {width}, and these nodes have no "
                'fabric, so a replica cannot span them: give them one (fabric = "ib0" in a '
                "fleet file; inline, @ib0 as in 2x8xh100-80g@ib0)"
            )
        best, count = max(fabrics.items(), key=lambda kv: kv[1])
        if count < nodes:
            return (
                f"{asked} is {need} cards, {nodes} {cls} nodes of {width}; the most on one "
                f"fabric are {count}, on {best}"
            )
        return (
            f"{asked} is {need} cards, more than a {cls} node's {width}; across nodes a "
            "replica is planned as a node's cards a pipeline stage (tp × pp, pp the nodes), "
            "or, for a mixture of experts, data-parallel ranks with expert parallelism"
        )
    return f"no layout planned on {cls} is {asked}"


def where(layout: Layout, gpu_class: str, fabric: str | None) -> str:
    """ "1 × h200-141g", "4 × h200-141g (tp4)", "8 × h100-80g (tp4×pp2)", "2 nodes × 8
    h100-80g on ib0 (tp8×pp2)": every parallel size above 1 named (Layout.short)."""
    if layout.nodes > 1:
        return (
            f"{layout.nodes} nodes × {layout.cards_per_node} {gpu_class} on {fabric}"
            f"{layout.label()}"
        )
    return f"{layout.cards} × {gpu_class}{layout.label()}"


def speed_inputs(
    table: dict[str, speeds.Constants],
    model: Model,
    weights: WeightLayout,
    spec: cards.CardSpec | None,
    layout: Layout,
    context: int,
    kv_per_token: int,
    held: float,
    fp8: bool,
    partition: Callable[[int, int], tuple[int, ...]],
    *,
    eager: bool = False,
    graph_batch: int = 0,
    overlap: bool = False,
    curves_backend: str | None = None,
) -> speeds.SpeedInputs | None:
    """The step model's inputs for one replica of the layout, with the engine's fitted
    constants for the card's family (`table`: the engine's own, by architecture; a new engine
    brings its own, looked up by no engine's name).

    A MoE's data-parallel ranks each run their own batch through their own attention and share
    the routed experts, sharded over every rank: one replica of `dp` attention ranks, whose card
    holds and reads 1/(tp·dp) of the experts. A dense model's data-parallel ranks are `dp`
    independent replicas.
    """
    if spec is None or held <= 0:
        return None
    model = counted(model)
    moe_dp = model.is_moe and layout.dp > 1
    k = serving_speed.for_card(table, spec.key)
    # Where the fitted constants say so, a MoE's routed experts are priced by the card's measured
    # grouped GEMM (plan/curves.py), where a table covers the card or its architecture; the
    # engine names the measured backend its kernels are (aiconfigurator's "vllm", "sglang").
    measured, kernel = (
        expert_pricing(model, weights, spec, layout.ep, fp8, curves_backend)
        if k.expert_curves and curves_backend
        else (None, None)
    )
    return speeds.inputs_for(
        model, weights, spec, constants=k,
        context=context, kv_bytes_per_token=kv_per_token, tp=layout.tp, pp=layout.pp,
        replicas=1 if moe_dp else layout.dp, ranks=layout.dp if moe_dp else 1, ep=layout.ep,
        nodes=layout.nodes, batch=max(1, int(held)),
        stage_layers=partition(weights.layers, layout.pp),
        compute_dtype="fp8" if fp8 else "bf16", eager=eager, graph_batch=graph_batch,
        overlap=overlap, curves=measured,
        curve_dtype=kernel or "bf16", curves_experts_only=True,
    )  # fmt: skip


def offloaded_inputs(inputs: speeds.SpeedInputs, offloaded: int) -> speeds.SpeedInputs:
    """The step model's inputs where --cpu-offload-gb keeps `offloaded` bytes of each rank's
    layers in pinned host memory, read over PCIe every step (vLLM: UVA views of the host's
    tensors, model_executor/offloader/uva.py; SGLang: copied up for each forward,
    srt/utils/offloader.py OffloaderV1), so each stage reads that much less of its own memory
    and the step waits on the PCIe read of the rest. The first layers' weights go first: their
    dense weights, then their experts (a whole expert's bytes, as a step reads the share it
    routes to)."""

    def less(stage: speeds.Stage) -> speeds.Stage:
        dense = min(offloaded, stage.dense_bytes)
        experts = min(offloaded - dense, stage.expert_bytes)
        return replace(
            stage, dense_bytes=stage.dense_bytes - dense, expert_bytes=stage.expert_bytes - experts
        )

    host = speeds.HostPart(
        layers=0, dense_bytes=offloaded, crossings=0, ram_bandwidth=inputs.pcie_bandwidth
    )
    return replace(inputs, stages=tuple(less(s) for s in inputs.stages), host=host)


def expert_pricing(
    model: Model, weights: WeightLayout, spec: cards.CardSpec, ep: bool, fp8: bool, engine: str
) -> tuple[curves.KernelCurves | None, str | None]:
    """The measured curves a MoE's routed experts are priced by, and their dtype as plan/speed.py
    reads it ("fp8", "w4a16", "bf16"); no curves where the shares price them. An engine the
    kernel rules are shipped for (llmfit/data/moe_kernels.toml `engines`) by the grouped GEMM of
    the kernel it runs at its default flags (plan/engines/expert_kernels.py); another by the
    fastest measured for the weights' dtype (`expert_kernel`), as is a listed engine's where no
    table measured the kernel it runs on the card (or no rule names one): how the model was
    fitted and measured (benchmarks/accuracy_load.py measured_kernels keeps the plan's curves
    there; docs/accuracy.md "Serving under load")."""
    four = model.params is not None and model.params > 0 and weights.total / model.params < 0.75
    if engine in expert_kernels.engines():
        dtype = "fp8" if fp8 else "w4a16" if four else "bf16"
        got = expert_kernels.expert_curves(
            engine, spec.key, spec.architecture,
            expert_kernels.checkpoint(model.quantization, four, fp8), model.architecture, ep,
            "fp8_block" if fp8 else dtype,
        )  # fmt: skip
        if got is not None:
            return got, dtype
    kernel = expert_kernel(model.quantization, four, fp8, spec.architecture)
    if kernel is None:
        return None, None
    measured = curves.curves_for(spec.key, spec.architecture, engine)
    return (measured if measured.measured else None), kernel


def expert_kernel(quantization: str | None, four_bit: bool, fp8: bool, arch: str) -> str | None:
    """Which measured grouped GEMM a MoE's experts run (plan/curves.py's dtype), or None where no
    table measured the kernel the engine runs, so the fitted shares price them: fp8 where the
    plan computes in it (the block-scaled kernel); 4-bit weights with 16-bit activations (AWQ,
    GPTQ, and MXFP4 on Blackwell); an MXFP4 checkpoint before Blackwell none. Both engines run
    gpt-oss's MXFP4 experts on Hopper with OpenAI's triton_kernels matmul_ogs (vLLM 0.34
    fused_moe/oracle/mxfp4.py _get_priority_backends_for_gpt_oss; SGLang 0.5.23
    model_overrides/gpt_oss.py), which aiconfigurator timed under vLLM 0.24 on the H100 and H200
    ("oaitriton" rows, 0.34-0.69 of the bandwidth at a few tokens an expert); SGLang's own rows
    for those shapes (labelled Triton's fused_moe) reach a fifth of an H200's bandwidth, and as
    the w4a16 curve priced dstack's gpt-oss-120b runs on H200s at three times their TPOT. Priced
    by the kernel each engine runs (plan/engines/expert_kernels.py), the runs never seen were no
    closer (docs/accuracy.md "Tried after this round, and not shipped"): the shares stay."""
    if fp8:
        return "fp8"
    if quantization is not None and "mxfp4" in quantization.lower() and "blackwell" not in arch:
        return None
    return "w4a16" if four_bit else "bf16"


def counted(model: Model) -> Model:
    """The model with its parameters counted from its config where its checkpoint's headers did
    not count them (vLLM's own count, layer by layer: vllm_weights.layer_params), and for a MoE
    those a token uses. Without them the step model would take bytes ÷ 2, half the parameters
    of an fp8 checkpoint, and prefill twice as fast as the card's peak allows."""
    if model.params or not model.layers or not model.hidden_size:
        return model
    # A plan asks once a layout, of the same model: counted once.
    return _counted(model)


def _count(model: Model) -> Model:
    if not model.hidden_size:
        return model
    if model.model_type == "nemotron_h" and model.is_moe:
        return model  # layer_params does not count the hybrid's MoE layers
    from llmfit.plan.engines import vllm_weights as vw

    try:
        rows = [vw.layer_params(model, i) for i in range(model.layers)]
    except (ValueError, KeyError, ZeroDivisionError):
        return model
    tied = bool(model.shapes and model.shapes.tied_embeddings)
    vocab = (model.vocab_size or 0) * model.hidden_size
    total = sum(r[0] for r in rows) + vocab * (1 if tied else 2)
    experts = sum(r[1] for r in rows)
    active = None
    if model.is_moe and model.experts and model.experts_active and experts:
        active = total - experts * (model.experts - model.experts_active) // model.experts
    return replace(model, params=total, active_params=active or model.active_params)


_counted: ByIdentity[Model, Model] = ByIdentity(_count, 64)


def replica(
    inputs: speeds.SpeedInputs | None,
    layout: Layout,
    model: Model,
    *,
    pool_tokens: int,
    max_batch: int,
    budget: int,
    mixed: bool,
    frontends: int = 1,
) -> load.Replica | None:
    """One replica of the layout for the serving model (plan/load.py), from the engine's own
    figures for one rank: the tokens its KV pool holds, the sequences it runs at once and the
    tokens a step carries. A MoE's data-parallel ranks are one replica whose pools and batches
    add up; a dense model's are `dp` copies of a replica. `frontends`: the front ends the
    launch takes its prompts through (load.Replica.frontends)."""
    if inputs is None:
        return None
    ranks = inputs.ranks
    return load.Replica(
        inputs=inputs,
        copies=1 if ranks > 1 or model.is_moe else layout.dp,
        max_batch=max(1, max_batch * ranks),
        kv_tokens=pool_tokens * ranks,
        budget=budget,
        mixed=mixed,
        frontends=max(frontends, 1),
    )


def served(t: Tried, job: Job) -> Tried:
    """The layout with how it serves the job's workload (plan/load.py)."""
    r = t.sized.replica
    if r is None:
        return t
    w = job.settings.workload
    return replace(t, sized=replace(t.sized, serving=load.serve(r, w)))


def hold_target(job: Job) -> float | None:
    """Sequences of the context a layout must hold: where the workload names requests in
    flight, one request whole (its prompt and output). More in flight than a pool holds wait for
    a place (plan/load.py `admits`, the one count of what a pool holds), as the engines queue
    them: not a reason to refuse the layout."""
    w = job.settings.workload
    if w.concurrency is None or not job.context:
        return None
    return w.tokens / job.context


def weights_share(layout: Layout, width: str, *, experts_over: int, copy: str) -> str:
    """What share of the weights a card holds, in words (--explain), `width` the layout as the
    engine names its sizes: a MoE's data-parallel ranks (`experts_over` > 0: the cards its routed
    experts are sharded over) hold a rank's attention and dense weights and their share of the
    experts; data-parallel copies (`copy`: what the engine calls one, "" for none) hold the model
    whole; pipeline stages their fullest stage's share."""
    tp = layout.tp
    if experts_over:
        return (
            f"the attention and dense weights over the {tp} card{'s' if tp > 1 else ''} of a "
            f"rank, the routed experts over all {experts_over} ({width})"
        )
    if copy:
        return f"a whole copy a {copy}, 1/{tp} a card ({width})"
    if layout.pp > 1:
        return f"its fullest pipeline stage's share ({width})"
    return f"1/{tp} ({width})"


def processes(
    option: Option[L],
    argv: Sequence[str],
    env: tuple[tuple[str, str], ...],
    *,
    ray: Sequence[str] | None,
    by_rank: Callable[[int, str], Sequence[str]],
    secrets: tuple[tuple[int, str], ...] = (),
) -> list[Command]:
    """The processes of a serve line `argv`: itself on one node; across nodes, with `ray` (the
    flags the head's serve adds), a Ray cluster and then one serve on its head; else the same
    line on every node, node 0 the head, each with `by_rank(rank, head address)` added. `secrets`
    are the words of `argv` that are credentials (Command.secrets); what is added comes after."""
    if option.layout.nodes <= 1:
        return [Command("all", tuple(argv), env=env, secrets=secrets)]
    ids = option.node_ids
    names = [ids[i] if i < len(ids) else None for i in range(option.layout.nodes)]
    head = names[0] or "<head-address>"
    if ray is not None:
        out = [Command("head", ("ray", "start", "--head", f"--port={RAY_PORT}"), names[0])]
        for name in names[1:]:
            join = ("ray", "start", f"--address={head}:{RAY_PORT}")
            out.append(Command("worker", join, name))
        out.append(Command("head", (*argv, *ray), names[0], env, secrets))
        return out
    return [
        Command(
            "head" if rank == 0 else "worker", (*argv, *by_rank(rank, head)), name, env, secrets
        )
        for rank, name in enumerate(names)
    ]


def option_of(
    job: Job, engine: str, art: Artifact, pool: ClassPool, t: Tried, launch: L, share: float
) -> Option[L]:
    """The option of a layout that fits: where it stands and what it holds, with the engine's
    launch part and the share of each card it counts on."""
    layout, sized = t.spot.layout, t.sized
    return Option(
        artifact=art,
        engine=engine,
        layout=layout,
        card=Card(pool.gpu_class, pool.card_bytes, pool.override),
        per_card=sized.per_card,
        have=sized.have,
        launch=launch,
        fabric=t.spot.fabric or None,
        hosts=t.spot.seats.hosts,
        free_now=t.spot.seats.free_now(layout.nodes),
        bits_per_weight=art.bits_per_weight(job.model.params),
        context=job.context,
        max_context=sized.max_context,
        held=sized.held,
        node_ids=t.spot.seats.node_ids if layout.nodes > 1 else (),
        share=share,
        kv_per_token=sized.kv_per_token,
        kv_tokens=sized.kv_tokens,
        speed=sized.speed,
        serving=sized.serving,
    )


# The engine's launch part.
L = TypeVar("L")


class Serving(ABC, Generic[L]):
    """How vLLM and SGLang plan a job: each what-if of the checkpoint on each class of cards, the
    widths the engine accepts searched over the shared layout space (plan/layouts.py), the misses
    and the layouts not shown said why. An engine gives its what-ifs, its width rule, its sizing
    of one layout and its launch part of an option."""

    key: str
    name: str
    layouts: LayoutSpace
    long_context_env: tuple[tuple[str, str], ...]

    def runs(self, artifact: Artifact) -> bool:
        return artifact.format == "safetensors"

    def where(self, option: Option[L]) -> str:
        return where(option.layout, option.gpu_class or "", option.fabric)

    def plan(self, job: Job) -> Found:
        found = Found()
        if job.settings.given is not None:
            found.notes += self._as_given(job)
        if job.settings.pins.ep and not job.model.is_moe:
            found.notes.append(
                "expert parallelism is asked for, but the model is not a mixture of experts: "
                "there are no experts to spread, so it is left out of the layouts"
            )
        if any(n.is_cpu for n in job.fleet.nodes):
            found.rejected.append(
                Rejection(
                    job.artifact.name,
                    self.key,
                    "CPU nodes",
                    f"safetensors weights are planned for {self.name} on GPUs; a CPU node runs "
                    "GGUF files with llama.cpp",
                )
            )
        for v in self._variants(job):
            art = replace(job.artifact, bytes=v.weight_bytes, quant=v.quant)
            shape = replace(job.shape, kv_dtype=v.kv_dtype)
            for pool in job.pools:
                refused: list[Rejection] = []
                found.options += [
                    replace(o, what_if=v.what_if, engine_flags=v.flags, changes=v.changes)
                    for o in self._on_pool(job, art, shape, pool, v, refused)
                ]
                found.rejected += [
                    replace(r, what_if=v.what_if, gpu_class=pool.gpu_class) for r in refused
                ]
        return found

    def _as_given(self, job: Job) -> list[str]:
        """What a checked command lacks that the engine needs, in one sentence each: its launch
        is the command as given, so the plan says so rather than adding it."""
        given, model = job.settings.given, job.model
        assert given is not None
        out = []
        env = dict(given.env)
        if model.max_context and job.context > model.max_context:
            missing = [f"{k}={v}" for k, v in self.long_context_env if env.get(k) != v]
            if missing:
                out.append(
                    f"{self.name} refuses a context of {job.context:,}, past the "
                    f"{model.max_context:,} the model was trained for, unless "
                    f"{' and '.join(missing)} is set, which this command does not set"
                )
        if model.custom_code and "--trust-remote-code" not in given.argv:
            out.append(
                f"{self.name} loads this model's own code only with --trust-remote-code, which "
                "this command does not give"
            )
        return out

    @abstractmethod
    def _variants(self, job: Job) -> list[Variant]:
        """The checkpoint as stored and the what-ifs of the engine's flags, as it spells them."""

    @abstractmethod
    def _width_refusal(self, shape: Shape, tp: int, expert_parallel: bool) -> str | None:
        """Why the engine refuses this tensor-parallel width, in its words; None if it takes it."""

    @abstractmethod
    def _sizer(
        self, job: Job, art: Artifact, shape: Shape, pool: ClassPool, v: Variant
    ) -> Callable[[Layout], Sized]:
        """How one layout of the what-if `v` on the pool's cards is sized, by the engine's own
        memory model."""

    @abstractmethod
    def _option(self, job: Job, art: Artifact, pool: ClassPool, t: Tried) -> Option[L]:
        """The option of a layout that fits, with the engine's launch part (see `option_of`)."""

    def _on_pool(
        self,
        job: Job,
        art: Artifact,
        shape: Shape,
        pool: ClassPool,
        v: Variant,
        rejected: list[Rejection],
    ) -> list[Option[L]]:
        model, settings = job.model, job.settings
        moe = model.is_moe
        pins = dense_pins(settings.pins, moe)
        ep = pins.ep if moe else False
        before = len(rejected)
        widths: list[int] = []
        # A pinned width, or a pinned card count for tensor parallelism alone, is tried as asked
        # (3, 6, 12): refused in the engine's own words where the heads or blocks refuse it,
        # never dropped for not being a power of two.
        asked = {w for w in (pins.tp, pins.gpus if pins.tp is None else None) if w}
        for tp in sorted(
            set(powers_of_two(pool.max_gpus)) | {w for w in asked if w <= pool.max_gpus}
        ):
            if pins.tp is not None and tp != pins.tp:
                continue
            refusal = self._width_refusal(shape, tp, moe and ep is not False)
            if refusal:
                here = where(Layout(tp=tp), pool.gpu_class, None)
                rejected.append(Rejection(art.name, self.key, here, refusal))
            else:
                widths.append(tp)
        if pins.tp is not None and pins.tp > pool.max_gpus and not pool.mig:
            rejected.append(
                Rejection(
                    art.name,
                    self.key,
                    pool.gpu_class,
                    f"--tp {pins.tp} is wider than any {pool.gpu_class} node "
                    f"({pool.max_gpus} cards): tensor parallelism stays within a node",
                )
            )
        if not widths:
            return []
        # A pinned number of stages or ranks is tried as asked too.
        stages = set(powers_of_two(pool.max_gpus)) | ({pins.pp} if pins.pp else set())
        ranks = set(powers_of_two(pool.max_gpus)) | ({pins.dp} if pins.dp else set())
        if pins.gpus and not pins.dp:
            # A pinned card count is also that many cards as data-parallel ranks of each width.
            ranks |= {pins.gpus // w for w in widths if pins.gpus % w == 0}
        space = Space.of(
            self.layouts,
            widths=tuple(widths),
            stages=tuple(sorted(n for n in stages if n <= pool.max_gpus)),
            ranks=tuple(sorted(n for n in ranks if 1 < n <= pool.max_gpus)),
            moe=moe,
            layers=shape.layers,
            ep=ep,
            stages_per_node=lambda tp, width: 1,
            ranks_across_nodes=True,
        )
        sizer = self._sizer(job, art, shape, pool, v)

        def size(layout: Layout) -> Sized:
            sized = sizer(layout)
            why = experts_refusal(shape, layout) if moe else None
            return replace(sized, refusal=why) if why and sized.refusal is None else sized

        target = hold_target(job)
        fits, misses = search(pool, space, size, pins=pins, target=target)
        fits = [served(t, job) for t in fits]
        if pool.mig and not fits:
            rejected.append(
                Rejection(
                    art.name,
                    self.key,
                    f"several {pool.gpu_class}",
                    "a MIG instance cannot be joined with others, on its node or across nodes",
                )
            )
        elif not fits and not pins.any:
            n = sum(h.count for h in pool.fabrics().get("", ()))
            if n > 1 and pool.max_gpus:
                rejected.append(
                    Rejection(
                        art.name,
                        self.key,
                        f"{n} nodes × {pool.max_gpus} {pool.gpu_class}",
                        "these nodes have no fabric, so a replica cannot span them",
                    )
                )
        for t in misses:
            lay = t.spot.layout
            plain = lay.pp == 1 and lay.dp == 1 or lay.nodes > 1
            if plain or pins.any or target is not None:
                rejected.append(self._miss(art, pool, t, target, job))
        if pins.any and not fits and len(rejected) == before:
            # The pins left no layout of the space to size here: which rule, said once.
            rejected.append(
                Rejection(
                    art.name,
                    self.key,
                    pinned_where(pins, pool.gpu_class),
                    pin_rule(pins, pool, shape.layers, moe),
                )
            )
        out: list[Option[L]] = []
        groups: dict[str, list[Tried]] = {}
        for t in fits:
            groups.setdefault(t.spot.fabric, []).append(t)
        for fabric, group in groups.items():
            width = pool.max_gpus if not fabric else pool.widest(fabric)
            kept, dropped = select(group, width, every=settings.every_layout)
            for t in kept:
                out.append(self._option(job, art, pool, t))
            for t, by in dropped:
                rejected.append(
                    Rejection(
                        art.name,
                        self.key,
                        where(t.spot.layout, pool.gpu_class, fabric or None),
                        f"not shown: {where(by.spot.layout, pool.gpu_class, fabric or None)} "
                        f"holds {by.sized.held:g} sequences on "
                        f"{by.spot.layout.cards} card{'s' if by.spot.layout.cards > 1 else ''} "
                        f"(this holds {t.sized.held:g} on {t.spot.layout.cards})",
                        kind="dominated",
                    )
                )
        return out

    def _miss(
        self, art: Artifact, pool: ClassPool, t: Tried, target: float | None, job: Job
    ) -> Rejection:
        s = t.sized
        here = where(t.spot.layout, pool.gpu_class, t.spot.fabric or None)
        if s.refusal is not None:
            return Rejection(art.name, self.key, here, s.refusal, nodes=t.spot.layout.nodes)
        w = job.settings.workload
        if s.fits_memory and target is not None:
            # A target is one request whole (hold_target): named only with requests in flight.
            held = s.held * job.context / w.tokens
            return Rejection(
                art.name,
                self.key,
                here,
                f"holds {held:.3g} requests of {w.tokens:,} tokens at once: not one whole request",
                have=s.have,
                max_context=s.max_context,
                nodes=t.spot.layout.nodes,
            )
        return Rejection(
            art.name, self.key, here, "", need=s.per_card.need, have=s.have,
            max_context=s.max_context, nodes=t.spot.layout.nodes,
        )  # fmt: skip


def kv_source(model: Model, settings: PlanSettings) -> str:
    """Where the --kv-cache-dtype planned came from: the user, the checkpoint (one calibrated for
    an fp8 cache), or the engine's auto (the model's own dtype)."""
    if settings.kv_cache_dtype != "auto":
        return "given"
    return "checkpoint" if model.kv_cache_dtype else "default"


def flag_value(flags: tuple[str, ...], flag: str) -> str | None:
    """The value a flag takes among a what-if's flags (`--kv-cache-dtype fp8`), or None."""
    return flags[flags.index(flag) + 1] if flag in flags[:-1] else None


def source(knob: object) -> str:
    """ "given" where the user set a knob, else "default" (the engine's own)."""
    return "default" if knob is None else "given"
