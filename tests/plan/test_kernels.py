"""A layer's kernels in a graphed decode step (plan/kernels.py), counted from the model's structure
as the engines' forward code runs it, and a stage's fixed cost where the constants price a
kernel (Constants.kernel_s) in place of a constant a layer."""

from __future__ import annotations

from dataclasses import replace

from llmfit.plan.kernels import LayerKernels, layer_kernels
from llmfit.plan.speed import inputs_for, stepper
from tests.plan.test_load import CTX, H100, K, fixture


def test_a_deepseek_v3_layer_in_fp8_and_in_16_bits():
    # DeepSeek-V3 (fixtures/src config: MLA with q_lora_rank 1536, 256 routed experts, 1 shared,
    # fp8 weights in 128 × 128 blocks). A MoE layer computing in fp8:
    #   2 norms (input and post-attention fused add-RMSNorm)
    # + 11 MLA: fused q_a/kv_a GEMM, q_a norm, kv_a norm, q_b GEMM, rope, the latent cache's
    #   write, W_UK bmm, FlashMLA and its combine, W_UV bmm, o GEMM
    # + 3 quantisations of activations, one for each of MLA's three GEMMs
    # + 7 routed experts: router GEMM, top-k, align, w13, act, w2, combine
    # + 2 quantisations, one for each grouped GEMM
    # + 4 shared expert: gate_up GEMM, act, down GEMM, the add
    # + 1 quantisation, gate_up's (down's is fused into the act)
    # = 30. A dense layer (the first three): 2 + 11 + 3 + 3 (MLP) + 1 (gate_up's quantisation)
    # = 20. In 16 bits, no quantisations: 24 and 16.
    m, _ = fixture("deepseek-ai--DeepSeek-V3")
    assert layer_kernels(m, fp8=True) == LayerKernels(dense=20, moe=30)
    assert layer_kernels(m, fp8=False) == LayerKernels(dense=16, moe=24)


def test_gqa_layers_with_and_without_qk_norms_and_shared_experts():
    # Llama-3.1-8B: 2 norms + 6 attention (qkv GEMM, rope, cache write, attention and its
    # split-KV combine, o GEMM) + 3 MLP = 11; in fp8 each of qkv, o and gate_up quantises its
    # input: 14.
    llama, _ = fixture("meta-llama--Llama-3.1-8B-Instruct")
    assert layer_kernels(llama, fp8=False) == LayerKernels(dense=11, moe=0)
    assert layer_kernels(llama, fp8=True) == LayerKernels(dense=14, moe=0)
    # gpt-oss-120b (no q/k norm, no shared expert): 2 + 6 + 7 routed = 15 a MoE layer.
    oss, _ = fixture("openai--gpt-oss-120b")
    assert layer_kernels(oss, fp8=False).moe == 15
    # Qwen3-235B-A22B: Qwen3's per-head q and k RMSNorms, 2 more: 2 + 6 + 2 + 7 = 17.
    qwen, _ = fixture("Qwen--Qwen3-235B-A22B")
    assert layer_kernels(qwen, fp8=False).moe == 17


def test_deepseek_v3_on_8_h100s_a_steps_kernels_at_5_us_each():
    # tp 8, fp8: 3 dense layers × 20 + 58 MoE layers × 30 = 1,800 kernels on each card; at 5 µs
    # a kernel the step's fixed cost is 9.0 ms, in place of 61 × 50 µs + 58 × 20 µs = 4.21 ms
    # (K's layer_s and moe_layer_s), which it keeps with kernel_s 0.
    m, layout = fixture("deepseek-ai--DeepSeek-V3", elem=1)
    kw = dict(context=CTX, kv_bytes_per_token=70_272, tp=8, compute_dtype="fp8")
    priced = inputs_for(m, layout, H100, constants=replace(K, kernel_s=5e-6), **kw)
    (stage,) = priced.stages
    assert (stage.layers, stage.moe_layers, stage.kernels) == (61, 58, 1800)
    assert abs(stepper(priced).coefs[0].graph - 9.0e-3) < 1e-12
    plain = inputs_for(m, layout, H100, constants=K, **kw)
    assert abs(stepper(plain).coefs[0].graph - 4.21e-3) < 1e-12
