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


config_values = (
    json_values
    | st.integers(-4, 200)
    | st.integers(1, 1 << 62)
    | st.sampled_from(["deepseek_v3", "gemma3", "qwen3_next", "llama", "bfloat16", "yarn"])
)


@BRIEF
@given(st.dictionaries(config_keys, json_values | st.integers(-4, 200), max_size=12))
def test_configs_of_any_shape(cfg):
    check_config(cfg)


@BRIEF
@given(
    st.fixed_dictionaries(
        {"num_hidden_layers": st.integers(1, 64), "num_attention_heads": st.integers(1, 64)}
    ),
    st.dictionaries(config_keys, config_values, max_size=8),
)
def test_configs_that_nearly_make_sense(base, extra):
    # A plausible core with arbitrary values around it reaches the branches (MLA, experts,
    # rope scaling, quantisation) that a config of random keys rarely does.
    check_config({**base, **extra})


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


@pytest.mark.slow
@LONG
@given(
    st.fixed_dictionaries(
        {"num_hidden_layers": st.integers(1, 64), "num_attention_heads": st.integers(1, 64)}
    ),
    st.dictionaries(config_keys, config_values, max_size=8),
)
def test_configs_that_nearly_make_sense_long(base, extra):
    check_config({**base, **extra})


def test_a_config_whose_model_type_is_a_list_is_one_sentence_found_by_fuzzing():
    cfg = {"num_hidden_layers": 1, "num_attention_heads": 1, "head_dim": 1, "model_type": []}
    with pytest.raises(ConfigError) as e:
        model_from_config(cfg, "config.json")  # type: ignore[arg-type]
    assert e.value.message == "config.json: model_type is [], not a name."


# --- GGUF headers ------------------------------------------------------------------------------
#
# parse_gguf on any bytes returns a header, asks for more (NeedMore), or raises WeightsError naming
# the file in one line; a parsed header then goes through everything a plan does with it.

GGUF_WHERE = "x.gguf"
_INTERESTING = [
    0,
    1,
    2,
    3,
    4,
    5,
    7,
    8,
    9,
    12,
    13,
    31,
    32,
    255,
    256,
    1 << 16,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    (1 << 64) - 1,
]


def _valid_gguf() -> bytes:
    from tests.sources.gguf_bytes import tiny

    return tiny()


def check_gguf(raw: bytes, size: int | None = None) -> None:
    from llmfit.sources.gguf import layout_of, model_from_gguf, parse_gguf
    from llmfit.sources.growing import NeedMore

    try:
        h = parse_gguf(raw, GGUF_WHERE, size=size)
        if isinstance(h, NeedMore):
            assert size is None or size > len(raw)
            assert h.total is not None and h.total > len(raw)
            return
        assert h.header_bytes <= len(raw) and h.data_offset >= h.header_bytes
        assert all(t.nbytes >= 0 for t in h.tensors)
        model_from_gguf([h])
        layout_of([h])
    except WeightsError as e:
        assert e.message.startswith(GGUF_WHERE), e.message
        assert "\n" not in e.message


gguf_bytes = st.binary(max_size=600) | st.binary(max_size=600).map(
    lambda b: b"GGUF\x03\x00\x00\x00" + b
)


