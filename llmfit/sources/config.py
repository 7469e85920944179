"""config.json → Model, read the way vLLM reads it (vllm/config/model.py).

Fields come from `text_config` when the config has one (a model that also reads pictures is sized
by its language model), and each is looked up under every name the families use for it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from llmfit.errors import ConfigError
from llmfit.plan.model import (
    DTYPE_BYTES,
    AttentionKind,
    LayerGroup,
    MambaShape,
    Model,
    ModelShapes,
    ParamSplit,
    SplitRule,
    Yarn,
)
from llmfit.sources.cache import show
from llmfit.sources.jsonfile import JsonProblem, parse

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads")
# vLLM ModelConfig.get_total_num_kv_heads, in its order.
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")
# vLLM _get_and_verify_max_len's possible_keys: the smallest present wins, and
# model_max_length (Command-R, Cohere 2, Aya Vision) overrides them all when present.
CONTEXT_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
ACTIVE_EXPERT_KEYS = (
    "num_experts_per_tok",
    "num_experts_per_token",
    "experts_per_token",
    "moe_top_k",
    "top_k",
)
# vLLM 0.34's list of the model types whose attention it runs as DeepSeek's multi-head latent
# attention when the config carries a kv_lora_rank (vllm/transformers_utils/
# model_arch_config_convertor.py ModelArchConfigConvertor.is_deepseek_mla). llmfit reads MLA from
# the config's own keys (`_is_mla`), so a new family is planned as MLA before anyone names it;
# this list only says which of those vLLM has been seen to run that way (a type off it gets a note).
VLLM_MLA_TYPES = frozenset(
    {
        "axk1", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_v41",
        "dots3_note", "deepseek_mtp", "k3_dspark", "glm5_next", "glm5_next_text", "glm_moe_dsa",
        "glm4_moe_lite", "glm4_moe_lite_mtp", "kimi_k2", "kimi_linear", "longcat_flash",
        "mistral_large_4", "pangu_ultra_moe", "pangu_ultra_moe_mtp", "bailing_hybrid",
        "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "hy_v4", "hy_v4_mtp",
    }
)  # fmt: skip


def _is_mla(merged: dict[str, Any]) -> bool:
    """Whether the layers that attend keep DeepSeek's compressed latent: the config gives the
    latent's rank and its rotary part (kv_lora_rank, qk_rope_head_dim), the keys every MLA
    family's config class has (DeepseekV2Config, Glm4MoeLiteConfig, KimiLinearConfig, ...)."""
    return _size(merged, "kv_lora_rank") > 0 and _size(merged, "qk_rope_head_dim") > 0


# What a repository cloned without git-lfs holds in place of a file: three lines pointing at it.
LFS_POINTER = "version https://git-lfs.github.com/spec/"
# The largest config.json seen is tens of KB (a classifier's id2label of thousands of labels makes
# one of a megabyte); past this it is not a config, and is neither read nor downloaded whole.
MAX_CONFIG = 16 << 20


