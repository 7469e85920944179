"""This machine as a one-node fleet: its RAM, and its NVIDIA cards and MIG instances.

RAM comes from /proc/meminfo (MemTotal, MemAvailable), else os.sysconf. Cards come from
`nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv` and MIG instances from
`nvidia-smi -L`, run when nvidia-smi is on PATH; no GPU library is loaded. The parsers here also
read saved nvidia-smi output for `llmfit fleet import nvidia-smi`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from llmfit.errors import FleetFileError
from llmfit.plan.fleet import (
    MIB,
    REPORTED_TOTALS,
    Fleet,
    PoolKind,
    PoolNode,
    class_from_product,
    memory_from_class,
    mig_class,
)
from llmfit.sources.fleet_bounds import MAX_CARD_GB, MAX_CARDS, MAX_NAME, is_name

MEMINFO = Path("/proc/meminfo")
NVIDIA_SMI = "nvidia-smi"
QUERY = "index,name,memory.total,memory.used"
TIMEOUT_S = 15
# A card with more than this share of its memory in use is busy: an idle datacenter card shows a
# few MiB used (1 MiB of 81,559 in fixtures/fleet/nvidia-smi-table-h100-sxm-8gpu.txt), a desktop
# one a few hundred for the display, a card serving a model most of it.
BUSY_SHARE = 0.05


def hostname() -> str:
    """This machine's name as a node's: the kernel takes any bytes, a fleet only a host name's
    characters (the name reaches the terminal and the commands)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:MAX_NAME].strip(".-")
    return name if is_name(name) else "this-machine"


def host_ram(meminfo: Path | None = None) -> tuple[int, int]:
    """(total, available) RAM in bytes: /proc/meminfo's MemTotal and MemAvailable, else sysconf."""
    try:
        text = (meminfo or MEMINFO).read_text()
    except OSError:
        text = ""
    fields = dict(re.findall(r"^(\w+):\s+(\d+)\s*kB", text, re.M))
    if "MemTotal" in fields:
        total = int(fields["MemTotal"]) * 1024
        free = int(fields.get("MemAvailable") or fields.get("MemFree") or fields["MemTotal"]) * 1024
        return total, min(free, total)
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
        free = page * os.sysconf("SC_AVPHYS_PAGES")
        return total, min(free, total)
    except (ValueError, OSError, AttributeError):
        return 0, 0


@dataclass(frozen=True)
class GpuRow:
    """One card as nvidia-smi's CSV gives it; memory in bytes, None where it says [N/A]."""

    index: int
    name: str
    total_bytes: int
    used_bytes: int | None = None


_UNIT = re.compile(r"\s*\[[^\]]*\]$")
# A header cell is a query field ("memory.total", "pci.bus_id"); a value never looks like one.
_FIELD = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*")
_QUERY_ARG = re.compile(r"--query-gpu[=\s]([\w.,]+)")
_NA = {"[n/a]", "n/a", "[not supported]", ""}


def _mib(cell: str) -> int | None:
    """'46068 MiB' or '7979' (nounits) → bytes; '[N/A]' → None."""
    text = cell.strip().lower()
    if text in _NA:
        return None
    # ASCII digits only, and few: float() reads "٣" and 400 nines (as inf, which int() refuses).
    m = re.fullmatch(r"([0-9]{1,15}(?:\.[0-9]{1,9})?)\s*(mib|gib)?", text, re.ASCII)
    if not m:
        raise ValueError(cell)
    scale = 1024 * MIB if m.group(2) == "gib" else MIB
    return int(float(m.group(1)) * scale)


