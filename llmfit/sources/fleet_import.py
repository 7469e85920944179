"""Imports that write a fleet file from what a cluster already reports.

- `nvidia-smi --query-gpu=… --format=csv` output (one node), with `nvidia-smi -L` for MIG.
- `kubectl get nodes -o json`: NVIDIA GPU Feature Discovery labels (`nvidia.com/gpu.product`,
  `.memory`, `.count`, `nvidia.com/mig.strategy`, `nvidia.com/mig-<profile>.count/.memory`),
  the node's capacity and allocatable resources, and a fabric from a label the user names.

Each returns PoolNodes; `fleet_toml` writes them as a fleet file that `parse_fleet` reads back.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from llmfit.errors import FleetFileError, UsageError
from llmfit.plan.fleet import (
    GIB,
    MIB,
    PoolKind,
    PoolNode,
    class_from_product,
    memory_from_class,
    mig_class,
)
from llmfit.sources.fleet_bounds import (
    _LABEL_KEY,
    _LABEL_VALUE,
    MAX_CARD_GB,
    MAX_CARDS,
    MAX_RAM_GB,
    NAME_RULE,
    is_gpu_class,
    is_name,
)
from llmfit.sources.machine import card_bytes, gpu_kinds, parse_gpu_csv, parse_gpu_list

# The most llmfit reads of what the imports are given: nvidia-smi's CSV and -L listing for 1,024
# cards are a few hundred KB; `kubectl get nodes -o json` is 10 to 20 KB a node.
MAX_NVIDIA_SMI_BYTES = 4 << 20
MAX_KUBECTL_BYTES = 256 << 20


def read_input(name: str, cap: int, stdin: BinaryIO | None = None) -> bytes:
    """The bytes of an import's input (`-` for stdin), bounded: a device such as /dev/zero is
    refused unread, and a file or stream past `cap` is refused after cap + 1 bytes."""
    from llmfit.sources.files import FileProblem, read_capped, read_stream

    source = "<stdin>" if name == "-" else name
    try:
        if name == "-":
            if stdin is None:  # stdin closed (`<&-`): nothing to read
                raise FleetFileError("<stdin> is closed: there is nothing to import.")
            return read_stream(stdin, cap, "file to import")
        return read_capped(name, cap, "file to import")
    except FileProblem as e:
        raise FleetFileError(f"{source} {e.problem}.") from None
    except FileNotFoundError:
        raise UsageError(f"{source}: no such file.") from None
    except OSError as e:
        raise FleetFileError(f"{source}: cannot be read ({e.strerror or e}).") from None


def text_of(data: str | bytes, source: str) -> str:
    """A saved file's text; bytes that are not UTF-8 (a UTF-16 redirect on Windows, a binary
    file) are one sentence naming the file."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FleetFileError(
            f"{source} is not UTF-8 text (byte {e.start:,} is 0x{data[e.start]:02x}); save it "
            "as UTF-8."
        ) from None


def ram_flag(ram_gb: float) -> int:
    """--ram-gb in bytes: a finite number of GB, at most what a node can have."""
    if ram_gb != ram_gb or not 0 <= ram_gb <= MAX_RAM_GB:
        raise UsageError(f"--ram-gb {ram_gb} must be a number of GiB from 0 to {MAX_RAM_GB:,}.")
    return int(ram_gb * GIB)


def checked(node: PoolNode, where: str) -> PoolNode:
    """The node, if the fleet parser will take it back: else one sentence here, naming `where`,
    so that an import never writes a fleet file that `llmfit fleet` then refuses."""
    if not is_name(node.id):
        raise FleetFileError(f"{where}: {node.id!r} is not a host name llmfit can write "
                             f"({NAME_RULE}).")  # fmt: skip
    if node.fabric and not is_name(node.fabric):
        raise FleetFileError(
            f"{where}: its fabric {node.fabric!r} is not a fabric name ({NAME_RULE})."
        )
    for key, value in node.labels:
        if not (_LABEL_KEY.fullmatch(key) and _LABEL_VALUE.fullmatch(value)):
            raise FleetFileError(
                f"{where}: its label {key!r} = {value!r} is not a Kubernetes label."
            )
    if not 0 <= node.ram_bytes <= MAX_RAM_GB * GIB:
        raise FleetFileError(
            f"{where}: {node.ram_bytes / GIB:,.0f} GiB of RAM is past the {MAX_RAM_GB:,} GiB a "
            "node can have."
        )
    for k in node.kinds:
        if not is_gpu_class(k.gpu_class):
            raise FleetFileError(f"{where}: {k.gpu_class!r} is not a GPU class llmfit can write.")
        if not 0 <= k.unhealthy_gpus <= k.gpus <= MAX_CARDS:
            raise FleetFileError(
                f"{where}: {k.gpus:,} {k.gpu_class} cards is not a count llmfit can plan (0 to "
                f"{MAX_CARDS:,} a node)."
            )
        if not 0 < k.card_bytes <= MAX_CARD_GB * GIB:
            raise FleetFileError(
                f"{where}: a {k.gpu_class} card of {k.card_bytes / MIB:,.0f} MiB is not a size "
                f"llmfit can plan (more than 0, at most {MAX_CARD_GB:,} GiB)."
            )
    return node


