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
    # The LoRA slots by module (attention, MLP, experts, router, embedding, output head).
    lora_parts: tuple[tuple[str, int], ...] = ()
    draft: int = 0
    # Bytes of the checkpoint vLLM does not load on this rank's account: MTP layers, a tied
    # output head stored beside the embedding.
    skipped: int = 0
    # Of the layers' bytes above, those --cpu-offload-gb keeps in the host's pinned memory (the
    # card reads them over PCIe): not on the card.
    offloaded: int = 0

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
            - self.offloaded
        )


def elem_bytes(model: Model) -> int:
    return 4 if model.dtype == "float32" else 2


def layer_mlp_params(model: Model, index: int) -> int:
    """Of layer `index`'s parameters (layer_params), its MLP's: a dense layer's gated MLP, or a
    MoE layer's shared experts (Nemotron-H's relu² MLP layers: up and down)."""
    s = model.shapes or ModelShapes()
    h = model.hidden_size or 0
    if model.model_type == "nemotron_h":
        kinds = layer_kinds(model)
        kind = kinds[index] if index < len(kinds) else "full"
        return 2 * h * s.intermediate_size if kind == "" else 0
    if model.is_moe and index >= s.dense_layers:
        return 3 * h * s.shared_expert_intermediate_size
    return 3 * h * s.intermediate_size


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
        if index in s.indexer_layers:
            # The sparse-attention indexer, whole on every rank (vllm/models/deepseek_v32/
            # attention.py DeepseekV32Indexer): wq_b a ReplicatedLinear (q_lora_rank → heads ×
            # head_dim, stored like the other linear weights), wk_weights_proj with disable_tp
            # and no quantisation (hidden → head_dim + heads, 16-bit), k_norm a LayerNorm.
            dim, n = s.index_head_dim, s.index_heads
            wq_b = (s.q_lora_rank or h) * dim * n
            sixteen_here = h * (dim + n) + 2 * dim
            params += wq_b + sixteen_here
            repl += wq_b
            sixteen += sixteen_here
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


# The families whose MTP module carries its own embedding and output head (DeepSeek's
# model.layers.61.embed_tokens and shared_head.head).
MTP_OWN_EMBEDDING = ("deepseek_v3", "deepseek_v2", "kimi_k2")


