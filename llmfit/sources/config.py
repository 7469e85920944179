"""config.json → Model, read the way vLLM reads it (vllm/config/model.py).

Fields come from `text_config` when the config has one (a model that also reads pictures is sized
by its language model), and each is looked up under every name the families use for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmfit.errors import ConfigError
from llmfit.plan.model import AttentionKind, LayerGroup, Model

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads")
# vLLM ModelConfig.get_total_num_kv_heads, in its order.
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")
CONTEXT_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_sequence_length",
    "max_seq_len",
    "seq_length",
    "model_max_length",
)
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
ACTIVE_EXPERT_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "top_k")
# Model types whose attention is DeepSeek's multi-head latent attention when the config carries
# a kv_lora_rank (vLLM ModelConfig.is_deepseek_mla).
MLA_TYPES = frozenset(
    {
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_mtp",
        "kimi_k2",
        "kimi_linear",
        "longcat_flash",
        "pangu_ultra_moe",
        "pangu_ultra_moe_mtp",
    }
)


def load_config(path: Path) -> dict[str, Any]:
    """Read config.json as a JSON object, or raise the sentence that says what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file.") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror}).") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not valid JSON: {e}.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data


def _first(cfg: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return None


def _int(cfg: dict[str, Any], keys: tuple[str, ...], path: Path) -> int | None:
    v = _first(cfg, keys)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{path}: {_which(cfg, keys)} is {v!r}, not a whole number.")
    if v <= 0:
        raise ConfigError(f"{path}: {_which(cfg, keys)} is {v}, which must be positive.")
    return v


def _which(cfg: dict[str, Any], keys: tuple[str, ...]) -> str:
    return next((k for k in keys if cfg.get(k) is not None), keys[0])


def _quantization(cfg: dict[str, Any], text: dict[str, Any]) -> str | None:
    """The checkpoint's quantisation method, found where vLLM looks (_parse_quant_hf_config)."""
    q = cfg.get("quantization_config") or cfg.get("compression_config")
    if not isinstance(q, dict):
        q = text.get("quantization_config")
    if not isinstance(q, dict):
        return None
    method = str(q.get("quant_method") or q.get("quant_algo") or "").lower()
    return method.replace("compressed_tensors", "compressed-tensors") or None


def model_from_config(cfg: dict[str, Any], path: Path) -> Model:
    """The Model a config describes; a field it does not give stays None."""
    text = cfg.get("text_config")
    text = text if isinstance(text, dict) else cfg
    # A multimodal config can leave fields at the top that its text_config does not repeat.
    merged = {**cfg, **text}

    layers = _int(merged, LAYER_KEYS, path)
    heads = _int(merged, HEAD_KEYS, path)
    if layers is None or heads is None:
        missing = "num_hidden_layers" if layers is None else "num_attention_heads"
        raise ConfigError(
            f"{path} gives no {missing}, so the model's memory cannot be sized.",
            hint="pass a repository whose config.json describes a transformer",
        )
    if merged.get("multi_query") is True:
        kv_heads = 1
    elif isinstance(merged.get("attn_config"), dict) and merged["attn_config"].get("kv_n_heads"):
        kv_heads = int(merged["attn_config"]["kv_n_heads"])
    else:
        kv_heads = _int(merged, KV_HEAD_KEYS, path) or heads
    hidden = _int(merged, ("hidden_size", "n_embd", "d_model"), path)
    head_dim = _int(merged, ("head_dim", "hidden_size_per_head"), path)
    if head_dim is None:
        if hidden is None:
            raise ConfigError(f"{path} gives neither head_dim nor hidden_size.")
        head_dim = hidden // heads

    # The repository's own type names it ("gemma3"); the text model's type decides how it attends.
    model_type = cfg.get("model_type") or text.get("model_type")
    text_type = text.get("model_type") or model_type
    notes: list[str] = []
    kv_lora = merged.get("kv_lora_rank")
    if text_type in MLA_TYPES and kv_lora:
        # vLLM's get_head_size for MLA: the latent (kv_lora_rank + qk_rope_head_dim), one "head".
        head_dim = int(kv_lora) + int(merged.get("qk_rope_head_dim") or 0)
        groups = (LayerGroup(AttentionKind.MLA, layers, latent_dim=head_dim),)
        kv_heads = 1
    else:
        groups = (LayerGroup(AttentionKind.FULL, layers, kv_heads=kv_heads, head_dim=head_dim),)

    experts = _int(merged, EXPERT_KEYS, path)
    shared = _first(merged, ("n_shared_experts", "num_shared_experts"))
    if shared is None and merged.get("shared_expert_intermediate_size"):
        shared = 1
    archs = cfg.get("architectures")
    dtype = (
        text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype")
    )
    return Model(
        architecture=archs[0] if isinstance(archs, list) and archs else None,
        model_type=model_type,
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        layer_groups=groups,
        hidden_size=hidden,
        vocab_size=_int(merged, ("vocab_size", "padded_vocab_size"), path),
        max_context=_int(merged, CONTEXT_KEYS, path),
        dtype=dtype if isinstance(dtype, str) else None,
        quantization=_quantization(cfg, text),
        experts=experts,
        experts_active=_int(merged, ACTIVE_EXPERT_KEYS, path) if experts else None,
        shared_experts=int(shared) if experts and shared is not None else None,
        notes=tuple(notes),
    )
