"""GGUF-only repositories in a Hugging Face cache, as `hf download` leaves them, for the benchmarks.

Each file's header is real (gguf's writer: a Llama with a 50,000 to 200,000-token vocabulary,
0.8 to 3.4 MB of header, as the quants of one model on the Hub have), held in
`blobs/<sha256>` with a snapshot link to it, and the file is as long as its tensor infos say:
sparse, so gigabytes declared cost kilobytes of disk.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUANTS = ["Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_0", "Q4_K_S", "Q4_K_M", "Q5_0", "Q5_K_S",
          "Q5_K_M", "Q6_K", "Q8_0", "F16", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_M",
          "IQ3_XXS", "IQ3_M", "IQ4_XS", "IQ4_NL", "BF16", "Q4_1"]  # fmt: skip


def gguf_headers(count: int) -> list[tuple[str, bytes, int]]:
    """(file name, header bytes, file length) of `count` quants of one model."""
    import gguf

    from tests.hubrepos import gguf_file

    made: dict[int, tuple[bytes, int]] = {}
    out = []
    with tempfile.TemporaryDirectory() as src:
        for i, q in enumerate((QUANTS * (1 + count // len(QUANTS)))[:count]):
            tokens = 50_000 + 25_000 * (i % 7)
            if tokens not in made:  # the writer takes a second a header: each vocabulary once
                q4k = gguf.GGMLQuantizationType.Q4_K
                (spec,) = gguf_file(Path(src), f"v{tokens}.gguf", 15, q4k, tokens=tokens).values()
                made[tokens] = (spec.content, spec.size)
            head, size = made[tokens]
            # The same header, each file a few bytes longer: each quant a blob of its own.
            out.append((f"Model-{q}-{i}.gguf", head, size + i * 32))
    return out


def write_repo(cache: Path, repo_id: str, files: list[tuple[str, bytes, int]]) -> Path:
    """The repository in the cache at `cache` (HF_HUB_CACHE); its snapshot directory."""
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    snap = folder / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    (folder / "blobs").mkdir(exist_ok=True)
    for name, head, size in files:
        digest = hashlib.sha256(head + size.to_bytes(8, "little")).hexdigest()
        blob = folder / "blobs" / digest
        with open(blob, "wb") as f:
            f.write(head)
            f.truncate(size)
        link = snap / name
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(blob, snap))
    return snap


def build(cache: Path, counts: tuple[int, ...] = (1, 24)) -> dict[int, str]:
    """One repository per count, sharing the headers; their ids by count."""
    files = gguf_headers(max(counts))
    ids = {}
    for n in counts:
        ids[n] = f"bench/Model-{n}-GGUF"
        write_repo(cache, ids[n], files[:n])
    return ids


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
