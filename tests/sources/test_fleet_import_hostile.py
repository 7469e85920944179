"""Imports given files of the wrong shape (issue 12): one sentence each, never a traceback, and
never a fleet file that `llmfit fleet` then refuses: every fixture in fixtures/fleet, fed to both
importers as whatever it could be, is either refused in one sentence or written and read back."""

from __future__ import annotations

import json
import re

import pytest

from llmfit.errors import FleetFileError, LlmfitError, UsageError
from llmfit.plan.fleet import GIB, PoolNode
from llmfit.sources.fleet import parse_fleet
from llmfit.sources.fleet_import import fleet_toml, import_kubectl, import_nvidia_smi
from llmfit.sources.machine import parse_gpu_csv
from tests.fleet_data import FLEET_FIXTURES

FIXTURES = sorted(p for p in FLEET_FIXTURES.iterdir() if p.name != "README.md")
# A card of each index an -L listing may name, for the listings to have cards to split.
A100_CSV = "index, name, memory.total [MiB]\n" + "".join(
    f"{i}, NVIDIA A100-SXM4-80GB, 81920 MiB\n" for i in range(8)
)
GFD_LABEL = re.compile(r"(nvidia\.com/[\w.\-]+)\s*[=:]\s*'?([^'\s,]*)'?")


