"""llama.cpp's --explain: an option's fullest card in the parts every engine fills, what it
keeps in the host's RAM beside them, and the settings its figures rest on."""

from __future__ import annotations

from llmfit.plan.engines import Assumed, Explanation, Part
from llmfit.plan.engines import llamacpp_sizes as sizes
from llmfit.plan.engines.llamacpp_launch import LlamaCppLaunch
from llmfit.plan.engines.serving import source
from llmfit.plan.fleet import GIB
from llmfit.plan.model import Model
from llmfit.plan.options import Option


def explain(option: Option[LlamaCppLaunch], model: Model) -> Explanation:
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
    named = (
        Part("weights", c.weights, f"{size}: {placed}"),
        Part(
            "KV cache",
            c.kv_cache,
            f"{o.context:,} cells (padded to 256) of the layers it holds",
        ),
        Part("activations", c.activations, "the compute buffer for one ubatch"),
        Part("runtime", c.runtime, "the CUDA context, cuBLAS workspace and allocator slack"),
    )
    parts = tuple(p for p in named if p.bytes or p.name in ("weights", "KV cache"))
    beside: tuple[Part, ...] = ()
    if o.host_bytes and not o.cpu:
        beside = (
            Part("in RAM", o.host_bytes, "the host's part: its layers, their KV and compute"),
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
    return Explanation(parts, assumes, beside, settings=_assumed(o))


def _assumed(o: Option[LlamaCppLaunch]) -> tuple[Assumed, ...]:
    """The settings the card's figures rest on, with where each came from: every one is passed
    on the command line, so llama.cpp's --fit and defaults cannot change them."""
    launch, opts = o.launch, o.launch.options
    given = launch.given is not None
    cache = "what-if" if "--cache-type-k" in o.engine_flags else source(opts.cache_type_k)
    out = [
        Assumed("--ctx-size", str(launch.ctx_size), "given" if given else "plan"),
        Assumed(
            "--n-gpu-layers",
            str(launch.gpu_layers),
            "given" if opts.n_gpu_layers is not None else "plan",
        ),
        Assumed("--parallel", str(opts.parallel or sizes.N_SEQ), source(opts.parallel)),
        Assumed("--ubatch-size", str(opts.ubatch or sizes.N_UBATCH), source(opts.ubatch)),
        Assumed("--cache-type-k", launch.cache_type, cache),
        # Planned on whatever a command says (off is noted as not planned).
        Assumed("--flash-attn", "on", "plan"),
    ]
    if launch.cpu_moe_layers:
        out.append(
            Assumed(
                "--n-cpu-moe",
                str(launch.cpu_moe_layers),
                "given" if opts.n_cpu_moe is not None else "plan",
            )
        )
    return tuple(out)
