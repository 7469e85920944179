"""How many GPU kernels an engine launches for one layer in one graphed decode step.

A layer's fixed cost in a step captured as a CUDA graph is its kernels' launch and tail latencies:
each kernel of a decode step is short (a few µs of work at a few tokens) and starts only when the
one before it ends. One constant a layer cannot follow what a layer runs: a GQA layer of a dense
model runs eleven kernels, a DeepSeek-V3 MoE layer with fp8 weights thirty (docs/accuracy.md
"Tried after this round, and not shipped"). The counts here follow the engines' forward code as
it runs a decode step (vLLM 0.34, SGLang 0.5.23; their files and functions are cited below), from
the model's structure alone: the kinds of its layers, its experts, and whether its GEMMs compute
in fp8. The all-reduces are not counted (the step model prices them by the link).
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
# Shared experts (DeepSeek, Kimi, GLM, Qwen2-MoE): a dense MLP beside the routed ones, and the
# add of the two (vLLM layers/fused_moe/shared_fused_moe.py SharedFusedMoE; SGLang
# models/deepseek_v2.py DeepseekV2MoE.forward_normal).
SHARED = MLP + 1


@dataclass(frozen=True)
class LayerKernels:
    """Kernels one graphed decode step launches for a layer, on one card: a layer whose MLP is
    dense, and one whose MLP is a MoE block (0 where the model has none)."""

    dense: float
    moe: float


def _attention(model: Model, fp8: bool) -> float:
    """The attention part's kernels, averaged over the model's layers by kind."""
    qk = QK_NORM if (model.model_type or "") in QK_NORM_TYPES else 0
    shapes = model.shapes
    total = 0.0
    layers = 0
    for g in model.layer_groups:
        if g.kind is AttentionKind.MLA:
            lora = bool(shapes and shapes.q_lora_rank)
            n = (MLA if lora or shapes is None else MLA_NO_Q_LORA) + (MLA_GEMMS if fp8 else 0)
            n = n * g.layers + INDEXER * g.indexer_layers
        elif g.kind is AttentionKind.LINEAR:
            mamba = g.state_kind.startswith("mamba")
            each = MAMBA + (MAMBA_GEMMS if fp8 else 0) if mamba else LINEAR + (
                LINEAR_GEMMS if fp8 else 0)  # fmt: skip
            n = each * g.layers
        else:
            n = (GQA + qk + (GQA_GEMMS if fp8 else 0)) * g.layers
        total += n
        layers += g.layers
    if not layers:
        return GQA + qk + (GQA_GEMMS if fp8 else 0)
    return total / layers


def layer_kernels(model: Model, fp8: bool) -> LayerKernels:
    """A layer's kernels in a graphed decode step, for a dense layer and a MoE layer of `model`,
    its GEMMs computing in fp8 or not (fp8: each GEMM's input quantised by a kernel of its own,
    as block-scaled checkpoints and fp8 plans run them)."""
    attention = NORMS + _attention(model, fp8)
    mlp = MLP + (MLP_QUANTS if fp8 else 0)
    moe = 0.0
    if model.is_moe:
        moe = attention + MOE + (MOE_QUANTS if fp8 else 0)
        shapes = model.shapes
        if model.shared_experts or (shapes and shapes.shared_expert_intermediate_size):
            moe += SHARED + (MLP_QUANTS if fp8 else 0)
    return LayerKernels(dense=attention + mlp, moe=moe)
