"""A GGUF-only repository from the cache, as a user runs it: every quant file's options."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLE_FLEET, HUB, ROOT, modules_a_json_plan_imports

FLEET = str(EXAMPLE_FLEET)
REPO = "llmfit-fixtures/Tiny-Llama-GGUF"
SNAP = HUB / "models--llmfit-fixtures--Tiny-Llama-GGUF" / "snapshots"


def test_each_quant_file_has_its_options(run):
    code, out, err = run(
        REPO,
        "--fleet",
        FLEET,
        "--context",
        "4096",
        "--json",
        "--precision",
        "stored",
        "--rank",
        "cards",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["model"]["architecture"] == "llama" and doc["model"]["layers"] == 4
    assert [(a["name"], a["quant"], a["shards"]) for a in doc["artifacts"]] == [
        ("Q8_0/Tiny-Llama-Q8_0.gguf", "Q8_0", 2),
        ("Tiny-Llama-Q4_K_M.gguf", "Q4_K_M", 1),
        ("Tiny-Llama-Q6_K.gguf", "Q6_K", 1),
    ]
    by_file: dict[str, list[str]] = {}
    for o in doc["options"]:
        assert o["engine"] == "llama.cpp"
        by_file.setdefault(o["artifact"], []).append(o["label"])
    # One card of each class, and the CPU, for every file; and, since it fits one card, a server
    # a card filling each node (the l40s box has three healthy cards, the h100 nodes four free
    # of eight: a node's healthy cards count, busy or not).
    labels = ["1 × h200-141g", "1 × a100-80g", "1 × h100-80g", "1 × l40s-48g",
              "1 × a100-80g-mig-3g.40gb", "CPU", "8 × h200-141g (dp8)",
              "6 × a100-80g (dp6)", "8 × h100-80g (dp8)", "3 × l40s-48g (dp3)"]  # fmt: skip
    assert {k: sorted(v) for k, v in by_file.items()} == {
        a["name"]: sorted(labels) for a in doc["artifacts"]
    }
    # On a card, the eight-bit file; on a CPU, where every bit is read per token, Q6_K.
    assert doc["options"][0]["artifact"] == "Q8_0/Tiny-Llama-Q8_0.gguf"
    cpu = [o["artifact"] for o in doc["options"] if o["cpu"]]
    assert cpu[0] == "Tiny-Llama-Q6_K.gguf"
    # By its Hub tag, which works on whichever node runs it (llama.cpp fetches both parts).
    assert doc["options"][0]["commands"][0]["argv"] == [
        "llama-server", "-hf", "llmfit-fixtures/Tiny-Llama-GGUF:Q8_0", "--ctx-size", "4096",
        "--n-gpu-layers", "5", "--flash-attn", "on", "--host", "0.0.0.0", "--port", "8080",
    ]  # fmt: skip


def test_local_paths_name_this_machines_file(run):
    code, out, err = run(REPO, "--fleet", FLEET, "--context", "4096", "--json", "--local-paths")
    assert code == 0, err
    (snap,) = SNAP.iterdir()
    first = snap / "Q8_0" / "Tiny-Llama-Q8_0-00001-of-00002.gguf"
    assert json.loads(out)["options"][0]["commands"][0]["argv"][:3] == [
        "llama-server", "-m", str(first),
    ]  # fmt: skip


def test_text_output_prints_the_best_command(run):
    code, out, _ = run(REPO, "--fleet", FLEET, "--context", "4096", "--rank", "cards")
    assert code == 0
    assert "Best: 1 × h200-141g, Q8_0, 0.5 GiB a card (125.5 free)" in out
    # The example fleet's H200 nodes have 8 cards: llama-server spreads its layers over every
    # card it sees, so a one-card server is shown only its own.
    assert (
        "CUDA_VISIBLE_DEVICES=0 llama-server -hf llmfit-fixtures/Tiny-Llama-GGUF:Q8_0 "
        "--ctx-size 4096 --n-gpu-layers 5 --flash-attn on --host 0.0.0.0 --port 8080"
        in out.splitlines()
    )


def test_a_corrupt_gguf_is_one_sentence_and_exit_3(run, tmp_path):
    bad = tmp_path / "model-Q4_K_M.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 20)
    code, out, err = run(str(tmp_path), "--fleet", FLEET)
    assert code == 3
    assert out == ""
    assert err == (
        f"llmfit: {bad} is truncated or corrupt: at byte 8 it claims "
        "18,446,744,073,709,551,615 tensors, at least 590,295,810,358,705,651,680 bytes, but the "
        "file ends 12 bytes later.\n"
    )


def test_a_safetensors_plan_does_not_import_gguf_or_numpy():
    import subprocess
    import sys

    code = (
        "import os, sys; os.environ['HF_HUB_CACHE'] = sys.argv[1]; "
        "from llmfit.advise import advise; from llmfit.plan.planner import PlanSettings; "
        "from llmfit.sources.fleet import read_fleet; from pathlib import Path; "
        "advise('Qwen/Qwen3-8B', read_fleet(Path(sys.argv[2])), PlanSettings()); "
        "print(sorted({'gguf', 'numpy'} & set(sys.modules)))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(HUB), FLEET],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert r.stdout.strip() == "[]"


def test_json_says_the_llama_cpp_placement(run):
    code, out, _ = run(REPO, "--fleet", FLEET, "--context", "4096", "--json")
    assert code == 0
    best = json.loads(out)["options"][0]
    assert (best["gpu_layers"], best["cpu_moe_layers"], best["host_bytes"]) == (5, 0, 0)


def test_a_json_plan_does_not_import_rich():
    """`--json` writes no table: rich (a fifth of a plan's imports) is left unloaded, where the
    streams' setup (render/streams.py) once pulled it in before any answer."""
    loaded = modules_a_json_plan_imports("Qwen/Qwen3-8B", FLEET)
    assert sorted(m for m in loaded if m.split(".")[0] == "rich") == []


def test_a_context_past_the_trained_one_is_what_the_command_holds(run):
    """Tiny-Llama's GGUF was trained for 8,192 tokens (its llama.context_length). Asked for 64k,
    llama-server runs --ctx-size 65536, so the option holds 65,536 (it said "max context 8,192"
    beside "1 sequence of 65,536"), and the note names no vLLM switch: no vLLM command is
    printed for a GGUF-only repository."""
    code, out, err = run(REPO, "--fleet", FLEET, "--context", "64k", "--json")
    assert code == 0, err
    doc = json.loads(out)
    best = doc["options"][0]
    assert best["commands"][0]["argv"][3:5] == ["--ctx-size", "65536"]
    assert best["max_context"] == 65_536
    assert doc["notes"] == [
        "a context of 65,536 is past the 8,192 the model was trained for; answers past it may "
        "degrade"
    ]
