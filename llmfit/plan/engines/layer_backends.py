"""The attention backend and the MoE kernel an engine picks for a layer on a card at its default
flags: what a layer's kernels are counted by (plan/kernels.py Backends).

Read from the engines' own selection code, vLLM 0.34.0 and SGLang 0.5.23, as
llmfit/data/moe_kernels.toml is (its rules give the routed experts' kernel). Only the choices that
change the count are kept: TRT-LLM-gen's attention on Blackwell (no split-KV combine kernel) and
the fused MoE kernels; elsewhere (Hopper's FA3 and FlashMLA, the A100's FlashInfer and Triton
decodes, AMD's aiter and Triton backends, each a decode and a reduction of its split KV) a layer
keeps the structure's count.
"""

from __future__ import annotations

from llmfit.plan.engines import expert_kernels
from llmfit.plan.kernels import Backends

# Card architectures (llmfit/data/cards.toml) of the SM100 family: vLLM's and SGLang's
# TRT-LLM-gen kernels run there (SM100, SM103), not on SM120's RTX cards.
SM100 = frozenset({"blackwell", "blackwell-ultra"})
AMD = frozenset({"cdna3", "cdna4"})

# SGLang's MLA models whose override picks trtllm_mla on SM100 where no attention backend is
# given (arg_groups/model_overrides/deepseek_v2.py, registered for these, "Use trtllm_mla as
# attention backend on sm100"); other MLA models take the default's FlashInfer MLA
# (arg_groups/model_override_base.py get_default_attn_backend: "flashinfer" for MLA on SM100).
SGLANG_TRTLLM_MLA = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
    "MistralLarge3ForCausalLM", "GlmMoeDsaForCausalLM",
})  # fmt: skip


def backends(engine: str, arch: str, checkpoint: str, model: str | None, ep: bool) -> Backends:
    """The kernels `engine` runs a layer of `model` (its config's architectures[0]) with on a
    card of `arch`, its routed experts stored as `checkpoint` (expert_kernels.checkpoint)."""
    if arch in AMD:
        # SGLang's MoE on ROCm is aiter's where SGLANG_USE_AITER is set (AMD's SGLang images set
        # it; layers/quantization/unquant.py and fp8.py take aiter's fused_moe under it); its
        # attention (aiter's or Triton's, model_override_base.py get_default_attn_backend on
        # HIP) decodes in two kernels as FA3 does: the structure's count.
        return Backends(experts="aiter" if engine == "sglang" else "")
    rule = expert_kernels.rule_for(engine, arch, checkpoint, model, ep)
    experts = rule.kernel if rule else ""
    if engine not in ("vllm", "sglang") or arch not in SM100:
        return Backends(experts=experts)
    if engine == "vllm":
        # platforms/cuda.py _get_backend_priorities on SM100 (major 10): FLASHINFER first for
        # GQA, whose decode there is TRT-LLM-gen's (v1/attention/backends/flashinfer.py,
        # trtllm_batch_decode_with_kv_cache; utils/flashinfer.py use_trtllm_attention), and
        # FLASHINFER_MLA first for MLA (TRT-LLM-gen's MLA decode, q concatenated first).
        return Backends(gqa="trtllm", mla="trtllm_cat", experts=experts)
    # SGLang: trtllm_mha for GQA on SM100 (model_override_base.py get_default_attn_backend;
    # gpt-oss's own override the same, model_overrides/gpt_oss.py _gpt_oss_overrides).
    mla = "trtllm" if model in SGLANG_TRTLLM_MLA else ""
    return Backends(gqa="trtllm", mla=mla, experts=experts)
