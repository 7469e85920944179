"""Imports that write a fleet file: from nvidia-smi CSV (+ -L for MIG) and from
`kubectl get nodes -o json`, checked value by value and read back by the fleet parser."""

from __future__ import annotations

import json

import pytest

from llmfit.errors import FleetFileError
from llmfit.plan.fleet import GIB, MIB, PoolKind, PoolNode
from llmfit.sources.fleet import parse_fleet
from llmfit.sources.fleet_import import fleet_toml, import_kubectl, import_nvidia_smi
from tests.fleet_data import FLEET_FIXTURES, fixture_text

H100 = 85_045_477_376  # the H100's CUDA total (REPORTED_TOTALS)
A100_80 = 85_100_068_864

# Built from the real GFD labels of five fixture files; fixtures/fleet/README.md ("Built here")
# says which parts are constructed: the fabric label, the H100 node's capacity/allocatable GPU
# counts (8/7) and its memory quantities, and the CPU node. No complete kubectl JSON was found.
KUBECTL = FLEET_FIXTURES / "kubectl-get-nodes-built.json"


def test_kubectl_nodes_whole_cards_mig_single_and_mixed():
    nodes = import_kubectl(KUBECTL.read_text(), "nodes.json", "example.com/fabric")
    assert nodes == (
        # Whole cards: gpu.product NVIDIA-H100-80GB-HBM3 → h100-80g (its CUDA total, not the
        # label's 81,559 MiB); capacity 8 less allocatable 7 is one unhealthy card; RAM is the
        # memory capacity, free RAM what pods may be allocated.
        PoolNode(
            "h100-xe9680-1",
            (PoolKind("h100-80g", H100, 8, 7, 1),),
            "ib0",
            2_097_096_404 * 1024,
            2_095_606_484 * 1024,
            # The label a nodeSelector picks the class by is kept (`--format k8s`).
            labels=(("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),),
        ),
        # MIG single strategy: GFD names the instance as the product, with its 9,856 MiB.
        PoolNode(
            "scw-k8s-jovial-dubinsky-pool-h100-93a072191d38",
            (PoolKind("h100-mig-1g.10gb", 9_856 * MIB, 7, 7, 0),),
            labels=(("nvidia.com/gpu.product", "NVIDIA-H100-PCIe-MIG-1g.10gb"),),
        ),
        # MIG mixed with GFD's mislabel: the resource mig-3g.20gb (16) takes the memory of the
        # one 3g label, mig-3g.21gb.memory = 20,096 MiB; no product label names the card.
        PoolNode("a100-node6", (PoolKind("gpu-mig-3g.20gb", 20_096 * MIB, 16, 16, 0),)),
        # Mixed-style labels and no resources: counts from the labels; 2g.10gb's memory label is
        # cut in the fixture, so its memory comes from the profile's name.
        PoolNode(
            "as-4124gs-tnr",
            (
                PoolKind("a100-40g-mig-1g.5gb", 4_864 * MIB, 4, 4, 0),
                # Its memory label is cut off in the fixture: 0.83 of the name's 10 GiB.
                PoolKind("a100-40g-mig-2g.10gb", int(10 * GIB * 0.83), 2, 2, 0),
            ),
            labels=(("nvidia.com/gpu.product", "A100-PCIE-40GB"),),
        ),
        PoolNode("cpu-1", (), "", 519_659_388 * 1024, 519_659_388 * 1024),
    )


def test_kubectl_fleet_file_is_written_and_reads_back():
    nodes = import_kubectl(KUBECTL.read_text(), "nodes.json", "example.com/fabric")
    text = fleet_toml(nodes, "written by a test")
    assert text == (
        "# written by a test\n"
        "\n"
        "[[node]]\n"
        'name = "h100-xe9680-1"\n'
        'fabric = "ib0"\n'
        "ram_gb = 1999.9\n"
        "free_ram_gb = 1998.5\n"
        'labels = { "nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3" }\n'
        'gpu = "h100-80g"\n'
        "gpus = 8\n"
        "unhealthy_gpus = 1\n"
        "\n"
        "[[node]]\n"
        'name = "scw-k8s-jovial-dubinsky-pool-h100-93a072191d38"\n'
        'labels = { "nvidia.com/gpu.product" = "NVIDIA-H100-PCIe-MIG-1g.10gb" }\n'
        'gpu = "h100-mig-1g.10gb"\n'
        "gpu_memory_gb = 9.625\n"
        "gpus = 7\n"
        "\n"
        "[[node]]\n"
        'name = "a100-node6"\n'
        'gpu = "gpu-mig-3g.20gb"\n'  # 20,096 MiB, as the 3g.20gb profile is known to hold
        "gpus = 16\n"
        "\n"
        "[[node]]\n"
        'name = "as-4124gs-tnr"\n'
        'labels = { "nvidia.com/gpu.product" = "A100-PCIE-40GB" }\n'
        "  [[node.devices]]\n"
        '  gpu = "a100-40g-mig-1g.5gb"\n'  # 4,864 MiB: what the 1g.5gb profile holds
        "  gpus = 4\n"
        "  [[node.devices]]\n"
        '  gpu = "a100-40g-mig-2g.10gb"\n'
        "  gpus = 2\n"
        "\n"
        "[[node]]\n"
        'name = "cpu-1"\n'
        "ram_gb = 495.6\n"
    )
    back = parse_fleet(text, "imported.toml")
    # Cards read back to the byte; RAM to the tenth of a GB it was written with.
    assert [n.kinds for n in back.nodes] == [n.kinds for n in nodes]
    assert [n.fabric for n in back.nodes] == ["ib0", "", "", "", ""]
    assert [n.labels for n in back.nodes] == [n.labels for n in nodes]
    assert back.nodes[0].ram_bytes == int(1999.9 * GIB)


def test_kubectl_without_a_fabric_label_puts_no_node_on_a_fabric():
    nodes = import_kubectl(KUBECTL.read_text(), "nodes.json")
    assert {n.fabric for n in nodes} == {""}


def _node(labels: dict[str, str], capacity: dict[str, str], allocatable=None) -> str:
    return json.dumps(
        {
            "kind": "Node",
            "metadata": {"name": "n1", "labels": labels},
            "status": {"capacity": capacity, "allocatable": allocatable or capacity},
        }
    )


def test_kubectl_mixed_strategy_from_allocatable_resources():
    """kubectl-node-a100-mig-mixed-allocatable.txt's GPU rows (whole cards beside MIG resources,
    one profile at 0). The issue names no card: the product and memory labels are made up."""
    rows = dict(
        line.split(":") for line in fixture_text("kubectl-node-a100-mig-mixed-allocatable.txt")
        .splitlines()[1:]
    )  # fmt: skip
    resources = {k.strip(): v.strip() for k, v in rows.items() if k.strip().startswith("nvidia")}
    assert resources == {
        "nvidia.com/gpu": "2",
        "nvidia.com/mig-1g.10gb": "6",
        "nvidia.com/mig-2g.20gb": "4",
        "nvidia.com/mig-3g.40gb": "0",
    }
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.memory": "81920",
    }
    (node,) = import_kubectl(_node(labels, resources), "n.json")
    assert node.kinds == (
        PoolKind("a100-80g", A100_80, 2, 2, 0),
        PoolKind("a100-80g-mig-1g.10gb", int(9.62 * GIB), 6, 6, 0),
        PoolKind("a100-80g-mig-2g.20gb", int(19.50 * GIB), 4, 4, 0),
    )


def test_kubectl_unhealthy_mig_instances():
    """kubectl-node-h100-mig-mixed-all-balanced.txt's capacity; one 1g.12gb taken out of
    allocatable (made up), and the H100 NVL product the note infers from the profile names."""
    cap = {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.12gb": "2",
        "nvidia.com/mig-2g.24gb": "1",
        "nvidia.com/mig-3g.47gb": "1",
    }
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.product": "NVIDIA-H100-NVL",
        "nvidia.com/gpu.memory": "95830",
    }
    (node,) = import_kubectl(_node(labels, cap, cap | {"nvidia.com/mig-1g.12gb": "1"}), "n.json")
    assert node.kinds == (
        PoolKind("h100-94g-mig-1g.12gb", int(10.75 * GIB), 2, 1, 1),
        PoolKind("h100-94g-mig-2g.24gb", int(21.62 * GIB), 1, 1, 0),
        PoolKind("h100-94g-mig-3g.47gb", 47488 * 2**20, 1, 1, 0),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "n.json is not JSON (line 1: Expecting property name enclosed in double quotes); "
              "make it with kubectl get nodes -o json."),
        ('{"kind": "List", "items": []}',
         "n.json holds no nodes; make it with kubectl get nodes -o json."),
        (_node({}, {"nvidia.com/gpu": "4"}),
         "node n1: has 4 nvidia.com/gpu but no nvidia.com/gpu.product label, so what its cards "
         "are is unknown; run GPU Feature Discovery or write the node by hand."),
        # kubectl-node-mig-timeslicing-shared-bottlerocket.txt: the cards only as a shared
        # resource, and no labels in the excerpt.
        (_node({}, {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "128"}),
         "node n1: has 128 nvidia.com/gpu.shared but no nvidia.com/gpu.product label, so what "
         "its cards are is unknown; run GPU Feature Discovery or write the node by hand."),
        ('{"kind": "List", "items": [1]}', "n.json: item 0 is not a node object."),
        (_node({"nvidia.com/gpu.product": "NVIDIA-GB10", "nvidia.com/gpu.count": "1"}, {}),
         "node n1: 'NVIDIA-GB10' has no nvidia.com/gpu.memory label, so its card memory is "
         "unknown; add gpu_memory_gb to the fleet file by hand."),
    ],
)  # fmt: skip
def test_kubectl_mistakes_are_one_sentence(text, message):
    with pytest.raises(FleetFileError) as e:
        import_kubectl(text, "n.json")
    assert e.value.message == message


