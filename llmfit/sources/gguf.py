"""GGUF files: their headers read into the core's nouns (Model, Artifact and its GgufLayout).

Only the header is read — the metadata and the tensor infos — never tensor data: a header says each
tensor's type and shape, and those give its bytes exactly (elements per block, bytes per block:
`GGML_TYPES`, gguf-py's `GGML_QUANT_SIZES` kept here so that no plan imports gguf and numpy).

Key names are gguf-py's (`gguf/constants.py`, `Keys.*`); what llama.cpp does with them is in
../shared/ENGINES.md, sections g and h.
"""

from __future__ import annotations

import marshal
import mmap
import os
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from llmfit.errors import WeightsError
from llmfit.plan.artifact import Artifact, GgufLayout
from llmfit.plan.model import AttentionKind, LayerGroup, Model
from llmfit.sources.growing import NeedMore

# GGML tensor types by id: (name, elements a block, bytes a block), exactly gguf-py's
# GGMLQuantizationType and GGML_QUANT_SIZES (gguf/constants.py), which a tensor's bytes are worked
# out from. Kept here because importing gguf imports numpy and yaml, about 340 ms, three times a
# whole plan; tests/sources/test_gguf_types.py holds the two equal, so a type gguf learns is a
# failing test here, not a file planned wrong.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}

# `general.file_type` → the name llama.cpp prints (llama_model_ftype_name; ENGINES.md h).
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE",
}  # fmt: skip

# A quant's name in a file name, as the reference planner reads it.
_QUANT_IN_NAME = re.compile(r"(IQ\d_[A-Z]+|Q\d_K_[SML]|Q\d_K|Q\d_\d|Q\d|BF16|F16|F32)", re.I)
# A part of a split GGUF: `<prefix>-00001-of-00003.gguf` (llama_split_path, include/llama.h).
_SPLIT = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
_BLOCK = re.compile(r"^blk\.(\d+)\.")
# The tensors --n-cpu-moe keeps on the host (LLM_FFN_EXPS_REGEX, common/common.h).
_EXPERTS = re.compile(r"\.ffn_(up|down|gate)_(ch)?exps")

# Architectures whose sliding-window layers llama.cpp sets in code rather than from a key
# (llama_model::load_hparams, `hparams.set_swa_pattern(n)`): period n, the last of each n is full.
SWA_PERIODS: dict[str, int] = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2}


@dataclass(frozen=True)
class GgufTensor:
    """One tensor as a GGUF header lists it: its type, shape and bytes."""

    name: str
    type: int  # GGMLQuantizationType
    shape: tuple[int, ...]
    n_elements: int
    nbytes: int


@dataclass(frozen=True)
class GgufHeader:
    """A GGUF file's header: its metadata and its tensors, and where its data begins."""

    path: Path
    metadata: dict[str, Any]
    tensors: tuple[GgufTensor, ...]
    header_bytes: int = 0  # where the tensor infos end
    data_offset: int = 0  # where the tensor data begins (the header padded to the alignment)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def arch_key(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}", default)

    @property
    def data_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def read_header(path: Path) -> GgufHeader:
    """A GGUF file's metadata and tensor infos, read once and never its tensor data; a file that
    is not one is one sentence naming it.

    The file is mapped and parsed in one pass, so only the pages its header spans are read (a
    growing window re-parsed each time it grows read a 3 MB header six times over). A file of the
    Hugging Face cache is a blob named by its content's hash, which never changes: its parse is
    kept in llmfit's cache, and a repository of 24 quants is parsed once, not at every plan.
    """
    try:
        size = path.stat().st_size
        blob = _blob_of(path)
        if blob is not None:
            kept = _load_parsed(blob, size, path)
            if kept is not None:
                return kept
        header = _read_once(path, size)
    except OSError as e:
        raise WeightsError(f"{path} is not a readable GGUF file ({e.strerror or e}).") from None
    if blob is not None:
        _store_parsed(blob, size, header)
    return header


def _read_once(path: Path, size: int) -> GgufHeader:
    limit = min(size, MAX_HEADER)
    with open(path, "rb") as f:
        try:
            buf = mmap.mmap(f.fileno(), limit, access=mmap.ACCESS_READ) if limit else b""
        except (OSError, ValueError):
            # A file that cannot be mapped (a pipe, some network file systems) is read as the
            # Hub's files are, in a window that grows as the parser asks.
            return _read_growing(f, path, size)
        try:
            # A map reads as bytes do (slices, indexing), without copying the file.
            result = parse_gguf(cast(bytes, buf), str(path), size=size)
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()
    if isinstance(result, NeedMore):
        # All of the file up to the cap was at hand, and the header goes on past the cap (short
        # of the file's end, it would have been "truncated").
        raise WeightsError(
            f"{path}: the header is larger than {MAX_HEADER >> 20} MB, the most llmfit reads."
        )
    return result


def _read_growing(f: Any, path: Path, size: int) -> GgufHeader:
    from llmfit.sources.growing import read_growing

    def fetch(start: int, stop: int) -> bytes:
        f.seek(start)
        return f.read(stop - start)

    header, _ = read_growing(
        fetch, lambda buf: parse_gguf(buf, str(path), size=size), size=size, where=str(path)
    )
    return header