def load_config(path: Path) -> dict[str, Any]:
    """Read config.json as a JSON object, or raise the sentence that says what is wrong with it."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file.") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror or e}).") from None
    return config_from_bytes(raw, path)


def config_from_bytes(raw: bytes, path: Path | str) -> dict[str, Any]:
    """config.json's bytes as a JSON object, or the sentence that says what is wrong with them."""
    if raw.startswith(LFS_POINTER.encode()):
        raise ConfigError(
            f"{path} is a Git LFS pointer, not the config itself.",
            hint="fetch the file itself: git lfs pull, or hf download",
        )
    try:
        data = parse(raw, MAX_CONFIG)
    except JsonProblem as e:
        raise ConfigError(f"{path} {e.problem}.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data


def _first(cfg: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return None


MAX_LAYERS = 100_000
# Every other count or size a config gives (widths, heads, vocabulary, context, experts, windows)
# is below this in any model; a number past it is a mistake or an attack, and would reach the
# planner's arithmetic as one.
MAX_WHOLE = 1 << 32


def _int(cfg: dict[str, Any], keys: tuple[str, ...], path: Path) -> int | None:
    v = _first(cfg, keys)
    if v is None:
        return None
    return _checked(v, _which(cfg, keys), path)


def _checked(v: Any, name: str, path: Path, *, bound: int = MAX_WHOLE) -> int:
    """A config's count or size, refused unless a positive whole number below `bound`."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{path}: {name} is {show(v)}, not a whole number.")
    if v <= 0:
        raise ConfigError(f"{path}: {name} is {v:,}, which must be positive.")
    if v > bound:
        raise ConfigError(f"{path}: {name} is {v:,}; no model has one above {bound:,}.")
    return v


def _real(v: Any, name: str, path: Path) -> float:
    """A config's ratio (a rope factor), refused unless a positive finite number."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{path}: {name} is {show(v)}, not a number.")
    if not math.isfinite(v) or v <= 0 or v > MAX_WHOLE:
        raise ConfigError(f"{path}: {name} is {show(v)}; it must be a positive finite number.")
    return float(v)


def _which(cfg: dict[str, Any], keys: tuple[str, ...]) -> str:
    return next((k for k in keys if cfg.get(k) is not None), keys[0])


# Model types llmfit has read real configs of, or whose layout vLLM documents; any other is planned
# from the fields it gives, with a note saying so.
KNOWN_TYPES = VLLM_MLA_TYPES | frozenset(
    {
        "llama", "llama4", "llama4_text", "mistral", "mistral3", "mixtral", "qwen2", "qwen2_moe",
        "qwen2_vl", "qwen2_5_vl", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_vl", "qwen3_vl_moe",
        "gemma", "gemma2", "gemma3", "gemma3_text", "gpt_oss", "glm4", "glm4_moe", "phi3",
        "nemotron_h", "granitemoehybrid", "jamba", "falcon_h1", "bert", "xlm-roberta", "roberta",
        "cohere", "cohere2", "granite", "granitemoe", "olmo2", "starcoder2", "gemma4",
        "gemma4_text", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
    }
)  # fmt: skip

# Sliding windows in layer_types, and what each value means (transformers' ALLOWED_LAYER_TYPES
# and the hybrid families' own spellings).
LAYER_TYPE_KINDS = {
    "full_attention": "full",
    "attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
    "mamba": "mamba",
    "mamba2": "mamba",
}

# Architectures that do not generate, by how their name ends, and what they are for.
NON_GENERATING = (
    ("ForSequenceClassification", "classify", "a classifier or reranker"),
    ("ForTokenClassification", "classify", "a token classifier"),
    ("ForQuestionAnswering", "classify", "an extractive question-answering model"),
    ("ForMaskedLM", "embed", "an encoder (masked language model)"),
    ("EmbeddingModel", "embed", "an embedding model"),
    ("Model", "embed", "an embedding model (a bare encoder with no language-model head)"),
)

# Architectures named like bare encoders that vLLM runs as generators (its model registry).
GENERATING_MODELS = frozenset({"ChatGLMModel"})

STATE_KEYS = ("ssm_state_size", "mamba_d_state", "state_size", "linear_num_value_heads")


def _rope_context(text: dict[str, Any], text_type: str | None, base: int, path: Path) -> int:
    """The trained context as vLLM derives it (_get_and_verify_max_len in vllm/config/model.py).

    Rope scaling of any type but su, longrope and llama3 multiplies the length by its factor
    (1 when it gives none, as "default" and "mrope" do); YaRN multiplies its
    original_max_position_embeddings instead. Gemma 3 is skipped: its max_position_embeddings
    already includes the scaling. Llama 3's own scaling is already in max_position_embeddings.
    Transformers 5's rope_parameters (possibly one per layer type) is read the same way.
    """
    key = "rope_parameters" if text.get("rope_parameters") else "rope_scaling"
    rope = text.get(key)
    if not isinstance(rope, dict) or "gemma3" in (text_type or ""):
        return base
    nested = not any(k in rope for k in ("rope_type", "type", "factor"))
    params = rope.items() if nested else [("", rope)]
    factor = 1.0
    length = base
    for sub, rp in params:
        if not isinstance(rp, dict):
            continue
        where = f"{key}.{sub}" if nested else key
        kind = rp.get("rope_type") or rp.get("type") or "default"
        if kind in ("su", "longrope", "llama3"):
            continue
        if rp.get("factor") is not None:
            factor = _real(rp["factor"], f"{where}.factor", path)
        original = rp.get("original_max_position_embeddings")
        if kind == "yarn" and original:
            length = _checked(original, f"{where}.original_max_position_embeddings", path)
    context = int(length * factor)
    if context > MAX_WHOLE:
        raise ConfigError(
            f"{path}: {key} scales the context to {context:,} tokens; no model has one above "
            f"{MAX_WHOLE:,}."
        )
    return max(context, 1)


def _trained_context(merged: dict[str, Any], text_type: str | None, path: Path) -> int | None:
    found = [v for k in CONTEXT_KEYS if (v := _int(merged, (k,), path)) is not None]
    if not found:
        return None
    base = min(found)
    if merged.get("model_max_length"):
        base = _int(merged, ("model_max_length",), path) or base
    return _rope_context(merged, text_type, base, path)


def _quant_config(
    cfg: dict[str, Any], text: dict[str, Any], hf_quant: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The checkpoint's quantisation config, found where vLLM looks (_parse_quant_hf_config),
    then ModelOpt's hf_quant_config.json."""
    for q in (cfg.get("quantization_config"), cfg.get("compression_config")):
        if isinstance(q, dict):
            return q
    q = text.get("quantization_config")
    if isinstance(q, dict):
        return q
    if isinstance(hf_quant, dict):
        inner = hf_quant.get("quantization")
        return {**(inner if isinstance(inner, dict) else {}), "producer": hf_quant.get("producer")}
    return None


def _quant_method(q: dict[str, Any], path: Path) -> str | None:
    raw = q.get("quant_method")
    if raw is not None and not isinstance(raw, str):
        raise ConfigError(f"{path}: quantization_config.quant_method is {show(raw)}, not a name.")
    method = (raw or "").lower().replace("compressed_tensors", "compressed-tensors")
    producer = q.get("producer")
    algo = str(q.get("quant_algo") or "").upper()
    if (isinstance(producer, dict) and producer.get("name") == "modelopt") or method == "modelopt":
        # vLLM: producer modelopt turns quant_algo FP8 into "modelopt", NVFP4 into "modelopt_fp4".
        return "modelopt_fp4" if "FP4" in algo else "modelopt"
    return method or (algo.lower() or None)


def _group_size(q: dict[str, Any], path: Path) -> int | None:
    name = "quantization_config.group_size"
    g = q.get("group_size", q.get("q_group_size"))
    if g is None and isinstance(q.get("config_groups"), dict):
        # compressed-tensors: the weights' group size of its (first) scheme with one.
        for group, scheme in q["config_groups"].items():
            w = scheme.get("weights") if isinstance(scheme, dict) else None
            if isinstance(w, dict) and w.get("strategy") == "group" and w.get("group_size"):
                g = w["group_size"]
                name = f"quantization_config.config_groups.{group}.weights.group_size"
                break
    # GPTQ writes -1 for one group a row (per channel): nothing for a width to split.
    if g is None or (g == -1 and not isinstance(g, bool)):
        return None
    return _checked(g, name, path)


def _kv_cache_dtype(q: dict[str, Any] | None, notes: list[str]) -> str | None:
    if not q:
        return None
    scheme = q.get("kv_cache_scheme")
    if isinstance(scheme, dict):
        if scheme.get("type") == "float" and scheme.get("num_bits") == 8:
            return "fp8"
        notes.append(
            f"kv_cache_scheme {show(scheme)} is not one llmfit sizes; "
            "the cache is planned at the model's dtype."
        )
        return None
    if str(q.get("kv_cache_quant_algo") or "").upper() == "FP8":
        return "fp8"
    return None


def _split_rules(
    merged: dict[str, Any],
    method: str | None,
    q: dict[str, Any] | None,
    experts: int | None,
    path: Path,
) -> tuple[SplitRule, ...]:
    """The sizes tensor parallelism splits that the checkpoint's quantisation must divide.

    Block FP8 (vllm/model_executor/layers/quantization/fp8.py): each rank's share of the MLP's
    intermediate size must be a multiple of weight_block_size[0]. GPTQ and AWQ (gptq.py, awq.py):
    each rank's share of a row-parallel input (down_proj's, the intermediate size) must be a
    multiple of the group size. Routed experts under expert parallelism stay whole, so their rule
    does not apply there.
    """
    if not q or not method:
        return ()
    block = q.get("weight_block_size")
    if method == "fp8" and block is not None:
        # A block of 0 or fewer would be a division by zero in the planner, and one of the wrong
        # type a rule silently dropped.
        if not isinstance(block, list) or not block:
            raise ConfigError(
                f"{path}: quantization_config.weight_block_size is {show(block)}, not a list of "
                "sizes."
            )
        multiple = _checked(block[0], "quantization_config.weight_block_size[0]", path)
        check, moe_check = "block_fp8", "block_fp8_moe"
    elif method in ("gptq", "awq", "compressed-tensors") and _group_size(q, path):
        multiple, check, moe_check = int(_group_size(q, path) or 0), "group", "group"
    else:
        return ()
    rules: list[SplitRule] = []
    inter = _int(merged, ("intermediate_size",), path)
    moe = _int(merged, ("moe_intermediate_size",), path)
    dense = not experts or bool(
        merged.get("first_k_dense_replace") or merged.get("mlp_only_layers")
    )
    if dense and inter is not None:
        rules.append(SplitRule("intermediate_size", inter, multiple, check))
    if experts:
        routed = moe if moe is not None else inter
        if routed is not None:
            rules.append(SplitRule("moe_intermediate_size", routed, multiple, moe_check, True))
        shared = _int(merged, ("shared_expert_intermediate_size",), path)
        n_shared = merged.get("n_shared_experts")
        if not shared and moe is not None and isinstance(n_shared, int) and n_shared > 0:
            shared = moe * n_shared
        if shared:
            rules.append(SplitRule("shared_expert_intermediate_size", shared, multiple, check))
    return tuple(rules)


def _need(cfg: dict[str, Any], keys: tuple[str, ...], path: Path, what: str) -> int:
    v = _int(cfg, keys, path)
    if v is None:
        raise ConfigError(
            f"{path} declares {what} layers but gives no {keys[0]}, so their state cannot be sized."
        )
    return v


def _state_bytes(
    kind: str, merged: dict[str, Any], hidden: int | None, elem: int, ssm_elem: int, path: Path
) -> int:
    """One sequence's state in one layer, before tensor parallelism, as vLLM sizes it
    (MambaStateShapeCalculator in vllm/model_executor/layers/mamba/mamba_utils.py): the conv
    state at `elem` bytes, the SSM (recurrent) state at `ssm_elem`."""
    if kind == "kda":
        # Kimi Delta Attention (kda_state_shape): a conv state of (kernel - 1) × 3 × heads ×
        # head_dim (q, k and v) and a heads × head_dim × head_dim recurrent state.
        lin = merged.get("linear_attn_config")
        lin = lin if isinstance(lin, dict) else {}
        what = "KDA"
        heads = _need(lin, ("num_heads",), path, what)
        head = _need(lin, ("head_dim",), path, what)
        kernel = _need(lin, ("short_conv_kernel_size",), path, what)
        return (kernel - 1) * 3 * heads * head * elem + heads * head * head * ssm_elem
    if kind == "gated_delta_net":
        what = "linear-attention"
        kernel = _need(merged, ("linear_conv_kernel_dim",), path, what)
        hk = _need(merged, ("linear_key_head_dim",), path, what)
        nk = _need(merged, ("linear_num_key_heads",), path, what)
        hv = _need(merged, ("linear_value_head_dim",), path, what)
        nv = _need(merged, ("linear_num_value_heads",), path, what)
        conv = (kernel - 1) * (2 * hk * nk + hv * nv)
        temporal = nv * hv * hk
    elif kind == "mamba2":
        what = "Mamba-2"
        heads = _need(merged, ("mamba_num_heads", "mamba_n_heads"), path, what)
        head = _need(merged, ("mamba_head_dim", "mamba_d_head"), path, what)
        state = _need(merged, ("ssm_state_size", "mamba_d_state", "state_size"), path, what)
        kernel = _need(merged, ("conv_kernel", "mamba_d_conv", "conv_kernel_size"), path, what)
        groups = _int(merged, ("n_groups", "mamba_n_groups"), path) or 1
        inner = _int(merged, ("mamba_d_ssm",), path) or heads * head
        conv = (kernel - 1) * (inner + 2 * groups * state)
        temporal = heads * head * state
    else:  # mamba1 (Jamba)
        what = "Mamba"
        expand = _need(merged, ("mamba_expand",), path, what)
        state = _need(merged, ("mamba_d_state",), path, what)
        kernel = _need(merged, ("mamba_d_conv",), path, what)
        if hidden is None:
            raise ConfigError(f"{path} declares Mamba layers but gives no hidden_size.")
        inner = expand * hidden
        conv = (kernel - 1) * inner
        temporal = inner * state
    return conv * elem + temporal * ssm_elem


def _window(merged: dict[str, Any], path: Path) -> int | None:
    """The sliding window's size; None when there is none (absent, null, or 0 as some configs
    write it)."""
    window = merged.get("sliding_window")
    if window is None or (window == 0 and not isinstance(window, bool)):
        return None
    return _checked(window, "sliding_window", path)


def _layer_kinds(
    merged: dict[str, Any], text_type: str | None, layers: int, path: Path, notes: list[str]
) -> list[tuple[str, ...]]:
    """What each layer keeps of its past: "full", "sliding", "chunked", "gated_delta_net",
    "mamba2", "mamba1" (a layer can hold two, as Falcon-H1's do), or nothing."""
    pattern = merged.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        # Nemotron-H: M a Mamba-2 layer, * attention, - an MLP and E a MoE (neither cached).
        if len(pattern) != layers:
            raise ConfigError(
                f"{path}: hybrid_override_pattern has {len(pattern)} layers, "
                f"num_hidden_layers {layers}."
            )
        return [{"M": ("mamba2",), "*": ("full",)}.get(c, ()) for c in pattern]
    lin = merged.get("linear_attn_config")
    if isinstance(lin, dict) and lin.get("kda_layers") is not None:
        # Kimi-Linear: the KDA layers, numbered from 1, and every other layer attends
        # (vllm/transformers_utils/configs/kimi_linear.py KimiLinearConfig.is_kda_layer).
        kda = lin.get("kda_layers")
        if not isinstance(kda, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= layers for i in kda
        ):
            raise ConfigError(
                f"{path}: linear_attn_config.kda_layers is {show(kda)}; it must list layer "
                f"numbers from 1 to {layers}."
            )
        numbers = set(kda)
        return [("kda",) if i + 1 in numbers else ("full",) for i in range(layers)]
    types = merged.get("layer_types") or merged.get("layers_block_type")
    if isinstance(types, list) and types:
        if len(types) != layers:
            raise ConfigError(
                f"{path}: layer_types lists {len(types)} layers, num_hidden_layers {layers}."
            )
        out: list[tuple[str, ...]] = []
        for t in types:
            kind = LAYER_TYPE_KINDS.get(str(t))
            if kind is None:
                raise ConfigError(
                    f"{path}: layer type {show(t)} is not one llmfit can size "
                    f"(known: {', '.join(sorted(LAYER_TYPE_KINDS))})."
                )
            if kind == "linear":
                kind = "gated_delta_net"
            elif kind == "mamba":
                kind = "mamba1" if text_type == "jamba" else "mamba2"
            out.append((kind,))
        return out
    if text_type == "falcon_h1":
        # Falcon-H1 runs attention and a Mamba-2 mixer side by side in every layer.
        return [("full", "mamba2")] * layers
    n = _int(merged, ("full_attention_interval",), path)
    if n:
        return [("full",) if (i + 1) % n == 0 else ("gated_delta_net",) for i in range(layers)]
    period = _int(merged, ("attn_layer_period",), path)
    if text_type == "jamba" and period:
        offset = merged.get("attn_layer_offset") or 0
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < period:
            # Any other value would place no attention layer at all, and plan the model as one
            # with no KV cache.
            raise ConfigError(
                f"{path}: attn_layer_offset is {show(offset)}; it must be a whole number from 0 "
                f"to attn_layer_period - 1 ({period - 1})."
            )
        return [("full",) if i % period == offset else ("mamba1",) for i in range(layers)]
    if merged.get("attention_chunk_size"):
        # Llama 4: layers with rope attend within a chunk; every no_rope_layer_interval-th layer
        # (no_rope_layers[i] == 0) attends globally (transformers Llama4TextConfig defaults).
        flags = merged.get("no_rope_layers")
        if not (isinstance(flags, list) and len(flags) == layers):
            n = _int(merged, ("no_rope_layer_interval",), path) or 4
            flags = [int((i + 1) % n != 0) for i in range(layers)]
        return [("chunked",) if f else ("full",) for f in flags]
    window = _window(merged, path)
    if window and merged.get("use_sliding_window") is not False:
        period = merged.get("sliding_window_pattern") or merged.get("_sliding_window_pattern")
        if text_type in ("gemma2", "gpt_oss"):
            period = 2
        if isinstance(period, int) and period > 1:
            return [("sliding",) if (i + 1) % period else ("full",) for i in range(layers)]
        notes.append(
            f"sliding_window {window} with no layer pattern: every layer is planned as sliding."
        )
        return [("sliding",)] * layers
    present = [k for k in STATE_KEYS if merged.get(k) is not None]
    if present:
        raise ConfigError(
            f"{path} declares state-space or linear-attention layers ({present[0]}) but not "
            "which layers they are, so its cache cannot be sized.",
        )
    return [("full",)] * layers


def layer_kinds_of(
    merged: dict[str, Any], text_type: str | None, layers: int, path: Path, notes: list[str]
) -> list[tuple[str, ...]]:
    """Each layer's kinds, from the layer-type keys (`_layer_kinds`), with what the attention
    keys say of the attending layers: MLA's latent where the config gives one (`_is_mla`), and
    nothing cached for the layers that reuse an earlier layer's K and V (Gemma 4's last
    num_kv_shared_layers: vllm/model_executor/models/gemma4.py Gemma4Attention, whose
    kv_sharing_target_layer_name gives them no cache of their own)."""
    kinds = _layer_kinds(merged, text_type, layers, path, notes)
    if _is_mla(merged):
        kinds = [tuple("mla" if k == "full" else k for k in ks) for ks in kinds]
    shared = _size(merged, "num_kv_shared_layers")
    if 0 < shared < layers:
        kinds = kinds[: layers - shared] + [()] * shared
    return kinds


# Keys that change what vLLM holds for a model and that llmfit does not model, and what they are:
# a config that gives one plans as an estimate, with a note naming it.
UNMODELLED_KEYS = {
    # DeepSeek-V4's compressed attention (is_deepseek_mla reads get_compress_ratios).
    "compress_ratios": "compressed attention",
    # MiniMax's lightning (linear) attention layers (attn_type 0).
    "attn_type_list": "linear attention layers",
    "full_attn_idxs": "linear attention layers",
    "swa_layers": "sliding-window layers",
    "kv_lora_rank": "a latent cache without its rotary part",
    # Gemma 4's global layers ship k_proj only; vLLM builds a whole QKV projection and loads K
    # into its V slot too (vllm/model_executor/models/gemma4.py _gemma4_layer_weights_mapper),
    # so the card holds more weight than the checkpoint.
    "attention_k_eq_v": "a V projection built from the K weights",
}


def _unmodelled(merged: dict[str, Any]) -> tuple[str, ...]:
    """The keys of UNMODELLED_KEYS the config gives with a value that changes the cache."""
    out = []
    for key in UNMODELLED_KEYS:
        v = merged.get(key)
        if v is None or v is False or v == [] or v == {}:
            continue
        if key == "attn_type_list" and isinstance(v, list) and all(t == 1 for t in v):
            continue  # every layer softmax attention: nothing to model
        if key == "kv_lora_rank" and _is_mla(merged):
            continue
        out.append(key)
    return tuple(out)


def _groups(
    kinds: list[tuple[str, ...]],
    merged: dict[str, Any],
    hidden: int | None,
    kv_heads: int,
    head_dim: int,
    elem: int,
    path: Path,
) -> tuple[LayerGroup, ...]:
    counts: dict[str, int] = {}
    for ks in kinds:
        for k in ks:
            counts[k] = counts.get(k, 0) + 1
    out: list[LayerGroup] = []
    window = _window(merged, path)
    for kind in ("full", "mla", "sliding", "chunked", "gated_delta_net", "kda", "mamba2", "mamba1"):
        n = counts.get(kind)
        if not n:
            continue
        if kind == "full":
            # Gemma 4's global layers have heads of their own (transformers' per_layer_config,
            # read by vllm/model_executor/models/gemma4.py Gemma4DecoderLayer): fewer KV heads
            # (num_global_key_value_heads, else the sliding layers' count) twice as wide
            # (global_head_dim).
            out.append(
                LayerGroup(
                    AttentionKind.FULL,
                    n,
                    kv_heads=_int(merged, ("num_global_key_value_heads",), path) or kv_heads,
                    head_dim=_int(merged, ("global_head_dim",), path) or head_dim,
                )
            )
        elif kind == "mla":
            # vLLM's get_head_size for MLA: the latent (kv_lora_rank + qk_rope_head_dim), one
            # "head", and a sparse-attention indexer's keys beside it where the config has one.
            latent = _size(merged, "kv_lora_rank") + _size(merged, "qk_rope_head_dim")
            index_layers, index_bytes = _indexer(merged, kinds, path)
            out.append(
                LayerGroup(
                    AttentionKind.MLA,
                    n,
                    latent_dim=latent,
                    indexer_layers=index_layers,
                    indexer_bytes=index_bytes,
                )
            )
        elif kind == "sliding":
            if not isinstance(window, int) or window <= 0:
                raise ConfigError(f"{path} has sliding-window layers but no sliding_window size.")
            out.append(
                LayerGroup(
                    AttentionKind.SLIDING, n, kv_heads=kv_heads, head_dim=head_dim, window=window
                )
            )
        elif kind == "chunked":
            chunk = _int(merged, ("attention_chunk_size",), path) or 0
            out.append(
                LayerGroup(
                    AttentionKind.SLIDING,
                    n,
                    kv_heads=kv_heads,
                    head_dim=head_dim,
                    window=chunk,
                    chunked=True,
                )
            )
        else:
            state = _state_bytes(kind, merged, hidden, elem, _ssm_elem(merged, kind, elem), path)
            out.append(LayerGroup(AttentionKind.LINEAR, n, state_bytes=state, state_kind=kind))
    return tuple(out)


def _ssm_dtype(merged: dict[str, Any]) -> str | None:
    """The SSM state's dtype as the config names it: Nemotron-H's mamba_ssm_cache_dtype
    (model_executor/models/config.py NemotronHForCausalLMConfig), Qwen3.5's mamba_ssm_dtype
    (Qwen3_5ForConditionalGenerationConfig)."""
    for key in ("mamba_ssm_cache_dtype", "mamba_ssm_dtype"):
        v = merged.get(key)
        if isinstance(v, str) and v in DTYPE_BYTES:
            return v
    return None


def _ssm_elem(merged: dict[str, Any], kind: str, elem: int) -> int:
    """Bytes an element of a layer's SSM (recurrent) state takes: the config's dtype where it
    names one, KDA's float32 (MambaStateDtypeCalculator.kda_state_dtype, whatever
    --mamba-ssm-cache-dtype auto), else the conv state's."""
    named = _ssm_dtype(merged)
    if kind == "kda":
        return 4 if named in (None, "float32") else 2
    return int(DTYPE_BYTES[named]) if named else elem


def _indexer(merged: dict[str, Any], kinds: list[tuple[str, ...]], path: Path) -> tuple[int, int]:
    """(layers that keep a sparse-attention indexer cache, bytes a token costs each).

    DeepSeek-V3.2's indexer (vllm/models/deepseek_v32/attention.py DeepseekV32Indexer) caches
    each token's index key in fp8, index_head_dim bytes, and a 4-byte scale for every 128 of
    them (head_dim + head_dim // 128 × 4, uint8), whatever the cache dtype."""
    if merged.get("index_topk") is None:
        return 0, 0
    dim = _need(merged, ("index_head_dim",), path, "sparse-attention indexer")
    return len(_indexer_layers(merged, kinds)), dim + dim // 128 * 4


def _indexer_layers(merged: dict[str, Any], kinds: list[tuple[str, ...]]) -> tuple[int, ...]:
    """The attending layers that build a sparse-attention indexer of their own: layers that
    reuse an earlier layer's top-k build none (vllm/model_executor/models/utils.py
    compute_skip_topk_layers: indexer_types' "shared", else index_topk_pattern's "S", else
    index_topk_freq counted from index_skip_topk_offset)."""
    if merged.get("index_topk") is None:
        return ()
    attending = [i for i, ks in enumerate(kinds) if "mla" in ks]
    types = merged.get("indexer_types")
    if isinstance(types, list) and len(types) == len(kinds):
        return tuple(i for i in attending if types[i] != "shared")
    freq = _size(merged, "index_topk_freq") or 1
    pattern = merged.get("index_topk_pattern")
    offset = merged.get("index_skip_topk_offset")
    offset = offset if isinstance(offset, int) and not isinstance(offset, bool) else 2
    if isinstance(pattern, (str, list)):
        keep = [i for i in attending if not (i < len(pattern) and pattern[i] == "S")]
    else:
        keep = [i for i in attending if max(i - offset + 1, 0) % freq == 0]
    return tuple(keep)


def _task(arch: str | None) -> tuple[str, str]:
    """What the architecture is for: ("generate", "") or ("embed"/"classify", what it is)."""
    if not arch or arch in GENERATING_MODELS:
        return "generate", ""
    if arch.endswith(("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")):
        return "generate", ""
    for suffix, task, what in NON_GENERATING:
        if arch.endswith(suffix):
            return task, what
    return "generate", ""


def model_from_config(
    cfg: dict[str, Any], path: Path, hf_quant: dict[str, Any] | None = None
) -> Model:
    """The Model a config describes; a field it does not give stays None.

    `hf_quant` is ModelOpt's hf_quant_config.json, for checkpoints whose config.json carries no
    quantization_config.
    """
    text = cfg.get("text_config")
    text = text if isinstance(text, dict) else cfg
    # A multimodal config can leave fields at the top that its text_config does not repeat.
    merged = {**cfg, **text}

    layers = _int(merged, LAYER_KEYS, path)
    heads = _int(merged, HEAD_KEYS, path)
    # A hostile or broken config must not cost memory in proportion to what it claims: the layer
    # count sizes per-layer lists (found by fuzzing: 2^32 layers was a MemoryError).
    if layers is not None and layers > MAX_LAYERS:
        raise ConfigError(
            f"{path}: {_which(merged, LAYER_KEYS)} is {layers:,}; no model has more than "
            f"{MAX_LAYERS:,} layers."
        )
    if layers is None or heads is None:
        missing = "num_hidden_layers" if layers is None else "num_attention_heads"
        raise ConfigError(
            f"{path} gives no {missing}, so the model's memory cannot be sized.",
            hint="pass a repository whose config.json describes a transformer",
        )
    notes: list[str] = []
    if merged.get("multi_query") is True:
        kv_heads = 1
    elif isinstance(merged.get("attn_config"), dict) and merged["attn_config"].get("kv_n_heads"):
        kv_heads = _int(merged["attn_config"], ("kv_n_heads",), path) or heads
    else:
        kv_heads = _int(merged, KV_HEAD_KEYS, path) or heads
    # vLLM groups query heads over KV heads evenly; a config where they do not divide describes
    # no model an engine will load, and any size read from it would be a guess.
    if heads % kv_heads:
        raise ConfigError(
            f"{path}: {heads} attention heads do not divide into {kv_heads} KV heads, so the "
            "config describes no model an engine can load."
        )
    hidden = _int(merged, ("hidden_size", "n_embd", "d_model"), path)
    head_dim = _int(merged, ("head_dim", "hidden_size_per_head"), path)
    if head_dim is None:
        if hidden is None:
            raise ConfigError(f"{path} gives neither head_dim nor hidden_size.")
        head_dim = hidden // heads
        if not head_dim:
            # Integer division would make every head 0 wide, and the model's KV cache 0 bytes.
            raise ConfigError(
                f"{path}: hidden_size {hidden:,} is smaller than its {heads:,} attention heads "
                "and no head_dim is given, so a head would be 0 wide."
            )
        if hidden % heads and not _is_mla(merged):
            # (An MLA model's heads are sized by its own keys, not by hidden_size.)
            notes.append(
                f"hidden_size {hidden} does not divide by {heads} heads: head_dim is taken as "
                f"{head_dim}, as vLLM's integer division takes it."
            )

    # The repository's own type names it ("gemma3"); the text model's type decides how it attends.
    for where in (cfg, text):
        # Found by fuzzing: a model_type of [] reached a set lookup as an unhashable list.
        if where.get("model_type") is not None and not isinstance(where["model_type"], str):
            raise ConfigError(f"{path}: model_type is {show(where['model_type'])}, not a name.")
    model_type = cfg.get("model_type") or text.get("model_type")
    text_type = text.get("model_type") or model_type
    for name, value in (("model_type", model_type), ("text_config.model_type", text_type)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{path}: {name} is {show(value)}, not a name.")
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    dtype = (
        text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype")
    )
    dtype = dtype if isinstance(dtype, str) else None
    # Linear and state-space layers keep their state in the model's dtype (vLLM
    # MambaStateDtypeCalculator with --mamba-cache-dtype auto).
    state_elem = 4 if dtype == "float32" else 2

    task, what = _task(arch)
    # MLA's sizes, refused where they are not whole numbers rather than read as absent.
    for key in ("kv_lora_rank", "qk_rope_head_dim", "index_head_dim"):
        _int(merged, (key,), path)
    mla = _is_mla(merged)
    kinds: list[tuple[str, ...]] = []
    if task != "generate":
        notes.append(
            f"{arch} is {what}, not a text generator: planned as its weights and the runtime, "
            "with no KV cache."
        )
        groups: tuple[LayerGroup, ...] = ()
    else:
        kinds = layer_kinds_of(merged, text_type, layers, path, notes)
        groups = _groups(kinds, merged, hidden, kv_heads, head_dim, state_elem, path)
        if mla:
            # vLLM's get_head_size for MLA: the latent, one "head" (kv_lora_rank +
            # qk_rope_head_dim), and get_num_kv_heads 1.
            head_dim = _size(merged, "kv_lora_rank") + _size(merged, "qk_rope_head_dim")
            kv_heads = 1
            if text_type not in VLLM_MLA_TYPES:
                notes.append(
                    f"model_type {show(text_type)} gives kv_lora_rank and qk_rope_head_dim, so "
                    "its attention is planned as MLA (a latent a token); vLLM 0.34 runs MLA for "
                    "the model types it lists (is_deepseek_mla), and this is not one of them."
                )

    if text_type not in KNOWN_TYPES:
        assumed = ", ".join(f"{g.layers} {g.kind.value}" for g in groups) or "no KV cache"
        given = f"({assumed} layers, {kv_heads} KV heads × {head_dim})"
        if text_type:
            notes.append(
                f"model_type {show(text_type)} is not one llmfit has been checked against: planned "
                f"from the fields its config gives {given}."
            )
        else:
            notes.append(
                f"No model_type is given: planned from the fields the config gives {given}."
            )
    unmodelled = _unmodelled(merged) if task == "generate" else ()
    if unmodelled:
        notes.append(
            f"The config's {', '.join(unmodelled)} change{'s' if len(unmodelled) == 1 else ''} "
            "what the engine keeps, which llmfit does not model: the memory figures are "
            "estimates."
        )

    experts = _int(merged, EXPERT_KEYS, path)
    active = _int(merged, ACTIVE_EXPERT_KEYS, path) if experts else None
    if experts and active and active > experts:
        raise ConfigError(
            f"{path}: {_which(merged, ACTIVE_EXPERT_KEYS)} is {active:,}, more than the "
            f"{experts:,} experts ({_which(merged, EXPERT_KEYS)}) a token could be routed to."
        )
    shared = _first(merged, ("n_shared_experts", "num_shared_experts"))
    if shared is not None and (isinstance(shared, bool) or not isinstance(shared, int)):
        raise ConfigError(f"{path}: n_shared_experts is {show(shared)}, not a whole number.")
    if shared is not None and not 0 <= shared <= MAX_WHOLE:
        raise ConfigError(f"{path}: n_shared_experts is {shared:,}; it cannot be negative.")
    if shared is None and merged.get("shared_expert_intermediate_size"):
        shared = 1
    q = _quant_config(cfg, text, hf_quant)
    method = _quant_method(q, path) if q else None
    kv_cache_dtype = _kv_cache_dtype(q, notes)
    return Model(
        architecture=arch,
        model_type=model_type,
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        layer_groups=groups,
        hidden_size=hidden,
        vocab_size=_int(merged, ("vocab_size", "padded_vocab_size"), path),
        max_context=_trained_context(merged, text_type, path),
        dtype=dtype,
        quantization=method,
        experts=experts,
        experts_active=active,
        shared_experts=int(shared) if experts and shared is not None else None,
        notes=tuple(notes),
        kv_cache_dtype=kv_cache_dtype,
        split_rules=_split_rules(merged, method, q, experts, path),
        task=task,
        param_split=_param_split(
            merged, text_type, kinds if task == "generate" else None, heads, kv_heads, experts, path
        ),
        custom_code=any(
            isinstance(c.get("auto_map"), dict) and bool(c["auto_map"]) for c in (cfg, text)
        ),
        unmodelled=unmodelled,
        shapes=_model_shapes(cfg, merged, text_type, kinds, layers, head_dim, task, path),
        vision_tower=_vision_tower(cfg),
        yarn=_documented_yarn(merged, text_type, path),
    )


# Families whose model cards document serving them past their native context with YaRN: the
# native length (original_max_position_embeddings), the longest the card vouches for, and which
# of the family's configs the card covers. The Qwen3 cards (Qwen/Qwen3-4B … -32B, -30B-A3B,
# -235B-A22B, "Processing Long Texts"): "Qwen3 natively supports context lengths of up to 32,768
# tokens … We have validated the model's performance on context lengths of up to 131,072 tokens
# using the YaRN method", with rope_scaling {"rope_type": "yarn", "factor": 4.0,
# "original_max_position_embeddings": 32768}. Their configs say max_position_embeddings 40,960
# and no rope scaling; Qwen3-0.6B and -1.7B (hidden size under 2,560) are cards of 32,768 only,
# and the 2507 releases (262,144 natively) document other ways.
DOCUMENTED_YARN = {
    "qwen3": (32_768, 131_072, "the Qwen3 model card"),
    "qwen3_moe": (32_768, 131_072, "the Qwen3 model card"),
}


def _documented_yarn(merged: dict[str, Any], text_type: str | None, path: Path) -> Yarn | None:
    """The YaRN way a model's card documents for its family, where the config is one the card
    covers and carries no rope scaling of its own; None otherwise."""
    known = DOCUMENTED_YARN.get(text_type or "")
    if known is None:
        return None
    original, longest, source = known
    rope = merged.get("rope_parameters") or merged.get("rope_scaling")
    if isinstance(rope, dict) and (rope.get("rope_type") or rope.get("type")) not in (
        None,
        "default",
    ):
        return None  # the config scales its rope already: its trained context says how far
    if merged.get("max_position_embeddings") != 40_960:
        return None
    if text_type == "qwen3" and (_int(merged, ("hidden_size",), path) or 0) < 2560:
        return None
    theta = merged.get("rope_theta")
    if isinstance(rope, dict) and theta is None:
        theta = rope.get("rope_theta")
    if isinstance(theta, bool) or not isinstance(theta, (int, float)):
        return Yarn(original, longest, None, source)
    good = math.isfinite(theta) and theta > 0
    return Yarn(original, longest, float(theta) if good else None, source)


# What vLLM's memory model reads besides the KV layout (llmfit/plan/engines/vllm_memory.py). These
# helpers never refuse a config: a field that is missing or not a positive whole number reads as
# 0, and the memory model then leaves that part out and says so.


def _size(cfg: dict[str, Any], *keys: str) -> int:
    """The first of `keys` that holds a positive whole number, else 0."""
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 0


# The Qwen2-VL image processor's default largest picture (Qwen2VLImageProcessor min_pixels /
# max_pixels, 12,845,056 = 16,384 merged tokens of 28 × 28 pixels), which vLLM's profile run
# sizes its dummy image and video frames by (qwen2_vl.py get_image_size_with_most_features).
QWEN_VL_MAX_PIXELS = 12_845_056
# The vision families that read video as well as pictures (each vLLM processor's
# supported_mm_limits).
VIDEO_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"})


def _vision(cfg: dict[str, Any], text_hidden: int) -> dict[str, Any]:
    """What a multimodal config says of its vision tower: its parameters with the projector, its
    hidden size, and what vLLM's profile run of it holds (ModelShapes' vision_* and mm_*).

    A SigLIP encoder (Gemma 3, PaliGemma; close for others) is a patch embedding (channels ×
    patch² × hidden, + bias), a position embedding for every patch, and per layer q/k/v/o (4 ×
    (hidden² + hidden)), an MLP (2 × hidden × intermediate + intermediate + hidden) and two layer
    norms (4 × hidden), then a post layer norm; Gemma 3's projector maps hidden → the text
    hidden size and norms it. For gemma-3-27b-it this is 423,060,336, the Hub's 27,432,406,640
    less the text model's 27,009,346,304 (tests/plan/test_vllm_memory.py works it out).

    Qwen2.5-VL's (transformers' Qwen2_5_VisionTransformer, vLLM's qwen2_5_vl.py) is a conv3d
    patch embedding (channels × temporal patch × patch² × hidden, no bias), per layer a fused
    qkv and a projection with biases (4 × (hidden² + hidden)), a gated MLP with biases
    (3 × hidden × intermediate + 2 × intermediate + hidden) and two RMS norms, then the merger:
    an RMS norm and an MLP from 4 hidden (2 × 2 patches merged) to 4 hidden to the text hidden
    size, with biases. Qwen2-VL's is the same with a plain MLP of embed_dim × mlp_ratio and
    layer norms.
    """
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return {}
    kind = cfg.get("model_type")
    qwen = kind in VIDEO_TYPES
    if kind == "qwen2_vl":
        h = _size(v, "embed_dim")
        ratio = v.get("mlp_ratio")
        inter = int(h * ratio) if isinstance(ratio, (int, float)) and ratio > 0 else 4 * h
    else:
        h = _size(v, "hidden_size", "embed_dim", "width")
        inter = _size(v, "intermediate_size") or 4 * h
    depth = _size(v, "num_hidden_layers", "depth", "num_layers")
    patch = _size(v, "patch_size", "spatial_patch_size") or 14
    image = _size(v, "image_size")
    channels = _size(v, "num_channels", "in_channels", "in_chans") or 3
    if not (h and depth):
        return {}
    gated = kind in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
    out: dict[str, Any] = {"vision_hidden": h, "vision_intermediate": inter, "vision_gated": gated}
    if qwen:
        temporal = _size(v, "temporal_patch_size") or 2
        merge = _size(v, "spatial_merge_size") or 2
        out_hidden = _size(v, "out_hidden_size") or text_hidden
        embed = channels * temporal * patch * patch * h
        mlp = 3 * h * inter + 2 * inter + h if gated else 2 * h * inter + inter + h
        layer = 4 * (h * h + h) + mlp + 2 * h * (1 if gated else 2)
        wide = h * merge * merge
        merger = h * (1 if gated else 2) + wide * wide + wide + wide * out_hidden + out_hidden
        unit = patch * merge
        out |= {
            "vision_params": embed + depth * layer + merger,
            "mm_tokens_per_item": QWEN_VL_MAX_PIXELS // (unit * unit),
            "mm_patches_per_token": merge * merge,
            "mm_pixels_per_patch": channels * temporal * patch * patch,
            "mm_video_temporal": temporal,
            "mm_modalities": ("image", "video"),
        }
        return out
    patches = (image // patch) ** 2 if image else 0
    embed = channels * patch * patch * h + h + patches * h
    layer = 4 * (h * h + h) + 2 * h * inter + inter + h + 4 * h
    projector = h * text_hidden + h if text_hidden else 0
    tokens = _size(cfg, "mm_tokens_per_image")
    out |= {
        "vision_params": embed + depth * layer + 2 * h + projector,
        "mm_tokens_per_item": tokens,
        "mm_patches_per_token": patches // tokens if tokens and patches >= tokens else 0,
        "mm_pixels_per_patch": channels * patch * patch,
        "mm_modalities": ("image",),
    }
    return out


def _mamba_shape(merged: dict[str, Any], kinds: list[tuple[str, ...]]) -> MambaShape | None:
    """The state shape of the model's Mamba or GDN layers (MambaStateShapeCalculator)."""
    present = {k for ks in kinds for k in ks}
    ssm_dtype = _ssm_dtype(merged)
    chunk = _size(merged, "mamba_chunk_size", "chunk_size")
    if "kda" in present:
        lin = merged.get("linear_attn_config")
        lin = lin if isinstance(lin, dict) else {}
        return MambaShape(
            "kda",
            conv_kernel=_size(lin, "short_conv_kernel_size"),
            heads=_size(lin, "num_heads"),
            head_dim=_size(lin, "head_dim"),
            ssm_dtype=ssm_dtype,
        )
    if "gated_delta_net" in present:
        return MambaShape(
            "gated_delta_net",
            conv_kernel=_size(merged, "linear_conv_kernel_dim"),
            k_heads=_size(merged, "linear_num_key_heads"),
            k_head_dim=_size(merged, "linear_key_head_dim"),
            v_heads=_size(merged, "linear_num_value_heads"),
            v_head_dim=_size(merged, "linear_value_head_dim"),
            chunk_size=chunk,
            ssm_dtype=ssm_dtype,
        )
    if "mamba2" in present:
        heads = _size(merged, "mamba_num_heads", "mamba_n_heads")
        head = _size(merged, "mamba_head_dim", "mamba_d_head")
        return MambaShape(
            "mamba2",
            conv_kernel=_size(merged, "conv_kernel", "mamba_d_conv", "conv_kernel_size"),
            heads=heads,
            head_dim=head,
            state_size=_size(merged, "ssm_state_size", "mamba_d_state", "state_size"),
            n_groups=_size(merged, "n_groups", "mamba_n_groups") or 1,
            inner=_size(merged, "mamba_d_ssm") or heads * head,
            chunk_size=chunk,
            ssm_dtype=ssm_dtype,
        )
    if "mamba1" in present:
        return MambaShape(
            "mamba1",
            conv_kernel=_size(merged, "mamba_d_conv"),
            state_size=_size(merged, "mamba_d_state"),
            inner=_size(merged, "mamba_expand") * _size(merged, "hidden_size"),
            chunk_size=chunk,
            ssm_dtype=ssm_dtype,
        )
    return None


def _model_shapes(
    cfg: dict[str, Any],
    merged: dict[str, Any],
    text_type: str | None,
    kinds: list[tuple[str, ...]],
    layers: int,
    head_dim: int,
    task: str,
    path: Path,
) -> ModelShapes:
    """What vLLM's memory model needs of the network beyond its KV layout."""
    hidden = _size(merged, "hidden_size", "n_embd", "d_model")
    mla = _is_mla(merged)
    tied = merged.get("tie_word_embeddings")
    if not isinstance(tied, bool):
        tied = cfg.get("tie_word_embeddings")
    dense = _size(merged, "first_k_dense_replace")
    mlp_only = merged.get("mlp_only_layers")
    if not dense and isinstance(mlp_only, list):
        dense = len(mlp_only)
    mtp = _size(merged, "num_nextn_predict_layers", "mtp_num_hidden_layers")
    if not mtp and text_type == "qwen3_next":
        # Qwen3-Next ships one mtp.* layer its config does not count (vLLM Qwen3NextMTP).
        mtp = 1
    partial = merged.get("partial_rotary_factor")
    rotary = _size(merged, "qk_rope_head_dim") if mla else head_dim
    if isinstance(partial, (int, float)) and not isinstance(partial, bool) and 0 < partial < 1:
        rotary = int(head_dim * partial)
    return ModelShapes(
        layer_kinds=tuple(ks[0] if ks else "" for ks in kinds),
        # A config that does not say ties, as transformers' PretrainedConfig does, unless its
        # family's config class says otherwise (UNTIED_BY_DEFAULT, as _param_split reads it).
        tied_embeddings=tied if isinstance(tied, bool) else text_type not in UNTIED_BY_DEFAULT,
        intermediate_size=_size(merged, "intermediate_size_mlp", "intermediate_size"),
        moe_intermediate_size=_size(merged, "moe_intermediate_size")
        or (_size(merged, "intermediate_size") if _int(merged, EXPERT_KEYS, path) else 0),
        shared_expert_intermediate_size=_size(merged, "shared_expert_intermediate_size")
        or _size(merged, "moe_intermediate_size") * _size(merged, "n_shared_experts"),
        dense_layers=dense,
        q_lora_rank=_size(merged, "q_lora_rank") if mla else 0,
        kv_lora_rank=_size(merged, "kv_lora_rank") if mla else 0,
        qk_nope_head_dim=_size(merged, "qk_nope_head_dim") if mla else 0,
        qk_rope_head_dim=_size(merged, "qk_rope_head_dim") if mla else 0,
        v_head_dim=_size(merged, "v_head_dim") if mla else 0,
        mtp_layers=mtp,
        indexer_layers=_indexer_layers(merged, kinds) if mla else (),
        index_heads=_size(merged, "index_n_heads") if mla else 0,
        index_head_dim=_size(merged, "index_head_dim") if mla else 0,
        index_topk=_size(merged, "index_topk") if mla else 0,
        rotary_dim=rotary,
        # Gemma 3 builds a local (rope_local_base_freq) and a global rotary cache.
        rope_caches=2 if merged.get("rope_local_base_freq") else 1,
        mamba=_mamba_shape(merged, kinds),
        **_vision(cfg, hidden),
    )


# Families whose config class leaves tie_word_embeddings False when a config omits it; every other
# family inherits transformers' PretrainedConfig default, True (Gemma's configs omit it and tie).
UNTIED_BY_DEFAULT = frozenset({"llama4", "llama4_text"})


def _param_split(
    merged: dict[str, Any],
    text_type: str | None,
    kinds: list[tuple[str, ...]] | None,
    heads: int,
    kv_heads: int,
    experts: int | None,
    path: Path,
) -> ParamSplit | None:
    """The parameters of each part of the network, from the sizes config.json gives.

    Counts the matrices (norms and biases are too small to move a layer's share): attention by
    the kind of each layer (q, k, v and o; MLA's low-rank q and kv projections; a linear or Mamba
    mixer's projections), then the MLP: gated (three matrices) where dense, and for a MoE layer
    its routed experts, router and shared experts. Which layers are MoE follows each family's key
    (first_k_dense_replace, mlp_only_layers, decoder_sparse_step, moe_layer_freq,
    interleave_moe_layer_step). The planner scales these to the checkpoint's real bytes, so what
    matters is the proportion between the embedding, the head and each layer; None when the
    config lacks the hidden size, the vocabulary or the layer kinds.
    """
    hidden = _int(merged, ("hidden_size", "n_embd", "d_model"), path)
    vocab = _int(merged, ("vocab_size", "padded_vocab_size"), path)
    if not hidden or not vocab or not kinds:
        return None

    def size(*keys: str) -> int:
        v = _first(merged, keys)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0

    head_dim = size("head_dim") or hidden // heads
    inter = size("intermediate_size")
    dense_inter = size("intermediate_size_mlp") or inter
    expert_inter = size("moe_intermediate_size") or inter
    n_exp = experts or 0
    shared = size("shared_expert_intermediate_size")
    if not shared and n_exp:
        n_shared = size("n_shared_experts", "num_shared_experts")
        shared = n_shared * expert_inter
        if not shared and text_type in ("llama4", "llama4_text"):
            shared = inter  # Llama 4's one shared expert, as wide as a routed one
    moe_layers = _moe_layers(merged, len(kinds), n_exp)

    def attention(kind: str) -> int:
        if kind in ("full", "sliding", "chunked"):
            return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
        if kind == "mla":
            q_lora, kv_lora = size("q_lora_rank"), size("kv_lora_rank")
            nope, rope = size("qk_nope_head_dim"), size("qk_rope_head_dim")
            v = size("v_head_dim") or nope
            q = (
                hidden * q_lora + q_lora * heads * (nope + rope)
                if q_lora
                else hidden * heads * (nope + rope)
            )
            return q + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v) + heads * v * hidden
        if kind == "gated_delta_net":
            hk, nk = size("linear_key_head_dim"), size("linear_num_key_heads")
            hv, nv = size("linear_value_head_dim"), size("linear_num_value_heads")
            return hidden * (2 * hk * nk + 2 * hv * nv + 2 * nv) + nv * hv * hidden
        if kind in ("mamba2", "mamba1"):
            inner = (
                size("mamba_d_ssm")
                or (
                    size("mamba_num_heads", "mamba_n_heads")
                    * size("mamba_head_dim", "mamba_d_head")
                )
                or size("mamba_expand") * hidden
            )
            state = size("ssm_state_size", "mamba_d_state", "state_size")
            groups = size("n_groups", "mamba_n_groups") or 1
            return hidden * (2 * inner + 2 * groups * state) + inner * hidden
        return 0

    pattern = merged.get("hybrid_override_pattern")
    layers: list[int] = []
    routed: list[int] = []
    for i, ks in enumerate(kinds):
        mixer = sum(attention(k) for k in ks)
        if isinstance(pattern, str) and len(pattern) == len(kinds):
            # Nemotron-H: a layer is one block: Mamba (M), attention (*), a non-gated MLP (-)
            # or a MoE (E).
            c = pattern[i]
            mlp = 2 * hidden * inter if c == "-" else 0
            exp = n_exp * 2 * hidden * expert_inter if c == "E" else 0
            layers.append(mixer + mlp + exp + (2 * hidden * shared if c == "E" else 0))
            routed.append(exp)
            continue
        if i in moe_layers:
            exp = n_exp * 3 * hidden * expert_inter
            layers.append(mixer + exp + hidden * n_exp + 3 * hidden * shared)
            routed.append(exp)
        else:
            layers.append(mixer + 3 * hidden * dense_inter)
            routed.append(0)
    tied = merged.get("tie_word_embeddings")
    if not isinstance(tied, bool):
        tied = text_type not in UNTIED_BY_DEFAULT
    embed = vocab * hidden
    return ParamSplit(
        embed=embed,
        output=hidden + (0 if tied else embed),
        layers=tuple(layers),
        experts=tuple(routed),
        tied_embeddings=tied,
    )


def _moe_layers(merged: dict[str, Any], layers: int, experts: int) -> set[int]:
    """The layers whose MLP is a mixture of experts, by the family's own key."""
    if experts <= 1:
        return set()
    first_dense = merged.get("first_k_dense_replace")
    freq = merged.get("moe_layer_freq")
    step = merged.get("interleave_moe_layer_step") or merged.get("decoder_sparse_step")
    only_mlp = merged.get("mlp_only_layers")
    out = set()
    for i in range(layers):
        if isinstance(first_dense, int) and i < first_dense:
            continue
        if isinstance(freq, int) and freq > 1 and i % freq:
            continue
        if isinstance(step, int) and step > 1 and (i + 1) % step:
            continue
        if isinstance(only_mlp, list) and i in only_mlp:
            continue
        out.add(i)
    return out


def _vision_tower(cfg: dict[str, Any]) -> tuple[int, int] | None:
    """The vision encoder a config describes, as (layers, hidden size), read as SGLang reads it
    (adjust_mem_fraction_for_vlm: `num_hidden_layers` and `hidden_size` of `vision_config`, the
    layers under Qwen2.5-VL's name `depth` too, 24 and 1024 where it gives none); None without a
    vision_config."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, dict):
        return None

    def size(key: str, default: int) -> int:
        v = vision.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default

    return size("num_hidden_layers", size("depth", 24)), size("hidden_size", 1024)