def test_nvidia_smi_import_one_node():
    node = import_nvidia_smi(
        fixture_text("nvidia-smi-csv-l40s-2gpu.txt"), "l40s.csv", name="sr665-1", fabric="eth0"
    )
    assert node == PoolNode("sr665-1", (PoolKind("l40s-48g", 47_803_596_800, 2, 2),), "eth0")
    text = fleet_toml((node,), "from l40s.csv")
    assert text == (
        '# from l40s.csv\n\n[[node]]\nname = "sr665-1"\nfabric = "eth0"\ngpu = "l40s-48g"\n'
        "gpus = 2\n"
    )
    assert parse_fleet(text, "x.toml").nodes == (node,)


def test_nvidia_smi_import_with_mig_from_its_list():
    """The 4-GPU A100 node of nvidia-smi-L-mig-a100-80gb-4gpu.txt, with a CSV in its names and
    nvidia-smi's 81,920 MiB (memory.used made up: GPU 1 busy)."""
    csv = (
        "index, name, memory.total [MiB], memory.used [MiB]\n"
        + "".join(
            f"{i}, NVIDIA A100-SXM4-80GB, 81920 MiB, {used} MiB\n"
            for i, used in enumerate((0, 40000, 4, 4))
        )
    )  # fmt: skip
    node = import_nvidia_smi(
        csv,
        "a100.csv",
        name="dgx-1",
        listing=fixture_text("nvidia-smi-L-mig-a100-80gb-4gpu.txt"),
        ram_bytes=1024 * GIB,
    )
    text = fleet_toml((node,), "x")
    assert text == (
        "# x\n\n"
        "[[node]]\n"
        'name = "dgx-1"\n'
        "ram_gb = 1024\n"
        "  [[node.devices]]\n"
        '  gpu = "a100-80g-mig-1g.20gb"\n'
        "  gpus = 4\n"
        "  [[node.devices]]\n"
        '  gpu = "a100-80g"\n'
        "  gpus = 3\n"
        "  free_gpus = 2\n"
    )
    assert parse_fleet(text, "x.toml").nodes == (node,)


