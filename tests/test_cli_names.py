"""Names people type for their cards (issue 16): aliases, typos, unknown and AMD classes, and
inline node RAM reaching llama.cpp's partial offload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plan.test_llamacpp import qwen3moe

UNKNOWN = "it is planned by its memory alone, without speed figures"


def classes(run, fleet: str) -> list[tuple[str, int, int]]:
    code, out, err = run("fleet", fleet, "--json")
    assert code == 0, err
    doc = json.loads(out)
    return [(c["gpu_class"], c["nodes"], c["gpus"]) for c in doc["classes"]]


@pytest.mark.parametrize(
    ("inline", "want"),
    [
        ("8xh100", [("h100-80g", 1, 8)]),
        ("8xh100-80gb", [("h100-80g", 1, 8)]),
        ("8xH100-80GB", [("h100-80g", 1, 8)]),
        ("2x8xh200", [("h200-141g", 2, 16)]),
        ("4xa6000-48g", [("rtxa6000-48g", 1, 4)]),
        ("1xl40", [("l40-48g", 1, 1)]),
    ],
)
def test_inline_names_people_type_resolve_to_the_card_table(run, inline, want):
    assert classes(run, inline) == want


def test_a_product_name_as_nvidia_smi_prints_it_is_a_class_in_a_fleet_file(run, tmp_path):
    f = tmp_path / "f.toml"
    f.write_text('[[node]]\ngpu = "NVIDIA H100 80GB HBM3"\ngpus = 8\n')
    assert classes(run, str(f)) == [("h100-80g", 1, 8)]


def test_an_inline_typo_is_an_error_with_the_fleet_it_meant(run):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "8xh10-80g")
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: --fleet '8xh10-80g': 'h10-80g' is not a GPU class llmfit knows; did you mean "
        "8xh100-80g?\n"
    )


def test_a_typo_in_a_fleet_file_names_the_line_and_the_class_meant(run, tmp_path):
    f = tmp_path / "f.toml"
    f.write_text('[[pool]]\nname = "gpu"\ncount = 2\ngpu = "h10-80g"\ngpus = 8\n')
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", str(f))
    assert (code, out) == (3, "")
    assert err == (
        f"llmfit: {f}:4: pool[0].gpu is 'h10-80g', not a GPU class llmfit knows; did you mean "
        "h100-80g? (to plan a card llmfit does not know under this name, give its "
        "gpu_memory_gb).\n"
    )


def test_a_stated_memory_keeps_a_name_the_table_lacks_with_a_warning(run, tmp_path):
    f = tmp_path / "f.toml"
    f.write_text('[[node]]\ngpu = "h10-80g"\ngpu_memory_gb = 80\ngpus = 8\n')
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", str(f), "--json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert (
        f"h10-80g is not a GPU class llmfit knows: {UNKNOWN} (known classes near it: h100-80g, "
        "h800-80g, h100-94g)"
    ) in notes


def test_an_unknown_class_is_planned_from_its_label_with_a_warning(run):
    # A Rubin card, newer than the table (the B300 was this test's card until the table had it).
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "2xr200-288g", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (
        f"r200-288g is not a GPU class llmfit knows: {UNKNOWN} (known classes near it: "
        "b300-288g, gb300-288g, b200-180g)"
    ) in doc["notes"]
    assert doc["options"][0]["gpu_class"] == "r200-288g"


def test_amd_cards_are_said_to_be_planned_as_cuda_sizes_them(run):
    code, out, err = run("Qwen/Qwen3-8B", "--fleet", "8xmi300x", "--json")
    assert code == 0, err
    assert (
        "mi300x-192g is an AMD card: it is planned by its memory and speed as the engines size "
        "CUDA cards, with the same flags, which vLLM, SGLang and llama.cpp take on ROCm too; the "
        "container images of --format docker|k8s are CUDA's"
    ) in json.loads(out)["notes"]


@pytest.fixture
def moe_dir(tmp_path) -> Path:
    qwen3moe(tmp_path)
    return tmp_path


def test_inline_node_ram_reaches_llamacpps_experts_in_ram(run, moe_dir):
    # tests/plan/test_llamacpp.py works the numbers: on a 16 GiB card at 32,768 tokens the
    # experts of 19 layers stay in RAM, 19 × 339,738,624 B = 6.0 GiB of them, inside 64 GiB.
    code, out, err = run(str(moe_dir), "--fleet", "1xx-16g+64g", "--context", "32768",
                         "--commands")  # fmt: skip
    assert code == 0, err
    assert out == (
        f"llama-server -m {moe_dir}/Qwen3-30B-A3B-Q4_K_M.gguf --ctx-size 32768 --n-gpu-layers 49 "
        "--n-cpu-moe 19 --flash-attn on --host 0.0.0.0 --port 8080\n"
    )


def test_without_node_ram_the_miss_says_how_to_give_it(run, moe_dir):
    code, out, err = run(str(moe_dir), "--fleet", "1xx-16g", "--context", "32768", "--json")
    assert code == 1
    (u,) = json.loads(out)["unplaced"]
    assert u["reason"].endswith(
        "; llama.cpp would keep the rest in the node's RAM, but the fleet gives it none "
        "(ram_gb in a fleet file; inline, +RAM as in 1xh100-80g+512g)"
    )