@st.composite
def mutated_gguf(draw) -> tuple[bytes, int | None]:
    """The valid header with a few fields overwritten by numbers that break readers (counts,
    lengths, value and tensor types), then perhaps cut short, with its file size known or not."""
    raw = bytearray(_valid_gguf())
    for _ in range(draw(st.integers(1, 3))):
        width = draw(st.sampled_from([1, 4, 8]))
        at = draw(st.integers(0, len(raw) - width))
        value = draw(st.sampled_from(_INTERESTING) | st.integers(0, (1 << (8 * width)) - 1))
        raw[at : at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    cut = draw(st.none() | st.integers(0, len(raw)))
    out = bytes(raw[:cut] if cut is not None else raw)
    size = draw(st.none() | st.just(len(out)) | st.integers(len(out), len(out) + 10_000))
    return out, size


@BRIEF
@given(gguf_bytes, st.booleans())
def test_gguf_header_bytes(data, sized):
    check_gguf(data, len(data) if sized else None)


@BRIEF
@given(mutated_gguf())
def test_gguf_header_mutations(case):
    check_gguf(*case)


def test_a_valid_gguf_header_cut_at_every_offset():
    raw = _valid_gguf()
    for cut in range(len(raw) + 1):
        check_gguf(raw[:cut])
        check_gguf(raw[:cut], cut)


@pytest.mark.slow
@LONG
@given(gguf_bytes, st.booleans())
def test_gguf_header_bytes_long(data, sized):
    check_gguf(data, len(data) if sized else None)


@pytest.mark.slow
@LONG
@given(mutated_gguf())
def test_gguf_header_mutations_long(case):
    check_gguf(*case)


_GGUF_KEYS = [
    "block_count",
    "attention.head_count",
    "attention.head_count_kv",
    "embedding_length",
    "attention.key_length",
    "attention.value_length",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "ssm.inner_size",
    "ssm.conv_kernel",
    "ssm.state_size",
    "ssm.group_count",
    "expert_count",
    "expert_used_count",
    "vocab_size",
    "context_length",
    "full_attention_interval",
    "feed_forward_length",
    "attention.key_length_mla",
    "attention.kv_lora_rank",
    "expert_shared_count",
]
_small_ints = st.sampled_from(_INTERESTING) | st.integers(0, 64)


@st.composite
def gguf_values(draw, depth: int = 0) -> bytes:
    """A GGUF value of any type: its u32 type, then its payload."""
    from tests.sources import gguf_bytes as g

    kind = draw(st.sampled_from(["u32", "i32", "u64", "f32", "bool", "str", "arr"]))
    if kind == "u32":
        return g.u32(g.U32) + g.u32(draw(_small_ints) % (1 << 32))
    if kind == "i32":
        return g.u32(g.I32) + struct.pack("<i", draw(st.integers(-(1 << 31), (1 << 31) - 1)))
    if kind == "u64":
        return g.u32(g.U64) + g.u64(draw(_small_ints) % (1 << 64))
    if kind == "f32":
        return g.u32(g.F32) + struct.pack("<f", draw(st.floats(width=32, allow_nan=True)))
    if kind == "bool":
        return g.u32(g.BOOL) + bytes([draw(st.integers(0, 255))])
    if kind == "str":
        return g.u32(g.STRING) + g.s(draw(st.text(max_size=6)))
    n = draw(st.integers(0, 6))
    item = draw(st.sampled_from(["u32", "i32", "str"] + (["arr"] if depth < 2 else [])))
    body = g.u32(g.ARRAY)
    if item == "u32":
        return body + g.u32(g.U32) + g.u64(n) + b"".join(g.u32(draw(_small_ints) % (1 << 32))
                                                         for _ in range(n))  # fmt: skip
    if item == "i32":
        return (
            body
            + g.u32(g.I32)
            + g.u64(n)
            + b"".join(
                struct.pack("<i", draw(st.integers(-(1 << 31), (1 << 31) - 1))) for _ in range(n)
            )
        )
    if item == "str":
        return body + g.u32(g.STRING) + g.u64(n) + b"".join(g.s(f"t{i}") for i in range(n))
    inner = [draw(gguf_values(depth + 1)) for _ in range(n)]
    # An array of arrays: each inner array is written without its own leading type.
    return body + g.u32(g.ARRAY) + g.u64(n) + b"".join(v[4:] for v in inner if v[:4] == g.u32(9))


@st.composite
def gguf_headers_of_any_metadata(draw) -> bytes:
    """A well-formed header whose metadata says anything: each key a plan reads, of any type and
    value, and tensors of any shape and type."""
    from tests.sources import gguf_bytes as g

    arch = draw(st.sampled_from(["llama", "gemma3", "deepseek2", "qwen3next", "mamba2", ""]))
    kvs = [g.kv_str("general.architecture", arch)]
    for key in draw(st.lists(st.sampled_from(_GGUF_KEYS), unique=True, max_size=10)):
        kvs.append(g.s(f"{arch}.{key}") + draw(gguf_values()))
    if draw(st.booleans()):
        kvs.append(g.s("general.file_type") + draw(gguf_values()))
    if draw(st.booleans()):
        kvs.append(g.s("general.alignment") + draw(gguf_values()))
    names = [
        "token_embd.weight",
        "output.weight",
        "blk.0.attn_q.weight",
        "blk.1.ffn_up_exps.weight",
        "blk.4000000000.ffn_down.weight",
        "rope_freqs",
    ]
    infos = []
    for name in draw(st.lists(st.sampled_from(names), unique=True, max_size=4)):
        dims = tuple(draw(st.lists(_small_ints, min_size=0, max_size=4)))
        qtype = draw(st.sampled_from([0, 1, 2, 8, 12, 14, 30, 39, 4]))
        infos.append(g.info(name, dims, qtype, draw(st.sampled_from([0, 32, 64, 5]))))
    return g.header(kvs, infos)


@BRIEF
@given(gguf_headers_of_any_metadata())
def test_gguf_headers_of_any_metadata(raw):
    check_gguf(raw)


@pytest.mark.slow
@LONG
@given(gguf_headers_of_any_metadata())
def test_gguf_headers_of_any_metadata_long(raw):
    check_gguf(raw)


# Found by test_gguf_headers_of_any_metadata: each was a traceback (ValueError, TypeError) or a
# list as long as the block count claimed, in the plan arithmetic after a clean parse.


def _plan_gguf(extra: list[bytes], infos: list[bytes] | None = None) -> str:
    from llmfit.sources.gguf import layout_of, model_from_gguf, parse_gguf
    from tests.sources import gguf_bytes as g

    raw = g.header([g.kv_str("general.architecture", "llama"), *extra], infos or [])
    h = parse_gguf(raw, GGUF_WHERE)
    with pytest.raises(WeightsError) as e:
        model_from_gguf([h])
        layout_of([h])
    return e.value.message


def test_a_gguf_head_count_that_is_a_string_is_one_sentence_found_by_fuzzing():
    from tests.sources.gguf_bytes import kv_str, kv_u32

    extra = [kv_u32("llama.block_count", 2), kv_str("llama.attention.head_count", "n")]
    assert _plan_gguf(extra) == (
        "x.gguf: llama.attention.head_count is 'n', not a whole number or an array of them."
    )


def test_a_gguf_block_count_that_is_a_string_array_is_one_sentence_found_by_fuzzing():
    from tests.sources.gguf_bytes import ARRAY, STRING, kv, u32, u64

    extra = [kv("llama.block_count", ARRAY, u32(STRING) + u64(0))]
    assert _plan_gguf(extra) == (
        "x.gguf: llama.block_count is an array of 0 strings, not a whole number."
    )


def test_a_gguf_block_count_of_2_to_the_31_is_one_sentence_found_by_fuzzing():
    from tests.sources.gguf_bytes import kv_u32

    assert _plan_gguf([kv_u32("llama.block_count", 1 << 31)]) == (
        "x.gguf: llama.block_count is 2,147,483,648; no model has more than 100,000 layers."
    )


def test_gguf_kv_heads_as_floats_are_one_sentence_found_by_fuzzing():
    from tests.sources.gguf_bytes import ARRAY, F32, kv, kv_u32, u32, u64

    extra = [
        kv_u32("llama.block_count", 2),
        kv_u32("llama.attention.head_count", 4),
        kv("llama.attention.head_count_kv", ARRAY, u32(F32) + u64(1) + b"\0\0\0\0"),
    ]
    assert _plan_gguf(extra) == (
        "x.gguf: llama.attention.head_count_kv is (0.0,), not a whole number or an array of them."
    )


def test_a_gguf_token_list_that_is_a_string_is_one_sentence_found_by_fuzzing():
    from tests.sources.gguf_bytes import kv_str, kv_u32

    extra = [kv_u32("llama.block_count", 2), kv_u32("llama.attention.head_count", 4),
             kv_str("tokenizer.ggml.tokens", "abc")]  # fmt: skip
    assert _plan_gguf(extra) == "x.gguf: tokenizer.ggml.tokens is not an array of strings."


def test_a_gguf_token_embedding_without_dimensions_plans_found_by_fuzzing():
    from llmfit.sources.gguf import layout_of, parse_gguf
    from tests.sources import gguf_bytes as g

    raw = g.header(
        [g.kv_str("general.architecture", "llama"), g.kv_u32("llama.block_count", 2),
         g.kv_u32("llama.attention.head_count", 4)],
        [g.info("token_embd.weight", ())],
    )  # fmt: skip
    assert layout_of([parse_gguf(raw, GGUF_WHERE)]).vocab == 0


def test_a_gguf_tensor_name_with_a_newline_stays_one_line_found_by_fuzzing():
    from llmfit.sources.gguf import parse_gguf
    from tests.sources import gguf_bytes as g

    # test_gguf_header_mutations_long turned token_embd.weight's name into "/}G\x04\nmbd.weight"
    # and cut the file inside the tensor info: the name went into the message, newline and all.
    raw = g.header(g.tiny_kvs(), [g.info("/}G\x04\nmbd.weight", (32, 8))])
    cut = raw[:332]
    with pytest.raises(WeightsError) as e:
        parse_gguf(cut, GGUF_WHERE, size=len(cut))
    assert e.value.message == (
        "x.gguf is truncated: it ends at byte 332, inside the dimension count of tensor "
        "/}G\\x04\\nmbd.weight (which needs byte 334)."
    )


def test_a_gguf_key_of_a_megabyte_is_cut_short_in_the_sentence():
    from llmfit.sources.gguf import parse_gguf
    from tests.sources import gguf_bytes as g

    raw = g.header([g.kv("k" * (1 << 20), 13, b"")], [])
    with pytest.raises(WeightsError) as e:
        parse_gguf(raw, GGUF_WHERE)
    assert e.value.message == (
        f"x.gguf is not a readable GGUF file (at byte 1,048,608, {'k' * 77}... has value type 13, "
        "which GGUF does not define)."
    )
