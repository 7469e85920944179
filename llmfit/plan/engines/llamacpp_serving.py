"""How fast llama-server runs a placement and how it serves a workload: the step model's inputs
for one server (plan/speed.py) and its serving under load (plan/load.py)."""

from __future__ import annotations

from llmfit.plan import cards, load
from llmfit.plan import speed as speeds
from llmfit.plan.artifact import GgufLayout
from llmfit.plan.engines import llamacpp_sizes as sizes
from llmfit.plan.engines import llamacpp_speed
from llmfit.plan.layout import Layout
from llmfit.plan.model import Model
from llmfit.plan.settings import PlanSettings

# A GGUF file's types that are plain floats; any other is a block quant the kernels dequantize.
FLOAT_QUANTS = ("F32", "F16", "BF16")


def step_inputs(
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


def speed_of(
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
    inputs = step_inputs(model, layout, spec, p, lay, context, kv_per_token, quant, ubatch)
    return speeds.estimate(inputs) if inputs else None


def serving_of(
    inputs: speeds.SpeedInputs | None,
    lay: Layout,
    n_seq: int,
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
        max_batch=n_seq,
        kv_tokens=sizes.pad(context),
        budget=llamacpp_speed.N_BATCH,
        mixed=True,
    )
    return load.serve(r, settings.workload)
