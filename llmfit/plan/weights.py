"""What each part of a checkpoint weighs, and what a card of a layout holds of it.

An engine that splits a model places whole layers: vLLM's pipeline stages take runs of layers, the
first stage also the embedding and the last the output layer; llama.cpp's layer split does the
same across cards. A card's share is therefore summed part by part, and the fullest card is the
one that runs out: an average over stages hides the embedding and the head, which for a large
vocabulary is gigabytes on one card.
"""

from __future__ import annotations

from llmfit.plan.artifact import Artifact, WeightLayout
from llmfit.plan.model import DTYPE_BYTES, DTYPE_SHORT, Model, ParamSplit


def spread(split: ParamSplit, total_bytes: int, embed_elem: float) -> WeightLayout | None:
    """The checkpoint's bytes spread over its parts in proportion to their parameters.

    The embedding and the output head are kept at 16 bits by every quantisation vLLM loads (fp8,
    GPTQ/AWQ, NVFP4 and MXFP4 all quantise the linear layers only), so they weigh their elements
    at `embed_elem` bytes; what is left is the layers', shared in proportion to each layer's
    parameters (largest remainder, so the parts sum to the checkpoint exactly). None when the
    embedding and head alone would outweigh the checkpoint (the config and the bytes disagree).
    """
    embed = int(split.embed * embed_elem)
    output = int(split.output * embed_elem)
    rest = total_bytes - embed - output
    weights = sum(split.layers)
    if rest <= 0 or weights <= 0:
        return None
    exact = [rest * w for w in split.layers]
    layer_bytes = [e // weights for e in exact]
    # Largest remainder: the bytes integer division left over go to the layers it shorted most.
    short = rest - sum(layer_bytes)
    for i in sorted(range(len(exact)), key=lambda i: -(exact[i] % weights))[:short]:
        layer_bytes[i] += 1
    expert_bytes = tuple(
        b * e // w if w else 0
        for b, e, w in zip(layer_bytes, split.experts, split.layers, strict=True)
    )
    return WeightLayout(
        layer_bytes=tuple(layer_bytes),
        expert_bytes=expert_bytes,
        embed_bytes=embed,
        output_bytes=output,
        tied_embeddings=split.tied_embeddings,
    )


def uniform(total_bytes: int, layers: int) -> WeightLayout:
    """The checkpoint as `layers` equal layers and nothing else: what is known when the config
    gives no sizes (every card's share is then the average, as it was before parts were known)."""
    layers = max(layers, 1)
    each, extra = divmod(total_bytes, layers)
    return WeightLayout(
        layer_bytes=tuple(each + (1 if i < extra else 0) for i in range(layers)),
        expert_bytes=(0,) * layers,
        embed_bytes=0,
        output_bytes=0,
        tied_embeddings=False,
    )


def estimated(model: Model) -> Artifact | None:
    """The weights of a repository that holds only its config (issue 34: it exited "nothing
    fits" with no estimate): the parameters the config describes (ParamSplit: the embedding,
    each layer, the output layer, and a vision tower's) at its torch_dtype, each planned as a
    checkpoint of that size would be. None where the config cannot say: no split, no dtype of
    whole bytes, or a quantisation, whose stored sizes its dtype does not give. The split leaves
    out norms and biases (Llama-3.1-8B: 262,144 of 8,030,261,248 parameters, 0.003%)."""
    split = model.param_split
    width = DTYPE_BYTES.get(model.dtype or "")
    if split is None or model.quantization or width is None or width < 2:
        return None
    vision = model.shapes.vision_params if model.shapes is not None else 0
    params = split.embed + split.output + sum(split.layers) + vision
    return Artifact(
        name="safetensors",
        format="safetensors",
        bytes=int(params * width),
        quant=DTYPE_SHORT.get(model.dtype or ""),
        params=params,
        estimated=True,
    )


def layout_of(art: Artifact, model: Model) -> WeightLayout:
    """The artifact's parts: its own (GGUF headers, safetensors headers) where it has them, else
    spread by the config's parameters, else equal layers."""
    if art.parts is not None:
        return art.parts
    if model.param_split is not None:
        elem = 4 if model.dtype == "float32" else 2
        found = spread(model.param_split, art.bytes, elem)
        if found is not None:
            return found
    return uniform(art.bytes, model.layers)


def pp_partition(layers: int, pp: int) -> tuple[int, ...]:
    """Layers per pipeline stage, as vLLM splits them (get_pp_indices in
    vllm/distributed/utils.py, 0.33): evenly, the remainder one each to the stages before the
    last, counting back from the second-to-last, since the first holds the embedding and the last
    the output layer."""
    base = layers // pp
    parts = [base] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def stage_parts(
    w: WeightLayout, pp: int, partition: tuple[int, ...] | None = None
) -> list[tuple[int, int, int]]:
    """Each pipeline stage's (non-expert bytes, routed-expert bytes, layers).

    The first stage holds the embedding; the last the output layer, and, with tied embeddings
    across several stages, its own copy of the embedding to be the head (vLLM builds
    embed_tokens on the last rank too when tie_word_embeddings is set, LlamaModel.__init__).
    `partition` gives the layers of each stage where an engine splits them otherwise than vLLM
    (SGLang gives the extra layers to the last stages); by default, vLLM's `pp_partition`."""
    out = []
    start = 0
    for s, n in enumerate(partition or pp_partition(w.layers, pp)):
        layer = sum(w.layer_bytes[start : start + n])
        experts = sum(w.expert_bytes[start : start + n])
        dense = layer - experts
        if s == 0:
            dense += w.embed_bytes
        if s == pp - 1:
            dense += w.output_bytes
            if w.tied_embeddings and pp > 1:
                dense += w.embed_bytes
        out.append((dense, experts, n))
        start += n
    return out
