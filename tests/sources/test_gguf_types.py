"""llmfit's table of GGML tensor types is gguf-py's, to the byte: every type gguf knows, with its
name, elements a block and bytes a block, and none it does not (a file of a type missing here
would be refused; a size that differed would plan every such tensor wrong)."""

from __future__ import annotations

import gguf

from llmfit.sources.gguf import GGML_TYPES


def test_the_table_is_ggufs():
    assert GGML_TYPES == {
        int(t): (t.name, *gguf.GGML_QUANT_SIZES[t])
        for t in gguf.GGMLQuantizationType
        if t in gguf.GGML_QUANT_SIZES
    }


def test_every_type_of_the_enum_has_a_size():
    # A type gguf names but gives no size would be one llmfit refuses; none is so today.
    assert {int(t) for t in gguf.GGMLQuantizationType} == set(GGML_TYPES)


def test_some_sizes_by_hand():
    # Q4_K: 256 weights in 144 bytes (4.5 bits); Q8_0: 32 in 34; Q6_K: 256 in 210; F32: 1 in 4.
    assert GGML_TYPES[12] == ("Q4_K", 256, 144)
    assert GGML_TYPES[8] == ("Q8_0", 32, 34)
    assert GGML_TYPES[14] == ("Q6_K", 256, 210)
    assert GGML_TYPES[0] == ("F32", 1, 4)
