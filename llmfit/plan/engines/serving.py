"""What vLLM and SGLang share as llmfit plans them.

The two serve the same safetensors checkpoints on the same layouts (tensor × pipeline parallel
within a node or across the nodes of a fabric, data-parallel ranks, expert parallelism for a MoE),
quantise the same linear layers on load, and start across nodes the same way (a Ray cluster, or
the same command on every node by rank). What is written once here is what they do alike; each
engine keeps what is its own: the widths it refuses and its words for them, how it splits layers
over pipeline stages, its memory model (vllm_memory, sglang_sizes), its flags and their spelling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from llmfit.plan import cards
from llmfit.plan import speed as speeds
from llmfit.plan.artifact import Artifact, WeightLayout
from llmfit.plan.launch import Command
from llmfit.plan.layout import Layout
from llmfit.plan.model import Model, Shape
from llmfit.plan.options import Option
from llmfit.plan.settings import PlanSettings

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


def split_refusal(shape: Shape, tp: int, expert_parallel: bool = False) -> str | None:
    """Why a tensor-parallel width splits a layer the engine cannot split, in its words, or None.

    SGLang's linear layers and fp8 block checks are vLLM's (the same sentences in both engines'
    code), so the rule is one here; the attention heads each engine checks in its own words
    (vllm_sizes.width_refusal, sglang.width_refusal). With expert parallelism the routed experts
    stay whole on each rank, so their quantisation blocks are never split and their rule does not
    apply.
    """
    for rule in shape.split_rules:
        if tp == 1 or (rule.experts and expert_parallel):
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


def where(layout: Layout, gpu_class: str, fabric: str | None) -> str:
    """ "4 × h200-141g", "8 × h100-80g (tp4×pp2)", "2 nodes × 8 h100-80g on ib0"."""
    plain = layout.pp == 1 and layout.dp == 1 or layout.nodes > 1 and layout.dp == 1
    shape = "" if plain else f" ({layout.short()})"
    if layout.nodes > 1:
        return f"{layout.nodes} nodes × {layout.cards_per_node} {gpu_class} on {fabric}{shape}"
    return f"{layout.cards} × {gpu_class}{shape}"


def speed(
    engine: str,
    model: Model,
    weights: WeightLayout,
    spec: cards.CardSpec | None,
    layout: Layout,
    context: int,
    kv_per_token: int,
    concurrency: float,
    fp8: bool,
    partition: Callable[[int, int], tuple[int, ...]],
) -> speeds.Speed | None:
    """How fast the layout decodes and prefills (plan/speed.py), its stages as the engine splits
    them (`partition`: layers and stages → layers a stage).

    A MoE's data-parallel ranks each run their own batch through their own attention and share
    the routed experts, sharded over every rank: a rank's card holds and reads 1/(tp·dp) of
    them, not the 1/tp a tensor-parallel replica would.
    """
    if spec is None or concurrency <= 0:
        return None
    inputs = speeds.inputs_for(
        model, weights, spec, engine=engine, context=context, kv_bytes_per_token=kv_per_token,
        tp=layout.tp, pp=layout.pp, replicas=layout.dp, ep=layout.ep, nodes=layout.nodes,
        concurrency=max(1, int(concurrency)), stage_layers=partition(weights.layers, layout.pp),
        compute_dtype="fp8" if fp8 else "bf16",
    )  # fmt: skip
    if model.is_moe and layout.dp > 1:
        stages = tuple(replace(s, expert_bytes=s.expert_bytes / layout.dp) for s in inputs.stages)
        inputs = replace(inputs, stages=stages)
    return speeds.estimate(inputs)


def processes(
    option: Option,
    argv: Sequence[str],
    env: tuple[tuple[str, str], ...],
    *,
    ray: Sequence[str] | None,
    by_rank: Callable[[int, str], Sequence[str]],
) -> list[Command]:
    """The processes of a serve line `argv`: itself on one node; across nodes, with `ray` (the
    flags the head's serve adds), a Ray cluster and then one serve on its head; else the same
    line on every node, node 0 the head, each with `by_rank(rank, head address)` added."""
    if option.layout.nodes <= 1:
        return [Command("all", tuple(argv), env=env)]
    ids = option.node_ids
    names = [ids[i] if i < len(ids) else None for i in range(option.layout.nodes)]
    head = names[0] or "<head-address>"
    if ray is not None:
        out = [Command("head", ("ray", "start", "--head", f"--port={RAY_PORT}"), names[0])]
        for name in names[1:]:
            join = ("ray", "start", f"--address={head}:{RAY_PORT}")
            out.append(Command("worker", join, name))
        out.append(Command("head", (*argv, *ray), names[0], env))
        return out
    return [
        Command("head" if rank == 0 else "worker", (*argv, *by_rank(rank, head)), name, env)
        for rank, name in enumerate(names)
    ]