def import_nvidia_smi(
    csv_text: str | bytes,
    source: str,
    *,
    name: str,
    query: str | None = None,
    listing: str | bytes | None = None,
    fabric: str = "",
    ram_bytes: int = 0,
) -> PoolNode:
    """One node from saved nvidia-smi CSV output, and `nvidia-smi -L` output for MIG instances."""
    if not is_name(name):
        raise UsageError(f"The node's name {name!r} is not a host name ({NAME_RULE}); give one "
                         "with --name.")  # fmt: skip
    if fabric and not is_name(fabric):
        raise UsageError(f"--fabric {fabric!r} is not a fabric name ({NAME_RULE}).")
    rows = parse_gpu_csv(text_of(csv_text, source), source, query)
    mig = parse_gpu_list(text_of(listing, "the -L file")) if listing else None
    kinds = gpu_kinds(rows, mig)
    node = PoolNode(
        id=name, kinds=kinds, fabric=fabric, ram_bytes=ram_bytes, free_ram_bytes=ram_bytes
    )
    return checked(node, source)


_GFD = "nvidia.com/"
# The node labels a fleet file keeps: the one a Kubernetes nodeSelector picks the GPU class by.
KEPT_LABELS = ("nvidia.com/gpu.product",)
_MIG_LABEL = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb)\.(count|memory)$")
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb)$")
# A MIG profile: compute slices and GB, neither 0 (0g.0gb is no instance a card offers).
_PROFILE = re.compile(r"[1-9][0-9]{0,5}g\.[1-9][0-9]{0,8}gb", re.ASCII)
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
_SCALE = {
    None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
}  # fmt: skip


