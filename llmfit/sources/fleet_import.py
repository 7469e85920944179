"""Imports that write a fleet file from what a cluster already reports.

- `nvidia-smi --query-gpu=… --format=csv` output (one node), with `nvidia-smi -L` for MIG.
- `kubectl get nodes -o json`: NVIDIA GPU Feature Discovery labels (`nvidia.com/gpu.product`,
  `.memory`, `.count`, `nvidia.com/mig.strategy`, `nvidia.com/mig-<profile>.count/.memory`),
  the node's capacity and allocatable resources, and a fabric from a label the user names.

Each returns PoolNodes; `fleet_toml` writes them as a fleet file that `parse_fleet` reads back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llmfit.errors import FleetFileError
from llmfit.plan.fleet import (
    GIB,
    MIB,
    PoolKind,
    PoolNode,
    class_from_product,
    memory_from_class,
    mig_class,
)
from llmfit.sources.machine import card_bytes, gpu_kinds, parse_gpu_csv, parse_gpu_list


def import_nvidia_smi(
    csv_text: str,
    source: str,
    *,
    name: str,
    query: str | None = None,
    listing: str | None = None,
    fabric: str = "",
    ram_bytes: int = 0,
) -> PoolNode:
    """One node from saved nvidia-smi CSV output, and `nvidia-smi -L` output for MIG instances."""
    rows = parse_gpu_csv(csv_text, source, query)
    kinds = gpu_kinds(rows, parse_gpu_list(listing) if listing else None)
    return PoolNode(
        id=name, kinds=kinds, fabric=fabric, ram_bytes=ram_bytes, free_ram_bytes=ram_bytes
    )


_GFD = "nvidia.com/"
# The node labels a fleet file keeps: the one a Kubernetes nodeSelector picks the GPU class by.
KEPT_LABELS = ("nvidia.com/gpu.product",)
_MIG_LABEL = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb)\.(count|memory)$")
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb)$")
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
_SCALE = {
    None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
}  # fmt: skip


def _int(value: Any) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def _bytes(quantity: Any) -> int:
    """A Kubernetes memory quantity ("519659388Ki", "2Ti", "1000000") → bytes; 0 if unreadable."""
    m = _QUANTITY.match(str(quantity or "").strip())
    return int(float(m.group(1)) * _SCALE[m.group(2)]) if m else 0


def _node_kinds(name: str, labels: dict[str, str], cap: dict, alloc: dict) -> list[PoolKind]:
    product = labels.get(_GFD + "gpu.product", "")
    memory = _int(labels.get(_GFD + "gpu.memory")) * MIB
    strategy = labels.get(_GFD + "mig.strategy", "none")
    replicas = max(_int(labels.get(_GFD + "gpu.replicas", "1")), 1)
    kinds: list[PoolKind] = []

    def unhealthy(resource: str, count: int, share: int = 1) -> int:
        # The device plugin takes a failed device out of allocatable, not out of capacity.
        if resource not in cap or resource not in alloc:
            return 0
        return min(max((_int(cap[resource]) - _int(alloc[resource])) // share, 0), count)

    if "-mig-" in product.lower() and strategy == "single":
        # Single strategy: GFD names the instance as the product and gives its memory.
        base, profile = re.split(r"-mig-", product, maxsplit=1, flags=re.I)
        cls = mig_class(class_from_product(base), profile)
        count = _int(labels.get(_GFD + "gpu.count")) or _int(cap.get(_GFD + "gpu"))
        size = memory or memory_from_class(cls) or 0
        bad = unhealthy(_GFD + "gpu", count)
        return [PoolKind(cls, size, count, count - bad, bad)] if count else []
    card_class = class_from_product(product, memory) if product else "gpu"
    # Time-slicing multiplies the resource by gpu.replicas, under its own name
    # (nvidia.com/gpu.shared) or not; the label gpu.count is the cards themselves.
    shared = _int(cap.get(_GFD + "gpu")) or _int(cap.get(_GFD + "gpu.shared"))
    if strategy == "mixed":
        whole = _int(cap.get(_GFD + "gpu"))
    else:
        whole = _int(labels.get(_GFD + "gpu.count")) or shared // replicas
    if (whole or shared) and not product:
        resource = "nvidia.com/gpu" if _int(cap.get(_GFD + "gpu")) else "nvidia.com/gpu.shared"
        raise FleetFileError(
            f"node {name}: has {whole or shared} {resource} but no nvidia.com/gpu.product label, "
            "so what its cards are is unknown; run GPU Feature Discovery or write the node by hand."
        )
    if whole:
        size = card_bytes(card_class, memory) if memory else memory_from_class(card_class) or 0
        if not size:
            raise FleetFileError(
                f"node {name}: {product!r} has no nvidia.com/gpu.memory label, so its card "
                "memory is unknown; add gpu_memory_gb to the fleet file by hand."
            )
        bad = unhealthy(_GFD + "gpu", whole, replicas)
        kinds.append(PoolKind(card_class, size, whole, whole - bad, bad))
    # MIG instances in the mixed strategy: one resource per profile. The resources say what the
    # scheduler can hand out; the labels carry each profile's memory. They can disagree on the
    # name (GFD once labelled mig-3g.21gb what the resource called mig-3g.20gb:
    # fixtures/fleet/kubectl-node-a100-mig-mixed-gfd7.txt), so a resource without a label of its
    # own takes the memory of the one label with the same slice count.
    label_mem: dict[str, int] = {}
    label_count: dict[str, int] = {}
    for key, value in labels.items():
        if m := _MIG_LABEL.match(key):
            target = label_mem if m.group(2) == "memory" else label_count
            target[m.group(1)] = _int(value)
    resources = {m.group(1): _int(v) for k, v in cap.items() if (m := _MIG_RESOURCE.match(k))}
    counts = resources or label_count
    for profile, count in sorted(counts.items()):
        if count <= 0:
            continue
        cls = mig_class(card_class, profile)
        mib = label_mem.get(profile)
        if mib is None:
            slices = [p for p in label_mem if p.split(".")[0] == profile.split(".")[0]]
            mib = label_mem[slices[0]] if len(slices) == 1 else None
        size = mib * MIB if mib else memory_from_class(cls) or 0
        bad = unhealthy(f"{_GFD}mig-{profile}", count)
        kinds.append(PoolKind(cls, size, count, count - bad, bad))
    return kinds


def import_kubectl(text: str, source: str, fabric_label: str | None = None) -> tuple[PoolNode, ...]:
    """Nodes from `kubectl get nodes -o json` (a List of Nodes, or one Node).

    Kubernetes does not say which cards are in use, so every healthy card is written as free,
    except on a cordoned node (none free) or one that is not Ready (every card unhealthy); host
    RAM is the node's memory capacity, and free RAM what it lets pods allocate (0 on those two).
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise FleetFileError(
            f"{source} is not JSON (line {e.lineno}: {e.msg}); "
            "make it with kubectl get nodes -o json."
        ) from None
    items = doc.get("items") if isinstance(doc, dict) else None
    if items is None and isinstance(doc, dict) and doc.get("kind") == "Node":
        items = [doc]
    if not isinstance(items, list) or not items:
        raise FleetFileError(f"{source} holds no nodes; make it with kubectl get nodes -o json.")
    nodes: list[PoolNode] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise FleetFileError(f"{source}: item {i} is not a node object.")
        meta = item.get("metadata") or {}
        status = item.get("status") or {}
        name = meta.get("name") or f"node{i + 1}"
        labels = {k: str(v) for k, v in (meta.get("labels") or {}).items()}
        cap = status.get("capacity") or {}
        alloc = status.get("allocatable") or {}
        ram = _bytes(cap.get("memory"))
        free_ram = min(_bytes(alloc.get("memory")) or ram, ram)
        kinds = _node_kinds(name, labels, cap, alloc)
        ready = [
            c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"
        ]
        if ready and ready[0] != "True":
            # A node that is not Ready runs nothing: its cards are neither used nor free.
            kinds = [PoolKind(k.gpu_class, k.card_bytes, k.gpus, 0, k.gpus) for k in kinds]
            free_ram = 0
        elif (item.get("spec") or {}).get("unschedulable") is True:
            # Cordoned: its cards work but take no new work now, so none is free.
            kinds = [
                PoolKind(k.gpu_class, k.card_bytes, k.gpus, 0, k.unhealthy_gpus) for k in kinds
            ]
            free_ram = 0
        nodes.append(
            PoolNode(
                id=name,
                kinds=tuple(kinds),
                fabric=labels.get(fabric_label, "") if fabric_label else "",
                ram_bytes=ram,
                free_ram_bytes=free_ram,
                labels=tuple((k, labels[k]) for k in KEPT_LABELS if k in labels),
            )
        )
    return tuple(nodes)


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _gb(n: int, exact: bool) -> str:
    """Bytes as GB for the file: exact when a card's memory is (MiB multiples are exact binary
    fractions, so the file reads back to the same bytes), one decimal for host RAM."""
    if exact:
        v = n / GIB
        return str(int(v)) if v == int(v) else repr(v)
    v = round(n / GIB, 1)
    return str(int(v)) if v == int(v) else str(v)


