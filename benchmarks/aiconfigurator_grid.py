"""llmfit beside NVIDIA's aiconfigurator where no run measured: the issue's unseen models.

Opt-in, as benchmarks/aiconfigurator_compare.py (whose aiconfigurator it runs the same way, and
whose install note applies). Issue 31 scored the model on 61 runs it keeps unseen, 55 of them
MoE (DeepSeek-R1, Kimi-K2, gpt-oss, Qwen3-235B and 480B, …), where aiconfigurator was 11 % off
on throughput and 9 % on TPOT. This asks both tools the same questions about those models, at
loads and on cards no run of fixtures/calibration measured: a grid of the models both can read
(DeepSeek-R1-0528 on 8 H200s and 8 B200s, Qwen3-235B-A22B-Instruct-2507 and
Qwen3-Coder-480B-A35B-Instruct on 8 H200s, gpt-oss-120b on one H100 and one B200), each at
tensor parallelism over its cards, 1,024 tokens in and out, 4, 32 and 128 requests in flight,
under vLLM and SGLang. Each scenario is planned as benchmarks/accuracy_load.py plans a measured
run (at the releases aiconfigurator measured its tables under, SGLang 0.5.14 and vLLM 0.24; the
constants as shipped), and
given to `aiconfigurator cli estimate` as aiconfigurator_compare.py gives a row.

It measures no error (nothing here was measured): it says where the two disagree, by how much,
and which way, so that a change to the step model can be read against the peer that was close
on the runs llmfit never saw. TTFT is printed, not compared: with fixed lengths a closed loop's
prompts arrive in waves, which llmfit prices as such (each wave's prompts prefilled together)
and aiconfigurator's aggregated estimate does not. Nor does aiconfigurator size a KV pool: where
llmfit's holds fewer requests than asked (gpt-oss-120b on one H100, whose weights leave vLLM's
pool about 29 requests of 2,048 tokens) the two part for that reason alone; such a scenario is
said and left out of the medians.

    PYTHONPATH=. python benchmarks/aiconfigurator_grid.py --aic /tmp/aic/bin/aiconfigurator
        [--refit [accuracy_load.py's flags: --kernels-a-layer, --pool=…, …]]

--refit prices the grid by constants fitted to every run of accuracy_load.py, with any of its
flags given beside it: a variant of the step model read against the peer where no run measured.

About 13 s a scenario on this machine's CPU the first time; answers are kept in --cache.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_load as al  # noqa: E402
import aiconfigurator_compare as ac  # noqa: E402

CARDS = {"h100": "H100-80G HBM3", "h200": "H200-141G", "b200": "B200-180G"}
# (model, card, cards): tensor parallel over all of them.
DEPLOYMENTS: tuple[tuple[str, str, int], ...] = (
    ("deepseek-ai/DeepSeek-R1-0528", "h200", 8),
    ("deepseek-ai/DeepSeek-R1-0528", "b200", 8),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "h200", 8),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "h200", 8),
    ("openai/gpt-oss-120b", "h100", 1),
    ("openai/gpt-oss-120b", "b200", 1),
)
CONCURRENCY = (4, 32, 128)
LENGTHS = (1024, 1024)
# The releases aiconfigurator 0.12 measured its tables under.
RELEASE = {"sglang": "0.5.14", "vllm": "0.24.0"}


def scenario(model: str, engine: str, card: str, cards: int, concurrency: int) -> dict:
    """A row of fixtures/calibration/load.jsonl's shape for the scenario, its measures empty."""
    isl, osl = LENGTHS
    fixed = "fixed lengths (--random-range-ratio 1.0)"
    return {
        "id": f"{model.split('/')[1]}-{engine}-{cards}x{card}-tp{cards}-{isl}-{osl}-c{concurrency}",
        "engine": engine, "engine_version": RELEASE[engine], "model": model, "moe": True,
        "precision": {"weights": "as stored in the repo", "kv_cache": "auto"},
        "gpu": CARDS[card], "vendor": "NVIDIA", "gpu_count": cards, "tp": cards, "pp": None,
        "dp": None, "ep": None, "dp_attention": False, "spec_decoding": "none",
        "pd_disaggregation": None, "dataset": "random",
        "input_len": {"nominal": isl, "mean": isl, "distribution": fixed},
        "output_len": {"nominal": osl, "mean": osl, "distribution": fixed},
        "load_kind": "max_concurrency", "concurrency": concurrency, "request_rate": "inf",
        "num_prompts": 10 * concurrency,
        "metrics": {"output_tok_s_per_gpu": 1.0},
        "source": "https://github.com/llmfit/grid/aiconfigurator_grid.py",
        "source_detail": f"launch: --tp {cards}", "confidence": "high", "notes": "",
    }  # fmt: skip


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--aic", default="aiconfigurator", help="the aiconfigurator program")
    p.add_argument("--cache", default="/tmp/aic-grid.json")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument(
        "--refit",
        action="store_true",
        help="price by constants fitted to every run (accuracy_load.py --fit's, with the "
        "accuracy_load.py flags given beside it), not the shipped ones",
    )
    # The rest are accuracy_load.py's own flags (it reads them from sys.argv as it loads).
    a, _ = p.parse_known_args(argv)
    table = None
    if a.refit:
        fitted, _ = al.load_rows()
        table, _ = al.fit(fitted, al.families(fitted), steps=60)
    cache: dict[str, object] = {}
    if Path(a.cache).exists():
        cache = json.loads(Path(a.cache).read_text())
    print("| scenario | llmfit: tok/s a GPU, TPOT ms, TTFT ms | aiconfigurator | llmfit ÷ "
          "aiconfigurator: tok/s a GPU, TPOT |")  # fmt: skip
    print("|---|---|---|---|")
    ratios: dict[str, tuple[list[float], list[float]]] = {}
    notes: list[str] = []
    for engine in ("sglang", "vllm"):
        for model, card, cards in DEPLOYMENTS:
            for c in CONCURRENCY:
                raw = scenario(model, engine, card, cards, c)
                row = al.parse(raw)
                why = row if isinstance(row, str) else al.plan_row(row)
                if why or isinstance(row, str):
                    notes.append(f"| {raw['id']} | llmfit does not plan it: {why} |")
                    continue
                argv_ = ac.args_of(row)
                if isinstance(argv_, str):
                    notes.append(f"| {raw['id']} | aiconfigurator does not price it: {argv_} |")
                    continue
                key = " ".join(argv_)
                if key not in cache:
                    cache[key] = ac.ask(a.aic, argv_, a.timeout)
                    Path(a.cache).write_text(json.dumps(cache, indent=1))
                got = cache[key]
                if isinstance(got, str):
                    notes.append(f"| {raw['id']} | aiconfigurator: {got} |")
                    continue
                assert isinstance(got, dict)
                ours = al.predict(row, table)
                r = row.replica
                assert r is not None
                held = r.kv_tokens / (sum(LENGTHS)) if r.kv_tokens else math.inf
                if held < c:
                    notes.append(f"| {raw['id']} | llmfit's pool holds about {held:.0f} "
                                 f"requests of {sum(LENGTHS):,} tokens, not {c} |")  # fmt: skip
                cells = [", ".join(f"{w[m] * (1 if m == 'per_gpu' else 1000):,.1f}"
                                   for m in al.METRICS) for w in (ours, got)]  # fmt: skip
                tput, tpot = ours["per_gpu"] / got["per_gpu"], ours["tpot"] / got["tpot"]
                print(f"| {raw['id']} | {cells[0]} | {cells[1]} | {tput:.2f}, {tpot:.2f} |")
                group = f"{model.split('/')[1]}, {engine}"
                if held >= c:
                    ratios.setdefault(group, ([], []))
                    ratios[group][0].append(tput)
                    ratios[group][1].append(tpot)
    print()
    print("| model, engine (scenarios whose pool holds the load) | scenarios | llmfit ÷ "
          "aiconfigurator, median: tok/s a GPU | TPOT |")  # fmt: skip
    print("|---|---|---|---|")
    for group, (tput_, tpot_) in ratios.items():
        print(f"| {group} | {len(tput_)} | {statistics.median(tput_):.2f} | "
              f"{statistics.median(tpot_):.2f} |")  # fmt: skip
    if notes:
        print()
        print("| scenario | note |")
        print("|---|---|")
        print("\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
