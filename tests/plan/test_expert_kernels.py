"""The kernel an engine runs a MoE's routed experts with at its default flags
(llmfit/data/moe_kernels.toml, plan/engines/expert_kernels.py), and that kernel's measured curve
(llmfit/data/kernel_curves.json "moe_kernels", benchmarks/derive_kernel_curves.py)."""

from dataclasses import replace

from llmfit.plan.cards import BY_KEY
from llmfit.plan.curves import curves_for
from llmfit.plan.engines import expert_kernels as ek
from llmfit.plan.engines import serving
from llmfit.plan.layout import Layout
from tests.plan.test_speed import H100, QWEN30B, QWEN30B_MODEL, SERVING

B200 = BY_KEY["b200-180g"]


def _kernel(engine: str, arch: str, checkpoint: str, model: str | None, ep: bool = False) -> str:
    rule = ek.rule_for(engine, arch, checkpoint, model, ep)
    assert rule is not None
    return rule.kernel


def test_sglang_runs_qwen3_235bs_bf16_experts_on_a_b200_with_trtllm_gen():
    # SGLang 0.5.23 sets moe_runner_backend "flashinfer_trtllm" on SM100 for the Qwen3 MoE
    # family's unquantised checkpoints (arg_groups/model_overrides/qwen3_moe.py): the table is
    # aiconfigurator's b200_sxm sglang 0.5.14 rows labelled sglang_flashinfer_trtllm_moe, bf16.
    assert _kernel("sglang", "blackwell", "bf16", "Qwen3MoeForCausalLM") == "flashinfer_trtllm"
    kc = ek.expert_curves("sglang", "b200-180g", "blackwell", "bf16", "Qwen3MoeForCausalLM",
                          False, "bf16")  # fmt: skip
    assert kc is not None and set(kc.moes) == {"bf16"} and not kc.moes_sliced
    curve = kc.moes["bf16"]
    # Qwen3-235B-A22B's MoE layer (hidden 4,096, expert FFN 1,536, 128 experts, 8 a token) on one
    # B200 holding every expert (8 TB/s, 2.25 PFLOP/s dense bf16, cards.toml), the derivation's
    # roofline: at 4 tokens an expert, 64 tokens, every expert reached: weights 128 × 3 × 4,096 ×
    # 1,536 × 2 = 4,831,838,208 B and activations 64 × 4,096 × (2 + 2) = 1,048,576 B in
    # 604.111 µs; 2 × 512 × 3 × 4,096 × 1,536 = 19,327,352,832 FLOPs in 8.590 µs. The curve's
    # 0.9122 at 4 gives 662.26 µs.
    nbytes = 128 * 3 * 4096 * 1536 * 2 + 64 * 4096 * 4
    roof = max(nbytes / B200.memory_bandwidth, 2 * 512 * 3 * 4096 * 1536 / B200.bf16_flops)
    assert curve.at(4) == 0.9122
    assert round(roof / curve.at(4) * 1e6, 2) == 662.26
    # At 4,000 tokens an expert (64,000 tokens) the FLOPs bind: 1.9327e13 in 8.590 ms (the bytes,
    # 4,831,838,208 + 1,048,576,000, take 0.735 ms); the kernel's curve ends at 1,024 tokens an
    # expert (0.4521) and is held there: 19.00 ms. The fastest kernel measured for the dtype (the
    # curve as shipped, Triton's rows past 1,024) reaches 0.1326 there: 64.77 ms.
    flops = 2 * 512_000 * 3 * 4096 * 1536
    roof = max((128 * 3 * 4096 * 1536 * 2 + 64_000 * 4096 * 4) / B200.memory_bandwidth,
               flops / B200.bf16_flops)  # fmt: skip
    assert round(roof * 1e3, 3) == 8.590
    assert curve.at(4000) == 0.4521
    assert round(roof / curve.at(4000) * 1e3, 2) == 19.00
    fastest = curves_for("b200-180g", "blackwell", "sglang").moe("bf16")
    assert round(roof / fastest.at(4000) * 1e3, 2) == 64.77