def parse_gpu_csv(text: str, source: str, query: str | None = None) -> tuple[GpuRow, ...]:
    """Rows of `nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]`.

    The columns are named by the header row when there is one, else by `query` (the
    --query-gpu list), else by an `nvidia-smi --query-gpu=…` command line pasted above the
    output. Every problem is one sentence naming `source` and the line.
    """
    fields = [f.strip() for f in query.split(",")] if query else None
    rows: list[tuple[int, list[str]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "nvidia-smi" in line:
            m = _QUERY_ARG.search(line)
            if m and fields is None:
                fields = m.group(1).split(",")
            continue
        cells = [c.strip() for c in line.split(",")]
        names = [_UNIT.sub("", c).lower() for c in cells]
        if not rows and all(_FIELD.fullmatch(n) for n in names):
            fields = names
            continue
        rows.append((n, cells))
    if not rows:
        raise FleetFileError(f"{source} holds no nvidia-smi CSV rows.")
    if len(rows) > MAX_CARDS:
        raise FleetFileError(f"{source}: has {len(rows):,} cards; a node holds at most "
                             f"{MAX_CARDS:,}.")  # fmt: skip
    if fields is None:
        raise FleetFileError(
            f"{source}:{rows[0][0]}: has no header row, so its columns are unknown; pass "
            "--query-gpu with the fields it was made with (like name,memory.total)."
        )
    if "memory.total" not in fields:
        raise FleetFileError(
            f"{source}: has no memory.total column; query it with "
            "nvidia-smi --query-gpu=name,memory.total --format=csv."
        )
    out: list[GpuRow] = []
    for i, (n, cells) in enumerate(rows):
        if len(cells) != len(fields):
            raise FleetFileError(
                f"{source}:{n}: has {len(cells)} values for {len(fields)} columns "
                f"({','.join(fields)})."
            )
        row = dict(zip(fields, cells, strict=True))
        try:
            total = _mib(row["memory.total"])
            used = _mib(row["memory.used"]) if "memory.used" in row else None
        except ValueError as e:
            raise FleetFileError(
                f"{source}:{n}: memory {e.args[0]!r} is not a size in MiB (like 81559 MiB)."
            ) from None
        if total is not None and not 0 < total <= MAX_CARD_GB << 30:
            raise FleetFileError(
                f"{source}:{n}: memory.total {row['memory.total']!r} is not a card's memory "
                f"(more than 0, at most {MAX_CARD_GB:,} GiB)."
            )
        if total is None:
            raise FleetFileError(
                f"{source}:{n}: memory.total is {row['memory.total']} (as on unified-memory parts "
                "like the GB10), so the card's memory is unknown; describe it in a fleet file "
                "with gpu_memory_gb."
            )
        if "name" not in row:
            raise FleetFileError(
                f"{source}: has no name column; query it with "
                "nvidia-smi --query-gpu=name,memory.total --format=csv."
            )
        # "²".isdigit() is true, and int() refuses it: an index is ASCII digits, or the row's place.
        given = row.get("index", "")
        index = int(given) if given.isascii() and given.isdigit() and len(given) <= 6 else i
        out.append(GpuRow(index, row["name"], total, used))
    return tuple(out)


_GPU_LINE = re.compile(r"^\s*GPU ([0-9]{1,6}): (.+?)(?: \(UUID: [^)]*\))?\s*$")
_MIG_LINE = re.compile(r"^\s*MIG (\d+g\.\d+gb)\s+Device\s+\d+:")


def parse_gpu_list(text: str) -> dict[int, tuple[str, tuple[str, ...]]]:
    """`nvidia-smi -L` → {gpu index: (name, MIG profiles of its instances)}.

    MIG lines follow their card, indented on a host and not indented inside a GPU Operator pod
    (fixtures/fleet/nvidia-smi-L-mig-h100-pcie-k8s-scaleway.txt); both are read. A card listed
    twice keeps its last listing.
    """
    cards: dict[int, tuple[str, list[str]]] = {}
    current: int | None = None
    for line in text.splitlines():
        if m := _GPU_LINE.match(line):
            current = int(m.group(1))
            cards[current] = (m.group(2).strip(), [])
        elif (m := _MIG_LINE.match(line)) and current is not None:
            cards[current][1].append(m.group(1).lower())
    return {i: (name, tuple(profiles)) for i, (name, profiles) in cards.items()}


def card_bytes(gpu_class: str, reported: int) -> int:
    """A card's memory: what CUDA reports for a known class, else the total nvidia-smi gave."""
    return REPORTED_TOTALS.get(gpu_class, reported)


def gpu_kinds(
    rows: tuple[GpuRow, ...], mig: dict[int, tuple[str, tuple[str, ...]]] | None = None
) -> tuple[PoolKind, ...]:
    """The kinds of one node's devices: whole cards by class, MIG instances by profile.

    A card with MIG instances is counted as its instances (all free: nvidia-smi's memory.used is
    the card's, not an instance's); a whole card is busy when more than BUSY_SHARE of it is used.
    """
    counts: dict[tuple[str, int], list[int]] = {}
    for row in rows:
        cls = class_from_product(row.name, row.total_bytes)
        profiles = (mig or {}).get(row.index, ("", ()))[1]
        if profiles:
            for p in profiles:
                sub = mig_class(cls, p)
                c = counts.setdefault((sub, memory_from_class(sub) or 0), [0, 0])
                c[0] += 1
                c[1] += 1
            continue
        busy = row.used_bytes is not None and row.used_bytes > BUSY_SHARE * row.total_bytes
        c = counts.setdefault((cls, card_bytes(cls, row.total_bytes)), [0, 0])
        c[0] += 1
        c[1] += not busy
    return tuple(PoolKind(cls, size, n, free) for (cls, size), (n, free) in counts.items())


def _run(argv: list[str]) -> str:
    # Output that is not UTF-8 is read as far as it goes: a name with a stray byte is still a
    # card, and what cannot be read becomes a note, never a traceback.
    r = subprocess.run(
        argv, capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S, check=False
    )
    if r.returncode != 0:
        first = (r.stderr or r.stdout).strip().splitlines()
        raise OSError(first[0] if first else f"exit status {r.returncode}")
    return r.stdout


def read_machine() -> Fleet:
    """This machine as a one-node fleet; what could not be read is said in Fleet.notes."""
    ram, free_ram = host_ram()
    kinds: tuple[PoolKind, ...] = ()
    notes: list[str] = []
    exe = shutil.which(NVIDIA_SMI)
    if exe:
        try:
            rows = parse_gpu_csv(_run([exe, f"--query-gpu={QUERY}", "--format=csv"]), NVIDIA_SMI)
        except (OSError, subprocess.SubprocessError, FleetFileError) as e:
            msg = e.message if isinstance(e, FleetFileError) else str(e)
            notes.append(
                f"nvidia-smi could not be read ({msg}), so only this machine's RAM is used."
            )
            rows = ()
        mig: dict[int, tuple[str, tuple[str, ...]]] = {}
        if rows:
            try:
                mig = parse_gpu_list(_run([exe, "-L"]))
            except (OSError, subprocess.SubprocessError) as e:
                notes.append(f"nvidia-smi -L failed ({e}), so MIG instances are not seen.")
        kinds = gpu_kinds(rows, mig)
    node = PoolNode(id=hostname(), kinds=kinds, ram_bytes=ram, free_ram_bytes=free_ram)
    return Fleet(nodes=(node,), source="this machine", notes=tuple(notes))
