"""A coverage-guided fuzzer (atheris, libFuzzer) for the GGUF header parser; opt-in, not collected.

    pip install atheris
    python tests/fuzz/gguf_atheris.py -max_total_time=600            # ten minutes
    python tests/fuzz/gguf_atheris.py -runs=100000 corpus/           # or a fixed count, a corpus

It seeds itself with valid headers (a hand-written one and one from gguf's writer, with split
keys and a token list), then mutates them. Each input is parsed with its size known (as a local
file is) and unknown (as a remote window is); a parsed header then goes through everything a plan
does with it. WeightsError is the one allowed failure, and its message must be one line naming
the file; anything else is a crash, which libFuzzer saves as crash-<hash> to turn into a test.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import atheris  # noqa: E402

with atheris.instrument_imports(include=["llmfit"]):
    from llmfit.errors import WeightsError
    from llmfit.sources.gguf import layout_of, model_from_gguf, parse_gguf
    from llmfit.sources.growing import NeedMore

WHERE = "x.gguf"


def check(data: bytes, size: int | None) -> None:
    try:
        h = parse_gguf(data, WHERE, size=size)
        if isinstance(h, NeedMore):
            assert size is None and h.total is not None and h.total > len(data)
            return
        model_from_gguf([h])
        layout_of([h])
    except WeightsError as e:
        if not e.message.startswith(WHERE) or "\n" in e.message:
            raise AssertionError(f"not one line naming the file: {e.message!r}") from None


def one_input(data: bytes) -> None:
    check(data, len(data))
    check(data, None)


def seeds(directory: Path) -> None:
    from fixtures.gguf_files import Q, llama_metadata, llama_tensors, write_gguf
    from tests.sources.gguf_bytes import tiny

    (directory / "tiny").write_bytes(tiny())
    md = llama_metadata(2, 64, 128, 4, 2, 2048, 15) | {
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(64)],
        "split.no": 0,
        "split.count": 1,
        "llama.attention.sliding_window": 128,
    }
    p = directory / "writer.gguf"
    write_gguf(p, "llama", md, llama_tensors(2, 256, 512, 64, 128, Q.Q4_K), with_data=False)


def main() -> None:
    args = sys.argv[:]
    if not any(not a.startswith("-") for a in args[1:]):
        corpus = Path(tempfile.mkdtemp(prefix="gguf-corpus-"))
        seeds(corpus)
        args.append(str(corpus))
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
