"""A layer's kernels in a graphed decode step (plan/kernels.py), counted from the model's structure
as the engines' forward code runs it, and a stage's fixed cost where the constants price a
kernel (Constants.kernel_s) in place of a constant a layer."""

from __future__ import annotations

from dataclasses import replace

from llmfit.plan.engines.layer_backends import backends
from llmfit.plan.kernels import Backends, LayerKernels, layer_kernels
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


def test_a_layer_by_the_kernels_the_engine_picks_on_the_card():
    # plan/engines/layer_backends.py: each engine's attention backend and MoE kernel on the card
    # for the checkpoint, plan/kernels.py's counts for them (worked out from the constants' cited
    # code, not from a run).
    oss, _ = fixture("openai--gpt-oss-120b")
    # gpt-oss-120b (MXFP4 experts) on a B200 under SGLang 0.5.23: trtllm_mha and the
    # "flashinfer_mxfp4" runner (TRT-LLM-gen). A MoE layer: 2 norms + 5 attention (qkv GEMM,
    # rope, cache write, TRT-LLM-gen's decode with its split KV reduced in the kernel, o GEMM)
    # + 5 experts (router GEMM, routing, FC1 with SwiGLU, FC2, finalize) = 12, where the
    # structure's count is 15.
    b = backends("sglang", "blackwell", "mxfp4", oss.architecture, False)
    assert b == Backends(gqa="trtllm", mla="", experts="flashinfer_trtllm")
    assert layer_kernels(oss, fp8=False, backends=b) == LayerKernels(dense=10, moe=12)
    # On an H200 both engines run its experts with triton_kernels' matmul_ogs: router GEMM,
    # routing's 3, two matmul_ogs = 6; FA3's 6 for the attention: 2 + 6 + 6 = 14.
    b = backends("vllm", "hopper", "mxfp4", oss.architecture, False)
    assert b == Backends(experts="triton_kernels")
    assert layer_kernels(oss, fp8=False, backends=b).moe == 14
    # DeepSeek-V3 in fp8 on a B200. SGLang: trtllm_mla (the latent cache's write and q's concat
    # in one launch, no combine: MLA's 11 less 1, 3 quantisations) and TRT-LLM-gen's fp8 MoE
    # (its 5, the hidden states' quantisation and the activation's own kernel: 7), the shared
    # expert's 5: 2 + 13 + 7 + 5 = 27 a MoE layer (30 by the structure); a dense layer 2 + 13 +
    # 4 = 19. vLLM: FLASHINFER_MLA's concat of q takes the combine's place: 28 and 20.
    ds, _ = fixture("deepseek-ai--DeepSeek-V3")
    b = backends("sglang", "blackwell", "fp8", ds.architecture, False)
    assert b == Backends(gqa="trtllm", mla="trtllm", experts="flashinfer_trtllm")
    assert layer_kernels(ds, fp8=True, backends=b) == LayerKernels(dense=19, moe=27)
    b = backends("vllm", "blackwell", "fp8", ds.architecture, False)
    assert layer_kernels(ds, fp8=True, backends=b) == LayerKernels(dense=20, moe=28)
    # On an H100 both keep the structure's count (FA3 MLA and its combine, Triton's MoE).
    b = backends("sglang", "hopper", "fp8", ds.architecture, False)
    assert layer_kernels(ds, fp8=True, backends=b) == LayerKernels(dense=20, moe=30)
    # On an MI300X SGLang runs aiter's MoE: router GEMM, top-k, the sort, two stages and two
    # quantisations = 7 for Triton's 9: 2 + 14 + 7 + 5 = 28.
    b = backends("sglang", "cdna3", "fp8", ds.architecture, False)
    assert b == Backends(experts="aiter")
    assert layer_kernels(ds, fp8=True, backends=b).moe == 28