def _kind_lines(k: PoolKind, indent: str) -> list[str]:
    out = [f"{indent}gpu = {_q(k.gpu_class)}"]
    if k.card_bytes != memory_from_class(k.gpu_class):
        out.append(f"{indent}gpu_memory_gb = {_gb(k.card_bytes, exact=True)}")
    out.append(f"{indent}gpus = {k.gpus}")
    if k.free_gpus != k.gpus - k.unhealthy_gpus:
        out.append(f"{indent}free_gpus = {k.free_gpus}")
    if k.unhealthy_gpus:
        out.append(f"{indent}unhealthy_gpus = {k.unhealthy_gpus}")
    return out


def fleet_toml(nodes: tuple[PoolNode, ...], header: str) -> str:
    """Nodes as a fleet file, one [[node]] each, with a comment saying where they came from."""
    lines = [f"# {line}" for line in header.splitlines()]
    for node in nodes:
        lines += ["", "[[node]]", f"name = {_q(node.id)}"]
        if node.fabric:
            lines.append(f"fabric = {_q(node.fabric)}")
        if node.ram_bytes:
            lines.append(f"ram_gb = {_gb(node.ram_bytes, exact=False)}")
            if node.free_ram_bytes != node.ram_bytes:
                lines.append(f"free_ram_gb = {_gb(node.free_ram_bytes, exact=False)}")
        if node.labels:
            pairs = ", ".join(f"{_q(k)} = {_q(v)}" for k, v in node.labels)
            lines.append(f"labels = {{ {pairs} }}")
        if len(node.kinds) == 1:
            lines += _kind_lines(node.kinds[0], "")
        for k in node.kinds if len(node.kinds) > 1 else ():
            lines += ["  [[node.devices]]", *_kind_lines(k, "  ")]
    return "\n".join(lines) + "\n"
