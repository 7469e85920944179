"""What a vLLM rank spends beside weights and KV cache: the batch defaults a release picks for the
card, the profile run's peak (logits, sampler warm-up, hidden states, encoder outputs), memory
outside torch and CUDA graphs (vllm/v1/worker/gpu_worker.py, gpu_model_runner.py,
gpu/model_runner.py, vllm/config/vllm.py)."""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.engines.vllm_inputs import (
    KIB,
    Context,
    card_arch,
    card_family,
    card_sms,
    cdiv,
    round_up,
)
from llmfit.plan.engines.vllm_versions import VllmVersion
from llmfit.plan.engines.vllm_weights import Weights, elem_bytes, mxfp4_padded
from llmfit.plan.layout import Card
from llmfit.plan.model import Model

GIB = 1 << 30

# ------------------------------------------------------------------------------------------------
# Defaults a version picks for a card
# ------------------------------------------------------------------------------------------------


def batch_defaults(version: VllmVersion, card: Card) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) `vllm serve` uses on this card
    (vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, OPENAI_API_SERVER): 16,384 and
    1,024 on cards of 160 GiB or more from 0.28; 8,192 and 1,024 on cards of 70 GiB or more
    that are not A100s (nor, in 0.33, a GB10); 2,048 and 256 elsewhere."""
    total = card.total_bytes
    if version.has("big_card_batch_defaults") and total >= 160 * GIB:
        return 16_384, 1024
    if total >= 70 * GIB and card_family(card) not in ("a100", "gb10"):
        return 8192, 1024
    return 2048, 256


# The sampler warm-up's peak a request a vocabulary entry, bytes (see activation()).
# 0.11's V1 sampler (FlashInfer top-k/top-p): fitted to llm-d's three H100 records (Qwen3-0.6B
# 5.56 GiB, Llama-3.1-8B 4.76, gpt-oss-20b 7.38 at 1,024 requests): 38 B a request a vocabulary
# entry, with 2.75 B a batched token a hidden unit (the old fit's 4.75 B x 8,192 tokens is the
# same 38 B x 1,024 requests).
SAMPLER_BYTES_FLASHINFER = 38
# 0.12-0.16 (PyTorch sort in apply_top_k_top_p_pytorch): the bf16 logits (2) and their fp32 copy
# (4) stay alive while the sort holds values (4) and int64 indices (8), the top-p softmax (4) and
# the two bool masks (1 + 1): 24 B.
SAMPLER_BYTES_SORT = 24
# 0.17 on (Triton top-k/top-p, in place): bf16 logits 2 + fp32 4 + the softmax probs 4 + the
# exponential noise random_sample divides by 4 = 14 B, plus the kernel's per-SM row buffer.
SAMPLER_BYTES_TRITON = 14
# Model Runner V2 (vllm/v1/worker/gpu/model_runner.py _dummy_sampler_run, sample/sampler.py):
# the bf16 logits and the fp32 copy its warm-up pass makes (2 + 4); everything after runs in
# place in Triton kernels. Its penalties keep output_bin_counts (int32, 4 B) and prompt_bin_mask
# (1 bit) a request a vocabulary entry for good: buffers, not activation.
SAMPLER_BYTES_MRV2 = 6
SAMPLER_STATE_BYTES_MRV2_X8 = 33  # 4 B + 1/8 B, in eighths
HIDDEN_BYTES_X4 = 11  # 2.75 B a batched token a hidden unit (the old fit; the live hidden states)
# Memory outside torch after the snapshot: 0.13 GiB in every 0.11 record at TP 1. NCCL starts
# before the snapshot since V1 (gpu_worker.init_device), so tensor parallelism adds nothing: the
# 1.79 GiB a card an older model of llmfit's charged at TP 2 came from a V0 record (PR #10511).
NON_TORCH = 139_586_437  # 0.13 GiB
# CUDA graphs, a layer a captured size: Qwen3-0.6B's 28 dense layers took 0.10 GiB and
# gpt-oss-20b's 24 MoE layers 0.39 GiB, each over 0.11's 67 capture sizes (llm-d's H100
# records): 56 KiB a dense layer, 254 KiB a MoE layer (its routing, expert and all-to-all
# kernels). Fitted: vLLM measures this by a trial capture (gpu/cudagraph_utils.py
# profile_cudagraph_memory), which no arithmetic reproduces.
GRAPH_BYTES_DENSE_LAYER = 56 * KIB
GRAPH_BYTES_MOE_LAYER = 254 * KIB


def capture_sizes(
    version: VllmVersion, model: Model, card: Card, max_num_seqs: int, batched: int, spec: int
) -> int:
    """How many batch sizes vLLM captures CUDA graphs for (vllm/config/vllm.py
    _set_cudagraph_sizes): up to min(2 × max_num_seqs × (1 + speculative tokens), 512) tokens
    (1,024 for gpt-oss from 0.12 and on Blackwell from 0.28), never past max_num_batched_tokens;
    1, 2, 4, then every 8 (0.11: every 8 to the end; from 0.12 every 16 past 256)."""
    limit = 512
    if version.has("gpt_oss_capture_1024") and model.model_type == "gpt_oss":
        limit = 1024
    elif version.has("blackwell_capture_1024") and card_arch(card) == "blackwell":
        limit = 1024
    top = min(max_num_seqs * (1 + spec) * 2, limit, batched)
    sizes = {s for s in (1, 2, 4) if s <= top}
    if version.has("capture_sizes_step16"):
        sizes |= set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))
    else:
        sizes |= set(range(8, top + 1, 8))
    return len(sizes)


# ------------------------------------------------------------------------------------------------
# The profile run
# ------------------------------------------------------------------------------------------------


def activation(ctx: Context, last: bool, transient_moe: int = 0) -> tuple[int, int]:
    """(transient peak, persistent buffers) of the profile run on this rank
    (gpu_model_runner.py / gpu/model_runner.py profile_run): a dummy forward of
    max_num_batched_tokens tokens over min(tokens, max_num_seqs) requests, then, on the last
    stage, logits for one token a request and the sampler's warm-up, while the forward's hidden
    states are still held. The sampler's peak a request a vocabulary entry is the release's
    (SAMPLER_BYTES_*); the hidden states cost 2.75 B a token a hidden unit (the fit of 0.11).
    A MoE's intermediate buffers that the forward frees again (`transient_moe`, before 0.13)
    peak before the sampler runs: the larger of the two counts."""
    m, v = ctx.model, ctx.version
    vocab, h = m.vocab_size or 0, m.hidden_size or 0
    reqs = min(ctx.batched, ctx.seqs)
    hidden = ctx.batched * HIDDEN_BYTES_X4 * h // 4
    if not last or m.task != "generate":
        return hidden + transient_moe, 0
    if ctx.mrv2:
        persistent = reqs * vocab * SAMPLER_STATE_BYTES_MRV2_X8 // 8
        return hidden + max(reqs * vocab * SAMPLER_BYTES_MRV2, transient_moe), persistent
    per = {
        "flashinfer": SAMPLER_BYTES_FLASHINFER,
        "sort": SAMPLER_BYTES_SORT,
        "triton": SAMPLER_BYTES_TRITON,
    }[v.sampler]
    buffer = card_sms(ctx.card) * vocab * 4 if v.sampler == "triton" else 0
    return hidden + max(reqs * vocab * per + buffer, transient_moe), 0


def moe_kernel(ctx: Context) -> str:
    """Which fused-MoE kernel vLLM runs the experts with, where the kernels' memory differs:
    "flashinfer" (FlashInfer's CUTLASS MoE) or "triton" (Triton's, Marlin's and vLLM's CUTLASS,
    whose buffers are alike). The FP8 oracle (fused_moe/oracle/fp8.py select_fp8_moe_backend and
    _get_priority_backends) puts FlashInfer's CUTLASS first on Hopper (SM 9.0) for 128 x 128
    block-FP8 weights with dynamic 128-wide activation scales (kFp8Static128BlockSym,
    kFp8Dynamic128Sym) from 0.15, and from 0.17 only where expert parallelism is on (ep_size
    > 1), Triton first otherwise. FlashInfer's kernel takes no LoRA (0.15-0.17: a LoRA server
    runs Triton; 0.34: FlashInferExperts.supports_lora is False)."""
    m, v, rank = ctx.model, ctx.version, ctx.rank
    if not v.has("moe_flashinfer_block_fp8") or card_arch(ctx.card) != "hopper":
        return "triton"
    block = any(r.check == "block_fp8_moe" and r.multiple == 128 for r in m.split_rules)
    if m.quantization != "fp8" or not block or ctx.settings.lora is not None:
        return "triton"
    ep = rank.ep and rank.tp * rank.dp > 1
    if v.has("moe_flashinfer_ep_only") and not ep:
        return "triton"
    return "flashinfer"


def moe_tokens(ctx: Context) -> int:
    """M, the tokens a rank's experts see at once: its own max_num_batched_tokens, and under data
    parallelism every rank's (the default all-gather/reduce-scatter all-to-all,
    prepare_finalize/naive_dp_ep.py, gathers each DP rank's batch before the experts run:
    device_communicators/all2all.py AgRsAll2AllManager.dispatch, and the profile run gives each
    rank a full batch), held to VLLM_FUSED_MOE_CHUNK_SIZE before 0.18 (65,536, then 16,384 from
    0.12)."""
    tokens = ctx.batched * ctx.rank.dp
    chunk = ctx.version.moe_chunk
    return min(tokens, chunk) if chunk is not None else tokens


def _moe_shapes(ctx: Context) -> tuple[int, int, int] | None:
    """(H, I, top-k) of the rank's experts as the kernel sees them, or None without MoE layers on
    this stage: H the hidden size, I the intermediate size a partition (whole experts under
    expert parallelism), both as an mxfp4 kernel pads them."""
    m, rank = ctx.model, ctx.rank
    s = m.shapes
    if not m.is_moe or s is None or not s.moe_intermediate_size:
        return None
    start, end = rank.layer_range(m.layers)
    if end <= max(start, s.dense_layers):
        return None
    h = m.hidden_size or 0
    width = rank.tp * rank.dp
    ep = rank.ep and width > 1
    part = s.moe_intermediate_size if ep else cdiv(s.moe_intermediate_size, width)
    if m.quantization == "mxfp4":
        # The experts' sizes as the mxfp4 kernel pads them (FusedMoE's moe_config).
        h, align = mxfp4_padded(m, ctx.card)
        part = round_up(part, align)
    return h, part, m.experts_active or 1


def moe_workspace(ctx: Context) -> int:
    """Bytes of the fused MoE's intermediate buffers on this rank, as the profile run sizes them
    (fused_moe/modular_kernel.py _allocate_buffers over the experts' workspace_shapes), for the
    M tokens of moe_tokens(): Triton's (and Marlin's, vLLM CUTLASS's alike) workspace13 of M ×
    top-k × max(I, H) and workspace2 of M × top-k × max(2I, H); FlashInfer's CUTLASS
    (experts/flashinfer_cutlass_moe.py FlashInferExperts.workspace_shapes) workspace13 and its
    output of M × H, workspace2 none; in the activations' dtype. The workspace is one for every
    layer (v1/worker/workspace.py), on a stage that holds MoE layers."""
    shapes = _moe_shapes(ctx)
    if shapes is None:
        return 0
    h, part, topk = shapes
    tokens = moe_tokens(ctx)
    if moe_kernel(ctx) == "flashinfer":
        return tokens * h * elem_bytes(ctx.model)
    return tokens * topk * (max(part, h) + max(2 * part, h)) * elem_bytes(ctx.model)


# FlashInfer's MoE scratch is cut into buffers each aligned to kCudaMemAlign (256 B,
# tensorrt_llm/common: calculateTotalWorkspaceSize).
_FI_ALIGN = 256
# The FP8 block-scale GEMM's activation rows are padded per expert to 32 (deep_gemm
# compute_padded_offset: M + experts × 31 at most, rounded to 32); llmfit takes the most.
_FI_BLOCK_PAD = 32


def moe_scratch(ctx: Context) -> int:
    """What FlashInfer's CUTLASS MoE allocates on every call beside vLLM's workspace, freed after
    it: a transient of the profile run's forward, with the experts' gathered input alive beside
    it. vLLM passes it no workspace_buffer (flashinfer_cutlass_moe.py FlashInferExperts.apply),
    so flashinfer's binding allocates getWorkspaceInfo's bytes each call
    (flashinfer/data/csrc/fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu;
    the sizes in cutlass_fused_moe_kernels.cuh CutlassMoeFCRunner::
    getWorkspaceDeviceBufferSizes, read in flashinfer-python 0.7.4, the nearest on the index to
    the 0.7.3 vLLM 0.34 pins). For the DeepSeek FP8 block-scale runner (bf16 activations, fp8
    weights) and N = M × top-k rows:
    - the row maps, N × 4 B three times, and the blocked map, local experts × M × 4 B;
    - GEMM inputs, overlapped: max(N × H, N × I) × 2 B (permuted input, FC2's bf16 output);
    - GEMM outputs: FC1's gated output, N × 2I × 2 B;
    - the block-scale GEMM's own workspace, its FP8 copy of the larger GEMM's activations and
      their per-128 scales (fp8_blockscale_gemm.cu getWorkspaceSizeBase): N × H × 1 B and
      N × ⌈H / 128⌉ × 4 B.
    The GEMM tactics' few MiB are left out. Under data parallelism the all-gathered input
    (M × H in 16-bit) is held while the kernel runs, and counted here too."""
    shapes = _moe_shapes(ctx)
    if shapes is None or moe_kernel(ctx) != "flashinfer":
        return 0
    h, part, topk = shapes
    m, rank = ctx.model, ctx.rank
    tokens = moe_tokens(ctx)
    rows = tokens * topk
    width = rank.tp * rank.dp
    local = cdiv(m.experts or 0, width) if rank.ep and width > 1 else (m.experts or 0)

    def aligned(n: int) -> int:
        return round_up(n, _FI_ALIGN)

    maps = 3 * aligned(rows * 4) + aligned(local * tokens * 4)
    inputs = aligned(max(rows * h, rows * part) * 2)
    outputs = aligned(rows * 2 * part * 2)
    rows4 = round_up(rows, 4)
    padded = round_up(rows + local * (_FI_BLOCK_PAD - 1), _FI_BLOCK_PAD)
    fp8 = max(rows4 * h + padded * cdiv(h, 128) * 4, rows4 * part + padded * cdiv(part, 128) * 4)
    gathered = tokens * h * elem_bytes(m) if rank.dp > 1 else 0
    return maps + inputs + outputs + aligned(fp8) + gathered


def stage_buffers(ctx: Context) -> int:
    """What a pipeline stage after the first keeps to receive the previous stage's activations:
    `intermediate_tensors`, the hidden states and the residual for max_num_batched_tokens
    tokens (models/utils.py make_empty_intermediate_tensors_factory), allocated once and kept
    (gpu_model_runner.py _dummy_run; Model Runner V2 at load, gpu/model_runner.py load_model)."""
    if ctx.rank.stage == 0:
        return 0
    return ctx.batched * (ctx.model.hidden_size or 0) * 2 * elem_bytes(ctx.model)


def indexer_topk_buffer(ctx: Context) -> int:
    """A sparse-attention model's top-k indices, int32, index_topk of them for each of
    max_num_batched_tokens tokens, allocated with the model on every rank and kept
    (vllm/model_executor/models/deepseek_v2.py DeepseekV2Model.__init__, topk_indices_buffer).
    Made at load, it is counted whatever the release: with the weights before 0.27, out of the
    free memory after."""
    s = ctx.model.shapes
    return ctx.batched * s.index_topk * 4 if s and s.indexer_layers else 0


# Every modality a processor takes is allowed this many items a prompt unless
# --limit-mm-per-prompt says otherwise (vllm/config/multimodal.py MultiModalConfig).
MM_DEFAULT_LIMIT = 999
# The most frames Qwen2-VL's profile run gives its dummy video (qwen2_vl.py _MAX_FRAMES_PER_VIDEO).
MAX_FRAMES_PER_VIDEO = 14


@dataclass(frozen=True)
class EncoderProfile:
    """What the profile run of a multimodal model's vision encoder holds (gpu_model_runner.py
    profile_run and multimodal/encoder_budget.py MultiModalBudget): the modality with the most
    tokens an item, the items of it the budget takes, the encoder outputs kept while the decoder
    runs, and the encoder's own peak."""

    modality: str = ""
    items: int = 0
    tokens_per_item: int = 0
    outputs: int = 0
    peak: int = 0


def mm_tokens(model: Model, max_model_len: int) -> dict[str, int]:
    """The most tokens one item of each modality becomes (each processor's
    get_mm_max_tokens_per_item): a picture its fixed count; a Qwen2-VL video as many frames of
    the largest picture as max_model_len holds, up to 14, in pairs (the temporal patch)."""
    s = model.shapes
    if s is None or not s.mm_tokens_per_item:
        return {}
    out = {"image": s.mm_tokens_per_item}
    t = s.mm_video_temporal
    if t:
        # _get_max_video_frames: the most frames whose tokens fit max_model_len, from 1.
        frames = 1
        while cdiv(frames + 1, t) * s.mm_tokens_per_item <= max_model_len:
            frames += 1
        frames = max(min(frames, MAX_FRAMES_PER_VIDEO), 1)
        out["video"] = cdiv(frames, t) * s.mm_tokens_per_item
    return out


def encoder_profile(ctx: Context, weights: Weights) -> EncoderProfile:
    """The vision encoder's profile run on the rank that builds the tower.

    The profiled modality is the one with the most tokens an item among those
    --limit-mm-per-prompt leaves above 0; the budget is max(max_num_batched_tokens, its
    tokens) (compute_mm_encoder_budget), the items the budget // tokens an item, held to
    max_num_seqs × the items a prompt may carry (MultiModalBudget._get_max_items). The outputs
    are those tokens at the text model's hidden size. The encoder's peak, at the least: the
    items' pixels, and in its widest layer, for every patch, the residual, the normed input, the
    MLP's up projection (gate and up when gated) and its activation, in the model's dtype. Where
    the model's vision shapes are not known, the outputs of a batch of max_num_batched_tokens."""
    m = ctx.model
    s = m.shapes
    if not weights.vision or s is None:
        return EncoderProfile()
    elem = elem_bytes(m)
    text = m.hidden_size or 0
    limits = dict(ctx.settings.limit_mm_per_prompt)
    tokens = {
        k: n for k, n in mm_tokens(m, ctx.max_model_len).items()
        if limits.get(k, MM_DEFAULT_LIMIT) > 0
    }  # fmt: skip
    if not tokens:
        return EncoderProfile(outputs=ctx.batched * text * elem)
    modality = max(tokens, key=lambda k: (tokens[k], k))
    per = tokens[modality]
    budget = max(ctx.batched, max(tokens.values()))
    per_prompt = max(1, min(limits.get(modality, MM_DEFAULT_LIMIT), ctx.max_model_len // per))
    items = max(1, min(budget // per, ctx.seqs * per_prompt))
    outputs = items * per * text * elem
    patches = items * per * s.mm_patches_per_token
    d, f = s.vision_hidden, s.vision_intermediate
    up = 2 * f if s.vision_gated else f
    peak = patches * ((2 * d + up + f) * elem + s.mm_pixels_per_patch * elem)
    return EncoderProfile(modality, items, per, outputs, peak)


def cuda_graph_bytes(ctx: Context) -> int:
    """Captured sizes × a layer's cost, over the stage's layers (MoE layers cost more)."""
    if ctx.settings.enforce_eager:
        return 0
    m = ctx.model
    start, end = ctx.rank.layer_range(m.layers)
    dense = m.shapes.dense_layers if m.shapes else 0
    moe_layers = max(0, end - max(start, dense)) if m.is_moe else 0
    dense_layers = (end - start) - moe_layers
    sizes = capture_sizes(ctx.version, m, ctx.card, ctx.seqs, ctx.batched, ctx.num_spec)
    per_size = dense_layers * GRAPH_BYTES_DENSE_LAYER + moe_layers * GRAPH_BYTES_MOE_LAYER
    return sizes * per_size