def test_each_engines_default_kernel_by_card_and_checkpoint():
    # vLLM 0.34 (fused_moe/oracle/*.py): bf16 on Hopper Triton (FlashInfer moved behind it), on
    # Blackwell TRT-LLM-gen; block fp8 on Hopper Triton at TP, FlashInfer CUTLASS with EP; MXFP4
    # on Hopper OpenAI's triton_kernels, on an A100 Marlin; fp8 on an A100 Marlin's W8A16.
    assert _kernel("vllm", "hopper", "bf16", "Qwen3MoeForCausalLM") == "triton"
    assert _kernel("vllm", "blackwell", "bf16", "Glm4MoeForCausalLM") == "flashinfer_trtllm"
    assert _kernel("vllm", "hopper", "fp8", "Glm4MoeForCausalLM") == "triton"
    assert _kernel("vllm", "hopper", "fp8", "Glm4MoeForCausalLM", ep=True) == "flashinfer_cutlass"
    assert _kernel("vllm", "hopper", "mxfp4", "GptOssForCausalLM") == "triton_kernels"
    assert _kernel("vllm", "ampere", "mxfp4", "GptOssForCausalLM") == "marlin"
    assert _kernel("vllm", "ampere", "fp8", "Qwen3MoeForCausalLM") == "marlin"
    assert _kernel("vllm", "hopper", "int4", "KimiK25ForConditionalGeneration") == "marlin"
    # SGLang 0.5.23: Triton's fused_moe unless a model override says otherwise on SM100 (GLM-4.7
    # fp8 and MiniMax-M2 fp8 have none), gpt-oss's MXFP4 by triton_kernels before SM100.
    assert _kernel("sglang", "blackwell", "fp8", "MiniMaxM2ForCausalLM") == "triton"
    assert _kernel("sglang", "blackwell", "fp8", "Glm4MoeForCausalLM") == "triton"
    assert _kernel("sglang", "blackwell", "bf16", "Glm4MoeForCausalLM") == "flashinfer_trtllm"
    assert _kernel("sglang", "blackwell", "fp8", "DeepseekV3ForCausalLM") == "flashinfer_trtllm"
    assert _kernel("sglang", "hopper", "mxfp4", "GptOssForCausalLM") == "triton_kernels"
    assert ek.rule_for("sglang", "hopper", "mxfp4", "GptOssForCausalLM", True) is None
    assert _kernel("sglang", "hopper", "int4", "KimiK25ForConditionalGeneration") == "marlin"


def test_a_kernel_no_table_measured_leaves_the_experts_to_the_shares():
    # gpt-oss on an A100 under vLLM runs Marlin: aiconfigurator measured no MXFP4 kernel on the
    # A100 under either engine, but SGLang 0.5.10's a100_sxm rows sglang_marlin_moe time Marlin's
    # MoE kernel on INT4 weights (the same bytes a weight, dequantised in the same kernel): the
    # rule's second dtype. At one token an expert it streams 0.7682 of the bandwidth.
    kc = ek.expert_curves("vllm", "a100-80g", "ampere", "mxfp4", "GptOssForCausalLM", False,
                          "w4a16")  # fmt: skip
    assert kc is not None and kc.moes["w4a16"].at(1) == 0.7682
    # SGLang's triton_kernels on an A100, Marlin's fp8 on an A100, any kernel on an MI300X: no
    # table, the shares.
    assert ek.expert_curves("sglang", "a100-80g", "ampere", "mxfp4", "GptOssForCausalLM", False,
                            "w4a16") is None  # fmt: skip
    assert ek.expert_curves("vllm", "a100-80g", "ampere", "fp8", "Qwen3MoeForCausalLM", False,
                            "fp8_block") is None  # fmt: skip
    assert ek.expert_curves("sglang", "mi300x-192g", "cdna3", "bf16", "Qwen3MoeForCausalLM",
                            False, "bf16") is None  # fmt: skip


