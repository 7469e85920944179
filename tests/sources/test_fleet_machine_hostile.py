"""This machine read through an nvidia-smi whose output has the wrong shape (issue 12): a note and
RAM only, never a traceback; and a host name that is not a node name."""

from __future__ import annotations

import pytest

from llmfit.sources import machine
from llmfit.sources.fleet import resolve_fleet
from tests.sources.test_fleet_resolve import A100_CSV, box, fake_nvidia_smi  # noqa: F401


@pytest.mark.parametrize(
    ("csv", "why"),
    [
        ("index, name, memory.total [MiB]\n0, NVIDIA H100, 0 MiB\n",
         "nvidia-smi:2: memory.total '0 MiB' is not a card's memory (more than 0, at most "
         "65,536 GB)."),
        ("index, name, memory.total [MiB]\n0, NVIDIA H100, 99999999999999 MiB\n",
         "nvidia-smi:2: memory.total '99999999999999 MiB' is not a card's memory (more than 0, "
         "at most 65,536 GB)."),
        ("index, name, memory.total [MiB]\n" + "0, NVIDIA H100, 81559 MiB\n" * 1025,
         "nvidia-smi: has 1,025 cards; a node holds at most 1,024."),
        ("<html>not what was asked</html>\n",
         "nvidia-smi:1: has no header row, so its columns are unknown; pass --query-gpu with "
         "the fields it was made with (like name,memory.total)."),
    ],
)  # fmt: skip
def test_output_of_the_wrong_shape_is_a_note(box, tmp_path, csv, why):  # noqa: F811
    fake_nvidia_smi(tmp_path / "bin", csv, "")
    fleet = resolve_fleet(None)
    assert fleet.nodes[0].is_cpu
    assert fleet.notes == (f"nvidia-smi could not be read ({why}), so only this machine's RAM "
                           "is used.",)  # fmt: skip


def test_output_that_is_not_utf8_is_read_as_far_as_it_goes(box, tmp_path):  # noqa: F811
    bin_dir = tmp_path / "bin"
    fake_nvidia_smi(bin_dir, A100_CSV, "")
    (bin_dir / "gpus.csv").write_bytes(A100_CSV.replace("NVIDIA", "NV\xffIDIA").encode("latin-1"))
    fleet = resolve_fleet(None)
    # The stray byte becomes U+FFFD in the name, and drops out of the class.
    assert [k.gpu_class for k in fleet.nodes[0].kinds] == ["nvidiaa100-80g"]


@pytest.mark.parametrize(
    ("name", "node"),
    [("gpu-box.example.com", "gpu-box.example.com"), ("box\x1b[31m", "box--31m"),
     ("a b;rm", "a-b-rm"), ("", "this-machine"), ("\n", "this-machine")],
)  # fmt: skip
def test_a_host_name_is_made_a_node_name(monkeypatch, name, node):
    monkeypatch.setattr(machine.socket, "gethostname", lambda: name)
    assert machine.hostname() == node
