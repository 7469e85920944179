"""Which fleet a run plans on: --fleet (file or inline), else ./fleet.toml, else $LLMFIT_FLEET,
else this machine, read through a fake `nvidia-smi` put first on PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmfit.errors import FleetFileError
from llmfit.plan.fleet import GIB, PoolKind
from llmfit.sources import machine
from llmfit.sources.fleet import resolve_fleet
from tests.fleet_data import fixture_text

# The CSV of a machine like nvidia-smi-L-mig-a100-80gb-4gpu.txt, in the form llmfit asks for:
# the -L fixture's names, the 81,920 MiB nvidia-smi reports for an A100-SXM4-80GB
# (gpu-memory-totals.md); the memory.used values are made up, with GPU 1 busy.
A100_CSV = (
    "index, name, memory.total [MiB], memory.used [MiB]\n"
    "0, NVIDIA A100-SXM4-80GB, 81920 MiB, 0 MiB\n"
    "1, NVIDIA A100-SXM4-80GB, 81920 MiB, 40000 MiB\n"
    "2, NVIDIA A100-SXM4-80GB, 81920 MiB, 4 MiB\n"
    "3, NVIDIA A100-SXM4-80GB, 81920 MiB, 4 MiB\n"
)
MEMINFO = "MemTotal:       1056768000 kB\nMemFree:         1000 kB\nMemAvailable:   1000000000 kB\n"


def fake_nvidia_smi(bin_dir: Path, csv: str, listing: str, exit_code: int = 0) -> Path:
    """An `nvidia-smi` that prints `csv` for a query and `listing` for -L, logging its args."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gpus.csv").write_text(csv)
    (bin_dir / "list.txt").write_text(listing)
    log = bin_dir / "calls.log"
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{log}"\n'
        f'if [ "$1" = "-L" ]; then /bin/cat "{bin_dir / "list.txt"}"; exit {exit_code}; fi\n'
        f'/bin/cat "{bin_dir / "gpus.csv"}" >&{2 if exit_code else 1}\n'
        f"exit {exit_code}\n"
    )
    script.chmod(0o755)
    return log


@pytest.fixture
def box(tmp_path, monkeypatch):
    """An empty working directory, no $LLMFIT_FLEET, this machine's RAM and name pinned, and a
    fake nvidia-smi as the only one on PATH."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("LLMFIT_FLEET", raising=False)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(MEMINFO)
    monkeypatch.setattr(machine, "MEMINFO", meminfo)
    monkeypatch.setattr(machine, "hostname", lambda: "gpu-box")
    bin_dir = tmp_path / "bin"
    log = fake_nvidia_smi(bin_dir, A100_CSV, fixture_text("nvidia-smi-L-mig-a100-80gb-4gpu.txt"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return cwd, log


def test_order_fleet_toml_then_env_then_this_machine(box, monkeypatch, tmp_path):
    cwd, log = box
    (cwd / "fleet.toml").write_text("[[node]]\nname = 'local'\nram_gb = 1\n")
    other = tmp_path / "other.toml"
    other.write_text("[[node]]\nname = 'from-env'\nram_gb = 2\n")
    monkeypatch.setenv("LLMFIT_FLEET", str(other))

    fleet = resolve_fleet(None)
    assert (fleet.source, fleet.nodes[0].id) == ("fleet.toml", "local")

    (cwd / "fleet.toml").unlink()
    fleet = resolve_fleet(None)
    assert (fleet.source, fleet.nodes[0].id) == (f"$LLMFIT_FLEET: {other}", "from-env")

    monkeypatch.setenv("LLMFIT_FLEET", "2x8xh100-80g@ib0")
    fleet = resolve_fleet(None)
    assert fleet.source == "$LLMFIT_FLEET: 2x8xh100-80g@ib0"
    assert fleet.node_ids() == ("h100-80g-1", "h100-80g-2")

    assert not log.exists()  # nvidia-smi is not run while a fleet is given
    monkeypatch.delenv("LLMFIT_FLEET")
    fleet = resolve_fleet(None)
    assert fleet.source == "this machine"
    (node,) = fleet.nodes
    assert node.id == "gpu-box"
    assert (node.ram_bytes, node.free_ram_bytes) == (1_056_768_000 * 1024, 1_000_000_000 * 1024)
    # GPU 0 is four 1g.20gb MIG instances; GPUs 1-3 are whole, and GPU 1 is busy.
    assert node.kinds == (
        PoolKind("a100-80g-mig-1g.20gb", int(19.50 * GIB), 4, 4),
        PoolKind("a100-80g", 85_100_068_864, 3, 2),
    )
    assert fleet.notes == ()
    assert log.read_text().splitlines() == [
        "--query-gpu=index,name,memory.total,memory.used --format=csv",
        "-L",
    ]


def test_an_explicit_fleet_wins_over_every_default(box):
    cwd, _ = box
    (cwd / "fleet.toml").write_text("[[node]]\nname = 'local'\n")
    assert resolve_fleet("cpu:64g").source == "inline: cpu:64g"


def test_this_machine_with_a_real_csv(box, tmp_path):
    """The L40S fixture as nvidia-smi's answer: any header is read, whatever its columns."""
    fake_nvidia_smi(
        tmp_path / "bin", fixture_text("nvidia-smi-csv-l40s-2gpu.txt"), "GPU 0: NVIDIA L40S\n"
    )
    (node,) = resolve_fleet(None).nodes
    assert node.kinds == (PoolKind("l40s-48g", 47_803_596_800, 2, 2),)


