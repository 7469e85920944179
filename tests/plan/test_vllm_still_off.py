"""Issue 32's "also still off" cases, worked out again by hand from the engines' wheels.

DeepSeek-V3 under data-parallel attention with expert parallelism: which fused-MoE kernel vLLM
runs decides what its workspace holds. vLLM's FP8 oracle
(vllm/model_executor/layers/fused_moe/oracle/fp8.py _get_priority_backends, read in 0.17, 0.19,
0.33 and 0.34) puts FlashInfer's CUTLASS kernel first on Hopper for 128 × 128 block-FP8 weights
when expert parallelism is on; its workspace_shapes
(experts/flashinfer_cutlass_moe.py FlashInferExperts.workspace_shapes) keep only M × hidden, and
FlashInfer allocates its own scratch on every call (flashinfer-python's
cutlass_fused_moe_kernels.cuh CutlassMoeFCRunner::getWorkspaceDeviceBufferSizes): a transient.
"""

from __future__ import annotations

from llmfit.plan.engines.vllm_inputs import Context
from llmfit.plan.engines.vllm_memory import CUDA_CONTEXT, Rank, Settings
from llmfit.plan.engines.vllm_runtime import NON_TORCH, moe_kernel, moe_scratch, moe_workspace
from llmfit.plan.engines.vllm_versions import VllmVersion
from tests.plan.test_model import model
from tests.plan.test_vllm_memory import H100, H200, deepseek_layout, mtp_layout, run

V = VllmVersion.parse
DSV3 = "deepseek-ai/DeepSeek-V3"
DP8 = Rank(tp=1, dp=8, ep=True)

# DeepSeek-V3 (fixtures/hub config.json): hidden 7,168, moe_intermediate_size 2,048, top-8 of
# 256 routed experts, FP8 with weight_block_size [128, 128] and dynamic activations.
H, INTER, TOPK = 7_168, 2_048, 8


def ctx(version: str, rank: Rank, card=H200, **kw) -> Context:
    s = Settings(version=V(version), max_model_len=32_768, **kw)
    return Context(V(version), model(DSV3), card, rank, s, 32_768, 8_192, 1_024, True, 0)


def test_the_kernel_the_fp8_oracle_picks():
    # 0.17 on: FlashInfer's CUTLASS on Hopper with expert parallelism, Triton without.
    assert moe_kernel(ctx("0.34", DP8)) == "flashinfer"
    assert moe_kernel(ctx("0.34", Rank(tp=8, ep=True))) == "flashinfer"
    assert moe_kernel(ctx("0.34", Rank(tp=8))) == "triton"
    # 0.15 and 0.16 list FlashInfer's CUTLASS ahead of Triton whatever the parallelism.
    assert moe_kernel(ctx("0.16", Rank(tp=8))) == "flashinfer"
    # 0.14 took FlashInfer only with VLLM_USE_FLASHINFER_MOE_FP8 set (quantization/fp8.py
    # get_fp8_moe_backend).
    assert moe_kernel(ctx("0.14", DP8)) == "triton"
    # FlashInfer's kernel is SM 9.0 only for block FP8 (_supports_quant_scheme), and takes no
    # LoRA (supports_lora).
    b200 = H200.__class__("b200-180g", 191_514_329_088)
    assert moe_kernel(ctx("0.34", DP8, card=b200)) == "triton"
    from llmfit.plan.engines.vllm_memory import LoRA

    assert moe_kernel(ctx("0.34", DP8, lora=LoRA(1, 16))) == "triton"