def test_the_checkpoints_classes():
    assert ek.checkpoint("fp8", False, True) == "fp8"
    assert ek.checkpoint("mxfp4", True, False) == "mxfp4"
    assert ek.checkpoint("modelopt_fp4", True, False) == "nvfp4"
    assert ek.checkpoint("awq", True, False) == "int4_zp"
    assert ek.checkpoint("compressed-tensors", True, False) == "int4"
    assert ek.checkpoint(None, False, False) == "bf16"


def test_plans_price_by_the_rules_only_the_engines_the_file_names(monkeypatch):
    # As shipped the file names vLLM alone: SGLang's plans keep the fastest kernel measured for
    # the dtype. Named, SGLang's Qwen3-30B-A3B (Qwen3MoeForCausalLM) at bf16 on an H100 takes
    # Triton's fused_moe curve (h100_sxm sglang 0.5.14 sglang_fused_moe_triton), 0.8739 at four
    # tokens an expert, where the curve of the fastest of Triton's and FlashInfer CUTLASS's rows
    # is 0.8668 (a median over other shapes: FlashInfer's were measured on three of its own).
    assert ek.engines() == frozenset({"vllm"})
    monkeypatch.setattr(serving.serving_speed, "for_card",
                        lambda table, key: replace(SERVING, expert_curves=True))  # fmt: skip
    model = replace(QWEN30B_MODEL, architecture="Qwen3MoeForCausalLM")

    def inputs():  # type: ignore[no-untyped-def]
        return serving.speed_inputs(
            serving.serving_speed.SGLANG, model, QWEN30B, H100, Layout(1), 4096, 0, 1, False,
            lambda layers, pp: (layers,), curves_backend="sglang",
        )  # fmt: skip

    shipped = inputs()
    assert shipped is not None and shipped.curves is not None
    assert shipped.curves == curves_for("h100-80g", "hopper", "sglang")
    monkeypatch.setattr(ek, "engines", lambda: frozenset({"sglang"}))
    by_rule = inputs()
    assert by_rule is not None and by_rule.curves is not None and by_rule.curve_dtype == "bf16"
    assert by_rule.curves.moes["bf16"].at(4) == 0.8739
    assert shipped.curves.moe("bf16").at(4) == 0.8668


def test_a_named_engine_keeps_the_fastest_kernel_where_its_own_was_not_measured(monkeypatch):
    # SGLang runs an A100's fp8 experts with Triton's fused_moe (moe_kernels.toml), which no
    # table measured in fp8 on an A100 (kernel_curves.json a100-80g sglang moe_kernels: triton
    # bf16 and marlin w4a16 only; no vLLM table for the card): the rules price nothing there,
    # and the plan keeps the fastest kernel measured for the dtype, the A100's own curves under
    # SGLang, as benchmarks/accuracy_load.py measured_kernels does (it keeps the plan's curves
    # where the rules give none), not the fitted shares.
    a100 = BY_KEY["a100-80g"]
    assert ek.expert_curves("sglang", "a100-80g", "ampere", "fp8", "Qwen3MoeForCausalLM", False,
                            "fp8_block") is None  # fmt: skip
    monkeypatch.setattr(serving.serving_speed, "for_card",
                        lambda table, key: replace(SERVING, expert_curves=True))  # fmt: skip
    monkeypatch.setattr(ek, "engines", lambda: frozenset({"sglang"}))
    model = replace(QWEN30B_MODEL, architecture="Qwen3MoeForCausalLM")
    got = serving.speed_inputs(
        serving.serving_speed.SGLANG, model, QWEN30B, a100, Layout(1), 4096, 0, 1, True,
        lambda layers, pp: (layers,), curves_backend="sglang",
    )  # fmt: skip
    assert got is not None and got.curve_dtype == "fp8"
    assert got.curves == curves_for("a100-80g", "ampere", "sglang")