def test_this_machine_without_nvidia_smi_is_its_ram(box, monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    fleet = resolve_fleet(None)
    (node,) = fleet.nodes
    assert node.is_cpu and node.ram_bytes == 1_056_768_000 * 1024
    assert fleet.notes == ()


def test_a_failing_nvidia_smi_is_a_note_not_a_crash(box, tmp_path):
    message = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    fake_nvidia_smi(tmp_path / "bin", message + "\n", "", exit_code=9)
    fleet = resolve_fleet(None)
    assert fleet.nodes[0].is_cpu
    assert fleet.notes == (
        f"nvidia-smi could not be read ({message}), so only this machine's RAM is used.",
    )


def test_unreadable_nvidia_smi_output_is_a_note(box, tmp_path):
    gb10 = "memory.free [MiB], memory.total [MiB], memory.used [MiB]\n[N/A], [N/A], [N/A]\n"
    fake_nvidia_smi(tmp_path / "bin", gb10, "")
    fleet = resolve_fleet(None)
    assert fleet.nodes[0].is_cpu
    assert fleet.notes[0].startswith(
        "nvidia-smi could not be read (nvidia-smi:2: memory.total is [N/A] "
    )


def test_a_missing_file_is_not_read_as_an_inline_fleet(box, monkeypatch):
    with pytest.raises(FleetFileError) as e:
        resolve_fleet("flet.toml")
    assert e.value.message == "flet.toml: no such fleet file."
    monkeypatch.setenv("LLMFIT_FLEET", "/nowhere/fleet.toml")
    with pytest.raises(FleetFileError) as e:
        resolve_fleet(None)
    assert e.value.message == "/nowhere/fleet.toml: no such fleet file."


def test_an_existing_file_is_a_file_whatever_its_name(box):
    cwd, _ = box
    (cwd / "8xh100-80g").write_text("[[node]]\nname = 'a-file'\n")
    assert resolve_fleet("8xh100-80g").nodes[0].id == "a-file"
    (cwd / "fleets").mkdir()
    with pytest.raises(FleetFileError) as e:
        resolve_fleet("fleets")
    assert e.value.message == "fleets is a directory, not a fleet file."


def test_an_error_in_the_local_fleet_toml_names_it(box):
    cwd, _ = box
    (cwd / "fleet.toml").write_text("[[node]]\ngpus = 2\n")
    with pytest.raises(FleetFileError) as e:
        resolve_fleet(None)
    assert e.value.message == (
        "fleet.toml:2: node[0].gpus is given without a gpu class to say what they are."
    )


def test_a_failing_list_keeps_the_whole_cards_and_says_so(box, tmp_path):
    bin_dir = tmp_path / "bin"
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-L" ]; then\n'
        '  echo "Failed to initialize NVML: Unknown Error" >&2; exit 255\n'
        "fi\n"
        f'/bin/cat "{bin_dir / "gpus.csv"}"\n'
    )
    fleet = resolve_fleet(None)
    assert fleet.nodes[0].kinds == (PoolKind("a100-80g", 85_100_068_864, 4, 3),)
    assert fleet.notes == (
        "nvidia-smi -L failed (Failed to initialize NVML: Unknown Error), so MIG instances are "
        "not seen.",
    )
