"""Fuzzing the readers of untrusted input: whatever they are given, one sentence or an answer.

Run briefly in the default suite; `pytest -m slow` runs the same targets far longer. A reader may
return a value or raise the project's own error for bad input; anything else (a traceback) fails.
"""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfit.errors import ConfigError, FleetFileError, WeightsError
from llmfit.sources.config import model_from_config
from llmfit.sources.fleet import parse_fleet
from llmfit.sources.safetensors import parse_header, read_header

BRIEF = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
tensor_infos = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["BF16", "F32", "F8_E4M3", "I8", "??"]) | json_values,
        "shape": st.lists(st.integers(-2, 1 << 40), max_size=4) | json_values,
        "data_offsets": st.lists(st.integers(-5, 1 << 50), max_size=3) | json_values,
    }
)
headers = st.dictionaries(st.text(max_size=12), tensor_infos | json_values, max_size=6)


def check_header(raw: bytes) -> None:
    try:
        h = parse_header(raw, "x.safetensors")
    except WeightsError as e:
        assert e.message.startswith("x.safetensors: ")
        return
    assert h.data_bytes >= 0 and h.params >= 0


@BRIEF
@given(st.binary(max_size=512))
def test_safetensors_header_bytes(data):
    check_header(data)


@BRIEF
@given(headers)
def test_safetensors_header_shapes(header):
    check_header(json.dumps(header).encode())


@BRIEF
@given(n=st.integers(0, (1 << 64) - 1), rest=st.binary(max_size=64))
def test_safetensors_file_with_any_length(tmp_path_factory, n, rest):
    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    path.write_bytes(struct.pack("<Q", n) + rest)
    try:
        read_header(path)
    except WeightsError as e:
        assert str(path) in e.message


fleet_values = st.one_of(
    st.integers(-3, 10), st.text(max_size=12), st.booleans(), st.floats(allow_nan=False),
    st.sampled_from(["h100-80g", "a100-80g-mig-3g.40gb", "cpu", "x-48g", "ib0"]),
)  # fmt: skip
fleet_keys = st.sampled_from(
    ["name", "count", "gpu", "gpus", "free_gpus", "unhealthy_gpus", "fabric", "ram_gb",
     "free_ram_gb", "gpu_memory_gb", "fabrik", "devices"]
)  # fmt: skip


def toml_value(v) -> str:
    return json.dumps(v) if not isinstance(v, bool) else str(v).lower()


@st.composite
def fleet_texts(draw) -> str:
    out = []
    for _ in range(draw(st.integers(0, 4))):
        out.append(f"[[{draw(st.sampled_from(['pool', 'node', 'nodes', 'node.devices']))}]]")
        for _ in range(draw(st.integers(0, 6))):
            out.append(f"{draw(fleet_keys)} = {toml_value(draw(fleet_values))}")
    return "\n".join(out) + "\n"


def check_fleet(text: str) -> None:
    try:
        fleet = parse_fleet(text, "f.toml")
    except FleetFileError as e:
        assert e.message.startswith("f.toml")
        assert "\n" not in e.message
        return
    for n in fleet.nodes:
        for k in n.kinds:
            assert 0 <= k.free_gpus <= k.gpus and k.unhealthy_gpus <= k.gpus and k.card_bytes > 0


@BRIEF
@given(fleet_texts())
def test_fleet_files_shaped_like_fleets(text):
    check_fleet(text)


@BRIEF
@given(st.text(max_size=300))
def test_fleet_files_of_any_text(text):
    check_fleet(text)


def check_config(cfg) -> None:
    try:
        model_from_config(cfg, "config.json")  # type: ignore[arg-type]
    except ConfigError as e:
        assert e.message.startswith("config.json")


config_keys = st.sampled_from(
    ["num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
     "max_position_embeddings", "num_experts", "text_config", "torch_dtype", "model_type",
     "kv_lora_rank", "qk_rope_head_dim", "quantization_config", "vocab_size", "architectures"]
)  # fmt: skip


@BRIEF
@given(st.dictionaries(config_keys, json_values | st.integers(-4, 200), max_size=12))
def test_configs_of_any_shape(cfg):
    check_config(cfg)


@pytest.mark.slow
@LONG
@given(st.binary(max_size=4096))
def test_safetensors_header_bytes_long(data):
    check_header(data)


@pytest.mark.slow
@LONG
@given(fleet_texts())
def test_fleet_files_long(text):
    check_fleet(text)


@pytest.mark.slow
@LONG
@given(st.dictionaries(config_keys, json_values | st.integers(-4, 200), max_size=12))
def test_configs_long(cfg):
    check_config(cfg)


def test_a_config_claiming_four_billion_layers_is_one_sentence_found_by_fuzzing():
    cfg = {"num_attention_heads": 1, "num_hidden_layers": 4294967296, "head_dim": 1}
    with pytest.raises(ConfigError) as e:
        model_from_config(cfg, "config.json")  # type: ignore[arg-type]
    assert e.value.message == (
        "config.json: num_hidden_layers is 4,294,967,296; no model has more than 100,000 layers."
    )


def test_a_config_whose_model_type_is_a_list_is_one_sentence_found_by_fuzzing():
    cfg = {"num_hidden_layers": 1, "num_attention_heads": 1, "head_dim": 1, "model_type": []}
    with pytest.raises(ConfigError) as e:
        model_from_config(cfg, "config.json")  # type: ignore[arg-type]
    assert e.value.message == "config.json: model_type is [], not a name."