# The parse of a blob, kept: <llmfit cache>/gguf-parsed/<blob>.v1, marshal's bytes of the header
# (a few KB, or a few hundred with a tokenizer's arrays), written after the parse succeeded, whole
# or not at all. A blob's name is its content's SHA-256 (SHA-1 for a file outside LFS), so an
# entry is never stale; its size is kept too, and an entry that disagrees or does not load is
# parsed again and replaced.
_PARSED_VERSION = 1
_BLOB = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _blob_of(path: Path) -> str | None:
    """The blob a Hugging Face cache's snapshot file links to; None for any other file."""
    real = os.path.realpath(path)
    name = os.path.basename(real)
    if os.path.basename(os.path.dirname(real)) == "blobs" and _BLOB.fullmatch(name):
        return name
    return None


def _parsed_path(blob: str) -> Path:
    from llmfit.sources.metacache import cache_root

    return cache_root() / "gguf-parsed" / f"{blob}.v{_PARSED_VERSION}"


def _load_parsed(blob: str, size: int, path: Path) -> GgufHeader | None:
    try:
        version, kept_size, header_bytes, data_offset, metadata, tensors = marshal.loads(
            _parsed_path(blob).read_bytes()
        )
        if version != _PARSED_VERSION or kept_size != size:
            return None
        return GgufHeader(
            path,
            {k: _decoded(v) for k, v in metadata.items()},
            tuple(GgufTensor(n, t, tuple(shape), ne, nb) for n, t, shape, ne, nb in tensors),
            header_bytes,
            data_offset,
        )
    except (OSError, ValueError, EOFError, TypeError, AttributeError):
        return None


def _store_parsed(blob: str, size: int, h: GgufHeader) -> None:
    """Keep a parse for the next run; failing to (a read-only or full disk) costs only that."""
    target = _parsed_path(blob)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        data = marshal.dumps(
            (
                _PARSED_VERSION,
                size,
                h.header_bytes,
                h.data_offset,
                {k: _encoded(v) for k, v in h.metadata.items()},
                tuple((t.name, t.type, t.shape, t.n_elements, t.nbytes) for t in h.tensors),
            )
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except (OSError, ValueError):
        tmp.unlink(missing_ok=True)


# A string array is kept as its length (_Strings), which marshal cannot hold as such: it is
# written as ("\0S", n), and an array holding one as ("\0A", items…). No array read from a header
# holds a str, so neither can be mistaken for one.
_STR_ARRAY, _NESTED = "\0S", "\0A"


def _encoded(v: Any) -> Any:
    if isinstance(v, _Strings):
        return (_STR_ARRAY, int(v))
    if type(v) is tuple and any(type(x) is tuple or isinstance(x, _Strings) for x in v):
        return (_NESTED, *map(_encoded, v))
    return v


def _decoded(v: Any) -> Any:
    if type(v) is tuple and v:
        if v[0] == _STR_ARRAY:
            return _Strings(v[1])
        if v[0] == _NESTED:
            return tuple(map(_decoded, v[1:]))
    return v


class _Strings(int):
    """A string array, kept as its length (tokenizer.ggml.tokens is 150,000 strings)."""


# ---------------------------------------------------------------------------------------------
# Reading a header: bytes in, GgufHeader out, every length checked before it is believed
#
# A GGUF header is anyone's bytes (a file on the Hub, a download cut short), so nothing in it is
# trusted: a count, a string length or an array length is checked against the bytes that can
# still follow (the file's size when known, else the window read so far and the cap) before
# anything is allocated or looped over, so a header claiming 2^63 tensors costs one comparison.
# The layout is gguf's (docs/gguf.md in ggml; gguf_init_from_file_impl in ggml/src/gguf.cpp):
#   magic "GGUF", u32 version (2 or 3), u64 tensor count, u64 KV count,
#   KVs: string key, u32 value type, value (arrays: u32 item type, u64 count, items),
#   tensor infos: string name, u32 n_dims (<= 4), u64 dims[n_dims], u32 ggml type, u64 offset,
#   padding to `general.alignment` (default 32), then the tensor data.

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)
GGML_MAX_DIMS = 4
DEFAULT_ALIGNMENT = 32
# Arrays of arrays are legal; deeper than this they are not a header, they are an attack on the
# reader's stack.
MAX_NESTING = 8
# The most header bytes llmfit reads of any GGUF, local or remote (hub.GGUF_MAX_WINDOW).
MAX_HEADER = 64 << 20
_INT64_MAX = (1 << 63) - 1
# The fewest bytes a KV (empty key, type, one byte) and a tensor info (empty name, n_dims, one
# dim, type, offset) can take: what a count is checked against.
_MIN_KV = 8 + 4 + 1
_MIN_TENSOR_INFO = 8 + 4 + 8 + 4 + 8
# The least a NeedMore asks beyond what is short: at most this much is read past a header's end.
_MIN_STEP = 8 << 10

# GGUFValueType → (struct format, size) for the fixed-size types.
_FIXED: dict[int, tuple[str, int]] = {
    0: ("B", 1), 1: ("b", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4),
    6: ("f", 4), 7: ("?", 1), 10: ("Q", 8), 11: ("q", 8), 12: ("d", 8),
}  # fmt: skip
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")


