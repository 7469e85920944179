"""What a remote plan costs: requests, bytes and time against a loopback Hub, printed as a table.

    python benchmarks/hub_bench.py

Two repositories are served by tests/hubserver.py on 127.0.0.1 with a per-request delay that
stands in for a round trip to the Hub (--rtt, default 20 ms):

- Meta-Llama-3.1-70B as the Hub holds it: its real config, 30 safetensors shards declared as
  141 GB whose headers are real, and 200 other small files. It is planned cold (empty caches),
  warm (a second online run: one request for the commit) and offline.
- A GGUF-only repository (no config.json) with many quantisations (--quants, default 24), each
  file a real GGUF header written by gguf's writer (a 50k to 200k-token vocabulary, 0.8 to 3.4 MB)
  and declared as gigabytes. It is planned by load_repo, cold and warm, through the real parser
  (sources.gguf.parse_gguf) reading each header in a growing window; the run fails if the bytes
  read exceed 1.1 x the headers' sizes.

"bytes sent" is every body byte the server sent: for safetensors it includes the file list (the
model_info answer), config.json and the index beside the headers, hence a ratio above 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hubrepos import commit_of, header_bytes, sharded_repo  # noqa: E402
from tests.hubserver import FileSpec, FixtureRepo, HubServer  # noqa: E402

GGUF_QUANTS = ["Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_0", "Q4_K_S", "Q4_K_M", "Q5_0", "Q5_K_S",
               "Q5_K_M", "Q6_K", "Q8_0", "F16", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_M",
               "IQ3_XXS", "IQ3_M", "IQ4_XS", "IQ4_NL", "BF16", "Q4_1"]  # fmt: skip


def point_at(server: HubServer, cache: Path) -> None:
    """What HF_ENDPOINT, HF_HUB_CACHE and LLMFIT_CACHE would do at start-up, done in-process."""
    from huggingface_hub import constants
    from huggingface_hub.utils import _detect_agent

    constants.ENDPOINT = server.url
    constants.HUGGINGFACE_CO_URL_TEMPLATE = server.url + "/{repo_id}/resolve/{revision}/{filename}"
    constants.HF_HUB_DISABLE_XET = True
    _detect_agent._registry = _detect_agent._EMPTY_REGISTRY  # no telemetry request in the counts
    os.environ.pop("HF_HUB_OFFLINE", None)
    os.environ["HF_HUB_CACHE"] = str(cache / "hf")
    os.environ["LLMFIT_CACHE"] = str(cache / "llmfit")


def measure(server: HubServer, run) -> tuple[int, int, float]:
    server.reset()
    t = time.perf_counter()
    run()
    return len(server.requests), server.bytes_sent, time.perf_counter() - t


def gguf_repo(quants: int, directory: Path) -> tuple[FixtureRepo, int]:
    """Real GGUF headers: seven vocabulary sizes, one file per quant name, each declared as the
    gigabytes its tensor infos call for; returns the repository and the sum of its headers."""
    import gguf

    from tests.hubrepos import gguf_file

    Q = gguf.GGMLQuantizationType
    files: dict[str, FileSpec] = {"README.md": FileSpec(b"# GGUF\n")}
    made: dict[int, dict[str, FileSpec]] = {}
    for i, q in enumerate((GGUF_QUANTS * (1 + quants // len(GGUF_QUANTS)))[:quants]):
        tokens = 50_000 + 25_000 * (i % 7)
        if tokens not in made:  # the writer takes a second a header: write each vocabulary once
            made[tokens] = gguf_file(directory, f"v{tokens}.gguf", 15, Q.Q4_K, tokens=tokens)
        (spec,) = made[tokens].values()
        files[f"model-{q}-{i}.gguf"] = spec
    headers = sum(len(f.content) for n, f in files.items() if n.endswith(".gguf"))
    return FixtureRepo("bench/Many-GGUF", commit_of("bench/Many-GGUF"), files), headers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtt", type=float, default=0.02, help="seconds added to every answer")
    ap.add_argument("--quants", type=int, default=24, help="GGUF files in the GGUF repository")
    args = ap.parse_args()

    st = sharded_repo("meta-llama/Meta-Llama-3.1-70B", "meta-llama--Meta-Llama-3.1-70B.json", 30,
                      extra_files=200)  # fmt: skip
    with tempfile.TemporaryDirectory() as src:
        gg, gguf_header_total = gguf_repo(args.quants, Path(src))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, HubServer([st, gg]) as server:
        point_at(server, Path(tmp))
        server.delay = args.rtt
        from llmfit.sources.repo import load_repo

        weights = sum(f.length for n, f in st.files.items() if n.endswith(".safetensors"))
        headers = header_bytes(st)
        box: dict = {}
        for label, kwargs in (("cold", {}), ("warm", {}), ("offline", {"offline": True})):
            n, sent, secs = measure(
                server, lambda k=kwargs: box.update(r=load_repo(st.repo_id, **k))
            )
            rows.append((f"safetensors {label}", len(st.files), n, sent, headers, weights, secs))
        params = box["r"].artifacts[0].params

        gguf_weights = sum(f.length for n, f in gg.files.items() if n.endswith(".gguf"))
        for label, kwargs in (("cold", {}), ("warm", {}), ("offline", {"offline": True})):
            n, sent, secs = measure(
                server, lambda k=kwargs: box.update(g=load_repo(gg.repo_id, **k))
            )
            rows.append((f"gguf {label}", len(gg.files), n, sent, gguf_header_total, gguf_weights,
                         secs))  # fmt: skip
        assert len(box["g"].artifacts) == args.quants

    print(f"loopback Hub, {args.rtt * 1000:.0f} ms a request; {st.repo_id}: {params:,} parameters")
    print()
    print(f"{'run':<20} {'files':>6} {'requests':>9} {'bytes sent':>13} {'headers':>13} "
          f"{'sent/headers':>12} {'weights':>17} {'seconds':>8}")  # fmt: skip
    for label, files, n, sent, hdr, weights, secs in rows:
        ratio = f"{sent / hdr:.3f}" if sent else "-"
        print(f"{label:<20} {files:>6} {n:>9} {sent:>13,} {hdr:>13,} {ratio:>12} {weights:>17,} "
              f"{secs:>8.3f}")  # fmt: skip
    gguf_cold = next(r for r in rows if r[0] == "gguf cold")
    assert gguf_cold[3] <= 1.1 * gguf_header_total, "GGUF bytes past 1.1 x the headers"


if __name__ == "__main__":
    main()
