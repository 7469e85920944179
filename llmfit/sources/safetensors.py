"""Safetensors weights: their bytes and parameters, read from the index and the headers only.

A safetensors file is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the data. Only the first two are ever read here: the weights of
a large model are hundreds of gigabytes, and their sizes are all in the headers. (The `safetensors`
package's own reader maps the whole file and imports numpy on the way, which costs a plan 0.1 s.)
"""

from __future__ import annotations

import json
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfit.errors import WeightsError

# The safetensors format caps its header at 100 MB (MAX_HEADER_SIZE in the reference reader);
# anything larger is not a safetensors file, and reading it would be a way to exhaust memory.
MAX_HEADER = 100_000_000

# Bytes per element of each safetensors dtype (the format's own dtype names).
DTYPE_SIZES: dict[str, float] = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
    "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1,
    "F6_E2M3": 0.75, "F6_E3M2": 0.75, "F4": 0.5,
}  # fmt: skip


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
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise WeightsError(f"{name}: the safetensors header is not valid JSON ({e}).") from None
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
                f"{name}: tensor {tensor!r} in the safetensors header has no valid "
                "dtype, shape and data_offsets."
            ) from None
        if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
            raise WeightsError(
                f"{name}: tensor {tensor!r} has dtype {dtype!r}, which is not a safetensors dtype."
            )
        # The byte range must hold exactly the elements the shape says: a header that disagrees
        # with itself would size the weights wrong whichever of the two were believed.
        if stop - begin != -(-int(n * DTYPE_SIZES[dtype] * 4) // 4):
            raise WeightsError(
                f"{name}: tensor {tensor!r} spans {stop - begin} bytes, but {dtype} of shape "
                f"{list(shape)} needs {-(-int(n * DTYPE_SIZES[dtype] * 4) // 4)}."
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
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise WeightsError(f"{path}: cannot be read ({e.strerror}).") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise WeightsError(f"{path} is not valid JSON: {e}.") from None
    if not isinstance(data, dict):
        raise WeightsError(f"{path} is not a JSON object.")
    meta = data.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total <= 0):
        raise WeightsError(f"{path}: metadata.total_size is {total!r}, not a positive byte count.")
    wm = data.get("weight_map")
    if wm is not None and not isinstance(wm, dict):
        raise WeightsError(f"{path}: weight_map is not an object of tensor → file.")
    shards = tuple(sorted({str(v) for v in (wm or {}).values()}))
    return SafetensorsIndex(total_size=total, shards=shards)