class _NotACount(ValueError):
    """A label or resource that is there but is not a whole number of devices ("8Ki")."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


def _int(value: Any) -> int:
    """A count a label or a resource gives: 0 where it is absent; a plain whole number where it
    is there, or _NotACount. "8Ki" is a Kubernetes quantity (8,192), never a card count a device
    plugin writes: it was read as 0 and the node written as a CPU node without a word."""
    if value is None:
        return 0
    text = str(value).strip()
    if not text:
        return 0
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 15):
        raise _NotACount(value)
    return int(text)  # a negative count is the node check's to refuse, with its bound


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
        if not _PROFILE.fullmatch(profile.strip().lower()):
            raise FleetFileError(
                f"node {name}: nvidia.com/gpu.product {product!r} names no MIG profile like "
                "1g.10gb."
            )
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
        if not _PROFILE.fullmatch(profile):
            raise FleetFileError(
                f"node {name}: nvidia.com/mig-{profile} names a MIG profile of 0 compute slices "
                "or 0 GB, which no card offers."
            )
        cls = mig_class(card_class, profile)
        mib = label_mem.get(profile)
        if mib is None:
            slices = [p for p in label_mem if p.split(".")[0] == profile.split(".")[0]]
            mib = label_mem[slices[0]] if len(slices) == 1 else None
        size = mib * MIB if mib else memory_from_class(cls) or 0
        bad = unhealthy(f"{_GFD}mig-{profile}", count)
        kinds.append(PoolKind(cls, size, count, count - bad, bad))
    return kinds


def import_kubectl(
    text: str | bytes, source: str, fabric_label: str | None = None
) -> tuple[PoolNode, ...]:
    """Nodes from `kubectl get nodes -o json` (a List of Nodes, or one Node).

    Kubernetes does not say which cards are in use, so every healthy card is written as free,
    except on a cordoned node (none free) or one that is not Ready (every card unhealthy); host
    RAM is the node's memory capacity, and free RAM what it lets pods allocate (0 on those two).
    Any part of the document of the wrong type is one sentence naming the item and the field.
    """
    again = "make it with kubectl get nodes -o json."
    try:
        doc = json.loads(text_of(text, source))
    except json.JSONDecodeError as e:
        raise FleetFileError(f"{source} is not JSON (line {e.lineno}: {e.msg}); {again}") from None
    except (ValueError, RecursionError):  # a number past 4,300 digits, or nesting past the stack
        raise FleetFileError(f"{source} is not JSON llmfit can read (a number too long or "
                             f"nesting too deep); {again}") from None  # fmt: skip
    items = doc.get("items") if isinstance(doc, dict) else None
    if items is None and isinstance(doc, dict) and doc.get("kind") == "Node":
        items = [doc]
    if not isinstance(items, list) or not items:
        raise FleetFileError(f"{source} holds no nodes; {again}")
    nodes: list[PoolNode] = []
    names: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise FleetFileError(f"{source}: item {i} is not a node object.")

        def part(value: Any, what: str, kind: type = dict, i: int = i) -> Any:
            if value is None:
                return kind()
            if not isinstance(value, kind):
                raise FleetFileError(
                    f"{source}: item {i}'s {what} is {_json_kind(value)}, not "
                    f"{_json_kind(kind())}; {again}"
                )
            return value

        meta = part(item.get("metadata"), "metadata")
        status = part(item.get("status"), "status")
        spec = part(item.get("spec"), "spec")
        name = part(meta.get("name"), "metadata.name", str) or f"node{i + 1}"
        labels = {k: str(v) for k, v in part(meta.get("labels"), "metadata.labels").items()}
        cap = part(status.get("capacity"), "status.capacity")
        alloc = part(status.get("allocatable"), "status.allocatable")
        conditions = part(status.get("conditions"), "status.conditions", list)
        if not all(isinstance(c, dict) for c in conditions):
            raise FleetFileError(
                f"{source}: item {i}'s status.conditions holds something other than objects; "
                f"{again}"
            )
        if name in names:
            raise FleetFileError(f"{source}: node {name!r} appears twice; names must be unique.")
        names.add(name)
        ram = _bytes(cap.get("memory"))
        free_ram = min(_bytes(alloc.get("memory")) or ram, ram)
        try:
            kinds = _node_kinds(name, labels, cap, alloc)
        except _NotACount as e:
            field = next(
                (f"{where} {k}" for where, d in (("capacity", cap), ("label", labels),
                 ("allocatable", alloc)) for k, v in d.items() if v is e.value),
                "a count",
            )  # fmt: skip
            raise FleetFileError(
                f"{source}: node {name!r}: {field} is {e.value!r}, not a whole number of "
                f"devices; {again}"
            ) from None
        ready = [c.get("status") for c in conditions if c.get("type") == "Ready"]
        if ready and ready[0] != "True":
            # A node that is not Ready runs nothing: its cards are neither used nor free.
            kinds = [PoolKind(k.gpu_class, k.card_bytes, k.gpus, 0, k.gpus) for k in kinds]
            free_ram = 0
        elif spec.get("unschedulable") is True:
            # Cordoned: its cards work but take no new work now, so none is free.
            kinds = [
                PoolKind(k.gpu_class, k.card_bytes, k.gpus, 0, k.unhealthy_gpus) for k in kinds
            ]
            free_ram = 0
        node = PoolNode(
            id=name,
            kinds=tuple(kinds),
            fabric=labels.get(fabric_label, "") if fabric_label else "",
            ram_bytes=ram,
            free_ram_bytes=free_ram,
            labels=tuple((k, labels[k]) for k in KEPT_LABELS if k in labels),
        )
        nodes.append(checked(node, f"{source}: node {name!r}" if is_name(name) else source))
    return tuple(nodes)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    kinds: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return kinds.get(type(value), "a number")


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


def write_fleet_file(text: str, output: Path) -> None:
    """Write `text` to `output` whole or not at all: beside it and renamed into place, so that a
    full disk or an interrupted run leaves the old file (or none), never half a fleet.

    A link is written through, to the file it names (as a shell's `>` would), not replaced by a
    file of its own; the file keeps its mode (0644 stays 0644; mkstemp's would be 0600), and a
    new one gets the mode the umask gives any new file. OSError as the system raises it."""
    import tempfile

    target = Path(os.path.realpath(output))
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
