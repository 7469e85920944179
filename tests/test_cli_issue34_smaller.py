"""The smaller things of issue 34 (item 7), each as a user met it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import EXAMPLE_FLEET, ROOT


def test_plan_help_names_no_document_that_is_not_there(run):
    code, out, _ = run("plan", "--help")
    assert code == 0
    assert "docs/serving.md" not in out and not (ROOT / "docs" / "serving.md").exists()
    assert "README, Serving under load" in " ".join(out.split())


def test_a_time_with_its_unit_is_read(run):
    # 50ms and 0.05s are the same TPOT; 500ms is half a second of TTFT.
    for tpot in ("50", "50ms", "0.05s"):
        code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--tpot", tpot,
                             "--ttft", "500ms", "--json")  # fmt: skip
        assert code == 0, err
        w = json.loads(out)["workload"]
        assert (w["tpot_s"], w["ttft_s"]) == (0.05, 0.5)


def test_a_time_that_is_not_one_says_what_one_is(run):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--tpot", "fast")
    assert code == 2
    assert "Invalid value for '--tpot': 'fast' is not a time (like 50, 50ms or 0.05s)." in err


def test_explain_and_commands_print_both(run):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--explain", "--commands")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Option 1: 1 × h100-80g")
    assert lines[-1].startswith("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1")


def test_the_plan_and_the_fleet_count_the_same_cards(run):
    # examples/fleet.toml: 78 cards, one L40S of them unhealthy (llmfit fleet says the same).
    code, plan_out, _ = run("Qwen/Qwen3-8B", "--fleet", str(EXAMPLE_FLEET))
    assert code == 0
    code, fleet_out, _ = run("fleet", str(EXAMPLE_FLEET))
    assert code == 0
    assert "· 78 GPUs, 1 unhealthy" in plan_out
    assert "78 GPUs: 17 used, 60 free, 1 unhealthy" in " ".join(fleet_out.split())


def test_the_readme_quotes_no_figure_the_plan_no_longer_prints():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for stale in ("at 133 output tokens", "up to 8 requests in flight", "take 86 ms a token"):
        assert stale not in readme


def test_an_fp8_kv_format_vllm_takes_is_planned_as_fp8_and_passed_on(run):
    # fp8_e5m2 is a byte a value, as fp8 is (vllm/config/cache.py CacheDType): the same card.
    docs = {}
    for dtype in ("fp8", "fp8_e5m2"):
        code, out, err = run("Qwen/Qwen3-8B", "--fleet", "1xh100-80g", "--kv-cache-dtype", dtype,
                             "--json")  # fmt: skip
        assert code == 0, err
        docs[dtype] = json.loads(out)["options"][0]
    assert docs["fp8_e5m2"]["per_card"] == docs["fp8"]["per_card"]
    argv = docs["fp8_e5m2"]["commands"][0]["argv"]
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8_e5m2"


def test_models_shows_a_cards_capacity_at_120_columns(run, monkeypatch):
    # With a load named, a card's output at the option's capacity, not the load's demand (10
    # requests a second × 512 tokens = 5,120 over one card, the same for every model).
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = run("models", "--fleet", str(EXAMPLE_FLEET), "--rate", "10")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.lstrip().startswith("# model"))
    assert "tok/s/GPU" in header
    code, doc, err = run("Qwen/Qwen3-8B", "--fleet", str(EXAMPLE_FLEET), "--rate", "10", "--json")
    o = json.loads(doc)["options"][0]
    sv = o["serving"]
    capacity = sv["capacity_rate"] * 512 / o["gpus"]
    row = next(line for line in out.splitlines() if " Qwen/Qwen3-8B " in line)
    assert f"{capacity:,.0f}" in row.split() and "5,120" not in row.split()


BAD_FLEET = """[[node]]
name = "a"
gpu = "h100-80g"
gpus = 8
zzz = 1

[[node]]
name = "b"
gpu = "h100-80g"
gpus = -2