def _show(text: object) -> str:
    """A key, name or architecture from a header, fit for a one-line message: escaped if it holds
    a newline or another unprintable character, and cut short if long."""
    shown = str(text)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return shown if shown.isprintable() else shown.encode("unicode_escape").decode("ascii")


class _Short(Exception):
    def __init__(self, need: int, what: str) -> None:
        self.need = need
        self.what = what


class _Reader:
    """A cursor over a header's bytes that knows how many more the file can hold."""

    def __init__(self, buf: bytes, where: str, size: int | None, cap: int) -> None:
        self.buf = buf
        self.where = where
        self.size = size
        self.cap = cap
        self.pos = 0
        # What is still to come, for NeedMore's estimate.
        self.kv_left = 0
        self.ti_left = 0
        self.ti_seen = 0
        self.ti_bytes = 0
        self.items_left = 0  # strings still to come in the array being read
        self.items_seen = 0
        self.items_bytes = 0

    # -- limits ------------------------------------------------------------------------------

    @property
    def room(self) -> int:
        """Bytes that can still follow pos in this header: to the file's end, or to the cap."""
        end = self.cap if self.size is None else min(self.size, self.cap)
        return max(end - self.pos, 0)

    def fail(self, at: int, why: str) -> WeightsError:
        return WeightsError(f"{self.where} is not a readable GGUF file (at byte {at:,}, {why}).")

    def claim(self, at: int, count: int, each: int, what: str) -> None:
        """A count is believed only if that many of the smallest such items fit in what follows."""
        need = count * each
        if need <= self.room:
            return
        said = (
            f"it says {what} is {count:,} bytes long"
            if each == 1
            else f"it claims {count:,} {what}, at least {need:,} bytes"
        )
        if self.size is not None and self.size - self.pos <= self.cap:
            left = max(self.size - self.pos, 0)
            raise WeightsError(
                f"{self.where} is truncated or corrupt: at byte {at:,} {said}, but the file ends "
                f"{left:,} bytes later."
            )
        raise self.fail(at, f"{said}, more than the {self.cap >> 20} MB llmfit reads of a header")

    # -- reading -----------------------------------------------------------------------------

    def take(self, n: int, what: str) -> int:
        """Step over n bytes; their offset. Past the end of the bytes held: _Short."""
        at = self.pos
        if at + n > len(self.buf):
            raise _Short(at + n, what)
        self.pos = at + n
        return at

    def fixed(self, fmt: str, n: int, what: str) -> Any:
        at = self.take(n, what)
        return struct.unpack_from("<" + fmt, self.buf, at)[0]

    def u32(self, what: str) -> int:
        return self.fixed("I", 4, what)

    def u64(self, what: str) -> int:
        return self.fixed("Q", 8, what)

    def string(self, what: str, *, keep: bool = True) -> str | int:
        at = self.pos
        n = self.u64(f"the length of {what}")
        self.claim(at, n, 1, what)
        start = self.take(n, what)
        if not keep:
            return n
        try:
            return self.buf[start : start + n].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(start, f"{what} is not UTF-8") from None

    def _skip_strings(self, count: int, key: str, *, top: bool) -> None:
        """Step over `count` strings, each length checked first: a token list is 150,000 of
        them, so this is the parser's inner loop, written flat."""
        buf, have, pos = self.buf, len(self.buf), self.pos
        start = pos
        limit = self.cap if self.size is None else min(self.size, self.cap)
        unpack = _U64.unpack_from
        done = 0
        try:
            while done < count:
                if pos + 8 > have:
                    raise _Short(pos + 8, f"the length of a string in {key}")
                n = unpack(buf, pos)[0]
                if pos + 8 + n > limit:
                    self.pos = pos + 8
                    self.claim(pos, n, 1, f"a string in {key}")
                if pos + 8 + n > have:
                    raise _Short(pos + 8 + n, f"a string in {key}")
                pos += 8 + n
                done += 1
        finally:
            self.pos = pos
            if top:
                self.items_left = count - done
                self.items_seen = done
                self.items_bytes = pos - start

    def estimate(self, need: int) -> int:
        """The bytes the header needs in all, at least: what is short now, and what is still to
        come at the sizes seen so far (the fewest possible for what is not seen yet)."""
        rest = 0
        if self.items_left:
            avg = self.items_bytes // self.items_seen if self.items_seen else 8
            rest += self.items_left * max(avg, 8)
        rest += self.kv_left * _MIN_KV
        per_info = self.ti_bytes // self.ti_seen if self.ti_seen else _MIN_TENSOR_INFO
        rest += self.ti_left * max(per_info, _MIN_TENSOR_INFO)
        # Never less than a step: a round trip costs more than the bytes a short step saves, and
        # the last few tensor infos would otherwise be fetched a few hundred bytes at a time.
        return need + max(rest, _MIN_STEP)

    # -- values ------------------------------------------------------------------------------

    def value(self, vtype: int, at: int, key: str, depth: int = 0) -> Any:
        if vtype in _FIXED:
            fmt, n = _FIXED[vtype]
            return self.fixed(fmt, n, f"the value of {key}")
        if vtype == _STRING:
            return self.string(f"the value of {key}")
        if vtype == _ARRAY:
            if depth >= MAX_NESTING:
                raise self.fail(at, f"{key} nests arrays more than {MAX_NESTING} deep")
            item_at = self.pos
            itype = self.u32(f"the item type of {key}")
            count_at = self.pos
            count = self.u64(f"the length of {key}")
            if itype in _FIXED:
                fmt, n = _FIXED[itype]
                self.claim(count_at, count, n, f"items in {key}")
                start = self.take(count * n, f"the items of {key}")
                return tuple(struct.unpack_from(f"<{count}{fmt}", self.buf, start))
            if itype == _STRING:
                # Token lists are long and of no use to a plan: only their number is kept.
                self.claim(count_at, count, 8, f"strings in {key}")
                self._skip_strings(count, key, top=depth == 0)
                return _Strings(count)
            if itype == _ARRAY:
                self.claim(count_at, count, 12, f"arrays in {key}")
                return tuple(self.value(_ARRAY, self.pos, key, depth + 1) for _ in range(count))
            raise self.fail(item_at, f"{key} is an array of value type {itype}, which GGUF does "
                            "not define")  # fmt: skip
        raise self.fail(at, f"{key} has value type {vtype}, which GGUF does not define")


