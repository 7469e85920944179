"""The whole path as a user runs it: the bundled cache, the example fleet, the exact commands."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLE_FLEET, HUB

FLEET = str(EXAMPLE_FLEET)


def test_qwen3_235b_on_the_example_fleet(run):
    code, out, err = run("Qwen/Qwen3-235B-A22B", "--fleet", FLEET)
    assert code == 0, err
    # 470,187,269,120 / 4 of weights + 1,971,322,880 of KV + 8,729,714,688 of overhead
    # = 128,247,854,848 B = 119.4 GiB, of 0.90 × 150,278,766,592 B (6.5 GiB left).
    assert "Best: 4 × h200-141g, bf16, 119.4 GB a card (6.5 free)" in out
    assert (
        "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 4 --enable-expert-parallel "
        "--max-model-len 40960 --gpu-memory-utilization 0.90"
    ) in out.splitlines()


def test_dense_model_on_one_card_has_no_expert_parallelism(run):
    code, out, _ = run("meta-llama/Llama-3.1-8B-Instruct", "--fleet", FLEET, "--context", "32k")
    assert code == 0
    assert (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 "
        "--max-model-len 32768 --gpu-memory-utilization 0.90"
    ) in out.splitlines()


def test_two_nodes_print_a_command_per_role(run, tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        '[[pool]]\nname = "h100"\ncount = 2\ngpu = "h100-80g"\ngpus = 8\nfabric = "ib0"\n'
    )
    code, out, _ = run("deepseek-ai/DeepSeek-V3", "--fleet", str(fleet), "--context", "8192")
    assert code == 0
    base = (
        "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 "
        "--enable-expert-parallel --max-model-len 8192 --gpu-memory-utilization 0.90 "
        "--nnodes 2"
    )
    lines = out.splitlines()
    assert "# head on h100-1" in lines
    assert f"{base} --node-rank 0 --master-addr h100-1" in lines
    assert "# worker on h100-2" in lines
    assert f"{base} --node-rank 1 --master-addr h100-1 --headless" in lines


def test_gpu_memory_utilization_is_passed_on(run):
    code, out, _ = run(
        "Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "4096", "--gpu-memory-utilization", "0.8"
    )
    assert code == 0
    assert "--max-model-len 4096 --gpu-memory-utilization 0.80" in out


def test_json_document_version_1(run):
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", FLEET, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == 1
    assert set(doc) >= {
        "schema",
        "repo",
        "model",
        "context",
        "fleet",
        "artifacts",
        "options",
        "unplaced",
    }
    assert doc["repo"] == {
        "id": "Qwen/Qwen3-235B-A22B",
        "revision": None,
        "commit": (HUB / "models--Qwen--Qwen3-235B-A22B" / "refs" / "main").read_text(),
        "source": "cache",
    }
    assert set(doc["model"]) == {
        "architecture", "model_type", "params", "active_params", "layers", "attention_heads",
        "kv_heads", "head_dim", "experts", "experts_active", "max_context",
        "kv_bytes_per_token", "dtype", "quantization",
    }  # fmt: skip
    assert doc["model"]["kv_bytes_per_token"] == 192_512
    assert doc["context"] == 40_960
    assert doc["fleet"] == {"source": FLEET, "nodes": 11, "gpus": 77}
    assert doc["artifacts"] == [
        {"name": "safetensors", "format": "safetensors", "bytes": 470_187_269_120, "shards": 118,
         "quant": "bf16", "bits_per_weight": 16}
    ]  # fmt: skip
    best = doc["options"][0]
    assert set(best) >= {
        "rank", "artifact", "engine", "label", "describe", "cpu", "gpu_class", "fabric",
        "gpus_per_node", "nodes", "gpus", "per_card", "hosts", "free_now", "bits_per_weight",
        "max_context", "concurrency", "commands",
    }  # fmt: skip
    assert best["per_card"]["weights"] == 470_187_269_120 // 4
    assert best["per_card"]["need"] == sum(
        best["per_card"][k] for k in ("weights", "kv_cache", "overhead")
    )
    assert best["commands"][0]["role"] == "all"
    assert best["commands"][0]["argv"][:3] == ["vllm", "serve", "Qwen/Qwen3-235B-A22B"]


def test_a_missing_repo_is_one_sentence_and_exit_4(run):
    code, out, err = run("nobody/nothing", "--fleet", FLEET)
    assert code == 4
    assert out == ""
    assert err.splitlines()[0] == (
        f"llmfit: nobody/nothing is not in the local Hugging Face cache ({HUB})."
    )
    assert "Traceback" not in err


def test_a_repo_without_config_is_one_sentence_and_exit_3(run, tmp_path):
    code, _, err = run(str(tmp_path), "--fleet", FLEET)
    assert code == 3
    assert err == f"llmfit: {tmp_path} has no config.json ({tmp_path}).\n"


def test_a_fleet_that_does_not_parse_is_one_sentence_and_exit_3(run, tmp_path):
    bad = tmp_path / "fleet.toml"
    bad.write_text("[[pool]\n")
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", str(bad))
    assert code == 3
    assert err.startswith(f"llmfit: {bad} is not valid TOML: ")
    assert len(err.splitlines()) == 1


def test_nothing_fits_exits_1_and_says_the_nearest(run, tmp_path):
    small = tmp_path / "fleet.toml"
    small.write_text('[[node]]\ngpu = "rtx4090-24g"\ngpus = 1\n')
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", str(small))
    assert code == 1
    # Weights, KV for 40,960 tokens at 192,512 B, and the overhead of a 2,048-token profile run
    # (vocabulary 151,936, hidden 4,096), in GiB; against 0.90 of the RTX 4090's 25,386,352,640 B.
    overhead = 2048 * (19 * 151_936 + 11 * 4096) // 4 + 2**28 + 2**29
    need = (470_187_269_120 + 192_512 * 40_960 + overhead) / 2**30
    assert f"{need:.1f}" == "447.4" and f"{25_386_352_640 * 0.9 / 2**30:.1f}" == "21.3"
    assert (
        "safetensors: nothing fits; closest is 1 × rtx4090-24g, needing 447.4 GB of 21.3 a card"
        in out.splitlines()
    )


def test_bad_context_is_a_usage_error(run):
    code, _, err = run("Qwen/Qwen3-8B", "--fleet", FLEET, "--context", "lots")
    assert code == 2
    assert err == "llmfit: --context 'lots' is not a token count (like 32768, 32k or 1m).\n"


def test_python_dash_m_works():
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "llmfit", "--version"], capture_output=True, text=True
    )
    assert r.stdout.strip() == "llmfit, version 0.1.0"
