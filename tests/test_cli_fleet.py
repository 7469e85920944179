"""`llmfit fleet`, `llmfit fleet import …`, and --fleet resolution, as a user runs them."""

from __future__ import annotations

import json

import pytest

from llmfit.sources import machine
from tests.conftest import EXAMPLE_FLEET, ROOT
from tests.fleet_data import FLEET_FIXTURES, fixture_text

FOUR = ROOT / "examples" / "fleet-4-nodes.toml"


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory with no fleet.toml, no $LLMFIT_FLEET, and no nvidia-smi on PATH."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLMFIT_FLEET", raising=False)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 67108864 kB\nMemAvailable: 33554432 kB\n")  # 64 GB, 32 free
    monkeypatch.setattr(machine, "MEMINFO", meminfo)
    monkeypatch.setattr(machine, "hostname", lambda: "laptop")
    return tmp_path


def test_fleet_summary_of_a_file(run):
    code, out, err = run("fleet", str(EXAMPLE_FLEET))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == (
        f"fleet: {EXAMPLE_FLEET} · 11 nodes (10 with GPUs, 1 CPU only) · 78 GPUs: 17 used, "
        "60 free, 1 unhealthy"
    )
    assert "h100-80g                   79.2      4    32    16    16          0  " in out
    assert "ib1          h100-80g       4            8                 0" in lines
    assert lines[-2:] == [
        "CPU only: 1 node, 768 GB RAM (600 free)",
        "host RAM, all nodes: 18,688 GB (18,520 free)",
    ]


def test_fleet_summary_json(run):
    code, out, _ = run("fleet", str(FOUR), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == 1 and doc["gpus"] == {
        "total": 27, "used": 3, "free": 23, "unhealthy": 1,
    }  # fmt: skip
    assert sorted(doc) == [
        "classes", "cpu_nodes", "cpu_ram", "fabrics", "gpu_nodes", "gpus", "nodes", "notes",
        "ram", "schema", "source",
    ]  # fmt: skip


def test_fleet_summary_inline(run):
    code, out, _ = run("fleet", "4x8xh100-80g@ib0,cpu:512g")
    assert code == 0
    assert out.splitlines()[0] == (
        "fleet: inline: 4x8xh100-80g@ib0,cpu:512g · 5 nodes (4 with GPUs, 1 CPU only) · "
        "32 GPUs: 0 used, 32 free, 0 unhealthy"
    )


def test_fleet_summary_default_is_this_machine(run, elsewhere):
    code, out, _ = run("fleet")
    assert code == 0
    assert out.splitlines() == [
        "fleet: this machine · 1 node (0 with GPUs, 1 CPU only) · no GPUs",
        "",
        "CPU only: 1 node, 64 GB RAM (32 free)",
        "host RAM, all nodes: 64 GB (32 free)",
    ]


def test_fleet_summary_default_is_the_local_fleet_toml(run, elsewhere):
    (elsewhere / "fleet.toml").write_text(FOUR.read_text())
    code, out, _ = run("fleet", "--json")
    assert code == 0 and json.loads(out)["source"] == "fleet.toml"


def test_a_bad_inline_fleet_is_a_usage_error(run):
    code, out, err = run("fleet", "8xfoo")
    assert (code, out) == (2, "")
    assert err == (
        "llmfit: --fleet '8xfoo': '8xfoo' names 'foo', whose label does not say its memory; "
        "write [NODESx]GPUSxCLASS[@FABRIC] (8xh100-80g, 4x8xh100-80g@ib0) or [NODESx]cpu:RAM "
        "(cpu:512g), joined with commas.\n"
    )


def test_plan_with_an_inline_fleet(run):
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", "8xh100-80g", "--context", "4096")
    assert code == 0
    assert "fleet: inline: 8xh100-80g · 1 node · 8 GPUs" in out.splitlines()
    assert "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1" in out


def test_plan_without_fleet_uses_the_local_fleet_toml(run, elsewhere):
    (elsewhere / "fleet.toml").write_text('[[node]]\nname = "box"\ngpu = "h100-80g"\ngpus = 2\n')
    code, out, _ = run("Qwen/Qwen3-8B", "--context", "4096", "--json")
    assert code == 0
    assert json.loads(out)["fleet"] == {"source": "fleet.toml", "nodes": 1, "gpus": 2}


def test_plan_without_any_fleet_plans_on_this_machine(run, elsewhere):
    """No GPU here: nothing fits (exit 1), and the plan says it planned on this machine."""
    code, out, _ = run("Qwen/Qwen3-8B", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["fleet"] == {"source": "this machine", "nodes": 1, "gpus": 0}


def test_import_nvidia_smi_to_a_file(run, tmp_path):
    csv = tmp_path / "gpus.csv"
    csv.write_text(fixture_text("nvidia-smi-csv-l40s-2gpu.txt"))
    out_file = tmp_path / "fleet.toml"
    code, out, err = run(
        "fleet", "import", "nvidia-smi", str(csv), "--name", "sr665", "--ram-gb", "768",
        "-o", str(out_file),
    )  # fmt: skip
    assert (code, out) == (0, "")
    assert err == f"wrote 1 node to {out_file}\n"
    assert out_file.read_text() == (
        f"# written by llmfit fleet import nvidia-smi from {csv}\n\n"
        '[[node]]\nname = "sr665"\nram_gb = 768\ngpu = "l40s-48g"\ngpus = 2\n'
    )
    code, out, _ = run("fleet", str(out_file))
    assert code == 0 and "l40s-48g" in out


def test_import_nvidia_smi_without_header_needs_its_fields(run, tmp_path):
    csv = tmp_path / "gpus.csv"
    csv.write_text("NVIDIA RTX A5000, 24564 MiB, 570.211.01, 0x223110DE\n")
    code, _, err = run("fleet", "import", "nvidia-smi", str(csv))
    assert code == 3
    assert err.startswith(f"llmfit: {csv}:1: has no header row, so its columns are unknown")
    code, out, _ = run(
        "fleet", "import", "nvidia-smi", str(csv),
        "--query-gpu", "name,memory.total,driver_version,pci.device_id",
    )  # fmt: skip
    assert code == 0
    assert out.endswith(
        'name = "gpus"\ngpu = "rtxa5000-24g"\ngpu_memory_gb = 23.98828125\ngpus = 1\n'
    )


def test_import_kubectl_to_stdout(run):
    path = FLEET_FIXTURES / "kubectl-get-nodes-built.json"
    code, out, _ = run(
        "fleet", "import", "kubectl", str(path), "--fabric-label", "example.com/fabric"
    )
    assert code == 0
    assert out.splitlines()[:2] == [
        f"# written by llmfit fleet import kubectl from {path}, fabric from label "
        "example.com/fabric",
        "# Kubernetes does not say which cards are busy: every healthy card is written free.",
    ]
    assert out.count("[[node]]") == 5


def test_import_kubectl_bad_json_exits_3(run, tmp_path):
    bad = tmp_path / "nodes.json"
    bad.write_text("not json")
    code, _, err = run("fleet", "import", "kubectl", str(bad))
    assert code == 3
    assert err == (
        f"llmfit: {bad} is not JSON (line 1: Expecting value); make it with kubectl get nodes "
        "-o json.\n"
    )