def parse_gguf(
    buf: bytes, where: str, *, size: int | None = None, cap: int = MAX_HEADER
) -> GgufHeader | NeedMore:
    """A GGUF header from its first bytes; `NeedMore` when they end before the tensor infos do.

    `size` is the file's length when known: then a header that needs bytes past it is one
    sentence ("…is truncated…"), and so is tensor data the infos place past it. `cap` bounds what
    any count may claim when the size is not known. Bad bytes raise WeightsError naming `where`
    and the offset.
    """
    r = _Reader(buf, where, size, cap)
    try:
        return _parse(r)
    except _Short as s:
        if size is None or s.need <= size:
            return NeedMore(r.estimate(s.need))
        if size == 0:
            raise WeightsError(f"{where} is not a readable GGUF file (it is empty).") from None
        raise WeightsError(
            f"{where} is truncated: it ends at byte {size:,}, inside {s.what} "
            f"(which needs byte {s.need:,})."
        ) from None


def _parse(r: _Reader) -> GgufHeader:
    where = r.where
    if len(r.buf) < 4 and r.buf != GGUF_MAGIC[: len(r.buf)]:
        raise WeightsError(f"{where} is not a readable GGUF file (it does not begin with the "
                           "GGUF magic bytes).")  # fmt: skip
    r.take(4, "the magic bytes")
    if r.buf[:4] != GGUF_MAGIC:
        raise WeightsError(f"{where} is not a readable GGUF file (it does not begin with the "
                           "GGUF magic bytes).")  # fmt: skip
    version = r.u32("the version")
    if version not in GGUF_VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        why = (
            "it is a big-endian file, which llama.cpp does not load on this machine"
            if swapped in GGUF_VERSIONS
            else f"it is GGUF version {version}; llmfit reads versions 2 and 3"
        )
        raise WeightsError(f"{where} is not a readable GGUF file ({why}).")
    count_at = r.pos
    n_tensors = r.u64("the tensor count")
    r.claim(count_at, n_tensors, _MIN_TENSOR_INFO, "tensors")
    n_kv = r.u64("the metadata count")
    r.claim(count_at + 8, n_kv, _MIN_KV, "metadata keys")
    r.kv_left, r.ti_left = n_kv, n_tensors
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        at = r.pos
        r.kv_left -= 1
        key = str(r.string("a metadata key"))
        shown = _show(key)
        vtype_at = r.pos
        vtype = r.u32(f"the value type of {shown}")
        if key in metadata:
            raise r.fail(at, f"the key {shown} appears twice")
        metadata[key] = r.value(vtype, vtype_at, shown)
        r.items_left = 0
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (
        isinstance(alignment, bool)
        or not isinstance(alignment, int)
        or alignment <= 0
        or alignment & (alignment - 1)
    ):
        raise WeightsError(f"{where} is not a readable GGUF file (general.alignment is "
                           f"{alignment!r}, not a power of two).")  # fmt: skip
    infos = []
    names: set[str] = set()
    for _ in range(n_tensors):
        at = r.pos
        r.ti_left -= 1
        name = r.string("a tensor name")
        tn = _show(name)
        n_dims = r.u32(f"the dimension count of tensor {tn}")
        if n_dims > GGML_MAX_DIMS:
            raise r.fail(at, f"tensor {tn} has {n_dims} dimensions; GGUF allows at most "
                         f"{GGML_MAX_DIMS}")  # fmt: skip
        dims = tuple(r.u64(f"the shape of tensor {tn}") for _ in range(n_dims))
        n = 1
        for d in dims:
            n *= d
        if any(d > _INT64_MAX for d in dims) or n > _INT64_MAX:
            raise r.fail(at, f"tensor {tn} has the shape {list(dims)}, whose size overflows "
                         "a 64-bit count")  # fmt: skip
        type_at = r.pos
        raw_type = r.u32(f"the type of tensor {tn}")
        offset = r.u64(f"the offset of tensor {tn}")
        r.ti_seen += 1
        r.ti_bytes += r.pos - at
        known = GGML_TYPES.get(raw_type)
        if known is None:
            raise r.fail(type_at, f"tensor {tn} has type {raw_type}, which the gguf library "
                         "does not know")  # fmt: skip
        qname, block, type_size = known
        if dims and dims[0] % block:
            raise r.fail(at, f"tensor {tn}'s rows of {dims[0]} are not a whole number of "
                         f"{qname} blocks of {block}")  # fmt: skip
        if name in names:
            raise r.fail(at, f"the tensor {tn} appears twice")
        if offset % alignment:
            raise r.fail(at, f"tensor {tn}'s data offset {offset:,} is not a multiple of the "
                         f"alignment {alignment}")  # fmt: skip
        names.add(str(name))
        infos.append((str(name), raw_type, dims, n, n // block * type_size, offset))
    header_end = r.pos
    data_start = -(-header_end // alignment) * alignment
    tensors = []
    end = 0
    for name, raw_type, dims, n, nbytes, offset in infos:
        tensors.append(GgufTensor(name, raw_type, dims, n, nbytes))
        end = max(end, data_start + offset + nbytes)
    if r.size is not None and end > r.size:
        raise WeightsError(
            f"{where} is truncated: its header places tensor data up to byte {end:,}, "
            f"but the file ends at byte {r.size:,}."
        )
    return GgufHeader(Path(where), metadata, tuple(tensors), header_end, data_start)


def quant_name(header: GgufHeader, filename: str) -> str | None:
    """The quant people call this file: llama.cpp's name for `general.file_type`, else the one
    in its file name (`general.file_type` is missing, 1024 = guessed, or an id from a fork)."""
    ft = header.get("general.file_type")
    if isinstance(ft, int) and ft in FILE_TYPES:
        return FILE_TYPES[ft]
    return quant_from_filename(filename)


def quant_from_filename(filename: str) -> str | None:
    m = _QUANT_IN_NAME.search(Path(filename).name)
    return m.group(1).upper() if m else None


# ---------------------------------------------------------------------------------------------
# Per-layer bytes


# The keys a plan reads, and what each must be: a whole number, or (per layer) an array of them.
# A header is anyone's bytes: a head count that is a string, or a block count of 2^31, is one
# sentence here rather than a traceback (or 2^31 list entries) in the arithmetic below.
MAX_BLOCKS = 100_000  # as for config.json: no model has more layers
_MAX_VALUE = 1 << 40
_SCALAR_KEYS = (
    "block_count", "embedding_length", "attention.key_length", "attention.value_length",
    "attention.key_length_swa", "attention.value_length_swa", "attention.sliding_window",
    "attention.kv_lora_rank", "ssm.inner_size", "ssm.conv_kernel", "ssm.state_size",
    "ssm.group_count", "expert_count", "expert_used_count", "expert_shared_count", "vocab_size",
    "context_length", "full_attention_interval",
)  # fmt: skip
_PER_LAYER_KEYS = (
    "attention.head_count", "attention.head_count_kv", "feed_forward_length",
    "attention.sliding_window_pattern",
)  # fmt: skip


def _whole(v: Any, bools: bool = False) -> bool:
    return (type(v) is int or (bools and type(v) is bool)) and 0 <= v <= _MAX_VALUE


def check_plan_keys(h: GgufHeader) -> None:
    """Refuse, in one sentence, a header whose plan keys are not the numbers llama.cpp reads."""
    arch = _show(h.architecture)
    problems = []
    for key in _SCALAR_KEYS + _PER_LAYER_KEYS:
        v = h.arch_key(key)
        if v is None:
            continue
        bools = key == "attention.sliding_window_pattern"
        ok = _whole(v, bools) or (
            key in _PER_LAYER_KEYS and type(v) is tuple and all(_whole(x, bools) for x in v)
        )
        if not ok:
            shown = f"an array of {int(v):,} strings" if isinstance(v, _Strings) else repr(v)
            if len(shown) > 40:
                shown = shown[:37] + "..."
            what = "a whole number" + (" or an array of them" if key in _PER_LAYER_KEYS else "")
            problems.append(f"{arch}.{key} is {shown}, not {what}")
    n = h.arch_key("block_count")
    if not problems and isinstance(n, int) and n > MAX_BLOCKS:
        problems.append(
            f"{arch}.block_count is {n:,}; no model has more than {MAX_BLOCKS:,} layers"
        )
    tokens = h.get("tokenizer.ggml.tokens")
    if not problems and tokens is not None and not isinstance(tokens, _Strings):
        problems.append("tokenizer.ggml.tokens is not an array of strings")
    if problems:
        raise WeightsError(f"{h.path}: {problems[0]}.")


def layout_of(headers: list[GgufHeader]) -> GgufLayout:
    """Bytes by layer from the tensor infos of every part, and the KV layout from the first."""
    first = headers[0]
    check_plan_keys(first)
    n_layer = _int(first.arch_key("block_count"))
    if not n_layer:
        raise WeightsError(f"{first.path} states no {_show(first.architecture)}.block_count.")
    layer = [0] * n_layer
    experts = [0] * n_layer
    embed = output = 0
    has_output = False
    for h in headers:
        for t in h.tensors:
            m = _BLOCK.match(t.name)
            if m and int(m.group(1)) < n_layer:
                il = int(m.group(1))
                layer[il] += t.nbytes
                if _EXPERTS.search(t.name):
                    experts[il] += t.nbytes
            elif t.name.startswith("token_embd"):
                embed += t.nbytes
            else:
                # output, output_norm, and the odd tensor outside a block (rope_freqs, a
                # next-token-prediction layer past block_count) travel with the output layer.
                output += t.nbytes
                has_output = has_output or t.name == "output.weight"
    vocab = _int(first.arch_key("vocab_size")) or int(first.get("tokenizer.ggml.tokens") or 0)
    if not vocab:
        emb = next((t for t in first.tensors if t.name == "token_embd.weight"), None)
        vocab = emb.shape[-1] if emb and emb.shape else 0
    return GgufLayout(
        layer_bytes=tuple(layer),
        expert_bytes=tuple(experts),
        embed_bytes=embed,
        output_bytes=output,
        tied_embeddings=not has_output,
        kv_layout=kv_layout(first),
        vocab=vocab,
        embedding=_int(first.arch_key("embedding_length")),
        feed_forward=_max(first.arch_key("feed_forward_length")),
    )


def _int(v: Any) -> int:
    if isinstance(v, bool) or v is None:
        return 0
    if isinstance(v, int):
        return v
    if isinstance(v, tuple) and v:
        return int(v[0])
    return 0


def _max(v: Any) -> int:
    if isinstance(v, tuple):
        return max((int(x) for x in v), default=0)
    return _int(v)


def _per_layer(v: Any, n: int, default: int = 0) -> list[int]:
    """A key that may be one value or an array with one value per layer."""
    if isinstance(v, tuple):
        vals = [int(x) for x in v[:n]]
        return vals + [vals[-1] if vals else default] * (n - len(vals))
    return [default if v is None else int(v)] * n


def kv_layout(h: GgufHeader) -> tuple[LayerGroup, ...]:
    """How each layer keeps its past, in layer order, as runs of like layers.

    From llama.cpp's hparams (llama_model::load_hparams, llama_hparams::n_embd_k_gqa): per-layer
    KV heads (0 = a recurrent layer), key and value lengths (default embedding / heads), MLA when
    `key_length_mla` is stated (K only: kv_lora_rank + rope dims), sliding-window layers from
    `sliding_window_pattern` or the architecture's fixed period, and recurrent state from `ssm.*`.
    """
    check_plan_keys(h)
    n = _int(h.arch_key("block_count"))
    embd = _int(h.arch_key("embedding_length"))
    heads = _per_layer(h.arch_key("attention.head_count"), n)
    kv_raw = h.arch_key("attention.head_count_kv")
    kv_heads = _per_layer(kv_raw, n) if kv_raw is not None else list(heads)
    head0 = max(heads, default=0)
    k_len = _int(h.arch_key("attention.key_length")) or (embd // head0 if head0 else 0)
    v_len = _int(h.arch_key("attention.value_length")) or (embd // head0 if head0 else 0)
    mla = h.arch_key("attention.key_length_mla") is not None
    window = _int(h.arch_key("attention.sliding_window"))
    swa = _swa_layers(h, n) if window else [False] * n
    k_swa = _int(h.arch_key("attention.key_length_swa")) or k_len
    v_swa = _int(h.arch_key("attention.value_length_swa")) or v_len
    state = _recurrent_state_bytes(h)
    interval = _int(h.arch_key("full_attention_interval"))
    groups: list[LayerGroup] = []
    for il in range(n):
        recurrent = state and (kv_heads[il] == 0 or (interval and (il + 1) % interval != 0))
        if not recurrent:
            _check_heads(h, il, heads[il], kv_heads[il])
        if recurrent:
            g = LayerGroup(AttentionKind.LINEAR, 1, state_bytes=state)
        elif mla:
            g = LayerGroup(AttentionKind.MLA, 1, kv_heads=1, head_dim=k_len, latent_dim=k_len)
        elif swa[il]:
            g = LayerGroup(
                AttentionKind.SLIDING, 1, kv_heads=kv_heads[il], head_dim=k_swa,
                head_dim_v=v_swa if v_swa != k_swa else 0, window=window,
            )  # fmt: skip
        else:
            g = LayerGroup(
                AttentionKind.FULL, 1, kv_heads=kv_heads[il], head_dim=k_len,
                head_dim_v=v_len if v_len != k_len else 0,
            )  # fmt: skip
        if groups and _same(groups[-1], g):
            last = groups[-1]
            groups[-1] = LayerGroup(**{**last.__dict__, "layers": last.layers + 1})
        else:
            groups.append(g)
    return tuple(groups)


def _check_heads(h: GgufHeader, il: int, heads: int, kv: int) -> None:
    """An attention layer's heads as llama.cpp needs them (llama_hparams: n_gqa() is
    n_head / n_head_kv, and the KV heads share the query heads evenly): some heads, some KV heads,
    and KV heads that divide them. Anything else was planned as a working llama-server."""
    key = f"{h.architecture}.attention.head_count"
    if heads <= 0:
        raise WeightsError(
            f"{h.path.name}: {key} is {heads} for layer {il}, so it has no attention heads and "
            "llama.cpp cannot run it."
        )
    if kv <= 0:
        raise WeightsError(
            f"{h.path.name}: {key}_kv is {kv} for layer {il}, which has no recurrent state: an "
            "attention layer with no KV heads, which llama.cpp cannot run."
        )
    if kv > heads or heads % kv:
        raise WeightsError(
            f"{h.path.name}: layer {il} has {kv:,} KV heads for {heads:,} attention heads; the "
            "KV heads must divide the attention heads, or llama.cpp cannot share them."
        )


def _same(a: LayerGroup, b: LayerGroup) -> bool:
    return {**a.__dict__, "layers": 0} == {**b.__dict__, "layers": 0}


def _swa_layers(h: GgufHeader, n: int) -> list[bool]:
    pattern = h.arch_key("attention.sliding_window_pattern")
    if isinstance(pattern, tuple):
        return [bool(x) for x in pattern[:n]] + [False] * (n - len(pattern))
    period = _int(pattern) if pattern is not None else SWA_PERIODS.get(h.architecture or "", 0)
    if pattern is None and not period:
        # A window with no pattern, on an architecture llama.cpp does not window: llama.cpp
        # ignores it (Mistral 7B v0.1's 4096 is served as full attention).
        return [False] * n
    # llama_hparams::set_swa_pattern: swa_layers[il] = n_pattern == 0 || il % n_pattern < n - 1.
    return [period == 0 or il % period < period - 1 for il in range(n)]


def _recurrent_state_bytes(h: GgufHeader) -> int:
    """One sequence's state in one recurrent layer, f32 (llama_memory_recurrent; ENGINES.md g):
    R = (conv_kernel − 1) × (inner_size + 2 × group_count × state_size), S = state_size ×
    inner_size."""
    inner = _int(h.arch_key("ssm.inner_size"))
    if not inner:
        return 0
    conv = _int(h.arch_key("ssm.conv_kernel"))
    d_state = _int(h.arch_key("ssm.state_size"))
    groups = _int(h.arch_key("ssm.group_count"))
    r = max(conv - 1, 0) * (inner + 2 * groups * d_state)
    s = d_state * inner
    return 4 * (r + s)


# ---------------------------------------------------------------------------------------------
# Model


def model_from_gguf(headers: Sequence[GgufHeader]) -> Model:
    """The Model a GGUF file states, for a repository with no config.json: given every part of a
    split file, first part first.

    The keys are the first part's (gguf-split writes the metadata there only); the parameters are
    every part's tensors, as llama.cpp counts them (llama_model_loader's constructor,
    src/llama-model-loader.cpp: it reads `split.count` from the first file, opens each further
    split, checks its `split.no`, and adds each tensor's elements to `n_elements`, which
    llama_model_n_params returns). The first part alone is a fraction of the model: a third of
    Qwen3-235B-A22B's Q4_K_M."""
    h = headers[0]
    check_plan_keys(h)
    arch = h.architecture
    n = _int(h.arch_key("block_count"))
    if not arch or not n:
        raise WeightsError(
            f"{h.path} states no general.architecture or block_count, so it cannot be planned."
        )
    groups = kv_layout(h)
    heads = _max(h.arch_key("attention.head_count"))
    attn = [g for g in groups if g.kind is not AttentionKind.LINEAR]
    kv_heads = max((g.kv_heads for g in attn), default=0)
    head_dim = max((g.head_dim for g in attn), default=0)
    experts = _int(h.arch_key("expert_count")) or None
    used = _int(h.arch_key("expert_used_count")) or None
    tensors = [t for part in headers for t in part.tensors]
    params = sum(t.n_elements for t in tensors)
    active = None
    if experts and used:
        expert_params = sum(t.n_elements for t in tensors if _EXPERTS.search(t.name))
        active = params - expert_params + expert_params * used // experts
    notes: list[str] = []
    if _int(h.arch_key("attention.kv_lora_rank")) and not any(
        g.kind is AttentionKind.MLA for g in groups
    ):
        notes.append(
            f"{h.path.name} predates llama.cpp's MLA cache (no key_length_mla): its KV cache "
            "holds every head's keys and values, many times what a re-converted file needs."
        )
    vocab = _int(h.arch_key("vocab_size")) or int(h.get("tokenizer.ggml.tokens") or 0) or None
    return Model(
        architecture=arch,
        model_type=arch,
        layers=n,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        layer_groups=groups,
        hidden_size=_int(h.arch_key("embedding_length")) or None,
        vocab_size=vocab,
        max_context=_int(h.arch_key("context_length")) or None,
        quantization="gguf",
        experts=experts,
        experts_active=used,
        shared_experts=_int(h.arch_key("expert_shared_count")) or None,
        params=params,
        active_params=active,
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------------
# Artifacts in a directory


@dataclass(frozen=True)
class GgufFiles:
    """The GGUF files of a repository read as artifacts, one a quant."""

    artifacts: tuple[Artifact, ...]
    # Every part of the first artifact, first part first, for a repository whose model only GGUF
    # states: the keys are the first part's, the parameters all of theirs (model_from_gguf).
    first_headers: tuple[GgufHeader, ...]
    warnings: tuple[str, ...] = ()


def is_projector(rel: str) -> bool:
    return Path(rel).name.lower().startswith("mmproj")


def group_files(rels: list[str]) -> tuple[list[list[str]], list[str]]:
    """GGUF paths grouped into artifacts (split parts together, first part first), and the
    warnings for split artifacts with parts missing."""
    singles: list[list[str]] = []
    splits: dict[tuple[str, int], dict[int, str]] = {}
    for rel in sorted(rels):
        m = _SPLIT.match(rel)
        if m:
            key = (m.group("prefix"), int(m.group("count")))
            splits.setdefault(key, {})[int(m.group("no"))] = rel
        else:
            singles.append([rel])
    warnings: list[str] = []
    groups = list(singles)
    for (prefix, count), parts in splits.items():
        missing = [i for i in range(1, count + 1) if i not in parts]
        if missing:
            warnings.append(
                f"{prefix}.gguf: part{'s' if len(missing) > 1 else ''} "
                f"{', '.join(map(str, missing))} of {count} "
                f"{'are' if len(missing) > 1 else 'is'} not here, so it is not planned."
            )
            continue
        groups.append([parts[i] for i in range(1, count + 1)])
    groups.sort(key=lambda g: g[0])
    return groups, warnings


# The headers of GGUF files not on disk (a repository read from the Hub, or from llmfit's cache of
# it), by name; a name it cannot give (offline, not cached) is left out.
RemoteHeaders = Callable[[list[str]], "dict[str, GgufHeader]"]


def gguf_artifacts(
    root: Path,
    *,
    listing: dict[str, int | None] | None = None,
    remote: RemoteHeaders | None = None,
) -> GgufFiles:
    """The GGUF artifacts of a repository: the files under `root`, and with `listing` and
    `remote`, those the repository lists but this machine does not hold (their headers read by
    `remote`; their path None, so llama-server is told `-hf repo:QUANT`)."""
    local = {p.relative_to(root).as_posix() for p in root.rglob("*.gguf") if p.is_file()}
    rels = set(local)
    if listing is not None and remote is not None:
        rels |= {n for n in listing if n.endswith(".gguf")}
    sizes = dict(listing or {})
    for rel in local:
        sizes[rel] = (root / rel).stat().st_size
    projectors = sorted(r for r in rels if is_projector(r))
    models = [r for r in rels if not is_projector(r)]
    groups, warnings = group_files(models)
    # Of several projectors (mmproj-F16, mmproj-BF16, mmproj-F32), the smallest; the command
    # names it with --mmproj, so plan and engine agree on which.
    projector = min(projectors, key=lambda r: (sizes.get(r) or 0, r), default=None)
    projector_bytes = (sizes.get(projector) or 0) if projector else 0
    projector_path = str(root / projector) if projector in local else None
    wanted = [p for parts in groups for p in parts if p not in local]
    fetched = remote(wanted) if wanted and remote is not None else {}
    artifacts = []
    first_headers: tuple[GgufHeader, ...] = ()
    for parts in groups:
        missing = [p for p in parts if p not in local and p not in fetched]
        if missing:
            warnings.append(
                f"{_artifact_name(parts)}: the header of {missing[0]} is not in llmfit's cache, "
                "so it is not planned (one online run reads it)."
            )
            continue
        headers = [read_header(root / p) if p in local else fetched[p] for p in parts]
        wrong = split_mismatch(parts, headers)
        if wrong:
            warnings.append(wrong)
            continue
        if not first_headers:
            first_headers = tuple(headers)
        on_disk = all(p in local for p in parts)
        artifacts.append(
            Artifact(
                name=_artifact_name(parts),
                format="gguf",
                bytes=sum(h.data_bytes for h in headers),
                shards=len(parts),
                quant=quant_name(headers[0], parts[0]),
                params=sum(t.n_elements for h in headers for t in h.tensors),
                path=str(root / parts[0]) if on_disk else None,
                files=tuple(parts),
                layout=layout_of(headers),
                projector=projector_path if on_disk else None,
                projector_bytes=projector_bytes,
            )
        )
    return GgufFiles(tuple(artifacts), first_headers, tuple(warnings))


def split_mismatch(parts: list[str], headers: list[GgufHeader]) -> str | None:
    """Why a split artifact's parts are not the parts their headers say they are, or None.

    Parts are grouped by their names (`-00002-of-00003`); a renamed or mixed-up file would
    otherwise be summed into another model's size. llama.cpp checks the same keys before loading
    (src/llama-model-loader.cpp, llama_model_loader's constructor: `split.count` read from the
    first file, each further file's `split.no` compared with its index, "invalid split file
    idx"). A key a header does not state is not held against it (gguf-split writes both)."""
    if len(parts) < 2:
        return None
    for i, (rel, h) in enumerate(zip(parts, headers, strict=True)):
        no, count = h.get("split.no"), h.get("split.count")
        # A stated value must be this very int (a bool or float equal to it is not llama.cpp's).
        if no is not None and (type(no) is not int or no != i):
            return (
                f"{_artifact_name(parts)}: {rel} states it is split part {no} (from 0), not "
                f"{i}, so it is not planned."
            )
        if count is not None and (type(count) is not int or count != len(parts)):
            return (
                f"{_artifact_name(parts)}: {rel} states the model is split in {count} parts, "
                f"not the {len(parts)} its file names say, so it is not planned."
            )
    return None


def _artifact_name(parts: list[str]) -> str:
    m = _SPLIT.match(parts[0])
    return f"{m.group('prefix')}.gguf" if m and len(parts) > 1 else parts[0]
