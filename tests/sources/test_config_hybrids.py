"""Readers for the hybrid layouts and context rules that the shared fixtures hold no real config of.

These configs are synthetic: written in each family's own field names (Granite 4.0-H, Jamba,
Falcon-H1, transformers 5's rope_parameters) with round values chosen for the arithmetic, so the
expected numbers below are worked out by hand from the dicts in each test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmfit.errors import ConfigError
from llmfit.plan.model import AttentionKind, Shape
from llmfit.sources.config import model_from_config

P = Path("config.json")
BASE = {
    "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 128, "hidden_size": 2048, "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}  # fmt: skip


def groups(m):
    return {(g.kind.value, g.state_kind): g for g in m.layer_groups}


def test_granite_4_h_layer_types_mamba_and_attention():
    cfg = {
        **BASE, "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "layer_types": ["mamba"] * 3 + ["attention"] + ["mamba"] * 3 + ["attention"],
        "mamba_n_heads": 64, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1,
        "mamba_d_conv": 4,
    }  # fmt: skip
    m = model_from_config(cfg, P)
    g = groups(m)
    assert g[("full", "")].layers == 2
    mamba = g[("linear", "mamba2")]
    # conv (4 - 1) × (64 × 64 + 2 × 1 × 128) = 3 × 4,352; temporal 64 × 64 × 128; × 2 B.
    assert mamba.layers == 6
    assert mamba.state_bytes == (3 * 4_352 + 524_288) * 2 == 1_074_688
    # 2 × 2 layers × 4 × 128 × 2 B.
    assert Shape.of(m).kv_bytes_per_token() == 4_096
    assert m.notes == ()


def test_jamba_attention_every_period_at_its_offset_and_mamba1_elsewhere():
    cfg = {
        **BASE, "architectures": ["JambaForCausalLM"], "model_type": "jamba",
        "attn_layer_period": 4, "attn_layer_offset": 2, "mamba_d_state": 16,
        "mamba_d_conv": 4, "mamba_expand": 2,
    }  # fmt: skip
    g = groups(model_from_config(cfg, P))
    # Layers 2 and 6 attend; the other 6 are Mamba: inner 2 × 2048 = 4,096;
    # conv 3 × 4,096, temporal 4,096 × 16, × 2 B.
    assert g[("full", "")].layers == 2
    assert g[("linear", "mamba1")].layers == 6
    assert g[("linear", "mamba1")].state_bytes == (3 * 4_096 + 4_096 * 16) * 2 == 155_648


def test_falcon_h1_keeps_attention_and_a_mamba_state_in_every_layer():
    cfg = {
        **BASE, "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1",
        "mamba_n_heads": 32, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1,
        "mamba_d_conv": 4, "mamba_d_ssm": 2048,
    }  # fmt: skip
    g = groups(model_from_config(cfg, P))
    assert g[("full", "")].layers == 8
    # conv 3 × (2,048 + 2 × 128), temporal 32 × 64 × 128, × 2 B.
    assert g[("linear", "mamba2")].layers == 8
    assert g[("linear", "mamba2")].state_bytes == (3 * 2_304 + 262_144) * 2 == 538_112


def test_a_mamba_layer_without_its_sizes_is_refused():
    cfg = {**BASE, "model_type": "granitemoehybrid", "layer_types": ["mamba"] * 8}
    with pytest.raises(ConfigError) as e:
        model_from_config(cfg, P)
    assert e.value.message == (
        "config.json declares Mamba-2 layers but gives no mamba_num_heads, "
        "so their state cannot be sized."
    )


def test_layer_types_must_match_the_layer_count_and_be_known():
    with pytest.raises(ConfigError) as e:
        model_from_config({**BASE, "layer_types": ["full_attention"] * 7}, P)
    assert e.value.message == "config.json: layer_types lists 7 layers, num_hidden_layers 8."
    with pytest.raises(ConfigError) as e:
        model_from_config({**BASE, "layer_types": ["cross_attention"] * 8}, P)
    assert e.value.message == (
        "config.json: layer type 'cross_attention' is not one llmfit can size (known: attention, "
        "chunked_attention, full_attention, linear_attention, mamba, mamba2, sliding_attention)."
    )


def test_sliding_window_pattern_and_all_sliding_mistral_style():
    m = model_from_config(
        {**BASE, "model_type": "cohere2", "sliding_window": 4096, "sliding_window_pattern": 4}, P
    )
    # Layers 3 and 7 are global: (i + 1) % 4 == 0.
    assert [(g.kind, g.layers) for g in m.layer_groups] == [
        (AttentionKind.FULL, 2),
        (AttentionKind.SLIDING, 6),
    ]
    m = model_from_config({**BASE, "model_type": "mistral", "sliding_window": 4096}, P)
    assert [(g.kind, g.layers, g.window) for g in m.layer_groups] == [
        (AttentionKind.SLIDING, 8, 4096)
    ]
    assert m.notes == (
        "sliding_window 4096 with no layer pattern: every layer is planned as sliding.",
    )


@pytest.mark.parametrize(
    ("rope", "context"),
    [
        # YaRN: original_max_position_embeddings × factor, whatever max_position_embeddings says.
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}, 8192),
        # Dynamic NTK and linear: max_position_embeddings × factor.
        ({"type": "dynamic", "factor": 2.0}, 8192),
        ({"rope_type": "linear", "factor": 8.0}, 32_768),
        # llama3 and longrope already state the extended length.
        ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 512}, 4096),
        ({"rope_type": "longrope", "long_factor": [1.0]}, 4096),
        # default/mrope carry no factor.
        ({"type": "mrope", "mrope_section": [16, 24, 24]}, 4096),
    ],
)
def test_trained_context_follows_vllms_rope_scaling_rule(rope, context):
    m = model_from_config({**BASE, "model_type": "llama", "rope_scaling": rope}, P)
    assert m.max_context == context


def test_rope_parameters_per_layer_type_and_model_max_length():
    cfg = {
        **BASE, "model_type": "llama",
        "rope_parameters": {
            "full_attention": {"rope_type": "yarn", "factor": 2.0,
                               "original_max_position_embeddings": 4096},
            "sliding_attention": {"rope_type": "default"},
        },
    }  # fmt: skip
    assert model_from_config(cfg, P).max_context == 8192
    # model_max_length wins over the others when present (Command-R).
    cfg = {**BASE, "model_type": "cohere", "model_max_length": 131_072}
    assert model_from_config(cfg, P).max_context == 131_072
    # Otherwise the smallest of the length fields.
    assert (
        model_from_config({**BASE, "model_type": "llama", "seq_length": 2048}, P).max_context
        == 2048
    )


def test_a_config_without_a_model_type_says_what_was_assumed():
    m = model_from_config(BASE, P)
    assert m.notes == (
        "No model_type is given: planned from the fields the config gives "
        "(8 full layers, 4 KV heads × 128).",
    )
