"""The whole path as a user runs it: the bundled cache, the example fleet, the exact commands."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLE_FLEET, HUB

FLEET = str(EXAMPLE_FLEET)


def test_qwen3_235b_on_the_example_fleet(run):
    # The fewest cards that hold the context (--rank cards; the default ranks by the workload).
    code, out, err = run("Qwen/Qwen3-235B-A22B", "--vllm-version", "0.33",
                         "--fleet", FLEET, "--precision", "stored",
                         "--rank", "cards")  # fmt: skip
    assert code == 0, err
    # A quarter of the checkpoint with what every rank keeps whole and the rotary cache,
    # 117,632,388,958 B (tests/plan/test_vllm_plan.py); KV of one head a card for 40,960 tokens,
    # 1,971,322,880 B; vLLM 0.33's profile run, buffers, non-torch memory and CUDA graphs,
    # 3,054,033,797 B, and the MoE workspace, 8,192 tokens × 8 experts × (4,096 + 4,096) × 2 B
    # (tests/plan/test_vllm_memory.py): 123,731,487,459 B = 115.2 GiB of 135,250,889,933 (10.7
    # GiB left).
    assert 117_632_388_958 + 1_971_322_880 + 3_054_033_797 + 2**30 == 123_731_487_459
    assert "Best: 4 × h200-141g (tp4+ep), bf16, 115.2 GiB a card (10.7 free)" in out
    assert (
        "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 4 --enable-expert-parallel "
        "--max-model-len 40960 --gpu-memory-utilization 0.90"
    ) in out.splitlines()


def test_dense_model_on_one_card_has_no_expert_parallelism(run):
    code, out, _ = run(
        "meta-llama/Llama-3.1-8B-Instruct",
        "--vllm-version",
        "0.33",
        "--fleet",
        FLEET,
        "--context",
        "32k",
    )
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
    code, out, _ = run(
        "deepseek-ai/DeepSeek-V3",
        "--vllm-version",
        "0.33",
        "--fleet",
        str(fleet),
        "--context",
        "8192",
        "--pp",
        "2",
    )
    assert code == 0
    base = (
        "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 "
        "--enable-expert-parallel --max-model-len 8192 --gpu-memory-utilization 0.90 "
        "--trust-remote-code --nnodes 2"
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
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--fleet", FLEET, "--json", "--precision", "stored",
                       "--rank", "cards")  # fmt: skip
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
        "kv_bytes_per_token", "dtype", "quantization", "attention", "unmodelled",
    }  # fmt: skip
    assert doc["model"]["unmodelled"] == []  # Qwen3-235B-A22B gives no key llmfit leaves out
    assert doc["model"]["kv_bytes_per_token"] == 192_512
    assert doc["context"] == 40_960
    assert doc["fleet"] == {"source": FLEET, "nodes": 11, "gpus": 77}
    assert doc["artifacts"] == [
        {"name": "safetensors", "format": "safetensors", "bytes": 470_187_269_120, "shards": 118,
         "quant": "bf16", "bits_per_weight": 16, "estimated": False}
    ]  # fmt: skip
    best = doc["options"][0]
    assert set(best) >= {
        "rank", "artifact", "engine", "label", "describe", "cpu", "gpu_class", "fabric",
        "gpus_per_node", "nodes", "gpus", "per_card", "hosts", "free_now", "bits_per_weight",
        "max_context", "concurrency", "commands",
    }  # fmt: skip
    # A quarter of the checkpoint, and what each rank keeps whole (tests/plan/test_vllm_plan.py).
    assert best["per_card"]["weights"] == 117_632_388_958
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
    # At the trained context (a consumer card's default is the desktop's 16k: issue 34).
    code, out, _ = run("Qwen/Qwen3-235B-A22B", "--vllm-version", "0.33", "--fleet", str(small),
                       "--context", "trained")  # fmt: skip
    assert code == 1
    # The weights (with a 10 MiB rotary cache) alone are 437.9 GiB, and KV for 40,960 tokens
    # at 192,512 B 7.3 more; the MoE workspace for the RTX 4090's 2,048 batched tokens,
    # 2,048 × 8 × 8,192 × 2 B = 0.25 GiB; against 0.90 of the RTX 4090's 25,386,352,640 B.
    assert f"{(470_187_269_120 + 192_512 * 40_960) / 2**30:.1f}" == "445.2"
    assert f"{25_386_352_640 * 0.9 / 2**30:.1f}" == "21.3"
    assert (
        "safetensors: nothing fits; closest is 1 × rtx4090-24g, needing 447.2 GiB of 21.3 a card"
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


def test_the_fp8_what_if_of_a_bf16_checkpoint_is_marked_and_its_flag_passed(run):
    code, out, _ = run(
        "Qwen/Qwen3-235B-A22B", "--vllm-version", "0.33", "--fleet", FLEET, "--rank", "cards"
    )
    assert code == 0
    # Linear layers in one byte, the embedding, head, norms and routers in two, over 2 cards:
    # 118,254,718,720 B (tests/plan/test_vllm_plan.py); KV of 2 heads a card for 40,960 tokens:
    # 3,942,645,760 B; the rest 3,054,033,797 B and the MoE workspace, 1 GiB (8,192 tokens ×
    # 8 × 8,192 × 2 B). 126,325,140,101 B = 117.6 GiB of 135,250,889,933 (8.3 left). vLLM 0.33
    # spells online fp8 fp8_per_tensor.
    assert 125_251_398_277 + 2**30 == 126_325_140_101
    assert (
        "Best: 2 × h200-141g (tp2+ep), fp8 (what-if: --quantization fp8_per_tensor), 117.6 GiB a "
        "card (8.3 free)" in out
    )
    assert (
        "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 2 --enable-expert-parallel "
        "--quantization fp8_per_tensor --max-model-len 40960 --gpu-memory-utilization 0.90"
    ) in out.splitlines()


def test_commands_prints_only_the_command_lines(run):
    code, out, _ = run(
        "meta-llama/Llama-3.1-8B-Instruct",
        "--vllm-version",
        "0.33",
        "--fleet",
        FLEET,
        "--context",
        "8k",
        "--commands",
    )
    assert code == 0
    # The launch, then (commented) the benchmark that checks its serving figure (issue 36).
    launch, measure = out.splitlines()
    assert launch == (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 "
        "--max-model-len 8192 --gpu-memory-utilization 0.90"
    )
    assert measure.startswith("# measure it: vllm bench serve ")


def two_nodes(tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        '[[pool]]\nname = "h100"\ncount = 2\ngpu = "h100-80g"\ngpus = 8\nfabric = "ib0"\n'
    )
    return str(fleet)


def test_ray_form_of_a_two_node_launch(run, tmp_path):
    code, out, _ = run(
        "deepseek-ai/DeepSeek-V3", "--vllm-version", "0.33",
        "--fleet", two_nodes(tmp_path), "--context", "8192",
        "--precision", "stored", "--commands", "--ray", "--pp", "2",
    )  # fmt: skip
    assert code == 0
    assert out.splitlines()[-1].startswith("# measure it: vllm bench serve ")
    assert out.splitlines()[:-1] == [
        "# head on h100-1",
        "ray start --head --port=6379",
        "# worker on h100-2",
        "ray start --address=h100-1:6379",
        "# head on h100-1",
        "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 "
        "--enable-expert-parallel --max-model-len 8192 --gpu-memory-utilization 0.90 "
        "--trust-remote-code --distributed-executor-backend ray",
    ]


def test_option_picks_another_way_and_a_missing_one_is_a_usage_error(run):
    code, out, _ = run(
        "Qwen/Qwen3-235B-A22B", "--vllm-version", "0.33", "--fleet", FLEET, "--precision",
        "stored", "--option", "2", "--commands",
    )  # fmt: skip
    assert code == 0
    # The second best on the example fleet for the chat workload: on the same eight H200s as the
    # first, one-wide attention eight times over, the experts sharded over all eight.
    assert out.startswith(
        "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 1 --data-parallel-size 8 "
        "--enable-expert-parallel "
    )
    # (At vLLM 0.33's 0.90 share, the release this was worked against: seven options.)
    code, _, err = run("Qwen/Qwen3-235B-A22B", "--vllm-version", "0.33", "--fleet", FLEET,
                       "--precision", "stored", "--option", "8")  # fmt: skip
    assert code == 2
    assert err == "llmfit: --option 8: there are only 7 options.\n"


def test_explain_shows_the_card_part_by_part(run):
    code, out, _ = run(
        "meta-llama/Llama-3.1-8B-Instruct", "--vllm-version", "0.33",
        "--fleet", FLEET, "--context", "8k", "--explain",
        "--precision", "stored", "--rank", "cards",
    )  # fmt: skip
    assert code == 0
    # Each part is one line, its words wrapped to the terminal: read them unwrapped.
    lines = [line for line in out.splitlines() if not line.startswith("        ")]
    flat = " ".join(out.split())
    # 16,094,076,928 B of weights (the checkpoint and a 32 MiB rotary cache) + 1,073,741,824 of
    # KV + vLLM 0.33's profile run of 8,192 tokens and 1,024 sequences on an H200, its
    # buffers, non-torch memory and CUDA graphs = 17.5 GiB.
    assert lines[0] == "Option 1: 1 × h200-141g, bf16, 17.5 GiB a card (108.4 free)"
    assert (
        "of it: kept whole on every rank 0.5 MiB, embedding 0.98 GiB, output head 0.98 GiB, "
        "rotary cache 32.0 MiB KV cache" in flat
    )
    # 8,192 tokens × 131,072 B = 1 GiB of KV: 512 blocks of 16 tokens × 32 layers × 64 KiB.
    kv = next(line for line in lines if line.split()[:2] == ["KV", "cache"])
    assert kv.split()[:4] == ["KV", "cache", "1.0", "GiB"]
    assert (
        "one sequence of 8,192 tokens: 512 blocks of 16 tokens (1 full group × 512) × "
        "2,097,152 B a block" in flat
    )
    # The rest in the parts every engine names (issue 35): the profile run's activations,
    # the CUDA graphs within the budget, and the runtime beside them.
    names = [line.split()[0] for line in lines if line.startswith("    ") and "GiB" in line]
    assert names == ["weights", "KV", "activations", "graphs", "runtime", "free", "need"]
    act = next(line for line in lines if line.split()[:1] == ["activations"])
    assert act.split()[:3] == ["activations", "0.8", "GiB"]
    assert act.endswith("a profile run of 8,192 tokens, 1,024 sequences")
    assert (
        "inputs: 32 layers · 32 attention heads · 8 KV heads × 128 · "
        "KV 131,072 B a token for the whole model" in flat
    )


def test_why_not_lists_the_refusals_with_their_reasons(run, tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        '[[node]]\nname = "a"\ngpu = "h100-80g"\ngpus = 8\n'
        '[[node]]\nname = "b"\ngpu = "h100-80g"\ngpus = 8\n'
        '[[node]]\nname = "m"\n  [[node.devices]]\n  gpu = "a100-80g-mig-3g.40gb"\n  gpus = 2\n'
        '[[node]]\nname = "cpu"\nram_gb = 512\n'
    )
    code, out, _ = run(
        "deepseek-ai/DeepSeek-V3", "--fleet", str(fleet), "--why-not", "--precision", "stored"
    )
    assert code == 1
    lines = out.splitlines()
    # Grouped by class of card, each reason once, the nearest misses first.
    assert lines[0] == "Ways refused, by class of card (nearest misses first):"
    h100 = lines.index("  h100-80g:")
    assert lines[h100 + 1].startswith("    8 × h100-80g (tp8+ep): needs ")
    assert (
        "    2 nodes × 8 h100-80g: these nodes have no fabric, so a replica cannot span them"
        in lines
    )
    assert (
        "    several a100-80g-mig-3g.40gb: a MIG instance cannot be joined with others, on its "
        "node or across nodes" in lines
    )
    assert (
        "    CPU nodes: safetensors weights are planned for vLLM on GPUs; a CPU node runs GGUF "
        "files with llama.cpp" in lines
    )


def test_why_not_names_a_width_that_does_not_divide_the_heads(run, tmp_path):
    cfg = json.loads(
        (HUB / "models--Qwen--Qwen3-8B" / "snapshots").glob("*/config.json").__next__().read_text()
    )
    cfg["num_attention_heads"] = 28
    cfg["num_key_value_heads"] = 4
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 600 * 2**30}, "weight_map": {}})
    )
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[node]]\ngpu = "h100-80g"\ngpus = 8\n')
    code, out, _ = run(
        str(tmp_path),
        "--vllm-version",
        "0.33",
        "--fleet",
        str(fleet),
        "--why-not",
        "--precision",
        "stored",
    )
    assert code == 1
    assert (
        "    8 × h100-80g (tp8): Total number of attention heads (28) must be "
        "divisible by tensor parallel size (8)."
    ) in out.splitlines()


def test_nothing_fits_at_the_target_says_the_context_that_would(run, tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[node]]\ngpu = "rtx3090-24g"\ngpus = 1\n')
    code, out, _ = run(
        "meta-llama/Llama-3.1-8B-Instruct", "--vllm-version", "0.33",
        "--fleet", str(fleet), "--precision", "stored",
        "--context", "128k",
    )  # fmt: skip
    assert code == 1
    # 0.90 × 25,327,697,920 − 16,094,076,928 of weights − 588,680,069 of the rest − the block
    # vLLM keeps back, at 131,072 B a token in whole blocks of 16: 46,608 tokens (worked out in
    # tests/plan/test_vllm_plan.py).
    assert "  at 46,608 tokens, 1 × rtx3090-24g would hold it (--context 46608)" in out.splitlines()