[[pool]]
name = "c"
gpu = "h10-80g"
gpus = 8
"""


def test_a_fleet_file_with_three_mistakes_says_all_three(run, tmp_path):
    f = tmp_path / "f.toml"
    f.write_text(BAD_FLEET)
    code, out, err = run("fleet", str(f))
    assert code == 3
    # Lines 5, 10 and 14, in the file's order, in one sentence.
    assert err.startswith(f"llmfit: {f}:5: node[0].zzz is not a key llmfit knows;")
    assert f"(and 2 more: {f}:10: node[1].gpus is -2; it cannot be negative; {f}:14: " in err
    assert "pool[0].gpu is 'h10-80g', not a GPU class llmfit knows" in err


def test_a_misspelt_llama_server_flag_is_refused_with_the_flag_it_meant(run):
    # llama-server refuses a flag it does not take ("error: invalid argument", common/arg.cpp);
    # --n-gpu-layer is one letter short of its --n-gpu-layers (llamacpp_flags.py, its README).
    code, out, err = run("check", "--fleet", "1xrtx4090-24g", "--", "llama-server", "-hf",
                         "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0", "-c", "4096",
                         "--n-gpu-layer", "40")  # fmt: skip
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: the command to check: llama-server refuses it: --n-gpu-layer: not one of its "
        "flags; did you mean --n-gpu-layers?\n"
    )
    # A flag it takes that llmfit does not model is still listed as not modelled, not refused.
    code, out, err = run("check", "--fleet", "1xrtx4090-24g", "--", "llama-server", "-hf",
                         "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0", "-c", "4096",
                         "--temp", "-1", "--no-kv-offload")  # fmt: skip
    assert code == 0, err
    assert "--temp -1" in " ".join(out.split())


def _config_only(tmp_path: Path) -> Path:
    """Llama-3.1-8B-Instruct's real config.json, with no weights, index or GGUF beside it."""
    repo = tmp_path / "Llama-3.1-8B-Instruct"
    repo.mkdir()
    src = ROOT / "fixtures" / "src" / "meta-llama--Llama-3.1-8B-Instruct.json"
    (repo / "config.json").write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    return repo


# Llama-3.1-8B-Instruct's config by hand (vocab 128,256, hidden 4,096, 32 layers, 32 heads and 8 KV
# heads of 128, intermediate 14,336, head not tied): the embedding 128,256 × 4,096 = 525,336,576;
# the output layer the same head plus the final norm's 4,096 = 525,340,672; a layer q and o
# 4,096² each, k and v 4,096 × 1,024 each, gate, up and down 3 × 4,096 × 14,336: 16,777,216 × 2 +
# 4,194,304 × 2 + 176,160,768 = 218,103,808, × 32 = 6,979,321,856. In all 8,029,999,104 parameters
# (the layers' norms, 262,144, are left out: the published checkpoint's 8,030,261,248), at
# bfloat16's two bytes 16,059,998,208 bytes (the published index says 16,060,522,496).
ESTIMATE = 16_059_998_208


def test_a_config_only_repository_is_planned_at_its_configs_parameters(run, tmp_path):
    repo = _config_only(tmp_path)
    code, out, err = run(str(repo), "--fleet", "1xh100-80g", "--context", "8192",
                         "--precision", "stored", "--json")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    (art,) = doc["artifacts"]
    assert (art["bytes"], art["quant"], art["estimated"]) == (ESTIMATE, "bf16", True)
    assert doc["notes"][0] == (
        "the weights are estimated from config.json: 8,029,999,104 parameters at bfloat16, "
        f"16,059,998,208 bytes; {repo} holds no checkpoint's sizes here (no "
        "model.safetensors.index.json, model.safetensors or GGUF file)"
    )
    assert doc["options"][0]["label"] == "1 × h100-80g"
    # The words say it too, and the plan is planned as usual: one card, as the checkpoint.
    code, out, err = run(str(repo), "--fleet", "1xh100-80g", "--context", "8192")
    assert code == 0, err
    assert "note: the weights are estimated from config.json: 8,029,999,104 parameters" in out
    assert "Best: 1 × h100-80g, bf16" in out


def test_a_config_only_repository_at_a_precision_given(run, tmp_path):
    # --precision fp8: the estimated bf16 weights quantised on load, as for a checkpoint.
    code, out, err = run(str(_config_only(tmp_path)), "--fleet", "1xh100-80g", "--context",
                         "8192", "--precision", "fp8", "--json")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["artifacts"][0]["bytes"] == ESTIMATE
    assert {o["what_if"] for o in doc["options"]} == {"fp8 weights"}