def test_deepseek_v3_dp8_ep_workspace_and_flashinfer_scratch_by_hand():
    c = ctx("0.34", DP8)
    # M: the all-gather/reduce-scatter dispatch (prepare_finalize/naive_dp_ep.py,
    # device_communicators/all2all.py dispatch) gathers every DP rank's batch: 8 × 8,192.
    m = 8 * 8_192
    # vLLM's workspace: workspace13 and the output, M × H in bf16 (workspace2 is empty).
    assert moe_workspace(c) == m * H * 2 == 939_524_096
    # FlashInfer's scratch for the DeepSeek FP8 block-scale runner, N = M × top-k rows, 32
    # local experts (256 / 8):
    n = m * TOPK
    maps = 3 * n * 4 + 32 * m * 4  # permuted-row maps and final scales; the blocked row map
    inputs = n * H * 2  # permuted bf16 input / FC2's bf16 output, overlapped
    outputs = n * 2 * INTER * 2  # FC1's gated bf16 output
    # The block-scale GEMM quantizes its input to FP8 with a float scale a 128 columns, rows
    # padded per expert to 32 (fp8_blockscale_gemm.cu getWorkspaceSizeBase), FC1's the larger.
    padded = 525_280  # round_up(524,288 + 32 × 31, 32)
    fp8 = n * H + padded * (H // 128) * 4
    gathered = m * H * 2  # the gathered bf16 input, alive while the kernel runs
    assert moe_scratch(c) == maps + inputs + outputs + fp8 + gathered == 16_641_123_328


def test_deepseek_v3_dp8_ep_on_an_h200_under_0_34():
    # vLLM 0.34 at its defaults, 32,768 tokens a sequence.
    layout = deepseek_layout()
    r = run(DSV3, layout.total, rank=DP8, card=H200, max_model_len=32_768, parts=layout,
            version="0.34", gpu_memory_utilization=None)  # fmt: skip
    # The profile run's transient: the hidden states (2.75 B × 8,192 × 7,168) and FlashInfer's
    # scratch, which passes the sampler's warm-up; it passes the MLA context pass too (65,536
    # tokens × (576 + 128 × 256) × 2 B = 4,370,464,768 B).
    hidden = 8_192 * 11 * H // 4
    assert r.activation == hidden + 16_641_123_328 == 16_802_604_032
    resident = r.weights.total + r.persistent_buffers + NON_TORCH + 939_524_096 + r.cuda_graphs
    # extensible_kv_cache.py measure_kv_cache_bytes: min(share − resident, free − margin) −
    # transient, the margin 0.75 × the transient, free the card less the CUDA context.
    margin = r.activation * 3 // 4
    free = H200.total_bytes - CUDA_CONTEXT - resident
    budget = min(H200.total_bytes - resident, free - margin) - r.activation
    assert r.kv_budget == budget == 15_049_194_875
    # 61 MLA layers × 64-token blocks × 576 × 2 B a block; 512 blocks a sequence.
    assert r.layout is not None and r.layout.bytes_per_block == 61 * 64 * 576 * 2
    assert r.num_blocks == budget // 4_497_408 == 3_346
    # 6.54 sequences, where llmfit said 9.86 when it charged Triton's workspace (M × top-k ×
    # (max(I, H) + max(2I, H)) × 2 B = 14 GiB, kept) and no FlashInfer scratch: +51 %.
    assert round(r.max_concurrency, 2) == 6.54
    # With the MTP layer loaded and cached (--speculative-config method mtp): 5.62 (was 8.90).
    mtp = mtp_layout()
    from llmfit.plan.engines.vllm_memory import Speculative

    s = run(DSV3, mtp.total, rank=DP8, card=H200, max_model_len=32_768, parts=mtp,
            version="0.34", gpu_memory_utilization=None,
            speculative=Speculative("mtp", 1))  # fmt: skip
    assert round(s.max_concurrency, 2) == 5.62


def test_tensor_parallel_with_expert_parallelism_keeps_a_small_workspace():
    # TP 8 with expert parallelism (no DP): M is one rank's 8,192 tokens; the workspace 8,192 ×
    # 7,168 × 2 B (112 MiB, where Triton's was 1.75 GiB), and FlashInfer's scratch is below...
    c = ctx("0.34", Rank(tp=8, ep=True))
    assert moe_workspace(c) == 8_192 * H * 2
    # ... nothing gathered (one DP rank).
    n = 8_192 * TOPK
    padded = -(-(n + 32 * 31) // 32) * 32
    expected = (3 * n * 4 + 32 * 8_192 * 4) + n * H * 2 + n * 2 * INTER * 2
    expected += n * H + padded * (H // 128) * 4
    assert moe_scratch(c) == expected
    # Without expert parallelism Triton runs, with its own workspace and no scratch.
    tp = ctx("0.34", Rank(tp=8))
    assert moe_scratch(tp) == 0
    assert moe_workspace(tp) == 8_192 * TOPK * (H + H) * 2


def test_an_h100_plans_the_same_kernel():
    assert moe_kernel(ctx("0.34", DP8, card=H100)) == "flashinfer"


# An EAGLE-3 head for Llama-3.1-8B as yuhuili/EAGLE3-LLaMA3.1-Instruct-8B publishes it (its
# config: hidden 4,096, 32 heads and 8 KV heads of 128, intermediate 14,336, draft vocabulary
# 32,000; the checkpoint holds no embedding), in bf16: the midlayer's q from the doubled input
# (4,096 × 8,192), k and v (1,024 × 8,192 each), o (4,096 × 4,096), its MLP (3 × 4,096 × 14,336),
# the fc (4,096 × 3 × 4,096), the output head (32,000 × 4,096) and three norms of 4,096; d2t
# (32,000 int64) and t2d (128,256 bools).
EAGLE3_FC = 3 * 4_096 * 4_096 * 2
EAGLE3_BYTES = (
    2 * (4_096 * 8_192 + 2 * 1_024 * 8_192 + 4_096 * 4_096 + 3 * 4_096 * 14_336 + 3 * 4_096
         + 32_000 * 4_096)
    + EAGLE3_FC + 32_000 * 8 + 128_256
)  # fmt: skip


def test_an_eagle3_heads_fc_is_whole_on_every_rank():
    # llama_eagle3.py: the decoder layer and the head are the target's parallel layers, split
    # over TP 2; the fc from the 3 auxiliary hidden states is a ReplicatedLinear, whole.
    from llmfit.plan.engines.vllm_memory import Speculative
    from tests.plan.test_vllm_memory import LLAMA_8B_BYTES

    spec = Speculative("eagle3", 3, draft_weight_bytes=EAGLE3_BYTES, draft_layers=1,
                       draft_replicated_bytes=EAGLE3_FC)  # fmt: skip
    r = run("meta-llama/Llama-3.1-8B-Instruct", LLAMA_8B_BYTES, rank=Rank(tp=2), card=H100,
            max_model_len=32_768, version="0.34", gpu_memory_utilization=None,
            speculative=spec)  # fmt: skip
    assert r.weights.draft == -(-(EAGLE3_BYTES - EAGLE3_FC) // 2) + EAGLE3_FC
    # 100,663,296 B of fc whole, 374,546,048 B of the rest a rank: 50 MB more than half.
    assert EAGLE3_FC == 100_663_296 and r.weights.draft == 475_209_344
    # The head's layer is cached like a target layer: 33 layers in the group.
    assert r.layout is not None and r.layout.kinds[0].layers == 33
