"""Safetensors weights: their bytes and parameters, read from the index and the headers only.

A safetensors file is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the data. Only the first two are ever read here: the weights of
a large model are hundreds of gigabytes, and their sizes are all in the headers. (The `safetensors`
package's own reader maps the whole file and imports numpy on the way, which costs a plan 0.1 s.)
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfit.errors import WeightsError
from llmfit.sources.cache import file_name_problem, show
from llmfit.sources.jsonfile import JsonProblem, parse

# The safetensors format caps its header at 100 MB (MAX_HEADER_SIZE in the reference reader);
# anything larger is not a safetensors file, and reading it would be a way to exhaust memory.
MAX_HEADER = 100_000_000

# Bits per element of each safetensors dtype (the format's own dtype names). Sizes are counted in
# whole numbers: a shape from outside can be any size, and a float would overflow or round.
DTYPE_BITS: dict[str, int] = {
    "F64": 64, "I64": 64, "U64": 64, "F32": 32, "I32": 32, "U32": 32, "F16": 16, "BF16": 16,
    "I16": 16, "U16": 16, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "I8": 8, "U8": 8, "BOOL": 8,
    "F6_E2M3": 6, "F6_E3M2": 6, "F4": 4,
}  # fmt: skip
# The model.safetensors.index.json of a trillion-parameter checkpoint is about 10 MB (one line a
# tensor); past this it is not an index worth reading.
MAX_INDEX = 64 << 20


@dataclass(frozen=True)
class SafetensorsHeader:
    """What one file's header says: bytes of tensor data and elements per dtype."""

    data_bytes: int
    params_by_dtype: tuple[tuple[str, int], ...]
    header_bytes: int
    # Elements of routed-expert tensors (named `.experts.`; shared experts are not among them).
    expert_params: int = 0

    @property
    def params(self) -> int:
        return sum(n for _, n in self.params_by_dtype)


def parse_header(raw: bytes, name: str) -> SafetensorsHeader:
    """Parse a header's JSON (the bytes after the 8-byte length) into sizes, checking its shape."""
    try:
        header = parse(raw, MAX_HEADER)
    except JsonProblem as e:
        raise WeightsError(f"{name}: the safetensors header {e.problem}.") from None
    if not isinstance(header, dict):
        raise WeightsError(f"{name}: the safetensors header is not a JSON object.")
    end = 0
    experts = 0
    counts: Counter[str] = Counter()
    for tensor, info in header.items():
        if tensor == "__metadata__":
            continue
        try:
            dtype = info["dtype"]
            shape = info["shape"]
            begin, stop = info["data_offsets"]
            n = 1
            for d in shape:
                if not isinstance(d, int) or d < 0:
                    raise ValueError
                n *= d
            if not (isinstance(begin, int) and isinstance(stop, int) and 0 <= begin <= stop):
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise WeightsError(
                f"{name}: tensor {show(tensor)} in the safetensors header has no valid "
                "dtype, shape and data_offsets."
            ) from None
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
            raise WeightsError(
                f"{name}: tensor {show(tensor)} has dtype {show(dtype)}, which is not a "
                "safetensors dtype."
            )
        # The byte range must hold exactly the elements the shape says: a header that disagrees
        # with itself would size the weights wrong whichever of the two were believed.
        needs = -(-n * DTYPE_BITS[dtype] // 8)
        if stop - begin != needs:
            raise WeightsError(
                f"{name}: tensor {show(tensor)} spans {stop - begin} bytes, but {dtype} of shape "
                f"{show(list(shape))} needs {needs}."
            )
        counts[dtype] += n
        if ".experts." in tensor:
            experts += n
        end = max(end, stop)
    return SafetensorsHeader(
        data_bytes=end,
        params_by_dtype=tuple(sorted(counts.items())),
        header_bytes=len(raw) + 8,
        expert_params=experts,
    )


def read_header(path: Path) -> SafetensorsHeader:
    """Read one file's header from disk: its length, then the JSON; never the tensor data."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            size = path.stat().st_size
            if len(head) < 8:
                raise WeightsError(
                    f"{path}: too short to be a safetensors file ({len(head)} bytes)."
                )
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER or n > size - 8:
                raise WeightsError(
                    f"{path}: the safetensors header claims {n} bytes, but the file holds "
                    f"{size - 8} after the length and the format allows at most {MAX_HEADER}."
                )
            raw = f.read(n)
    except OSError as e:
        raise WeightsError(f"{path}: cannot be read ({e.strerror}).") from None
    return parse_header(raw, str(path))


_OF = re.compile(r"-of-0*(\d+)\.safetensors$")


@dataclass(frozen=True)
class SafetensorsIndex:
    """What a safetensors index says: the checkpoint's total size and its shard files."""

    total_size: int | None
    shards: tuple[str, ...]

    @property
    def shard_count(self) -> int:
        """Shards the repository has: the files named, or the N of their `-of-N` if larger (an
        index trimmed for planning keeps only a few weight_map entries)."""
        named = [int(m.group(1)) for s in self.shards if (m := _OF.search(s))]
        return max([len(self.shards), *named]) or 1


def read_index(path: Path) -> SafetensorsIndex:
    """Read model.safetensors.index.json: total_size and the shard files its weight_map names."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_INDEX + 1)
    except OSError as e:
        raise WeightsError(f"{path}: cannot be read ({e.strerror or e}).") from None
    return index_from_bytes(raw, path)


def index_from_bytes(raw: bytes, path: Path | str) -> SafetensorsIndex:
    """An index's bytes as its total_size and shard names, each name checked to be one a file of
    the repository can have before anything opens or fetches it."""
    try:
        data: Any = parse(raw, MAX_INDEX)
    except JsonProblem as e:
        raise WeightsError(f"{path} {e.problem}.") from None
    if not isinstance(data, dict):
        raise WeightsError(f"{path} is not a JSON object.")
    meta = data.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total <= 0):
        raise WeightsError(
            f"{path}: metadata.total_size is {show(total)}, not a positive byte count."
        )
    wm = data.get("weight_map")
    if wm is not None and not isinstance(wm, dict):
        raise WeightsError(f"{path}: weight_map is not an object of tensor → file.")
    shards = set()
    for tensor, shard in (wm or {}).items():
        # A name like ../../.cache/huggingface/token or /etc/passwd would be opened (and its first
        # bytes shown as a header length) or fetched, or used as a cache path.
        why = file_name_problem(shard)
        if why is not None:
            raise WeightsError(
                f"{path}: weight_map gives tensor {show(tensor)} the file {show(shard)}, which "
                f"cannot be a file of the repository: {why}."
            )
        shards.add(shard)
    return SafetensorsIndex(total_size=total, shards=tuple(sorted(shards)))
