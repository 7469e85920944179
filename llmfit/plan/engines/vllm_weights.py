"""The weights one rank of a vLLM layout loads ("Model loading took X GiB"), part by part: the
checkpoint's bytes by part (parts_of), the stage's share of them, and what vLLM adds at load
(rotary caches, MLA's decompressed W_UK/W_UV, mxfp4 padding, LoRA slots, a draft)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from llmfit.plan.artifact import WeightLayout
from llmfit.plan.engines.vllm_inputs import Context, card_arch, cdiv, layer_kinds, round_up
from llmfit.plan.layout import Card
from llmfit.plan.model import Model, ModelShapes


@dataclass(frozen=True)
class Weights:
    """What the rank loads ("Model loading took X GiB"), part by part, and what it skips."""

    # The stage's repeating layers: attention, dense MLP, shared experts (split by TP).
    layers: int = 0
    # Their routed experts (split over TP × DP, with or without expert parallelism).
    experts: int = 0
    # Tensors every TP rank keeps whole: router gates, norms, MLA's fused q/kv-a projection,
    # KV projections past one head a rank.
    replicated: int = 0
    embedding: int = 0
    output: int = 0
    # Rotary cos/sin caches: max positions × rotary dims × 2 B each.
    rope: int = 0
    # MLA: W_UK/W_UV decompressed from kv_b_proj at load, bf16.
    mla_decompressed: int = 0
    # mxfp4 experts padded to the MoE kernel's tile (gpt-oss).
    mxfp4_padding: int = 0
    vision: int = 0
    lora: int = 0
    draft: int = 0
    # Bytes of the checkpoint vLLM does not load on this rank's account: MTP layers, a tied
    # output head stored beside the embedding.
    skipped: int = 0

    @property
    def total(self) -> int:
        return (
            self.layers
            + self.experts
            + self.replicated
            + self.embedding
            + self.output
            + self.rope
            + self.mla_decompressed
            + self.mxfp4_padding
            + self.vision
            + self.lora
            + self.draft
        )


def elem_bytes(model: Model) -> int:
    return 4 if model.dtype == "float32" else 2


def layer_params(model: Model, index: int) -> tuple[int, int, int, int]:
    """(parameters, routed-expert parameters, replicated linear parameters, 16-bit parameters)
    of layer `index`, from the config: attention or mixer, MLP or experts, norms. Replicated are
    the tensors vLLM keeps whole on every TP rank (ReplicatedLinear / disable_tp): MLA's fused
    q_a/kv_a projection (stored like the other linear weights), and, always 16-bit, the MoE
    router gate and the norms."""
    s = model.shapes or ModelShapes()
    h = model.hidden_size or 0
    kinds = layer_kinds(model)
    kind = kinds[index] if index < len(kinds) else "full"
    heads, kvh, hd = model.attention_heads, model.kv_heads, model.head_dim
    params = expert = repl = sixteen = 0
    nemotron = model.model_type == "nemotron_h"
    if kind == "mla":
        nope, rope, vdim = s.qk_nope_head_dim, s.qk_rope_head_dim, s.v_head_dim
        q_a = h * s.q_lora_rank if s.q_lora_rank else 0
        q_b = (s.q_lora_rank or h) * heads * (nope + rope)
        kv_a = h * (s.kv_lora_rank + rope)
        kv_b = s.kv_lora_rank * heads * (nope + vdim)
        o = heads * vdim * h
        params += q_a + q_b + kv_a + kv_b + o + s.q_lora_rank + s.kv_lora_rank
        repl += q_a + kv_a
        sixteen += s.q_lora_rank + s.kv_lora_rank
    elif kind in ("full", "sliding", "chunked"):
        params += h * heads * hd + 2 * h * kvh * hd + heads * hd * h
    elif kind == "mamba2" and s.mamba:
        mb = s.mamba
        conv_dim = mb.inner + 2 * mb.n_groups * mb.state_size
        params += h * (mb.inner + conv_dim + mb.heads) + conv_dim * mb.conv_kernel
        params += 3 * mb.heads + mb.inner + mb.inner * h
    elif kind == "gated_delta_net" and s.mamba:
        mb = s.mamba
        qkvz = 2 * mb.k_heads * mb.k_head_dim + 2 * mb.v_heads * mb.v_head_dim
        conv_dim = 2 * mb.k_heads * mb.k_head_dim + mb.v_heads * mb.v_head_dim
        params += h * (qkvz + 2 * mb.v_heads) + conv_dim * mb.conv_kernel
        params += 2 * mb.v_heads + mb.v_head_dim + mb.v_heads * mb.v_head_dim * h
    elif kind == "mamba1" and s.mamba:
        mb = s.mamba
        params += h * 2 * mb.inner + mb.inner * mb.conv_kernel + mb.inner * h
        params += mb.inner * (mb.state_size * 2 + 2)
    # The MLP: Nemotron-H's layers each hold one block (mixer, attention or MLP); every other
    # family pairs the mixer with an MLP or the experts.
    if nemotron:
        if kind == "":
            params += 2 * h * s.intermediate_size  # relu² MLP: up and down
        params += h
        sixteen += h
        return params, expert, repl, sixteen
    moe_layer = model.is_moe and index >= s.dense_layers
    if moe_layer:
        e = model.experts or 0
        routed = e * 3 * h * s.moe_intermediate_size
        shared = 3 * h * s.shared_expert_intermediate_size
        router = e * h
        params += routed + shared + router
        expert += routed
        sixteen += router
    else:
        params += 3 * h * s.intermediate_size
    params += 2 * h
    sixteen += 2 * h
    return params, expert, repl, sixteen


@dataclass(frozen=True)
class Parts:
    """The checkpoint's bytes by part, as vLLM places them: the stage's layers, the embedding
    with the first stage, the output with the last; MTP layers and a tied output head stored
    beside the embedding are bytes vLLM skips, the vision tower is built beside the layers."""

    layer_bytes: tuple[int, ...]
    expert_bytes: tuple[int, ...]
    # Bytes of each layer kept whole on every TP rank.
    replicated_bytes: tuple[int, ...]
    embed_bytes: int
    output_bytes: int
    mtp_bytes: int = 0
    vision_bytes: int = 0
    # Bytes outside the layout that are neither (loaded with the first stage).
    extra_bytes: int = 0
    # Output-head bytes the checkpoint stores though the embeddings are tied.
    tied_head_bytes: int = 0


# A plan sizes every layout of every pool with the same model and checkpoint (a 94-layer MoE
# on the example fleet: 140 estimates, 2 distinct parts): walking the layers each time was
# most of the plan's time. Model, WeightLayout and Parts are frozen, so one result is shared.
@lru_cache(maxsize=64)
def parts_of(model: Model, weight_bytes: int, parts: WeightLayout | None) -> Parts:
    """The checkpoint's bytes by part: from the artifact's WeightLayout when it has one, else
    spread over the config's parameters.

    With a WeightLayout: layers at index ≥ model.layers are MTP layers (DeepSeek-V3's layer 61);
    bytes outside the layout (weight_bytes − parts.total) are the vision tower, up to its size
    from the config, and the rest MTP weights kept under another name (Qwen3-Next's mtp.*) when
    the model has MTP layers, else loaded with the first stage.

    From the config: 16-bit parameters for the embedding, the output head, norms, router gates
    and the vision tower (quantised checkpoints leave them unquantised); what remains of
    weight_bytes spread over the linear weights in proportion to their parameters, except
    gpt-oss's mxfp4 experts, which take 4.25 bits a weight (a 4-bit value and an 8-bit scale a
    32) and a bf16 bias an output. An MTP module counts as one more layer like the last and a
    2H → H projection, with DeepSeek's own embedding and head.
    """
    s = model.shapes or ModelShapes()
    elem = elem_bytes(model)
    h, vocab = model.hidden_size or 0, model.vocab_size or 0
    rows = [layer_params(model, i) for i in range(model.layers)]
    head = vocab * h * elem
    if parts is not None:
        n = model.layers
        layers = tuple(parts.layer_bytes[:n])
        experts = tuple(parts.expert_bytes[:n])
        repl = []
        for i, (params, exp, rep_lin, six) in enumerate(rows[: len(layers)]):
            lin_params = params - exp - six
            rate = (layers[i] - experts[i] - six * elem) / lin_params if lin_params > 0 else 0.0
            repl.append(six * elem + int(rep_lin * rate))
        mtp = sum(parts.layer_bytes[n:])
        other = max(0, weight_bytes - parts.total)
        vision = min(other, s.vision_params * elem)
        rest = other - vision
        tied_head = head if s.tied_embeddings and parts.output_bytes >= head else 0
        return Parts(
            layer_bytes=layers,
            expert_bytes=experts,
            replicated_bytes=tuple(repl),
            embed_bytes=parts.embed_bytes,
            output_bytes=parts.output_bytes - tied_head,
            mtp_bytes=mtp + (rest if s.mtp_layers else 0),
            vision_bytes=vision,
            extra_bytes=0 if s.mtp_layers else rest,
            tied_head_bytes=tied_head,
        )
    embed = vocab * h * elem
    output = h * elem + (0 if s.tied_embeddings else head)
    vision = s.vision_params * elem
    sixteen = [r[3] * elem for r in rows]
    mtp_params = 0
    if s.mtp_layers and rows:
        mtp_params = s.mtp_layers * (rows[-1][0] + 2 * h * h)
        if model.model_type in ("deepseek_v3", "deepseek_v2", "kimi_k2"):
            mtp_params += s.mtp_layers * 2 * vocab * h
    expert_b = 0
    if model.quantization == "mxfp4" and model.is_moe:
        e, inter = model.experts or 0, s.moe_intermediate_size
        # gate_up (2I × H) and down (H × I) weights at 4.25 bits, a bf16 bias an output row.
        expert_b = e * (3 * h * inter * 17 // 32 + (2 * inter + h) * 2)
    fixed = embed + output + vision + sum(sixteen)
    fixed += expert_b * sum(1 for r in rows if r[1])
    linear = [r[0] - r[3] - (r[1] if expert_b else 0) for r in rows]
    tied_head = 0
    if s.tied_embeddings and model.quantization is None:
        # A tied checkpoint that stores lm_head.weight anyway (Qwen3-0.6B's 1.5 GB file holds
        # 0.75 B parameters for a 0.6 B model): vLLM skips it (skip_prefixes "lm_head.").
        plain = fixed + (sum(linear) + mtp_params) * elem
        if weight_bytes - plain >= head * 9 // 10:
            tied_head = head
    if sum(linear) + mtp_params <= 0 and rows:
        # A config that gives no sizes (no hidden size, no vocabulary): the checkpoint as that
        # many equal layers, as before parts were known, rather than weights of nothing.
        each, extra = divmod(max(0, weight_bytes - fixed), len(rows))
        return Parts(
            layer_bytes=tuple(each + (1 if i < extra else 0) for i in range(len(rows))),
            expert_bytes=(0,) * len(rows),
            replicated_bytes=(0,) * len(rows),
            embed_bytes=embed,
            output_bytes=output,
            vision_bytes=vision,
        )
    if fixed + tied_head >= weight_bytes and rows:
        # The config's 16-bit parts alone outweigh the checkpoint: config and bytes disagree,
        # and a share of what is left would be negative (weights of less than nothing a card).
        # The checkpoint's bytes are what loads: spread as equal layers, as weights.spread does.
        each, extra = divmod(weight_bytes, len(rows))
        return Parts(
            layer_bytes=tuple(each + (1 if i < extra else 0) for i in range(len(rows))),
            expert_bytes=(0,) * len(rows),
            replicated_bytes=(0,) * len(rows),
            embed_bytes=0,
            output_bytes=0,
            vision_bytes=0,
        )
    rate = (weight_bytes - fixed - tied_head) / max(1, sum(linear) + mtp_params)
    layer_b, exp_b, repl_b = [], [], []
    for (_, exp, rep_lin, six), lin in zip(rows, linear, strict=True):
        e_bytes = expert_b if (expert_b and exp) else int(exp * rate)
        layer_b.append(int(lin * rate) + six * elem + (expert_b if expert_b and exp else 0))
        exp_b.append(e_bytes)
        repl_b.append(six * elem + int(rep_lin * rate))
    return Parts(
        layer_bytes=tuple(layer_b),
        expert_bytes=tuple(exp_b),
        replicated_bytes=tuple(repl_b),
        embed_bytes=embed,
        output_bytes=output,
        mtp_bytes=int(mtp_params * rate),
        vision_bytes=vision,
        tied_head_bytes=tied_head,
    )


def mxfp4_padded(model: Model, card: Card) -> tuple[int, int]:
    """(hidden, intermediate) an mxfp4 MoE's experts are padded to on this card: the Marlin
    kernel (Ampere) pads hidden to 256 and intermediate to 128 (quantization/mxfp4.py
    Mxfp4MoEMethod.create_weights; fused_moe/oracle/mxfp4.py from 0.2x); on Hopper triton_kernels'
    swizzled layout pads hidden to 256 (gpt-oss-20b loads 13.47 GiB where it stores 12.82:
    inferred from that record, the layout is triton_kernels', not vLLM's); Blackwell's TRTLLM
    kernels pad hidden to 256 and intermediate to 128."""
    h = model.hidden_size or 0
    inter = model.shapes.moe_intermediate_size if model.shapes else 0
    arch = card_arch(card)
    if arch in ("ampere", "blackwell"):
        return round_up(h, 256), round_up(inter, 128)
    if arch == "hopper":
        return round_up(h, 256), round_up(inter, 64)
    return h, round_up(inter, 64)


# The same stage of the same split recurs on every card class a plan tries (120 estimates of
# a 94-layer MoE on the example fleet, about 15 distinct stages); its per-layer sums are kept.
@lru_cache(maxsize=256)
def _stage_layer_bytes(
    m: Model, p: Parts, start: int, end: int, tp: int, dp: int, online_fp8: bool
) -> tuple[int, int, int]:
    """(layer, routed-expert, replicated) bytes of layers [start, end) on one rank, rounded up
    layer by layer as each layer's tensors are split."""
    elem = elem_bytes(m)
    h = m.hidden_size or 0
    kinds = layer_kinds(m)
    layers = experts = replicated = 0
    kv_extra = 0
    for i in range(start, min(end, len(p.layer_bytes))):
        whole = p.layer_bytes[i]
        exp = p.expert_bytes[i]
        rep = p.replicated_bytes[i]
        split = whole - exp - rep
        if online_fp8:
            # --quantization fp8 stores every linear weight in one byte (embedding, head,
            # norms and router gates stay 16-bit).
            split, exp = split * 1 // elem, exp * 1 // elem
        layers += cdiv(split, tp)
        replicated += rep
        experts += cdiv(exp, tp * dp)
        if kinds[i] in ("full", "sliding", "chunked") and tp > m.kv_heads > 0:
            # Past one KV head a rank, QKVParallelLinear replicates K and V: each rank holds
            # 1/kv_heads of them, not 1/tp.
            kv = 2 * h * m.kv_heads * m.head_dim * (1 if online_fp8 else elem)
            kv_extra += kv // m.kv_heads - cdiv(kv, tp)
    return layers + kv_extra, experts, replicated


def rank_weights(ctx: Context, weight_bytes: int, layout: WeightLayout | None) -> Weights:
    """What "Model loading took" reports on this rank."""
    m, rank, v, s = ctx.model, ctx.rank, ctx.version, ctx.settings
    shapes = m.shapes or ModelShapes()
    p = parts_of(m, weight_bytes, layout)
    tp, pp, dp = rank.tp, rank.pp, rank.dp
    start, end = rank.layer_range(m.layers)
    first, last = rank.stage == 0, rank.stage == pp - 1
    elem = elem_bytes(m)
    h, vocab = m.hidden_size or 0, m.vocab_size or 0
    online_fp8 = s.quantization in ("fp8", "fp8_per_tensor") and m.quantization is None

    kinds = layer_kinds(m)
    layers, experts, replicated = _stage_layer_bytes(m, p, start, end, tp, dp, online_fp8)

    # VocabParallelEmbedding / ParallelLMHead: the vocabulary padded to a multiple of 64,
    # split across TP (replicated across DP).
    pad = round_up(vocab, 64) / vocab if vocab else 1.0
    embedding = math.ceil(p.embed_bytes * pad / tp) + p.extra_bytes if first else 0
    output = 0
    skipped = p.mtp_bytes + p.tied_head_bytes
    if last:
        head = vocab * h * elem
        norm = h * elem
        if shapes.tied_embeddings:
            # Tied: the head is the embedding, kept once; a last stage that is not the first
            # loads its own copy of it.
            output = norm + (math.ceil(head * pad / tp) if not first else 0)
        else:
            output = norm + math.ceil(max(0, p.output_bytes - norm) * pad / tp)

    rope = 0
    if (
        shapes.rotary_dim
        and m.max_context
        and any(k in ("full", "sliding", "chunked", "mla") for k in kinds[start:end])
    ):
        # RotaryEmbedding's cos/sin cache: max positions × rotary dims in the model's dtype,
        # one a distinct rotary (get_rope caches them), on every rank.
        rope = shapes.rope_caches * m.max_context * shapes.rotary_dim * elem

    mla = 0
    if shapes.kv_lora_rank:
        # MLAAttention.process_weights_after_loading: kv_b_proj dequantised to W_UK and W_UV,
        # kv_lora_rank × (heads / tp) × (qk_nope + v_head) in bf16, a layer.
        n = sum(1 for k in kinds[start:end] if k == "mla")
        mla = n * shapes.kv_lora_rank * (m.attention_heads // tp)
        mla *= (shapes.qk_nope_head_dim + shapes.v_head_dim) * 2

    pad_b = 0
    if m.quantization == "mxfp4" and m.is_moe and experts:
        hp, ip = mxfp4_padded(m, ctx.card)
        inter = shapes.moe_intermediate_size
        if hp and inter:
            e = m.experts or 0
            stored = e * (3 * h * inter * 17 // 32 + (2 * inter + h) * 2)
            padded = e * (3 * hp * ip * 17 // 32 + (2 * ip + hp) * 2)
            n = sum(1 for i in range(start, end) if p.expert_bytes[i])
            pad_b = cdiv(n * (padded - stored), tp * dp)

    vision = 0
    if p.vision_bytes:
        text_only = bool(s.limit_mm_per_prompt) and all(c == 0 for _, c in s.limit_mm_per_prompt)
        if text_only and v.has("tower_skipped_text_only"):
            vision = 0
        elif v.has("tower_first_stage_only") and ctx.mrv2 and not first:
            vision = 0
        else:
            vision = cdiv(p.vision_bytes, tp)

    lora = lora_bytes(ctx) if s.lora else 0
    draft = 0
    spec = s.speculative
    if spec is not None and last:
        if spec.method == "mtp":
            draft = cdiv(p.mtp_bytes, tp)
            skipped -= p.mtp_bytes
        else:
            draft = spec.draft_weight_bytes
    return Weights(
        layers=layers,
        experts=experts,
        replicated=replicated,
        embedding=embedding,
        output=output,
        rope=rope,
        mla_decompressed=mla,
        mxfp4_padding=pad_b,
        vision=vision,
        lora=lora,
        draft=draft,
        skipped=skipped,
    )


def lora_bytes(ctx: Context) -> int:
    """LoRA adapter slots vLLM allocates at load (vllm/lora/layers: each LoRA-able linear keeps
    max_loras stacked A (rank × input) and B (output × rank) in the model's dtype, the
    TP-sharded side divided): q/k/v and o, gate/up and down of every layer on the stage. MoE
    experts' adapters are not counted."""
    lora = ctx.settings.lora
    if lora is None:
        return 0
    m, tp = ctx.model, ctx.rank.tp
    s = m.shapes or ModelShapes()
    h, r = m.hidden_size or 0, lora.max_lora_rank
    q = m.attention_heads * m.head_dim
    kv = m.kv_heads * m.head_dim
    inter = s.intermediate_size if not m.is_moe else s.shared_expert_intermediate_size
    per_layer = (
        3 * r * h  # qkv A: one a slice, whole input
        + r * (q + 2 * kv) // tp  # qkv B: column-parallel output
        + r * q // tp  # o A: row-parallel input
        + h * r  # o B
    )
    if inter:
        per_layer += 2 * r * h + 2 * inter * r // tp + r * inter // tp + h * r
    start, end = ctx.rank.layer_range(m.layers)
    return lora.max_loras * (end - start) * per_layer * elem_bytes(m)