def mtp_own_embedding(model: Model) -> bool:
    """Whether the checkpoint's MTP layers carry their own embedding and output head: DeepSeek's
    MTP module does (vllm/model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictor-
    Layer's embed_tokens and shared_head.head), and every MLA model whose config counts its MTP
    layers in num_nextn_predict_layers is built on it or its copy (glm4_moe_lite_mtp.py for
    GLM-4.7-Flash, deepseek_v32's mtp.py for GLM-5), whatever its model type."""
    s = model.shapes
    if model.model_type in MTP_OWN_EMBEDDING:
        return True
    return bool(s and s.mtp_layers and s.kv_lora_rank and "mla" in s.layer_kinds)


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
    # Of the MTP bytes: the routed experts, what every rank keeps whole (norms, router, MLA's
    # q/kv-a projection, the 2H → H projection), and DeepSeek's own embedding and head.
    mtp_experts: int = 0
    mtp_replicated: int = 0
    mtp_embedding: int = 0
    mtp_head: int = 0
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
        other = max(0, weight_bytes - parts.total)
        vision = min(other, s.vision_params * elem)
        rest = other - vision
        outside = rest if s.mtp_layers else 0
        mtp = sum(parts.layer_bytes[n:]) + outside
        mtp_exp = sum(parts.expert_bytes[n:])
        if outside and layers and layers[-1]:
            # mtp.* under another name (Qwen3-Next): its experts as the last layer's share.
            mtp_exp += int(outside * experts[-1] / layers[-1])
        own = mtp_own_embedding(model) and mtp >= 2 * s.mtp_layers * head
        mtp_embed = s.mtp_layers * head if own else 0
        mtp_repl = 0
        if mtp and rows:
            # The MTP layer's whole-on-every-rank part as the last layer's, at its rate, with
            # DeepSeek's 2H → H eh_proj (an nn.Linear; Qwen3-Next's fc is column-parallel).
            params, exp, rep_lin, six = rows[-1]
            lin = params - exp - six
            r = (layers[-1] - experts[-1] - six * elem) / lin if lin > 0 and layers else 1.0
            proj = (2 * h * h + 2 * h) * elem if own else 2 * h * elem
            mtp_repl = s.mtp_layers * (six * elem + int(rep_lin * r) + proj)
            mtp_repl = min(mtp_repl, max(0, mtp - mtp_exp - 2 * mtp_embed))
        tied_head = head if s.tied_embeddings and parts.output_bytes >= head else 0
        return Parts(
            layer_bytes=layers,
            expert_bytes=experts,
            replicated_bytes=tuple(repl),
            embed_bytes=parts.embed_bytes,
            output_bytes=parts.output_bytes - tied_head,
            mtp_bytes=mtp,
            mtp_experts=min(mtp_exp, mtp),
            mtp_replicated=mtp_repl,
            mtp_embedding=mtp_embed,
            mtp_head=mtp_embed,
            vision_bytes=vision,
            extra_bytes=0 if s.mtp_layers else rest,
            tied_head_bytes=tied_head,
        )
    embed = vocab * h * elem
    output = h * elem + (0 if s.tied_embeddings else head)
    vision = s.vision_params * elem
    sixteen = [r[3] * elem for r in rows]
    # An MTP module: a layer like the last (its linear weights at the checkpoint's rate, its
    # norms and router 16-bit), two 16-bit norms and the 2H → H projection, and DeepSeek's own
    # embedding and head (16-bit).
    mtp_params = mtp_sixteen = mtp_embed = 0
    if s.mtp_layers and rows:
        mtp_params = s.mtp_layers * (rows[-1][0] - rows[-1][3])
        mtp_sixteen = s.mtp_layers * (rows[-1][3] + 2 * h)
        if mtp_own_embedding(model):
            # DeepSeek's eh_proj (16-bit, an nn.Linear kept whole), embedding and head.
            mtp_sixteen += s.mtp_layers * 2 * h * h
            mtp_embed = s.mtp_layers * head
        else:
            # Qwen3-Next's fc, a column-parallel linear at the checkpoint's rate.
            mtp_params += s.mtp_layers * 2 * h * h
    expert_b = 0
    if model.quantization == "mxfp4" and model.is_moe:
        e, inter = model.experts or 0, s.moe_intermediate_size
        # gate_up (2I × H) and down (H × I) weights at 4.25 bits, a bf16 bias an output row.
        expert_b = e * (3 * h * inter * 17 // 32 + (2 * inter + h) * 2)
    fixed = embed + output + vision + sum(sixteen) + mtp_sixteen * elem + 2 * mtp_embed
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
    mtp_repl = 0
    if s.mtp_layers and rows:
        mtp_repl = s.mtp_layers * int(rows[-1][2] * rate) + mtp_sixteen * elem
    return Parts(
        layer_bytes=tuple(layer_b),
        expert_bytes=tuple(exp_b),
        replicated_bytes=tuple(repl_b),
        embed_bytes=embed,
        output_bytes=output,
        mtp_bytes=int(mtp_params * rate) + mtp_sixteen * elem + 2 * mtp_embed,
        mtp_experts=int(s.mtp_layers * rows[-1][1] * rate) if s.mtp_layers and rows else 0,
        mtp_replicated=mtp_repl,
        mtp_embedding=mtp_embed,
        mtp_head=mtp_embed,
        vision_bytes=vision,
        tied_head_bytes=tied_head,
    )


def mxfp4_padded(model: Model, card: Card) -> tuple[int, int]:
    """(hidden, the multiple the intermediate size a partition is rounded to) of an mxfp4 MoE's
    experts on this card (fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_
    size, applied by FusedMoE to intermediate_size_per_partition, after the tensor-parallel
    split): the Marlin kernel (Ampere) pads hidden to 256 and the partition to 128; on Hopper
    triton_kernels' swizzled layout pads hidden to 256 (gpt-oss-20b loads 13.47 GiB where it
    stores 12.82: inferred from that record, the layout is triton_kernels', not vLLM's) and the
    partition to 64; Blackwell's TRTLLM kernels pad hidden to 256 and the partition to 128."""
    h = model.hidden_size or 0
    arch = card_arch(card)
    if arch in ("ampere", "blackwell"):
        return round_up(h, 256), 128
    if arch == "hopper":
        return round_up(h, 256), 64
    return h, 64


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


def mtp_share(m: Model, p: Parts, tp: int, dp: int, pp: int) -> int:
    """What the MTP module of the checkpoint costs a rank of the last stage when speculation runs
    it (DeepSeekMTP, Qwen3NextMTP): a decoder layer like the target's, split as the target's
    layers are (its routed experts over tp × dp, what they keep whole on every rank), its MLA
    weights decompressed like the target's, and not its embedding and head, which vLLM shares
    with the target (v1/spec_decode/llm_base_proposer.py _maybe_share_embeddings,
    _maybe_share_lm_head) — but for the embedding under pipeline parallelism, where the last
    stage has none to lend and builds its own."""
    s = m.shapes or ModelShapes()
    if not p.mtp_bytes or not s.mtp_layers:
        return 0
    split = p.mtp_bytes - p.mtp_experts - p.mtp_replicated - p.mtp_embedding - p.mtp_head
    share = cdiv(max(0, split), tp) + p.mtp_replicated + cdiv(p.mtp_experts, tp * dp)
    if s.kv_lora_rank:
        # MLAAttention.process_weights_after_loading, as for the target's layers.
        share += (
            s.mtp_layers
            * s.kv_lora_rank
            * (m.attention_heads // tp)
            * 2
            * (s.qk_nope_head_dim + s.v_head_dim)
        )
    if pp > 1:
        vocab, h = m.vocab_size or 0, m.hidden_size or 0
        pad = round_up(vocab, 64) / vocab if vocab else 1.0
        share += math.ceil((p.mtp_embedding or vocab * h * elem_bytes(m)) * pad / tp)
    return share


def rank_weights(
    ctx: Context, weight_bytes: int, layout: WeightLayout | None, notes: list[str] | None = None
) -> Weights:
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
        hp, align = mxfp4_padded(m, ctx.card)
        inter = shapes.moe_intermediate_size
        if hp and inter:
            # Expert parallelism keeps whole experts (E / ranks of them); else every expert at
            # intermediate / ranks, each partition rounded up on its own (so TP 2 pads more).
            e, width = m.experts or 0, tp * dp
            ep = rank.ep and width > 1
            local = cdiv(e, width) if ep else e
            ip = round_up(inter if ep else cdiv(inter, width), align)
            stored = e * (3 * h * inter * 17 // 32 + (2 * inter + h) * 2)
            padded = local * (3 * hp * ip * 17 // 32 + (2 * ip + hp) * 2)
            n = sum(1 for i in range(start, end) if p.expert_bytes[i])
            pad_b = n * max(0, padded - cdiv(stored, width))

    vision = 0
    if p.vision_bytes:
        # _mark_tower_model builds no tower only when every modality it reads is limited to 0:
        # Qwen2.5-VL's video keeps its default limit when only images are turned off.
        limits = dict(s.limit_mm_per_prompt)
        text_only = all(limits.get(k, 1) == 0 for k in shapes.mm_modalities or ("image",))
        if text_only and v.has("tower_skipped_text_only"):
            vision = 0
        elif v.has("tower_first_stage_only") and ctx.mrv2 and not first:
            vision = 0
        else:
            vision = cdiv(p.vision_bytes, tp)

    lora_by = lora_parts(ctx)
    draft = 0
    spec = s.speculative
    if spec is not None and last:
        if spec.method == "mtp":
            draft = mtp_share(m, p, tp, dp, pp)
            skipped -= p.mtp_bytes
        elif spec.method != "ngram":
            # An EAGLE head or draft model is built with the target's parallel layers
            # (eagle.py, draft_model.py: the draft's tensor-parallel size is the target's), so
            # a rank holds its share, but an EAGLE head's fc whole (ReplicatedLinear in
            # llama_eagle.py, llama_eagle3.py); under pipeline parallelism the last stage has no
            # embedding to lend it, and a draft whose checkpoint has none builds its own.
            whole = min(spec.draft_replicated_bytes, spec.draft_weight_bytes)
            draft = cdiv(spec.draft_weight_bytes - whole, tp) + whole
            if pp > 1 and not spec.draft_embed_bytes:
                draft += cdiv(spec.draft_embedding_size, tp)
            if spec.draft_unweighed and notes is not None:
                notes.append(
                    f"The draft {spec.draft_unweighed} publishes no safetensors weights to "
                    f"read: it is counted at its config's parameters in 16-bit, "
                    f"{spec.draft_weight_bytes / (1 << 30):.2f} GiB, the most vLLM would load."
                )
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
        lora=sum(n for _, n in lora_by),
        lora_parts=lora_by,
        draft=draft,
        skipped=skipped,
    )


# Architectures whose embedding and output head take LoRA slots too: those whose class names them
# in `embedding_modules` (vLLM 0.33's models/*.py; get_supported_lora_modules adds them to the
# modules an adapter may target). Gemma, DeepSeek, gpt-oss, Qwen2 and Mistral name none.
LORA_EMBEDDING_ARCHITECTURES = frozenset(
    {
        "ApertusForCausalLM", "CohereForCausalLM", "ExaoneForCausalLM", "Exaone4ForCausalLM",
        "ExaoneMoeForCausalLM", "FalconH1ForCausalLM", "GraniteForCausalLM",
        "GraniteMoeForCausalLM", "GraniteMoeHybridForCausalLM", "GraniteMoeSharedForCausalLM",
        "HyperCLOVAXForCausalLM", "JambaForCausalLM", "K2HorizonForCausalLM", "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM", "LlamaForCausalLM", "MiniCPMForCausalLM", "MixtralForCausalLM",
        "NemotronForCausalLM", "NemotronHForCausalLM", "DeciLMForCausalLM",
        "Param2MoEForCausalLM", "PhiMoEForCausalLM", "Qwen3ForCausalLM", "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM", "Qwen3MoeForCausalLM", "SolarForCausalLM",
    }
)  # fmt: skip
# 0.11's embedding adapter rows beyond the vocabulary (LoRAConfig.lora_extra_vocab_size) and the
# padding of the output head's B (lora_vocab_padding_size).
LORA_EXTRA_VOCAB = 256


def lora_parts(ctx: Context) -> tuple[tuple[str, int], ...]:
    """LoRA adapter slots vLLM allocates at load, by module, in bytes on this rank (each layer
    vllm/lora/model_manager.py _create_lora_modules wraps keeps max_loras stacked A (rank ×
    input) and B (output × rank) in the model's dtype, the TP-sharded side divided; with no
    --lora-target-modules every module the model supports is wrapped):

    - attention: q/k/v (A whole a slice, B column-parallel) and o (A row-parallel, B whole);
      MLA's q_a/kv_a (replicated), q_b and kv_b (column-parallel) and o;
    - MLP: gate/up and down of a dense layer, or of a MoE layer's shared experts;
    - experts (0.12 on, lora/layers/fused_moe.py FusedMoEWithLoRA): for every local expert,
      w13's A (rank × hidden) and B (intermediate a partition × rank) for gate and up, w2's A
      (rank × intermediate a partition) and B (hidden × rank); expert parallelism keeps whole
      experts (E / ranks of them), else every expert at intermediate / ranks;
    - router: the gate (a ReplicatedLinear, hidden → experts), whole on every rank;
    - embedding (first stage) and output head (last stage), for the architectures that name
      them (VocabParallelEmbeddingWithLoRA: A vocabulary × rank, B hidden × rank;
      LogitsProcessorWithLoRA: A rank × hidden, B vocabulary × rank), whole on every rank.
    """
    lora = ctx.settings.lora
    if lora is None:
        return ()
    m, rank, v = ctx.model, ctx.rank, ctx.version
    s = m.shapes or ModelShapes()
    tp = rank.tp
    h, r = m.hidden_size or 0, lora.max_lora_rank
    heads, kvh, hd = m.attention_heads, m.kv_heads, m.head_dim
    q, kv = heads * hd, kvh * hd
    kinds = layer_kinds(m)
    start, end = rank.layer_range(m.layers)
    width = tp * rank.dp
    ep = rank.ep and width > 1

    def mlp(inter: int) -> int:
        # MergedColumnParallelLinear gate_up (A 2 × rank × hidden, B 2 × inter / tp × rank) and
        # RowParallelLinear down (A rank × inter / tp, B hidden × rank).
        return 2 * r * h + 2 * inter * r // tp + r * inter // tp + h * r if inter else 0

    attention = dense = experts = router = 0
    for i in range(start, end):
        kind = kinds[i] if i < len(kinds) else "full"
        if kind == "mla":
            q_in = s.q_lora_rank or h
            if s.q_lora_rank:
                attention += r * h + s.q_lora_rank * r  # q_a (replicated)
            attention += r * q_in + heads * (s.qk_nope_head_dim + s.qk_rope_head_dim) * r // tp
            attention += r * h + (s.kv_lora_rank + s.qk_rope_head_dim) * r  # kv_a (replicated)
            attention += r * s.kv_lora_rank + heads * (s.qk_nope_head_dim + s.v_head_dim) * r // tp
            attention += r * heads * s.v_head_dim // tp + h * r  # o
        else:
            attention += 3 * r * h + r * (q + 2 * kv) // tp + r * q // tp + h * r
        if m.is_moe and i >= s.dense_layers:
            e = m.experts or 0
            inter = s.moe_intermediate_size
            dense += mlp(s.shared_expert_intermediate_size)
            router += r * h + e * r
            if v.has("lora_moe_experts") and e and inter:
                local = cdiv(e, width) if ep else e
                part = inter if ep else cdiv(inter, width)
                # Gated experts (w1 and w3) take two w13 slices; Nemotron-H's relu² experts one.
                slices = 1 if m.model_type == "nemotron_h" else 2
                experts += local * r * (slices * (h + part) + part + h)
        else:
            dense += mlp(s.intermediate_size)
    out = [("attention", attention), ("MLP", dense), ("experts", experts), ("router", router)]
    if m.architecture in LORA_EMBEDDING_ARCHITECTURES:
        vocab = m.vocab_size or 0
        extra = LORA_EXTRA_VOCAB if v.has("lora_extra_vocab") else 0
        if rank.stage == 0:
            # 0.11 also keeps the extra rows' embeddings (embeddings_tensors, extra × hidden).
            out.append(("embedding", (vocab + extra) * r + h * r + extra * h))
        if rank.stage == rank.pp - 1:
            rows = round_up(vocab, extra) if extra else vocab
            out.append(("output head", r * h + rows * r))
    scale = lora.max_loras * elem_bytes(m)
    return tuple((name, n * scale) for name, n in out if n)
