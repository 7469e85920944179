"""The JSON fleet format: the TOML schema as a JSON document, chosen by the name's .json or by a
text that opens with `{`, with the same sentences (a line found in the JSON text too)."""

from __future__ import annotations

import json
import tomllib

import pytest

from llmfit.errors import FleetFileError
from llmfit.sources.fleet import parse_fleet, read_fleet
from tests.conftest import EXAMPLE_FLEET, ROOT


@pytest.mark.parametrize("name", ["fleet.toml", "fleet-4-nodes.toml", "fleet-200-nodes.toml"])
def test_each_example_as_json_is_the_same_fleet(tmp_path, name):
    toml_path = ROOT / "examples" / name
    doc = json.dumps(tomllib.loads(toml_path.read_text()), indent=1)
    as_json = tmp_path / "fleet.json"
    as_json.write_text(doc)
    assert read_fleet(as_json).nodes == read_fleet(toml_path).nodes
    # By content: a JSON document under any other name.
    (tmp_path / "fleet.conf").write_text(doc)
    assert read_fleet(tmp_path / "fleet.conf").nodes == read_fleet(toml_path).nodes


NODES = """{
  "node": [
    {"name": "a", "gpu": "h100-80g", "gpus": 8},
    {
      "name": "b",
      "ram_gb": 64,
      "devices": [
        {"gpu": "a100-80g", "gpus": 2},
        {"gpu": "a100-80g-mig-3g.40gb",
         "gpus": 4, "free_gpus": 3}
      ]
    }
  ],
  "pool": [{"name": "p", "count": 3, "gpu": "l40s-48g", "fabric": "eth0"}]
}
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # The line of the key, or of the object that lacks it.
        (NODES.replace('"free_gpus": 3', '"free_gpus": 5'),
         "f.json:10: node[1].devices[1].free_gpus is 5, more than the 4 gpus it has."),
        (NODES.replace('"gpus": 8', '"gpus": -8'),
         "f.json:3: node[0].gpus is -8; it cannot be negative."),
        (NODES.replace('"ram_gb": 64', '"ram_gb": NaN'),
         "f.json:6: node[1].ram_gb is nan; it must be a finite number of GB."),
        (NODES.replace('"ram_gb": 64', '"ram_gb": 1e999'),
         "f.json:6: node[1].ram_gb is inf; it must be a finite number of GB."),
        (NODES.replace('"count": 3', '"count": 3.0'),
         "f.json:14: pool[0].count is 3.0; it must be a whole number."),
        (NODES.replace('"fabric": "eth0"', '"fabrik": "eth0"'),
         "f.json:14: pool[0].fabrik is not a key llmfit knows; did you mean 'fabric'?"),
        (NODES.replace('{"gpu": "a100-80g", "gpus": 2}', "7"),
         "f.json:8: node[1].devices[0] must be an object."),
        (NODES.replace('"name": "b"', '"name": "a"'),
         "f.json:5: node[1].name is 'a', a name another node already has; names must be unique."),
        (NODES.replace('"name": "b"', '"name": "b\\u001b[2J"'),
         "f.json:5: node[1].name is 'b\\x1b[2J', not a host name (letters, digits, '.', '-' and "
         "'_', at most 128)."),
        ('{"node": {"name": "a"}}', "f.json:1: node must be a list of objects."),
        ('{"node": [{"name": "a", "devices": {}}]}',
         "f.json:1: node[0].devices must be a list of objects."),
        ('{"nodes": []}', "f.json:1: nodes is not a key llmfit knows; did you mean 'node'?"),
        ("{}", "f.json describes no nodes: add a [[pool]] or a [[node]]."),
        ('{"node": [}', "f.json is not valid JSON: Expecting value (at line 1, column 11)."),
        ("[1, 2]", "f.json holds a JSON list, not an object like {\"node\": [...]}."),
        ('{"node": [{"ram_gb": ' + "9" * 5000 + "}]}",
         "f.json is not valid JSON: it holds a number too long to read."),
        ('{"node": ' + "[" * 100_000 + "]" * 100_000 + "}",
         "f.json is not valid JSON: it nests too deep."),
    ],
)  # fmt: skip
def test_each_mistake_is_one_sentence_with_its_line(text, message):
    with pytest.raises(FleetFileError) as e:
        parse_fleet(text, "f.json")
    assert e.value.message == message


def test_a_json_fleet_plans_from_the_cli(run, tmp_path):
    doc = tmp_path / "fleet.json"
    doc.write_text(json.dumps(tomllib.loads(EXAMPLE_FLEET.read_text())))
    code, out, _ = run("fleet", str(doc), "--json")
    assert code == 0 and json.loads(out)["nodes"] == 11
    code, out, _ = run("Qwen/Qwen3-8B", "--fleet", str(doc), "--json")
    assert code == 0 and json.loads(out)["fleet"] == {"source": str(doc), "nodes": 11, "gpus": 77}


def test_the_document_reads_as_written():
    fleet = parse_fleet(NODES, "f.json")
    assert fleet.node_ids() == ("p-1", "p-2", "p-3", "a", "b")
    assert [k.gpu_class for k in fleet.nodes[2].kinds] == ["a100-80g", "a100-80g-mig-3g.40gb"]
    assert (fleet.nodes[0].fabric, fleet.nodes[2].ram_bytes) == ("eth0", 64 << 30)
