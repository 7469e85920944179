"""`llmfit calibrate` (issue 36): result files in each engine's exact format (tests/bench_files.py)
read, matched to their plan, fitted, written beside the fleet file, and applied by later plans;
hostile result files each one sentence and exit 3, with nothing written.

The round trips make their "measured" figures from the plan itself with its step times moved by
a known factor (decode × 1.3, prefill × 1.25: the model's own figures worked out at those
scales by plan/calibration.py `figures`), so the fit must find that factor again (within 2 %).
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from llmfit.errors import EXIT_BAD_INPUT, EXIT_USAGE
from tests.bench_files import llama_bench_result, sglang_result, vllm_result

H100 = '[[pool]]\nname = "h100"\ncount = 1\ngpu = "h100-80g"\ngpus = 1\n'
TWO = H100 + '\n[[pool]]\nname = "a100"\ncount = 1\ngpu = "a100-80g"\ngpus = 1\n'
LOADS = (("concurrency", 8.0), ("concurrency", 64.0), ("rate", 2.0))
TRUE = (1.3, 1.25)


def _figures(repo: str, fleet: str, engine: str, kind: str, load: float, scales, io=(2048, 512)):
    """The plan's own figures for a run at `scales` (its replica's steps times the factors)."""
    from llmfit.advise import advise
    from llmfit.plan.calibration import figures
    from llmfit.plan.load import Scales
    from llmfit.plan.planner import PlanSettings
    from llmfit.plan.settings import Workload
    from llmfit.sources.fleet import resolve_fleet

    w = Workload(
        "run", io[0], io[1], concurrency=load if kind == "concurrency" else None,
        rate=load if kind == "rate" else None, ttft_s=None, tpot_s=None, named=True,
    )  # fmt: skip
    settings = PlanSettings(workload=w, engines=(engine,), precision="stored")
    o = advise(repo, resolve_fleet(fleet), settings, offline=True).plan.options[0]
    return figures(replace(o.serving.replica, scales=Scales(*scales)), w, kind, load)


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    p = tmp_path / "fleet.toml"
    p.write_text(H100)
    return p


def _vllm_runs(folder: Path, scales=TRUE, model="Qwen/Qwen3-8B") -> list[str]:
    out = []
    for kind, load in LOADS:
        m = _figures("Qwen/Qwen3-8B", "1xh100-80g", "vllm", kind, load, scales)
        out.append(str(vllm_result(
            folder / f"{kind}-{load:g}.json", model=model, input_len=2048, output_len=512,
            prompts=int(10 * load) if kind == "concurrency" else 200,
            output_tps=m.output_tokens_per_s, tpot_s=m.tpot_s, ttft_s=m.ttft_s,
            concurrency=int(load) if kind == "concurrency" else None,
            rate=load if kind == "rate" else None,
        )))  # fmt: skip
    return out


def _pools(path: Path) -> list[dict]:
    return tomllib.loads(path.read_text())["pool"]


def test_vllm_results_calibrate_back_to_the_factor_they_were_made_with(run, fleet, tmp_path):
    files = _vllm_runs(tmp_path)
    code, out, err = run("calibrate", *files, "--fleet", str(fleet))
    assert code == 0, err
    (pool,) = _pools(tmp_path / "fleet.calibration.toml")
    assert (pool["card"], pool["engine"], pool["runs"]) == ("h100-80g", "vllm", 3)
    assert pool["decode"] == pytest.approx(TRUE[0], rel=0.02)
    assert pool["prefill"] == pytest.approx(TRUE[1], rel=0.02)
    # Run by run, the error before (the model's own figures) and after: nil after.
    lines = out.splitlines()
    assert lines[0].startswith(f"{files[0]}: Qwen/Qwen3-8B as 1 × h100-80g, 2,048 in / 512 out")
    assert lines[0].endswith("→ -0 %") or lines[0].endswith("→ +0 %")
    assert "median error" in lines[3] and lines[3].endswith("0.0 % after")
    assert lines[4].startswith(f"wrote {tmp_path / 'fleet.calibration.toml'}")


def test_a_later_plan_says_it_is_calibrated_and_no_calibration_ignores_it(run, fleet, tmp_path):
    run("calibrate", *_vllm_runs(tmp_path), "--fleet", str(fleet))
    args = ("Qwen/Qwen3-8B", "--fleet", str(fleet), "--engine", "vllm", "--concurrency", "32")
    code, out, _ = run(*args, "--json")
    import json

    doc = json.loads(out)
    note = [n for n in doc["notes"] if "calibrated" in n]
    assert note == [
        "serving figures on h100-80g with vLLM calibrated on 3 runs of yours (median error 0 %, "
        "26 % before; --no-calibration for the model's own)"
    ]
    calibrated = doc["options"][0]["serving"]
    _, out, _ = run(*args, "--json", "--no-calibration")
    plain = json.loads(out)
    assert not [n for n in plain["notes"] if "calibrated" in n]
    own = plain["options"][0]["serving"]
    # The calibrated figure is the model's at decode × 1.3, prefill × 1.25: the measured one.
    m = _figures("Qwen/Qwen3-8B", "1xh100-80g", "vllm", "concurrency", 32.0, TRUE)
    assert calibrated["tpot_s"] == pytest.approx(m.tpot_s, rel=0.02)
    assert own["tpot_s"] == pytest.approx(
        _figures("Qwen/Qwen3-8B", "1xh100-80g", "vllm", "concurrency", 32.0, (1, 1)).tpot_s,
        rel=1e-3,
    )


def test_sglang_lines_calibrate_back_too(run, fleet, tmp_path):
    # SGLang on Hopper streams weights at its datasheet bandwidth already (weight_efficiency
    # 1.0): no decode scale below 1 is allowed, so the factor made is above it.
    scales = (1.2, 1.1)
    out_file = tmp_path / "sglang.jsonl"
    for kind, load in LOADS:
        m = _figures("Qwen/Qwen3-8B", "1xh100-80g", "sglang", kind, load, scales)
        sglang_result(
            out_file, model="Qwen/Qwen3-8B", input_len=2048, output_len=512,
            prompts=int(10 * load) if kind == "concurrency" else 200,
            output_tps=m.output_tokens_per_s, tpot_s=m.tpot_s, ttft_s=m.ttft_s,
            concurrency=int(load) if kind == "concurrency" else None,
            rate=load if kind == "rate" else math.inf,
        )  # fmt: skip
    code, out, err = run("calibrate", str(out_file), "--fleet", str(fleet))
    assert code == 0, err
    (pool,) = _pools(tmp_path / "fleet.calibration.toml")
    assert pool["engine"] == "sglang" and pool["runs"] == 3
    assert pool["decode"] == pytest.approx(scales[0], rel=0.02)
    assert pool["prefill"] == pytest.approx(scales[1], rel=0.02)
    # Each line of the file is a run of its own.
    assert f"{out_file} (run 3): " in out


def test_a_llama_bench_result_is_one_sequences_prefill_and_generation(tmp_path):
    from llmfit.sources.bench_results import read_results

    p = llama_bench_result(
        tmp_path / "lb.json", model_file="Tiny-Llama-Q8_0-00001-of-00002.gguf", prompt=512,
        gen=128, prompt_ts=2048.0, gen_ts=250.0,
    )  # fmt: skip
    (r,) = read_results(str(p))
    # TTFT: 512 prompt tokens at 2,048 a second = 0.25 s; TPOT 1 / 250 = 4 ms.
    assert (r.engine, r.kind, r.input_len, r.output_len) == ("llama.cpp", "single", 512, 128)
    assert r.ttft_s == pytest.approx(0.25) and r.tpot_s == pytest.approx(0.004)
    # llama-bench names the file it loaded, not a repository.
    assert (r.model, r.model_file) == (None, "Tiny-Llama-Q8_0-00001-of-00002.gguf")


def test_llama_bench_needs_the_repository_and_matches_its_file(run, tmp_path):
    p = llama_bench_result(
        tmp_path / "lb.json", model_file="Tiny-Llama-Q8_0-00001-of-00002.gguf", prompt=512,
        gen=128, prompt_ts=2048.0, gen_ts=250.0,
    )  # fmt: skip
    cal = tmp_path / "cal.toml"
    base = ("calibrate", str(p), "--fleet", "1xrtx4090-24g", "--calibration", str(cal))
    code, _, err = run(*base)
    assert code == EXIT_USAGE
    assert "does not name the repository it served: give it with --model." in err
    code, out, err = run(*base, "--model", "llmfit-fixtures/Tiny-Llama-GGUF")
    assert code == 0, err
    (pool,) = _pools(cal)
    assert (pool["card"], pool["engine"]) == ("rtx4090-24g", "llama.cpp")
    other = llama_bench_result(
        tmp_path / "other.json", model_file="Mistral-7B-Q4_K_M.gguf", prompt=512, gen=128,
        prompt_ts=2048.0, gen_ts=250.0,
    )  # fmt: skip
    before = cal.read_bytes()
    code, _, err = run("calibrate", str(other), "--fleet", "1xrtx4090-24g", "--calibration",
                       str(cal), "--model", "llmfit-fixtures/Tiny-Llama-GGUF")  # fmt: skip
    assert code == EXIT_BAD_INPUT
    assert "measured Mistral-7B-Q4_K_M.gguf, which is not a file of the plan's" in err
    assert cal.read_bytes() == before


def test_llama_bench_matches_the_file_the_command_serves(run, tmp_path):
    # llama-bench names a file, not a repository: with the launch given as --command, the run is
    # matched by its file among the command's artifact's (the Q8_0 split's first part), and
    # another model's file is still refused. (Before, the file's name was taken for a repository
    # and every such run was refused as another model's.)
    command = "llama-server -hf llmfit-fixtures/Tiny-Llama-GGUF:Q8_0 -c 4096"
    p = llama_bench_result(
        tmp_path / "lb.json", model_file="Tiny-Llama-Q8_0-00001-of-00002.gguf", prompt=512,
        gen=128, prompt_ts=2048.0, gen_ts=250.0,
    )  # fmt: skip
    base = ("--fleet", "1xrtx4090-24g", "--dry-run", "--command", command)
    code, out, err = run("calibrate", str(p), *base)
    assert code == 0, err
    assert "rtx4090-24g with llama.cpp: " in out
    other = llama_bench_result(
        tmp_path / "other.json", model_file="Mistral-7B-Q4_K_M.gguf", prompt=512, gen=128,
        prompt_ts=2048.0, gen_ts=250.0,
    )  # fmt: skip
    code, _, err = run("calibrate", str(other), *base)
    assert code == EXIT_BAD_INPUT
    assert "measured Mistral-7B-Q4_K_M.gguf, which is not a file of the plan's" in err


def test_one_card_class_never_moves_anothers(run, tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(TWO)
    files = _vllm_runs(tmp_path)
    code, _, err = run("calibrate", *files, "--fleet", str(fleet), "--card", "h100-80g")
    assert code == 0, err
    cal = tmp_path / "fleet.calibration.toml"
    (h100,) = _pools(cal)
    # An A100 run (the model's own figures at decode × 2) adds its pool and leaves the H100's.
    m = _figures("Qwen/Qwen3-8B", "1xa100-80g", "vllm", "concurrency", 16.0, (2.0, 1.25))
    a100 = vllm_result(
        tmp_path / "a100.json", model="Qwen/Qwen3-8B", input_len=2048, output_len=512,
        prompts=160, output_tps=m.output_tokens_per_s, tpot_s=m.tpot_s, ttft_s=m.ttft_s,
        concurrency=16,
    )  # fmt: skip
    code, _, err = run("calibrate", str(a100), "--fleet", str(fleet), "--card", "a100-80g")
    assert code == 0, err
    pools = {p["card"]: p for p in _pools(cal)}
    assert pools["h100-80g"] == h100
    assert pools["a100-80g"]["runs"] == 1


def test_a_fleet_of_two_classes_asks_which(run, tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(TWO)
    code, _, err = run("calibrate", _vllm_runs(tmp_path)[0], "--fleet", str(fleet))
    assert code == EXIT_USAGE
    assert "say which the run used with --card." in err


def test_an_inline_fleet_needs_a_calibration_file(run, tmp_path):
    code, _, err = run("calibrate", _vllm_runs(tmp_path)[0], "--fleet", "1xh100-80g")
    assert code == EXIT_USAGE
    assert "an inline fleet has no file to keep a calibration beside" in err


# -- hostile result files: one sentence, exit 3, nothing written ---------------------------------


@pytest.fixture
def calibrated(run, fleet, tmp_path) -> tuple[Path, bytes]:
    """A fleet already calibrated: the file every hostile run must leave as it was."""
    run("calibrate", *_vllm_runs(tmp_path), "--fleet", str(fleet))
    cal = tmp_path / "fleet.calibration.toml"
    return cal, cal.read_bytes()


def _refused(run, fleet, calibrated, path: Path | str, sentence: str) -> None:
    code, out, err = run("calibrate", str(path), "--fleet", str(fleet))
    assert code == EXIT_BAD_INPUT, err
    assert sentence in err
    assert len(err.strip().splitlines()) <= 2  # the sentence (and a hint), never a traceback
    cal, before = calibrated
    assert cal.read_bytes() == before
    assert not [p for p in cal.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_truncated_result(run, fleet, calibrated, tmp_path):
    whole = (tmp_path / "concurrency-8.json").read_text()
    p = tmp_path / "cut.json"
    p.write_text(whole[: len(whole) // 2])
    _refused(run, fleet, calibrated, p, "is not valid JSON")
    _refused(run, fleet, calibrated, p, "(a result cut short, or not a benchmark's result file)")


def test_a_huge_result(run, fleet, calibrated, tmp_path, monkeypatch):
    from llmfit.sources import bench_results

    monkeypatch.setattr(bench_results, "MAX_BYTES", 1000)
    p = tmp_path / "huge.json"
    p.write_text("[" + "1," * 2000 + "1]")
    _refused(run, fleet, calibrated, p, "is more than 1,000 bytes, the most llmfit reads of a "
             "benchmark result")  # fmt: skip


def test_a_result_of_the_wrong_types(run, fleet, calibrated, tmp_path):
    import json

    doc = json.loads((tmp_path / "concurrency-8.json").read_text())
    doc["mean_tpot_ms"] = "12.5"
    bad = tmp_path / "types.json"
    bad.write_text(json.dumps(doc))
    _refused(run, fleet, calibrated, bad, "types.json: mean_tpot_ms is '12.5', not a number.")


def test_a_result_holding_nan(run, fleet, calibrated, tmp_path):
    import json

    doc = json.loads((tmp_path / "concurrency-8.json").read_text())
    doc["output_throughput"] = math.nan
    bad = tmp_path / "nan.json"
    bad.write_text(json.dumps(doc))  # NaN, as Python's json writes it
    _refused(
        run, fleet, calibrated, bad, "nan.json: output_throughput is nan, not a finite number."
    )


def test_another_models_result(run, fleet, calibrated, tmp_path):
    (tmp_path / "other").mkdir()
    other = _vllm_runs(tmp_path / "other", model="Qwen/Qwen3-32B")[0]
    code, _, err = run("calibrate", other, "--fleet", str(fleet), "--model", "Qwen/Qwen3-8B")
    assert code == EXIT_BAD_INPUT
    assert "measured Qwen/Qwen3-32B, not --model Qwen/Qwen3-8B: another model's." in err
    assert calibrated[0].read_bytes() == calibrated[1]


def test_failed_requests(run, fleet, calibrated, tmp_path):
    bad = vllm_result(
        tmp_path / "failed.json", model="Qwen/Qwen3-8B", input_len=2048, output_len=512,
        prompts=100, output_tps=1000.0, tpot_s=0.02, ttft_s=0.1, concurrency=10, failed=7,
    )  # fmt: skip
    _refused(run, fleet, calibrated, bad, "7 of its 100 requests failed, so its figures are not "
             "the server's at that load.")  # fmt: skip


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_symlink_to_a_device(run, fleet, calibrated, tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    _refused(run, fleet, calibrated, link, "is a device, not a file: nothing is read from it.")


def test_a_file_of_no_benchmark(run, fleet, calibrated, tmp_path):
    p = tmp_path / "other.json"
    p.write_text('{"hello": 1}')
    _refused(run, fleet, calibrated, p, "is not a result of `vllm bench serve --save-result`")


def test_the_file_is_written_whole_or_not_at_all(run, fleet, calibrated, tmp_path, monkeypatch):
    # The rename that puts the new file in place fails: the old one is as it was, no temporary
    # file is left, and the failure is one sentence.
    def fail(*a: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    (tmp_path / "again").mkdir()
    files = _vllm_runs(tmp_path / "again", scales=(1.5, 1.25))
    code, _, err = run("calibrate", *files, "--fleet", str(fleet))
    assert code == EXIT_BAD_INPUT
    assert (
        "could not be written (No space left on device); the old calibration is as it was." in err
    )
    cal, before = calibrated
    assert cal.read_bytes() == before
    assert not [p for p in cal.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_damaged_calibration_file_is_one_sentence_when_planning(run, fleet, tmp_path):
    damaged = 'schema = 1\n[[pool]]\ncard = "h100-80g"\nengine = "vllm"\nruns = 3\ndecode = nan\n'
    (tmp_path / "fleet.calibration.toml").write_text(damaged)
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", str(fleet))
    assert code == EXIT_BAD_INPUT
    assert "pool 1: decode is nan, not a finite number." in err
    code, _, _ = run("Qwen/Qwen3-8B", "--fleet", str(fleet), "--no-calibration")
    assert code == 0


def test_the_launch_measured_can_be_given_as_the_command(run, fleet, tmp_path):
    files = _vllm_runs(tmp_path)
    code, out, err = run("calibrate", *files, "--fleet", str(fleet), "--dry-run",
                         "--command", "vllm serve Qwen/Qwen3-8B --max-model-len 8192")  # fmt: skip
    assert code == 0, err
    assert "h100-80g with vLLM: decode × 1.300, prefill × 1.250, on 3 runs" in out
    assert out.rstrip().endswith("--dry-run: nothing written.")
    assert not (tmp_path / "fleet.calibration.toml").exists()


def test_no_scale_passes_the_cards_datasheet_peak(run, fleet, tmp_path):
    # Runs "measured" at decode × 0.5: weights streamed at 0.927 / 0.5 = 185 % of the H100's
    # datasheet bandwidth (vLLM on Hopper reaches weight_efficiency 0.927 of it: llmfit/data/
    # serving_speed.toml). The fit stops at 0.927, the card's peak, and says the error it keeps.
    files = _vllm_runs(tmp_path, scales=(0.5, 1.25))
    code, out, err = run("calibrate", *files, "--fleet", str(fleet))
    assert code == 0, err
    (pool,) = _pools(tmp_path / "fleet.calibration.toml")
    assert pool["decode"] == pytest.approx(0.927, rel=1e-3)
    assert pool["error_after"] > 0.1


# -- what one run identifies, and how far its scales carry ---------------------------------------


def test_one_run_fits_one_factor_on_the_whole_step(run, fleet, tmp_path):
    # One run at one load pins the step time at its batch, not its split between decode and
    # prefill: a run made at decode × 1.3, prefill × 1.3 (the whole step) comes back as 1.3 on
    # both, within 2 %; its own figures then match it (the error after is nil).
    m = _figures("Qwen/Qwen3-8B", "1xh100-80g", "vllm", "concurrency", 16.0, (1.3, 1.3))
    one = vllm_result(
        tmp_path / "c16.json", model="Qwen/Qwen3-8B", input_len=2048, output_len=512,
        prompts=160, output_tps=m.output_tokens_per_s, tpot_s=m.tpot_s, ttft_s=m.ttft_s,
        concurrency=16,
    )  # fmt: skip
    code, out, err = run("calibrate", str(one), "--fleet", str(fleet))
    assert code == 0, err
    (pool,) = _pools(tmp_path / "fleet.calibration.toml")
    assert pool["decode"] == pool["prefill"]
    assert pool["decode"] == pytest.approx(1.3, rel=0.02)
    assert pool["error_after"] < 0.01
    assert (
        "\n  one factor on the whole step: runs at one load pin the step time at its batch" in out
    )
    # The batch it ran at: 16 in flight, a few of them prefilling at any time (at most 16).
    assert 1 < pool["batch_low"] <= pool["batch_high"] <= 16


def test_scales_hold_whole_within_their_runs_batches_and_fade_outside():
    from llmfit.plan.calibration import FADE, Pool
    from llmfit.plan.load import Scales

    p = Pool("h100-80g", "vllm", Scales(1.3, 1.25), 3, 0.2, 0.0, (), (8.0, 64.0))
    assert FADE == 2.0
    assert p.at_batch(8.0) == p.at_batch(32.0) == p.at_batch(64.0) == Scales(1.3, 1.25)
    # 256 is 4 times the last run's batch: the scales count for 4^(-1/2) = half (in the
    # logarithm): 1.3^0.5 = 1.140175, 1.25^0.5 = 1.118034. 2 is 4 times under the first.
    for b in (256.0, 2.0):
        s = p.at_batch(b)
        assert (s.decode, s.prefill) == pytest.approx((1.140175, 1.118034), rel=1e-6)
    # A batch under one counts as one: 8 times under 8, 8^(-1/2) = 0.353553 of the logarithm,
    # 1.3^0.353553 = exp(0.262364 × 0.353553) = 1.097198.
    assert p.at_batch(0.2).decode == pytest.approx(1.097198, rel=1e-6)
    # A pool from a file written before the batches were kept: whole at every batch.
    old = Pool("h100-80g", "vllm", Scales(1.3, 1.25), 3, 0.2, 0.0)
    assert old.at_batch(1e6) == Scales(1.3, 1.25)


def test_a_calibration_file_whose_batches_are_upside_down_is_one_sentence(run, fleet, tmp_path):
    pool = ('schema = 1\n[[pool]]\ncard = "h100-80g"\nengine = "vllm"\nruns = 1\ndecode = 1.3\n'
            'prefill = 1.3\nerror_before = 0.2\nerror_after = 0.0\n')  # fmt: skip
    cal = tmp_path / "fleet.calibration.toml"
    cal.write_text(pool + "batch_low = 64\nbatch_high = 8\n")
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", str(fleet))
    assert code == EXIT_BAD_INPUT
    assert "pool 1: batch_low 64 is above batch_high 8." in err
    # Without them (a file of before): read, and applied whole.
    cal.write_text(pool)
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", str(fleet), "--json")
    assert code == 0, err
    assert "calibrated on 1 run of yours" in out
