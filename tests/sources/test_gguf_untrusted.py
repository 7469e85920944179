"""A GGUF header is anyone's bytes: each way it can lie or break is one sentence, and cheap.

Headers here are written byte by byte (tests/sources/gguf_bytes.py), so that they can say what no
writer would. Each test pins the exact sentence; docs/reliability.md lists them.
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from fixtures.gguf_files import Q, llama_tensors, write_gguf
from llmfit.errors import WeightsError
from llmfit.sources.gguf import parse_gguf, read_header
from llmfit.sources.growing import NeedMore
from tests.sources.gguf_bytes import (
    ARRAY,
    F32_TYPE,
    Q4_K,
    STRING,
    U8,
    U32,
    header,
    info,
    kv,
    kv_u32,
    s,
    tiny,
    tiny_infos,
    tiny_kvs,
    u32,
    u64,
    whole_file,
)

W = "m.gguf"


def refusal(raw: bytes, size: int | None = None) -> str:
    with pytest.raises(WeightsError) as e:
        parse_gguf(raw, W, size=size)
    return e.value.message


def write(tmp_path: Path, raw: bytes) -> Path:
    p = tmp_path / W
    p.write_bytes(raw)
    return p


def test_a_valid_header_parses_to_the_end_of_its_tensor_infos():
    h = parse_gguf(tiny(), W)
    assert h.header_bytes == len(tiny()) == 423
    assert h.data_offset == 448  # padded to the default alignment of 32
    assert [t.name for t in h.tensors] == ["token_embd.weight", "blk.0.attn_q.weight"]
    assert h.tensors[1].nbytes == 32 * 32 * 4
    assert h.get("tokenizer.ggml.tokens") == 8
    assert h.architecture == "llama"


def test_version_2_is_read_like_version_3():
    assert parse_gguf(header(tiny_kvs(), tiny_infos(), version=2), W).header_bytes == 423


@pytest.mark.parametrize("cut", [0, 3, 4, 23, 50, 200, 422])
def test_a_window_that_ends_early_asks_for_more(cut):
    more = parse_gguf(tiny()[:cut], W)
    assert isinstance(more, NeedMore) and more.total is not None and more.total > cut


def test_need_more_estimates_the_rest_of_a_long_token_list():
    raw = header(tiny_kvs(20_000), [])
    more = parse_gguf(raw[:50_000], W)
    # The tokens seen so far average 14 bytes; the estimate stays under the header's true length.
    assert isinstance(more, NeedMore)
    assert 0.8 * len(raw) < more.total <= len(raw)


def test_the_parse_agrees_with_gguf_py_on_every_value_type(tmp_path):
    import gguf

    p = tmp_path / "all.gguf"
    w = gguf.GGUFWriter(p, "llama")
    w.add_uint8("a.u8", 7)
    w.add_int8("a.i8", -7)
    w.add_uint16("a.u16", 700)
    w.add_int16("a.i16", -700)
    w.add_uint32("a.u32", 70000)
    w.add_int32("a.i32", -70000)
    w.add_float32("a.f32", 0.5)
    w.add_bool("a.bool", True)
    w.add_string("a.str", "héllo")
    w.add_uint64("a.u64", 1 << 40)
    w.add_int64("a.i64", -(1 << 40))
    w.add_float64("a.f64", 0.25)
    w.add_array("a.ints", [1, 2, 3])
    w.add_array("a.floats", [0.5, 1.5])
    w.add_array("a.strs", ["x", "yz"])
    w.add_uint32("general.alignment", 64)
    for name, shape, q in llama_tensors(1, 256, 512, 64, 128, Q.Q4_K):
        block, size = gguf.GGML_QUANT_SIZES[q]
        n = 1
        for d in shape:
            n *= d
        w.add_tensor_info(name, shape, gguf.np.dtype("float32"), n // block * size, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    raw = p.read_bytes()
    with open(p, "r+b") as f:  # GGUFReader maps the data too: give the file its length
        f.truncate(-(-len(raw) // 64) * 64 + 10_000_000)
    ours = parse_gguf(raw, W)
    ref = gguf.GGUFReader(p)
    for name, field in ref.fields.items():
        if name.startswith("GGUF."):
            continue
        want = field.contents()
        got = ours.metadata[name]
        if name == "a.strs":
            assert got == len(want)
        elif isinstance(want, list):
            assert list(got) == want
        else:
            assert got == want, name
    assert ours.header_bytes == len(raw)
    assert ours.data_offset == -(-len(raw) // 64) * 64
    assert [(t.name, t.shape, t.type) for t in ours.tensors] == [
        (n, tuple(reversed(shape)), int(q))
        for n, shape, q in llama_tensors(1, 256, 512, 64, 128, Q.Q4_K)
    ]


# --- each bad input, one sentence -------------------------------------------------------------


def test_wrong_version_is_one_sentence():
    assert refusal(header(tiny_kvs(), tiny_infos(), version=1)) == (
        f"{W} is not a readable GGUF file (it is GGUF version 1; llmfit reads versions 2 and 3)."
    )


def test_a_big_endian_file_is_one_sentence():
    assert refusal(header(tiny_kvs(), tiny_infos(), version=3 << 24)) == (
        f"{W} is not a readable GGUF file (it is a big-endian file, which llama.cpp does not "
        "load on this machine)."
    )


def test_2_to_the_63_tensors_in_a_small_file_cost_nothing():
    raw = whole_file(header(tiny_kvs(), tiny_infos(), n_tensors=1 << 63))
    start = time.perf_counter()
    message = refusal(raw, size=len(raw))
    assert time.perf_counter() - start < 0.05
    assert message == (
        f"{W} is truncated or corrupt: at byte 8 it claims 9,223,372,036,854,775,808 tensors, "
        "at least 295,147,905,179,352,825,856 bytes, but the file ends 5,552 bytes later."
    )


def test_2_to_the_63_tensors_of_a_file_of_unknown_size_are_past_the_cap():
    assert refusal(header(tiny_kvs(), tiny_infos(), n_tensors=1 << 63)) == (
        f"{W} is not a readable GGUF file (at byte 8, it claims 9,223,372,036,854,775,808 "
        "tensors, at least 295,147,905,179,352,825,856 bytes, more than the 64 MB llmfit reads "
        "of a header)."
    )


def test_a_metadata_count_past_the_file_is_one_sentence():
    raw = header(tiny_kvs(), tiny_infos(), n_kv=1 << 40)
    assert refusal(raw, size=len(raw)) == (
        f"{W} is truncated or corrupt: at byte 16 it claims 1,099,511,627,776 metadata keys, at "
        "least 14,293,651,161,088 bytes, but the file ends 399 bytes later."
    )


def test_a_4_gb_string_costs_nothing():
    raw = header([kv("general.name", STRING, u64(4 << 30) + b"abc")], [])
    tracemalloc.start()
    try:
        message = refusal(raw, size=100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000
    assert message == (
        f"{W} is truncated or corrupt: at byte 48 it says the value of general.name is "
        "4,294,967,296 bytes long, but the file ends 44 bytes later."
    )


def test_an_array_of_2_to_the_62_numbers_costs_nothing():
    raw = header([kv("x", ARRAY, u32(U32) + u64(1 << 62))], [])
    assert refusal(raw, size=10_000) == (
        f"{W} is truncated or corrupt: at byte 41 it claims 4,611,686,018,427,387,904 items in x, "
        "at least 18,446,744,073,709,551,616 bytes, but the file ends 9,951 bytes later."
    )


def test_an_unknown_value_type_names_its_offset():
    assert refusal(header([kv("x", 13, b"1234")], [])) == (
        f"{W} is not a readable GGUF file (at byte 33, x has value type 13, which GGUF does not "
        "define)."
    )


def test_an_array_of_an_unknown_type_names_its_offset():
    assert refusal(header([kv("x", ARRAY, u32(13) + u64(1))], [])) == (
        f"{W} is not a readable GGUF file (at byte 37, x is an array of value type 13, which GGUF "
        "does not define)."
    )


def test_arrays_nested_too_deep_are_refused():
    nested = (u32(ARRAY) + u64(1)) * 12 + u32(U8) + u64(0)
    assert refusal(header([kv("x", ARRAY, nested)], [])) == (
        f"{W} is not a readable GGUF file (at byte 133, x nests arrays more than 8 deep)."
    )


def test_an_unknown_tensor_type_names_its_offset():
    assert refusal(header(tiny_kvs(), [info("a", (32,), 99)])) == (
        f"{W} is not a readable GGUF file (at byte 328, tensor a has type 99, which the gguf "
        "library does not know)."
    )


def test_more_than_four_dimensions_are_refused():
    assert refusal(header(tiny_kvs(), [info("a", (1, 1, 1, 1, 1))])) == (
        f"{W} is not a readable GGUF file (at byte 307, tensor a has 5 dimensions; GGUF allows "
        "at most 4)."
    )


@pytest.mark.parametrize(
    ("dims", "shown"),
    [((1 << 63,), "[9223372036854775808]"), ((1 << 40, 1 << 40), "[1099511627776, 1099511627776]")],
)
def test_a_negative_or_overflowing_shape_is_refused(dims, shown):
    assert refusal(header(tiny_kvs(), [info("a", dims)])) == (
        f"{W} is not a readable GGUF file (at byte 307, tensor a has the shape {shown}, whose "
        "size overflows a 64-bit count)."
    )


def test_a_shape_larger_than_the_file_is_truncation():
    raw = whole_file(header(tiny_kvs(), [info("a", (1 << 20, 1 << 20), F32_TYPE)]))
    assert refusal(raw, size=len(raw)) == (
        f"{W} is truncated: its header places tensor data up to byte 4,398,046,511,456, but the "
        "file ends at byte 5,472."
    )


def test_rows_that_are_not_whole_blocks_are_refused():
    assert refusal(header(tiny_kvs(), [info("a", (33,), Q4_K)])) == (
        f"{W} is not a readable GGUF file (at byte 307, tensor a's rows of 33 are not a whole "
        "number of Q4_K blocks of 256)."
    )


def test_a_key_twice_is_refused():
    assert refusal(header([*tiny_kvs(), kv_u32("llama.block_count", 2)], [])) == (
        f"{W} is not a readable GGUF file (at byte 307, the key llama.block_count appears twice)."
    )


def test_a_tensor_twice_is_refused():
    assert refusal(header(tiny_kvs(), [info("a", (32,)), info("a", (32,), offset=128)])) == (
        f"{W} is not a readable GGUF file (at byte 340, the tensor a appears twice)."
    )


def test_an_alignment_that_is_not_a_power_of_two_is_refused():
    assert refusal(header([*tiny_kvs(), kv_u32("general.alignment", 3)], [])) == (
        f"{W} is not a readable GGUF file (general.alignment is 3, not a power of two)."
    )


def test_a_misaligned_tensor_offset_is_refused():
    assert refusal(header(tiny_kvs(), [info("a", (32,), offset=5)])) == (
        f"{W} is not a readable GGUF file (at byte 307, tensor a's data offset 5 is not a multiple "
        "of the alignment 32)."
    )


def test_a_key_that_is_not_utf8_is_refused():
    assert refusal(header([s(b"\xff\xfe") + u32(U8) + b"\x01"], [])) == (
        f"{W} is not a readable GGUF file (at byte 32, a metadata key is not UTF-8)."
    )


def test_a_file_cut_inside_a_number_is_truncated(tmp_path):
    p = write(tmp_path, tiny()[:311])
    with pytest.raises(WeightsError) as e:
        read_header(p)
    assert e.value.message == (
        f"{p} is truncated: it ends at byte 311, inside the length of a tensor name (which needs "
        "byte 315)."
    )


def test_a_file_cut_at_every_offset_is_one_sentence(tmp_path):
    raw = whole_file(tiny())
    for cut in [*range(len(tiny()) + 1), len(raw) - 1]:
        p = write(tmp_path, raw[:cut])
        with pytest.raises(WeightsError) as e:
            read_header(p)
        assert e.value.message.startswith(str(p)), cut
        assert ("truncated" in e.value.message) or cut in (0, 1, 2, 3), e.value.message


def test_a_local_file_is_read_once_and_only_as_far_as_its_header(tmp_path, monkeypatch):
    """A 4 GB (sparse) GGUF is parsed once, from a mapping of the file (the pages the parser
    touches are the only ones read), and the parser needs no byte past its header: the file's
    first header_bytes alone give the same header."""
    from llmfit.sources import gguf as gguf_module

    p = tmp_path / "big.gguf"
    write_gguf(p, "llama", {"llama.block_count": 1}, [("w", (1 << 16, 1 << 14), Q.F32)])
    size = p.stat().st_size
    assert size > 4 << 30
    parses: list[int] = []
    real = gguf_module.parse_gguf

    def counting(buf, where, **kw):
        parses.append(len(buf))
        return real(buf, where, **kw)

    monkeypatch.setattr(gguf_module, "parse_gguf", counting)
    h = read_header(p)
    assert h.tensors[0].nbytes == 4 << 30
    assert parses == [64 << 20]  # one parse, of the mapped first 64 MB: the most ever read
    with open(p, "rb") as f:
        head = f.read(h.header_bytes)
    assert real(head, str(p), size=size) == h