def body(path) -> str:
    """A fixture's data: after its `source:` and `note:` lines when it has them."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(lines[2:] if lines[:1] and lines[0].startswith("source:") else lines)


def node_from_labels(text: str) -> str:
    """The GFD labels a fixture quotes (describe output, YAML, key=value), as one Node."""
    labels = dict(GFD_LABEL.findall(text))
    count = labels.get("nvidia.com/gpu.count", "0")
    return json.dumps(
        {
            "kind": "Node",
            "metadata": {"name": "from-labels", "labels": labels},
            "status": {"capacity": {"nvidia.com/gpu": count, "memory": "1056768000Ki"}},
        }
    )


def round_trip(nodes: tuple[PoolNode, ...]) -> None:
    back = parse_fleet(fleet_toml(nodes, "a test"), "imported.toml")
    assert [(n.id, n.fabric, n.kinds) for n in back.nodes] == [
        (n.id, n.fabric, n.kinds) for n in nodes
    ]
    for a, b in zip(back.nodes, nodes, strict=True):
        assert abs(a.ram_bytes - b.ram_bytes) <= 0.05 * GIB


def attempts(path):
    text = body(path)
    yield lambda: import_kubectl(path.read_bytes(), path.name, "example.com/fabric")
    yield lambda: import_kubectl(node_from_labels(text), path.name)
    yield lambda: (import_nvidia_smi(text, path.name, name="n1"),)
    yield lambda: (import_nvidia_smi(A100_CSV, "a.csv", name="n1", listing=text),)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_is_refused_in_one_sentence_or_reads_back(path):
    written = 0
    for attempt in attempts(path):
        try:
            nodes = attempt()
        except LlmfitError as e:
            assert "\n" not in e.message and e.message
            continue
        round_trip(nodes)
        written += 1
    assert written >= 1  # the listing attempt at least: any text is a listing of no MIG


def test_the_fixtures_that_are_imports_import():
    """Not everything is refused: the CSVs, the listings, the built kubectl JSON and the label
    excerpts that name a product and its memory are written."""
    imported = set()
    for path in FIXTURES:
        for kind, attempt in zip(("kubectl", "labels", "csv", "listing"), attempts(path),
                                 strict=True):  # fmt: skip
            try:
                nodes = attempt()
            except LlmfitError:
                continue
            if any(n.kinds for n in nodes) and (kind != "listing" or "mig" in str(nodes)):
                imported.add((kind, path.name))
    assert {
        ("kubectl", "kubectl-get-nodes-built.json"),
        ("labels", "kubectl-node-h100-8gpu-whole-labels.txt"),
        ("labels", "kubectl-node-h100-pcie-mig-single-scaleway.txt"),
        ("csv", "nvidia-smi-csv-l40s-2gpu.txt"),
        ("csv", "nvidia-smi-csv-rtx-a5000-noheader.txt"),
        ("listing", "nvidia-smi-L-mig-a100-80gb-4gpu.txt"),
    } <= imported


def kubectl(item: object) -> str:
    return json.dumps({"kind": "List", "items": [item]})


GPU = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}
AGAIN = "make it with kubectl get nodes -o json."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (kubectl({"metadata": "x"}),
         f"n.json: item 0's metadata is a string, not an object; {AGAIN}"),
        (kubectl({"status": []}), f"n.json: item 0's status is a list, not an object; {AGAIN}"),
        (kubectl({"spec": 5}), f"n.json: item 0's spec is a number, not an object; {AGAIN}"),
        (kubectl({"metadata": {"name": 5}}),
         f"n.json: item 0's metadata.name is a number, not a string; {AGAIN}"),
        (kubectl({"metadata": {"labels": ["a"]}}),
         f"n.json: item 0's metadata.labels is a list, not an object; {AGAIN}"),
        (kubectl({"status": {"capacity": "8"}}),
         f"n.json: item 0's status.capacity is a string, not an object; {AGAIN}"),
        (kubectl({"status": {"conditions": "Ready"}}),
         f"n.json: item 0's status.conditions is a string, not a list; {AGAIN}"),
        (kubectl({"status": {"conditions": [1]}}),
         f"n.json: item 0's status.conditions holds something other than objects; {AGAIN}"),
        ('{"items": [' + "[" * 100_000 + "]" * 100_000 + "]}",
         "n.json is not JSON llmfit can read (a number too long or nesting too deep); " + AGAIN),
        (b"\xff\xfe{\x00}\x00", "n.json is not UTF-8 text (byte 0 is 0xff); save it as UTF-8."),
        # Names and labels that would reach the terminal or a command.
        (kubectl({"metadata": {"name": "a\nllmfit: forged"}}),
         "n.json: 'a\\nllmfit: forged' is not a host name llmfit can write (letters, digits, "
         "'.', '-' and '_', at most 128)."),
        (kubectl({"metadata": {"name": "a", "labels": {"fab": "ib\x1b[31m"}}}),
         "n.json: node 'a': its fabric 'ib\\x1b[31m' is not a fabric name (letters, digits, '.', "
         "'-' and '_', at most 128)."),
        (json.dumps({"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "a"}}]}),
         "n.json: node 'a' appears twice; names must be unique."),
        (kubectl({"metadata": {"name": "a", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-MIG-[red]x", "nvidia.com/mig.strategy": "single",
            "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "9856"}}}),
         "node a: nvidia.com/gpu.product 'NVIDIA-H100-MIG-[red]x' names no MIG profile like "
         "1g.10gb."),
        # Numbers past what a fleet file may say.
        (kubectl({"metadata": {"name": "a", "labels": GPU | {"nvidia.com/gpu.count": "-8"}}}),
         "n.json: node 'a': -8 h100-80g cards is not a count llmfit can plan (0 to 1,024 a "
         "node)."),
        (kubectl({"metadata": {"name": "a", "labels": GPU | {"nvidia.com/gpu.count": "99999"}}}),
         "n.json: node 'a': 99,999 h100-80g cards is not a count llmfit can plan (0 to 1,024 a "
         "node)."),
        (kubectl({"metadata": {"name": "a", "labels": {
            "nvidia.com/gpu.product": "Big", "nvidia.com/gpu.count": "1",
            "nvidia.com/gpu.memory": "999999999999"}}}),
         "n.json: node 'a': a big-976562500g card of 999,999,999,999 MiB is not a size llmfit can "
         "plan (more than 0, at most 65,536 GB)."),
        (kubectl({"metadata": {"name": "a"}, "status": {"capacity": {"memory": "9999999Ti"}}}),
         "n.json: node 'a': 10,239,998,976 GB of RAM is past the 1,048,576 GB a node can have."),
    ],
)  # fmt: skip
def test_kubectl_files_of_the_wrong_shape_are_one_sentence(text, message):
    with pytest.raises(FleetFileError) as e:
        import_kubectl(text, "n.json", "fab")
    assert e.value.message == message
    assert e.value.exit_code == 3


@pytest.mark.parametrize(
    ("csv", "message"),
    [
        ("name, memory.total [MiB]\nX, 0 MiB\n",
         "g.csv:2: memory.total '0 MiB' is not a card's memory (more than 0, at most 65,536 GB)."),
        ("name, memory.total [MiB]\nH100, 99999999999999 MiB\n",
         "g.csv:2: memory.total '99999999999999 MiB' is not a card's memory (more than 0, at most "
         "65,536 GB)."),
        ("name,memory.total\n" + "NVIDIA H100 80GB HBM3, 81559\n" * 1025,
         "g.csv: has 1,025 cards; a node holds at most 1,024."),
        (b"name, memory.total\n\xe9, 100\n",
         "g.csv is not UTF-8 text (byte 19 is 0xe9); save it as UTF-8."),
    ],
)  # fmt: skip
def test_nvidia_smi_files_of_the_wrong_shape_are_one_sentence(csv, message):
    with pytest.raises(FleetFileError) as e:
        import_nvidia_smi(csv, "g.csv", name="n1")
    assert e.value.message == message


def test_a_product_name_is_only_ever_a_label():
    """Control characters and markup in a product name are dropped from the class it gives."""
    csv = "name, memory.total [MiB]\nNVIDIA \x1b[31mH100[/red] 80GB, 81559 MiB\n"
    node = import_nvidia_smi(csv, "g.csv", name="n1")
    assert node.kinds[0].gpu_class == "31mh100red-80g"
    (row,) = parse_gpu_csv(csv, "g.csv")
    assert row.name == "NVIDIA \x1b[31mH100[/red] 80GB"  # kept as data; never printed raw


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"name": "gpu box"}, "The node's name 'gpu box' is not a host name (letters, digits, "
                              "'.', '-' and '_', at most 128); give one with --name."),
        ({"name": "n1", "fabric": "ib 0"},
         "--fabric 'ib 0' is not a fabric name (letters, digits, '.', '-' and '_', at most 128)."),
    ],
)  # fmt: skip
def test_flags_of_the_wrong_shape_are_usage_errors(kw, message):
    with pytest.raises(UsageError) as e:
        import_nvidia_smi("name, memory.total [MiB]\nH100, 81559 MiB\n", "g.csv", **kw)
    assert (e.value.message, e.value.exit_code) == (message, 2)


@pytest.mark.parametrize("ram", ["inf", "nan", "2e6"])
def test_ram_gb_that_is_not_a_size_is_a_usage_error(run, tmp_path, ram):
    csv = tmp_path / "gpus.csv"
    csv.write_text("name, memory.total [MiB]\nNVIDIA L40S, 46068 MiB\n")
    code, out, err = run("fleet", "import", "nvidia-smi", str(csv), "--ram-gb", ram)
    assert (code, out) == (2, "")
    assert err == f"llmfit: --ram-gb {float(ram)} must be a number of GB from 0 to 1,048,576.\n"


def test_the_cli_reads_bytes_that_are_not_utf8_as_one_sentence(run, tmp_path):
    bad = tmp_path / "nodes.json"
    bad.write_bytes("{}".encode("utf-16"))
    code, _, err = run("fleet", "import", "kubectl", str(bad))
    assert (code, err) == (3, f"llmfit: {bad} is not UTF-8 text (byte 0 is 0xff); save it as "
                              "UTF-8.\n")  # fmt: skip
    code, _, err = run("fleet", "import", "nvidia-smi", str(bad))
    assert code == 3 and "is not UTF-8 text" in err


def test_an_output_that_cannot_be_written_is_one_sentence(run, tmp_path):
    csv = tmp_path / "gpus.csv"
    csv.write_text("name, memory.total [MiB]\nNVIDIA L40S, 46068 MiB\n")
    out_file = tmp_path / "no-such-dir" / "fleet.toml"
    code, _, err = run("fleet", "import", "nvidia-smi", str(csv), "-o", str(out_file))
    assert (code, err) == (2, f"llmfit: -o {out_file}: cannot be written (No such file or "
                              "directory).\n")  # fmt: skip
