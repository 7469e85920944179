"""GGUF headers written byte by byte, so that tests can write what no writer would."""

from __future__ import annotations

import struct

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
F32_TYPE, Q4_K = 0, 12


def u32(n: int) -> bytes:
    return struct.pack("<I", n)


def u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return u64(len(raw)) + raw


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return s(key) + u32(vtype) + payload


def kv_u32(key: str, n: int) -> bytes:
    return kv(key, U32, u32(n))


def kv_str(key: str, text: str) -> bytes:
    return kv(key, STRING, s(text))


def kv_strings(key: str, items: list[str]) -> bytes:
    return kv(key, ARRAY, u32(STRING) + u64(len(items)) + b"".join(s(x) for x in items))


def info(name: str, dims: tuple[int, ...], ggml_type: int = F32_TYPE, offset: int = 0) -> bytes:
    return s(name) + u32(len(dims)) + b"".join(u64(d) for d in dims) + u32(ggml_type) + u64(offset)


def header(
    kvs: list[bytes],
    infos: list[bytes],
    *,
    version: int = 3,
    n_tensors: int | None = None,
    n_kv: int | None = None,
) -> bytes:
    return (
        b"GGUF"
        + u32(version)
        + u64(len(infos) if n_tensors is None else n_tensors)
        + u64(len(kvs) if n_kv is None else n_kv)
        + b"".join(kvs)
        + b"".join(infos)
    )


def tiny_kvs(tokens: int = 8) -> list[bytes]:
    return [
        kv_str("general.architecture", "llama"),
        kv_u32("llama.block_count", 1),
        kv_u32("llama.embedding_length", 32),
        kv_u32("llama.attention.head_count", 4),
        kv_strings("tokenizer.ggml.tokens", [f"t{i}" for i in range(tokens)]),
    ]


def tiny_infos() -> list[bytes]:
    return [
        info("token_embd.weight", (32, 8), F32_TYPE, 0),
        info("blk.0.attn_q.weight", (32, 32), F32_TYPE, 1024),
    ]


def tiny() -> bytes:
    """A valid header for a one-layer model, and the file's whole length with data."""
    return header(tiny_kvs(), tiny_infos())


def whole_file(head: bytes, data: int = 1024 + 4096) -> bytes:
    return head + b"\0" * (-len(head) % 32) + b"\0" * data
