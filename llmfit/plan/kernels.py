"""How many GPU kernels an engine launches for one layer in one graphed decode step.

A layer's fixed cost in a step captured as a CUDA graph is its kernels' launch and tail latencies:
each kernel of a decode step is short (a few µs of work at a few tokens) and starts only when the
one before it ends. One constant a layer cannot follow what a layer runs: a GQA layer of a dense
model runs eleven kernels, a DeepSeek-V3 MoE layer with fp8 weights thirty (docs/accuracy.md
"Tried after this round, and not shipped"). The counts here follow the engines' forward code as
it runs a decode step (vLLM 0.34, SGLang 0.5.23; their files and functions are cited below), from
the model's structure alone: the kinds of its layers, its experts, and whether its GEMMs compute
in fp8. The all-reduces are not counted (the step model prices them by the link).

`Backends` counts a layer by the kernels the engine picks on the card for the checkpoint (the
attention backend, the routed experts' MoE kernel: plan/engines/layer_backends.py), where they
launch fewer kernels than the paths counted above: TRT-LLM-gen's attention reduces its split KV
within the kernel, its fused MoE routes, multiplies and combines in five, OpenAI's
triton_kernels in six. The counts follow the engines' and FlashInfer's code (cited below),
never the runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmfit.plan.model import AttentionKind, Model

# Both engines' decoder layer: a fused residual-add + RMSNorm before the attention and another
# before the MLP (vLLM models/llama.py LlamaDecoderLayer.forward, input_layernorm and
# post_attention_layernorm with the residual; SGLang models/llama.py LlamaDecoderLayer.forward).
NORMS = 2

# A GQA (or sliding-window) attention block: its qkv GEMM, the rotary embedding, the KV cache's
# write, the attention kernel and its split-KV combine, and its o GEMM (vLLM models/llama.py
# LlamaAttention.forward, the KV write v1/attention/backends/flash_attn.py
# FlashAttentionImpl.do_kv_cache_update reshape_and_cache_flash; under CUDA graphs FA3 splits
# the KV, up to flash_attn_max_num_splits_for_cuda_graph ways, FlashAttentionMetadataBuilder,
# and combines the splits in a kernel of its own, as FlashMLA does below; SGLang models/llama.py
# LlamaAttention.forward, the backend's set_kv_buffer). Two of them GEMMs.
GQA = 6
GQA_GEMMS = 2
# Per-head RMSNorms of q and k (Qwen3: vLLM models/qwen3_moe.py Qwen3MoeAttention.forward q_norm,
# k_norm; MiniMax-M2's over the whole width, models/minimax_m2.py MiniMaxM2Attention.forward,
# layers/minimax_rms_norm/rms_norm_tp.py forward_qkv; Gemma 3; OLMo 2).
QK_NORM = 2
QK_NORM_TYPES = frozenset({
    "qwen3", "qwen3_moe", "qwen3_next", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe",
    "qwen3_5_text", "qwen3_5_moe_text", "minimax_m2", "gemma3", "gemma3_text", "gemma4",
    "gemma4_text", "olmo2", "olmoe",
})  # fmt: skip

# MLA with a q LoRA (DeepSeek-V3, Kimi-K2, GLM-4.7-Flash) as vLLM runs a decode step: the fused
# q_a / kv_a projection, q_a's and kv_a's RMSNorms, q_b's projection, the rotary embedding
# (layers/mla.py MultiHeadLatentAttentionWrapper.forward), the latent cache's write
# (concat_and_cache_mla), q's absorbed W_UK bmm, the decode kernel and its split-KV combine
# (FlashMLA), the absorbed W_UV bmm (v1/attention/backends/mla/common.py
# MLACommonImpl.forward_impl, _v_up_proj), and o's projection; SGLang's forward_absorb runs the
# same kernels (models/deepseek_common/attention_forward_methods/forward_mla.py
# forward_absorb_prepare, forward_absorb_core: q_a_layernorm, kv_a_layernorm, q_b_proj, w_kc's
# bmm, rotary_emb, the backend's attention, w_vc's bmm). Without a q LoRA (DeepSeek-V2-Lite) q
# is one projection, unnormed: two fewer. Three of them GEMMs on the weights' dtype (the bmm's
# run in 16 bits).
MLA = 11
MLA_NO_Q_LORA = 9
MLA_GEMMS = 3
# A sparse-attention indexer (DeepSeek-V3.2, GLM-5; vLLM models/deepseek_v2.py Indexer.forward):
# its wq_b and wk GEMMs, k's LayerNorm, the rotary embedding, q's and k's fp8 quantisation, its
# key cache's write, the head weights' GEMM, the logits kernel and the top-k.
INDEXER = 9
# Gated DeltaNet (Qwen3-Next, Qwen3.5; vLLM models/qwen3_next.py Qwen3NextGatedDeltaNet.forward):
# in_proj_qkvz and in_proj_ba GEMMs, the causal conv1d's update, the gating, the recurrent
# delta rule, the gated RMSNorm and out_proj; Kimi's KDA is counted alike. Three GEMMs.
LINEAR = 7
LINEAR_GEMMS = 3
# Mamba-2 / Mamba (vLLM layers/mamba/mamba_mixer2.py MambaMixer2.forward_cuda): in_proj, the
# conv1d's update, the selective state update, the gated norm, out_proj. Two GEMMs.
MAMBA = 5
MAMBA_GEMMS = 2

# A dense MLP: gate_up's GEMM, SiLU-and-mul, down's GEMM (vLLM models/llama.py LlamaMLP.forward;
# SGLang models/llama.py LlamaMLP.forward). With fp8 activations the act quantises for down in
# the same kernel (vLLM layers/fusion/fused_act_quant.py maybe_fused_act_quant), so one of its
# two GEMMs needs a kernel of its own to quantise its input.
MLP = 3
MLP_QUANTS = 1
# A MoE block's routed experts (vLLM layers/fused_moe: the router's GEMM, the top-k
# (topk_softmax, or grouped_topk for DeepSeek's groups), moe_align_block_size's sort of tokens
# by expert, the first grouped GEMM (w13), the activation, the second (w2), and moe_sum's
# combine of each token's k results; SGLang layers/moe/fused_moe_triton the same seven, its
# topk.py select_experts and moe_align_block_size). With fp8 activations each grouped GEMM's
# input is quantised first (fused_moe.py, moe_kernel_quantize_input before each): two more.
MOE = 7
MOE_QUANTS = 2
# The routed experts by the kernel the engine runs (llmfit/data/moe_kernels.toml `kernel`).
# TRT-LLM-gen's fused MoE (vLLM experts/trtllm_*_moe.py, SGLang's "flashinfer_trtllm" and
# "flashinfer_mxfp4" runners): the router's GEMM, then FlashInfer 0.7.4's launcher runs the
# routing (csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_runner.cu Runner::run: one
# kernel at a decode step's few tokens, the single-cluster path; DeepSeek-V3's grouped routing
# one more, its main kernel, not counted: the model does not say its groups), FC1 with the
# activation fused, FC2, and finalize's combine (csrc/trtllm_fused_moe_runner.cu Runner::run).
# Five. With block fp8 (DeepSeek fp8) the hidden states are quantised first and the activation
# runs in a kernel of its own ("cubins do not have fused activation"): two more, as Triton's.
MOE_TRTLLM = 5
MOE_TRTLLM_QUANTS = 2
# OpenAI's triton_kernels matmul_ogs (vLLM experts/gpt_oss_triton_kernels_moe.py
# triton_kernel_moe_forward, SGLang's "triton_kernel" runner): the router's GEMM, the routing
# (topk and the routing metadata: "the three separate kernels used by the generic path" the
# fused routing() replaces), the first matmul_ogs with SwiGLU fused, the second with the
# scatter and the top-k reduce in it. 16-bit activations: no quantisation.
MOE_TRITON_KERNELS = 6
# Marlin's MoE (vLLM fused_moe/fused_marlin_moe.py fused_marlin_moe, SGLang's "marlin" runner):
# the router's GEMM, top-k, moe_align_block_size, the two Marlin GEMMs, the activation and
# moe_sum, as Triton's; its activations stay in 16 bits: no quantisation.
MOE_MARLIN = 7
# aiter's fused MoE on AMD (SGLang on ROCm with SGLANG_USE_AITER, as AMD's images run it;
# ROCm/aiter aiter/fused_moe.py fused_moe_: moe_sorting, then fused_moe_2stages' two kernels, the
# activation in the first and the weighted sum in the second): the router's GEMM, top-k, the
# sort and the two stages. With fp8 the first stage's input and the second's are quantised
# (its quant_func before each): two more. Its one-stage kernels (asm fmoe, where its tuned
# configs say run_1stage) launch one fewer; not counted.
MOE_AITER = 5
MOE_AITER_QUANTS = 2
# TRT-LLM-gen's attention decode (vLLM's FLASHINFER on SM100, trtllm_batch_decode_with_kv_cache;
# SGLang's trtllm_mha and trtllm_mla): its split KV is reduced within the kernel's cluster
# (FlashInfer include/flashinfer/trtllm/fmha/fmhaKernels.cuh, CgaSmemReduction up to 16 CTAs a
# sequence), so the combine kernel counted above does not run. vLLM's FLASHINFER_MLA
# concatenates q's nope and rope parts in a kernel of its own first
# (v1/attention/backends/mla/flashinfer_mla.py forward_mqa, torch.cat), in the combine's place;
# SGLang's trtllm_mla writes the latent cache and concatenates q in one launch
# (layers/attention/trtllm_mla_backend.py forward_decode, _set_kv_and_concat_q_fused), one
# fewer.
TRTLLM_SAVES = 1

# Shared experts (DeepSeek, Kimi, GLM, Qwen2-MoE): a dense MLP beside the routed ones, and the
# add of the two (vLLM layers/fused_moe/shared_fused_moe.py SharedFusedMoE; SGLang
# models/deepseek_v2.py DeepseekV2MoE.forward_normal).
SHARED = MLP + 1


@dataclass(frozen=True)
class Backends:
    """The kernels an engine picks for a layer on one card (plan/engines/layer_backends.py).
    gqa: "trtllm" for TRT-LLM-gen's attention decode, else "" (a split-KV combine of its own:
    FA3, FlashInfer's, Triton's and aiter's two-stage decodes). mla: "trtllm" (SGLang's
    trtllm_mla), "trtllm_cat" (vLLM's FLASHINFER_MLA) or "". experts: the MoE kernel family of
    llmfit/data/moe_kernels.toml, "" where no rule says (Triton's count)."""

    gqa: str = ""
    mla: str = ""
    experts: str = ""


@dataclass(frozen=True)
class LayerKernels:
    """Kernels one graphed decode step launches for a layer, on one card: a layer whose MLP is
    dense, and one whose MLP is a MoE block (0 where the model has none)."""

    dense: float
    moe: float


def _attention(model: Model, fp8: bool, b: Backends) -> float:
    """The attention part's kernels, averaged over the model's layers by kind."""
    qk = QK_NORM if (model.model_type or "") in QK_NORM_TYPES else 0
    gqa = GQA - (TRTLLM_SAVES if b.gqa == "trtllm" else 0)
    shapes = model.shapes
    total = 0.0
    layers = 0
    for g in model.layer_groups:
        if g.kind is AttentionKind.MLA:
            lora = bool(shapes and shapes.q_lora_rank)
            n = (MLA if lora or shapes is None else MLA_NO_Q_LORA) + (MLA_GEMMS if fp8 else 0)
            n -= TRTLLM_SAVES if b.mla == "trtllm" else 0
            n = n * g.layers + INDEXER * g.indexer_layers
        elif g.kind is AttentionKind.LINEAR:
            mamba = g.state_kind.startswith("mamba")
            each = MAMBA + (MAMBA_GEMMS if fp8 else 0) if mamba else LINEAR + (
                LINEAR_GEMMS if fp8 else 0)  # fmt: skip
            n = each * g.layers
        else:
            n = (gqa + qk + (GQA_GEMMS if fp8 else 0)) * g.layers
        total += n
        layers += g.layers
    if not layers:
        return gqa + qk + (GQA_GEMMS if fp8 else 0)
    return total / layers


def _experts(kernel: str, fp8: bool) -> int:
    """The routed experts' kernels, router and combine included, by the MoE kernel that runs."""
    if kernel == "flashinfer_trtllm":
        return MOE_TRTLLM + (MOE_TRTLLM_QUANTS if fp8 else 0)
    if kernel == "triton_kernels":
        return MOE_TRITON_KERNELS
    if kernel == "marlin":
        return MOE_MARLIN
    if kernel == "aiter":
        return MOE_AITER + (MOE_AITER_QUANTS if fp8 else 0)
    return MOE + (MOE_QUANTS if fp8 else 0)


def layer_kernels(model: Model, fp8: bool, backends: Backends | None = None) -> LayerKernels:
    """A layer's kernels in a graphed decode step, for a dense layer and a MoE layer of `model`,
    its GEMMs computing in fp8 or not (fp8: each GEMM's input quantised by a kernel of its own,
    as block-scaled checkpoints and fp8 plans run them), by the kernels the engine picks on the
    card where `backends` says (else the structure's count: FA3's, FlashMLA's, Triton's MoE)."""
    b = backends or Backends()
    attention = NORMS + _attention(model, fp8, b)
    mlp = MLP + (MLP_QUANTS if fp8 else 0)
    moe = 0.0
    if model.is_moe:
        moe = attention + _experts(b.experts, fp8)
        shapes = model.shapes
        if model.shared_experts or (shapes and shapes.shared_expert_intermediate_size):
            moe += SHARED + (MLP_QUANTS if fp8 else 0)
    return LayerKernels(dense=attention + mlp, moe=moe)
