"""What each attention kind costs a vLLM card, what vLLM refuses, and checkpoints at real bytes.

Expected values are worked out by hand from the fixture configs; the comments show the sums.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from llmfit.plan.artifact import Artifact
from llmfit.plan.engines.vllm import width_refusal
from llmfit.plan.engines.vllm_kv import attention_charges
from llmfit.plan.fleet import GIB, Fleet
from llmfit.plan.model import Shape
from llmfit.plan.planner import PlanSettings, plan
from llmfit.sources.config import model_from_config
from llmfit.sources.repo import load_repo
from tests.conftest import FIXTURES, HUB
from tests.plan.test_vllm_plan import H100, H200, node


def read(repo: str):
    return load_repo(repo, HUB).model


# --- the fixed part of a sequence's cache, as the plan's summary charges it ---------------------


def sequence(shape: Shape, tp: int, context: int) -> int:
    """One sequence of `context` tokens on one card of a TP-wide replica: the growing layers in
    16-token blocks, plus the windows and states that do not grow (8,192 batched tokens)."""
    blocks = -(-context // 16) * 16
    fixed = shape.fixed_kv_bytes(tp, 1, context, batched_tokens=8192, block_size=16)
    return shape.kv_bytes_per_token(tp) * blocks + fixed


def test_gpt_oss_card_holds_its_full_layers_per_token_and_its_windows_per_sequence():
    shape = Shape.of(read("openai/gpt-oss-20b"))
    # 24,576 B × 131,072 tokens for the 12 full layers, + 204,865,536 B for the 12 windows
    # (8,336 tokens × 12 × 2,048 B, see test_config_models).
    assert sequence(shape, 1, 131_072) == 24_576 * 131_072 + 204_865_536 == 3_426_091_008
    full, sliding = attention_charges(shape, 131_072)
    assert (full.kind, full.layers, full.bytes_per_token, full.bytes_per_sequence) == (
        "full", 12, 24_576, 0,
    )  # fmt: skip
    assert (sliding.kind, sliding.bytes_per_sequence, sliding.window) == (
        "sliding", 204_865_536, 128,
    )  # fmt: skip


def test_qwen3_next_linear_state_is_charged_once_a_sequence_and_split_by_tp():
    shape = Shape.of(read("Qwen/Qwen3-Next-80B-A3B-Thinking"))
    # TP 2: 12 full layers of 2 KV heads split to 1 a rank: 12 × 1 × 512 × 2 B = 12,288 B a
    # token, × 8,192 tokens; 36 states of 1,097,728 B halved.
    assert sequence(shape, 2, 8192) == 12_288 * 8_192 + 36 * 548_864 == 120_422_400


def test_gemma3_windows_hold_the_batch_beside_the_window():
    shape = Shape.of(read("google/gemma-3-27b-it"))
    # One 8,192-token sequence: 81,920 × 8,192 = 671,088,640 for the 10 full layers; the 52
    # sliding ones hold min(1023 + 8192, 8192) = 8,192 → 512 + 1 blocks = 8,208 tokens × 52 ×
    # 8,192 B = 3,496,476,672.
    assert sequence(shape, 1, 8192) == 671_088_640 + 3_496_476_672


def test_nemotron_h_card_holds_attention_per_token_and_mamba_state_per_sequence():
    shape = Shape.of(read("nvidia/Nemotron-H-56B-Base-8K"))
    # 10 attention layers of 8 KV heads, 4 a rank: 10 × 4 × 256 × 2 B = 20,480 B a token;
    # 54 Mamba-2 states of 8,511,488 B, halved.
    assert sequence(shape, 2, 8192) == 20_480 * 8_192 + 54 * 4_255_744 == 397_582_336


# --- what vLLM refuses, in its words ---------------------------------------------------------


def test_block_fp8_moe_refuses_a_width_that_splits_a_block_unless_experts_stay_whole():
    shape = Shape.of(read("Qwen/Qwen3-235B-A22B-FP8"))
    # moe_intermediate_size 1536 / 8 = 192, not a multiple of weight_block_size[0] = 128.
    assert width_refusal(shape, 8) == (
        "The output_size of gate's and up's weight = 192 is not divisible by "
        "weight quantization block_n = 128."
    )
    # 1536 / 4 = 384 = 3 × 128.
    assert width_refusal(shape, 4) is None
    # Expert parallelism keeps each expert whole, so 8 cards are fine.
    assert width_refusal(shape, 8, expert_parallel=True) is None


def test_qwen3_30b_fp8_already_fails_at_four_cards_without_expert_parallelism():
    shape = Shape.of(read("Qwen/Qwen3-30B-A3B-FP8"))
    # 768 / 2 = 384 = 3 × 128; 768 / 4 = 192.
    assert width_refusal(shape, 2) is None
    assert width_refusal(shape, 4) == (
        "The output_size of gate's and up's weight = 192 is not divisible by "
        "weight quantization block_n = 128."
    )


def test_block_fp8_dense_mlp_split_below_a_block_is_refused():
    shape = Shape.of(read("Qwen/Qwen3-32B-FP8"))
    # intermediate_size 25600 / 8 = 3,200 = 25 × 128; / 16 = 1,600 = 12.5 × 128.
    assert width_refusal(shape, 8) is None
    assert width_refusal(shape, 16) == (
        "Weight output_partition_size = 1600 is not divisible by weight quantization block_n = 128."
    )


def test_awq_group_size_against_the_row_parallel_split():
    # Qwen2.5-72B's real config with an AWQ quantization_config (group_size 128) added: the
    # published Qwen2.5-72B-Instruct-AWQ pads intermediate_size from 29,568 to 29,696
    # (shared meta.json): 29,568 = 128 × 231, and 231 is odd, so no even width splits it into
    # whole groups; 29,696 = 128 × 232, and 232 / 8 = 29.
    cfg = json.loads((FIXTURES / "src" / "Qwen--Qwen2.5-72B.json").read_text())
    cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128}
    shape = Shape.of(model_from_config(cfg, Path("config.json")))
    assert width_refusal(shape, 1) is None
    assert width_refusal(shape, 2) == (
        "The input size is not aligned with the quantized weight shape. "
        "This can be caused by too large tensor parallel size."
    )
    padded = Shape.of(model_from_config({**cfg, "intermediate_size": 29_696}, Path("c.json")))
    assert width_refusal(padded, 8) is None


# --- an FP8 checkpoint at its real bytes, with its parameters counted from the headers -----------


def _header_only(path: Path, tensors: list[tuple[str, str, list[int]]]) -> None:
    """A safetensors file holding only its header: tensor names, dtypes, shapes and offsets."""
    size = {"F8_E4M3": 1, "BF16": 2, "F32": 4}
    header, offset = {}, 0
    for name, dtype, shape in tensors:
        n = size[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def _qwen3_30b_fp8(root: Path) -> Path:
    """Qwen3-30B-A3B-FP8 as a directory: its real config.json, and header-only shards whose
    tensors are the ones its config implies (the published headers are not in shared/fixtures):
    fp8 linear weights with one f32 scale per 128 × 128 block, bf16 norms, router, embeddings."""
    snap = root / "Qwen3-30B-A3B-FP8"
    snap.mkdir()
    shutil.copyfile(FIXTURES / "src" / "Qwen--Qwen3-30B-A3B-FP8.json", snap / "config.json")

    def linear(name: str, out: int, inp: int) -> list[tuple[str, str, list[int]]]:
        return [
            (f"{name}.weight", "F8_E4M3", [out, inp]),
            (f"{name}.weight_scale_inv", "F32", [-(-out // 128), -(-inp // 128)]),
        ]

    weight_map = {}
    for i in range(48):
        pre = f"model.layers.{i}"
        t = linear(f"{pre}.self_attn.q_proj", 32 * 128, 2048)
        t += linear(f"{pre}.self_attn.k_proj", 4 * 128, 2048)
        t += linear(f"{pre}.self_attn.v_proj", 4 * 128, 2048)
        t += linear(f"{pre}.self_attn.o_proj", 2048, 32 * 128)
        t += [
            (f"{pre}.self_attn.q_norm.weight", "BF16", [128]),
            (f"{pre}.self_attn.k_norm.weight", "BF16", [128]),
            (f"{pre}.input_layernorm.weight", "BF16", [2048]),
            (f"{pre}.post_attention_layernorm.weight", "BF16", [2048]),
            (f"{pre}.mlp.gate.weight", "BF16", [128, 2048]),
        ]
        for e in range(128):
            t += linear(f"{pre}.mlp.experts.{e}.gate_proj", 768, 2048)
            t += linear(f"{pre}.mlp.experts.{e}.up_proj", 768, 2048)
            t += linear(f"{pre}.mlp.experts.{e}.down_proj", 2048, 768)
        shard = f"model-{i + 1:05d}-of-00049.safetensors"
        _header_only(snap / shard, t)
        weight_map.update({name: shard for name, _, _ in t})
    last = "model-00049-of-00049.safetensors"
    rest = [
        ("model.embed_tokens.weight", "BF16", [151_936, 2048]),
        ("lm_head.weight", "BF16", [151_936, 2048]),
        ("model.norm.weight", "BF16", [2048]),
    ]
    _header_only(snap / last, rest)
    weight_map.update({name: last for name, _, _ in rest})
    index = {"metadata": {}, "weight_map": weight_map}
    (snap / "model.safetensors.index.json").write_text(json.dumps(index))
    return snap


def test_an_fp8_checkpoint_is_planned_at_the_bytes_its_headers_hold(tmp_path):
    repo = load_repo(str(_qwen3_30b_fp8(tmp_path)))
    m, (art,) = repo.model, repo.artifacts
    # A layer: attention fp8 4096×2048 + 2 × 512×2048 + 2048×4096 = 18,874,368 B; their scales
    # 32×16 + 2 × 4×16 + 16×32 = 1,152 × 4 B; norms 128 + 128 + 2048 + 2048 = 4,352 × 2 B;
    # router 128 × 2048 × 2 B; experts 128 × 3 × 768 × 2048 = 603,979,776 B and their scales
    # 128 × (6×16 + 6×16 + 16×6) = 36,864 × 4 B: 623,539,200 B. × 48 layers, + embeddings and
    # lm_head 2 × 151,936 × 2048 × 2 B, + the final norm 4,096 B.
    assert art.bytes == 48 * 623_539_200 + 1_244_659_712 + 4_096 == 31_174_545_408
    assert art.quant == "fp8"
    # Elements: 48 × 623,158,656 + 2 × 151,936 × 2048 + 2048.
    assert m.params == 30_533_947_392
    # Active: all but 120 of every 128 experts' elements (48 × 604,016,640 = 28,992,798,720).
    assert m.active_params == 30_533_947_392 - 28_992_798_720 * 120 // 128 == 3_353_198_592
    # Ranked by cards, to read one card's bytes (the serving ranking may spread it wider).
    o = plan(
        m, repo.artifacts, Fleet((node("h100", "h100-80g", H100, 8),)), PlanSettings(rank="cards")
    )
    best = o.options[0]
    assert best.tp == 1
    # Its real bytes, not 2 B × parameters (61,067,894,784), and vLLM's rotary cache beside
    # them: 40,960 positions × 128 dims × 2 B.
    assert best.per_card.weights == 31_174_545_408 + 40_960 * 128 * 2
    # 2 × 48 × 4 × 128 × 2 B × 40,960 tokens.
    assert best.per_card.kv_cache == 98_304 * 40_960


# --- models that do not generate, and models llmfit does not know ------------------------------


def test_an_embedding_model_is_planned_without_a_kv_cache():
    cfg = {
        "architectures": ["BertModel"], "model_type": "bert", "num_hidden_layers": 12,
        "num_attention_heads": 12, "hidden_size": 768, "max_position_embeddings": 512,
        "torch_dtype": "float32",
    }  # fmt: skip
    m = model_from_config(cfg, Path("config.json"))
    assert m.task == "embed"
    assert Shape.of(m).kv_bytes_per_token() == 0
    assert m.notes == (
        "BertModel is an embedding model (a bare encoder with no language-model head), not a text "
        "generator: planned as its weights and the runtime, with no KV cache.",
    )
    art = Artifact("safetensors", "safetensors", 438_000_000, quant="fp32")
    o = plan(m, [art], Fleet((node("h100", "h100-80g", H100, 1),)), PlanSettings()).options[0]
    assert o.per_card.kv_cache == 0
    assert o.max_context == 512


def test_a_reranker_is_a_classifier():
    cfg = {
        "architectures": ["Qwen3ForSequenceClassification"], "model_type": "qwen3",
        "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 128, "hidden_size": 1024, "max_position_embeddings": 40960,
    }  # fmt: skip
    m = model_from_config(cfg, Path("config.json"))
    assert (m.task, m.layer_groups) == ("classify", ())


def test_an_unknown_architecture_is_planned_from_its_fields_and_says_so():
    cfg = {
        "architectures": ["FooForCausalLM"], "model_type": "foo", "num_hidden_layers": 24,
        "num_attention_heads": 16, "num_key_value_heads": 4, "hidden_size": 2048,
        "max_position_embeddings": 4096,
    }  # fmt: skip
    m = model_from_config(cfg, Path("config.json"))
    # 2 × 24 × 4 × (2048 / 16 = 128) × 2 B.
    assert Shape.of(m).kv_bytes_per_token() == 49_152
    assert m.notes == (
        "model_type 'foo' is not one llmfit has been checked against: planned from the fields "
        "its config gives (24 full layers, 4 KV heads × 128).",
    )


def test_an_unknown_hybrid_that_does_not_say_which_layers_are_recurrent_is_refused():
    import pytest

    from llmfit.errors import ConfigError

    cfg = {
        "architectures": ["BarForCausalLM"], "model_type": "bar", "num_hidden_layers": 24,
        "num_attention_heads": 16, "hidden_size": 2048, "ssm_state_size": 128,
    }  # fmt: skip
    with pytest.raises(ConfigError) as e:
        model_from_config(cfg, Path("config.json"))
    assert e.value.message == (
        "config.json declares state-space or linear-attention layers (ssm_state_size) but not "
        "which layers they are, so its cache cannot be sized."
    )


# --- the command line: which kinds, how charged, and another KV dtype -----------------------------


def test_json_says_which_attention_kinds_and_how_each_was_charged(run):
    from tests.conftest import EXAMPLE_FLEET

    code, out, _ = run("openai/gpt-oss-20b", "--fleet", str(EXAMPLE_FLEET), "--json")
    assert code == 0
    doc = json.loads(out)
    model = doc["model"]
    assert (model["kv_bytes_per_token"], model["quantization"]) == (24_576, "mxfp4")
    assert (model["params"], model["active_params"]) == (None, None)
    assert model["attention"] == [
        {
            "kind": "full",
            "layers": 12,
            "window": None,
            "bytes_per_token": 24_576,
            "bytes_per_sequence": 0,
            "how": "K and V for every token of the context",
        },
        {
            "kind": "sliding",
            "layers": 12,
            "window": 128,
            "bytes_per_token": 0,
            "bytes_per_sequence": 204_865_536,
            "how": "a window of 128 tokens + 8,192 batched tokens a sequence, whatever the "
            "context (here at vLLM's max_num_batched_tokens on cards of 70 GiB or more; each "
            "card's plan counts what its release keeps for it)",
        },
    ]


def test_text_output_names_the_kinds(run):
    from tests.conftest import EXAMPLE_FLEET

    _, out, _ = run("google/gemma-3-27b-it", "--fleet", str(EXAMPLE_FLEET))
    assert "attention: 10 full, 52 sliding (window 1,024)" in out.splitlines()


def test_kv_cache_dtype_fp8_is_planned_and_passed_to_vllm(run):
    from tests.conftest import EXAMPLE_FLEET

    fleet = str(EXAMPLE_FLEET)
    _, out, _ = run("meta-llama/Llama-3.1-8B-Instruct", "--fleet", fleet, "--json")
    auto = json.loads(out)
    assert auto["model"]["kv_bytes_per_token"] == 131_072
    assert "--kv-cache-dtype" not in auto["options"][0]["commands"][0]["argv"]
    _, out, _ = run(
        "meta-llama/Llama-3.1-8B-Instruct", "--fleet", fleet, "--json", "--kv-cache-dtype", "fp8"
    )
    fp8 = json.loads(out)
    # 2 × 32 × 8 × 128 × 1 B.
    assert fp8["model"]["kv_bytes_per_token"] == 65_536
    best = fp8["options"][0]
    assert best["commands"][0]["argv"][-2:] == ["--kv-cache-dtype", "fp8"]
    assert best["per_card"]["kv_cache"] == 65_536 * 131_072
    _, out, _ = run(
        "meta-llama/Llama-3.1-8B-Instruct", "--fleet", fleet, "--json", "--kv-cache-dtype", "bf16"
    )
    bf16 = json.loads(out)["options"][0]["commands"][0]["argv"]
    assert bf16[-2:] == ["--kv-cache-dtype", "bfloat16"]


def test_a_checkpoint_calibrated_for_an_fp8_cache_is_planned_with_one_and_says_so_to_vllm():
    m = read("nvidia/Llama-3.1-70B-Instruct-FP8")
    art = Artifact("safetensors", "safetensors", 75 * GIB, quant="modelopt")
    o = plan(
        m,
        [art],
        Fleet((node("h200", "h200-141g", H200, 8),)),
        PlanSettings(context=8192, rank="cards"),
    )
    best = o.options[0]
    assert best.launch.kv_cache_dtype == "fp8"
    # 2 × 80 × 8 × 128 × 1 B × 8,192 tokens.
    assert best.per_card.kv_cache == 163_840 * 8_192


def test_compressed_tensors_kv_cache_scheme_sets_the_cache_dtype():
    cfg = json.loads((FIXTURES / "src" / "Qwen--Qwen3-8B.json").read_text())
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"},
    }
    m = model_from_config(cfg, Path("config.json"))
    assert (m.quantization, m.kv_cache_dtype) == ("compressed-tensors", "fp8")
    # 2 × 36 × 8 × 128 × 1 B.
    assert Shape.of(m).kv_bytes_per_token() == 73_728


# --- properties that hold for every kind -------------------------------------------------------

PROPERTY_REPOS = [
    "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b", "google/gemma-3-27b-it",
    "google/gemma-2-9b-it", "Qwen/Qwen3-Next-80B-A3B-Thinking", "nvidia/Nemotron-H-56B-Base-8K",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct", "Qwen/Qwen3-235B-A22B",
]  # fmt: skip


def stage_kv(shape: Shape, tp: int, pp: int, context: int) -> int:
    blocks = -(-context // 16) * 16
    fixed = shape.fixed_kv_bytes(tp, pp, context, batched_tokens=8192, block_size=16)
    return shape.kv_bytes_per_token(tp, pp) * blocks + fixed


def test_more_context_never_needs_less_cache_and_fp8_never_more_than_bf16():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    shapes = [Shape.of(read(r), "bfloat16") for r in PROPERTY_REPOS]
    fp8 = [Shape.of(read(r), "fp8") for r in PROPERTY_REPOS]

    @settings(max_examples=200, deadline=None)
    @given(
        st.integers(0, len(shapes) - 1),
        st.integers(1, 1 << 20),
        st.integers(1, 1 << 20),
        st.sampled_from([1, 2, 4, 8]),
        st.sampled_from([1, 2, 3]),
    )
    def check(i, a, b, tp, pp):
        short, long = sorted((a, b))
        assert stage_kv(shapes[i], tp, pp, short) <= stage_kv(shapes[i], tp, pp, long)
        assert stage_kv(fp8[i], tp, pp, long) <= stage_kv(shapes[i], tp, pp, long)
        # A wider replica never holds more cache a card.
        assert stage_kv(shapes[i], tp * 2, pp, long) <= stage_kv(shapes[i], tp, pp, long)

    check()


def test_a_config_only_snapshot_says_its_weights_cannot_be_sized():
    repo = load_repo("openai/gpt-oss-120b", HUB, offline=True)
    assert repo.artifacts == ()
    assert repo.warnings == (
        "openai/gpt-oss-120b holds no model.safetensors.index.json, model.safetensors or GGUF "
        "file here, so its weights cannot be sized: only its model is read.",
    )