def test_nvidia_smi_import_keeps_an_unknown_cards_memory_exactly():
    node = import_nvidia_smi(
        fixture_text("nvidia-smi-csv-rtx-a5000-noheader.txt"), "a5000.csv", name="ws"
    )
    text = fleet_toml((node,), "x")
    assert 'gpu = "rtxa5000-24g"\ngpu_memory_gb = 23.98828125\ngpus = 1\n' in text
    assert parse_fleet(text, "x.toml").nodes[0].kinds[0].card_bytes == 24_564 * MIB


H100_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.count": "8",
}


def _with(node: str, **extra) -> str:
    doc = json.loads(node)
    for key, value in extra.items():
        doc.setdefault(key, {}).update(value)
    return json.dumps(doc)


def test_kubectl_time_sliced_cards_are_counted_once():
    """With gpu.replicas = 4 the resource is 32, the cards are 8 (the gpu.count label)."""
    labels = H100_LABELS | {"nvidia.com/gpu.replicas": "4"}
    (node,) = import_kubectl(_node(labels, {"nvidia.com/gpu.shared": "32"}), "n.json")
    assert node.kinds == (PoolKind("h100-80g", H100, 8, 8, 0),)


def test_kubectl_cordoned_node_has_no_free_card():
    text = _with(_node(H100_LABELS, {"nvidia.com/gpu": "8", "memory": "1Ti"}),
                 spec={"unschedulable": True})  # fmt: skip
    (node,) = import_kubectl(text, "n.json")
    assert node.kinds == (PoolKind("h100-80g", H100, 8, 0, 0),)
    assert (node.ram_bytes, node.free_ram_bytes) == (1 << 40, 0)


def test_kubectl_node_not_ready_has_every_card_unhealthy():
    not_ready = {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                {"type": "Ready", "status": "Unknown"}]}  # fmt: skip
    text = _with(_node(H100_LABELS, {"nvidia.com/gpu": "8"}), status=not_ready)
    (node,) = import_kubectl(text, "n.json")
    assert node.kinds == (PoolKind("h100-80g", H100, 8, 0, 8),)
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    (node,) = import_kubectl(_with(_node(H100_LABELS, {"nvidia.com/gpu": "8"}), status=ready), "")
    assert node.kinds == (PoolKind("h100-80g", H100, 8, 8, 0),)
