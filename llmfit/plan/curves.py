"""Measured kernel efficiencies, as curves in the work's size: what share of a card's datasheet
bandwidth or peak a GEMM, a grouped MoE GEMM or an attention read reaches, and how long a
collective takes, for the cards and engines aiconfigurator measured.

The curves are data: llmfit/data/kernel_curves.json, derived once by
benchmarks/derive_kernel_curves.py from aiconfigurator 0.12.0's measured tables (Apache-2.0), and
read here from the package's own files on first use (the plan package reads nothing else). Every
efficiency is

    efficiency = roofline time / measured time,
    roofline time = max(bytes / the card's datasheet memory bandwidth,
                        FLOPs / its dense peak at the dtype),

with the figures of llmfit's card table (plan/cards.py), so a serving model prices an operation
as `roofline time / curve.at(size)`, and no rate it prints can pass the card's peak.

A card aiconfigurator does not cover takes the curves of a covered card of its own architecture
(an H800 Hopper's are the H100's), and a card of no covered architecture (AMD, Apple, Turing, …)
the priors: at each point the lowest efficiency any covered card reaches. `KernelCurves.source`
says which.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from llmfit.plan import cards, package_data

DATA_FILE = "data/kernel_curves.json"

# A covered card whose curves an uncovered card of the same architecture takes.
REPRESENTATIVE: dict[str, str] = {
    "ampere": "a100-80g",
    "ada": "l40s-48g",
    "hopper": "h100-80g",
    "blackwell": "b200-180g",
    "blackwell-ultra": "b300-288g",
    "blackwell-rtx": "rtxpro6000-96g",
}
# A dtype a card's tables lack is read from the nearest they hold (same weight bytes first),
# then from 16-bit.
DTYPE_ALIASES: dict[str, str] = {
    "bfloat16": "bf16", "fp16": "bf16", "float16": "bf16", "nvfp4": "fp4", "mxfp4": "fp4",
    "int4": "w4a16", "awq": "w4a16", "gptq": "w4a16",
}  # fmt: skip
DTYPE_NEAREST: dict[str, tuple[str, ...]] = {
    "fp8": ("fp8_block",),
    "fp8_block": ("fp8",),
    "w4a8": ("fp8_block", "fp8"),
    "fp4": ("w4a8",),
}
# A collective on a link no table measured: a ring's 2(n-1)/n of the bytes each way for an
# all-reduce, (n-1)/n for an all-to-all, over the card's link, after a fixed 10 µs (the
# smallest NVLink all-reduce measured is 4.4-5 µs; PCIe's are slower: 10 is the conservative side).
PRIOR_COLLECTIVE_LATENCY = 10e-6


@dataclass(frozen=True)
class Curve:
    """Points (x, y), x ascending and positive: y at any x by linear interpolation in log x,
    held at the end values outside them."""

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        xs = [x for x, _ in self.points]
        if not self.points or any(not (math.isfinite(x) and x > 0) for x in xs):
            raise ValueError(f"a curve needs positive finite x values, not {xs}")
        if any(b <= a for a, b in zip(xs, xs[1:], strict=False)):
            raise ValueError(f"a curve's x values must ascend: {xs}")
        if any(not (math.isfinite(y) and y > 0) for _, y in self.points):
            raise ValueError(f"a curve's values must be positive and finite: {self.points}")
        # The step model reads a curve thousands of times a plan: its x values are kept once
        # as they are, and each segment's ends (x, y at its right end; log x and y at its left;
        # the differences across it), so that a reading is one search and four operations.
        pts = self.points
        lx = [math.log(x) for x in xs]
        object.__setattr__(self, "_xs", tuple(xs))
        object.__setattr__(self, "_segments", tuple(
            (pts[i][0], pts[i][1], lx[i - 1], lx[i] - lx[i - 1], pts[i - 1][1],
             pts[i][1] - pts[i - 1][1])
            for i in range(1, len(pts))
        ))  # fmt: skip
        object.__setattr__(self, "_ends", (xs[0], self.points[0][1], xs[-1], self.points[-1][1]))

    def at(self, x: float) -> float:
        first, y_first, last, y_last = self._ends  # type: ignore[attr-defined]
        if not x > first:  # also NaN and anything at or below the first point
            return y_first  # type: ignore[no-any-return]
        if x >= last:
            return y_last  # type: ignore[no-any-return]
        i = bisect.bisect_left(self._xs, x)  # type: ignore[attr-defined]
        x1, y1, l0, dl, y0, dy = self._segments[i - 1]  # type: ignore[attr-defined]
        if x == x1:
            return y1  # type: ignore[no-any-return]
        # y0 + w (y1 − y0), w the share of the segment's log x: as the points give it.
        return y0 + (math.log(x) - l0) / dl * dy  # type: ignore[no-any-return]


def efficiency_curve(points: object) -> Curve:
    """A curve of efficiencies: every value in (0, 1], so any value between them is too."""
    curve = Curve(_pairs(points))
    if any(y > 1 for _, y in curve.points):
        raise ValueError(f"an efficiency is at most 1: {curve.points}")
    return curve


@dataclass(frozen=True)
class Collective:
    """A collective's measured seconds by message bytes (every rank's buffer): interpolated in
    log-log between the points, the first point's latency below them, and past the last at the
    last point's bandwidth (time in proportion to bytes)."""

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        # Kept once in log, as Curve keeps its x values: a plan reads collectives thousands of
        # times.
        object.__setattr__(self, "_xs", tuple(x for x, _ in self.points))
        object.__setattr__(self, "_lx", tuple(math.log(x) for x, _ in self.points))
        object.__setattr__(self, "_ly", tuple(math.log(y) for _, y in self.points))

    def at(self, nbytes: float) -> float:
        pts = self.points
        if not nbytes > pts[0][0]:
            return pts[0][1]
        if nbytes >= pts[-1][0]:
            return pts[-1][1] * nbytes / pts[-1][0]
        i = bisect.bisect_left(self._xs, nbytes)  # type: ignore[attr-defined]
        if nbytes == pts[i][0]:
            return pts[i][1]
        lx: tuple[float, ...] = self._lx  # type: ignore[attr-defined]
        ly: tuple[float, ...] = self._ly  # type: ignore[attr-defined]
        w = (math.log(nbytes) - lx[i - 1]) / (lx[i] - lx[i - 1])
        return math.exp(ly[i - 1] + w * (ly[i] - ly[i - 1]))


def _ring(link_bandwidth: float, share: float) -> Collective:
    """A prior collective: a fixed latency then `share` × bytes over the link, on a grid of
    sizes from 1 KiB to 1 GiB."""
    bw = link_bandwidth if link_bandwidth > 0 else cards.PCIE4
    sizes = [float(1 << e) for e in range(10, 31, 2)]
    return Collective(tuple((b, PRIOR_COLLECTIVE_LATENCY + share * b / bw) for b in sizes))


@dataclass(frozen=True)
class KernelCurves:
    """One card's curves under one engine, and where they came from."""

    card: str  # the card asked for
    backend: str
    # "aiconfigurator 0.12.0: measured on h100-80g under vllm", "… on h100-80g (the hopper
    # card measured) under vllm", "… on h100-80g under sglang (no vllm table)" or "prior: …"
    source: str
    measured: bool  # False: the priors
    gemms: Mapping[str, Curve]  # by dtype: efficiency by tokens (m)
    moes: Mapping[str, Curve]  # by dtype: efficiency by tokens an active expert gets
    attention_decode: Curve  # efficiency vs bandwidth by batch × context tokens read
    attention_prefill: Curve  # efficiency vs 16-bit peak by a sequence's prompt tokens
    mla_decode: Curve | None  # as attention_decode, for MLA's latent cache (SGLang's tables)
    allreduces: Mapping[int, Collective]  # by ranks: seconds by bytes
    alltoalls: Mapping[int, Collective]
    link_bandwidth: float  # the card's, one way: for ranks no table measured
    # By tensor-parallel width: the grouped GEMM of one GPU whose experts are each cut to
    # 1/width of their columns (aiconfigurator's moe_tp_size), by dtype as `moes`.
    moes_sliced: Mapping[int, Mapping[str, Curve]] = field(default_factory=dict)
    # By kernel family ("triton", "flashinfer_trtllm", "marlin", …), then dtype: each kernel's own
    # grouped GEMM, whole experts ("moe_kernels"); the engine's own tables first, then the same
    # card's under the other engine for a kernel and dtype its own did not measure (the kernel is
    # the same code: SGLang's Marlin and Triton MoE are vLLM's).
    moes_by_kernel: Mapping[str, Mapping[str, Curve]] = field(default_factory=dict)

    def gemm(self, dtype: str) -> Curve:
        return _by_dtype(self.gemms, dtype, "gemm")

    def moe(self, dtype: str, slices: int = 1) -> Curve:
        """The grouped GEMM's curve for experts cut `slices` ways (1: whole, as under expert
        parallelism): the widest measured cut no wider than `slices` that holds the dtype (or
        its nearest), else the whole experts'. A thinner slice reaches less of the bandwidth
        at a few tokens an expert (its GEMMs are narrower), so the nearest measured width
        below is the optimistic side of the two."""
        for n in sorted((w for w in self.moes_sliced if 1 < w <= slices), reverse=True):
            found = _in_table(self.moes_sliced[n], dtype)
            if found is not None:
                return found
        return _by_dtype(self.moes, dtype, "moe")

    def moe_kernel(self, kernel: str, dtypes: tuple[str, ...]) -> Curve | None:
        """The grouped GEMM of `kernel` at the first of `dtypes` a table measured, if any."""
        table = self.moes_by_kernel.get(kernel, {})
        return next((table[d] for d in dtypes if d in table), None)

    def allreduce(self, ranks: int) -> Collective:
        return _by_ranks(self.allreduces, ranks, self.link_bandwidth, 2 * (ranks - 1) / ranks)

    def alltoall(self, ranks: int) -> Collective:
        return _by_ranks(self.alltoalls, ranks, self.link_bandwidth, (ranks - 1) / ranks)


def _chain(dtype: str) -> tuple[str, ...]:
    d = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    return (d, *DTYPE_NEAREST.get(d, ()), "bf16")


def _in_table(table: Mapping[str, Curve], dtype: str) -> Curve | None:
    """The curve of `dtype`, else of the nearest dtype the table holds, if any."""
    return next((table[name] for name in _chain(dtype) if name in table), None)


def _by_dtype(table: Mapping[str, Curve], dtype: str, kind: str) -> Curve:
    """The curve of `dtype`, else of the nearest dtype the table holds, else the priors'."""
    chain = _chain(dtype)
    found = _in_table(table, dtype)
    if found is not None:
        return found
    priors = _curves(_priors(), kind)
    return next(priors[name] for name in chain if name in priors)


def _by_ranks(table: Mapping[int, Collective], ranks: int, link: float, share: float) -> Collective:
    if ranks < 2:
        raise ValueError(f"a collective needs 2 or more ranks, not {ranks}")
    if ranks in table:
        return table[ranks]
    # Ranks between measured counts take the next larger count's times (more ranks are no
    # faster); more than any measured, or none measured, the link's prior.
    bigger = [n for n in table if n > ranks]
    if bigger:
        return table[min(bigger)]
    return _ring(link, share)


@cache
def _doc() -> dict[str, object]:
    doc = package_data.read_json(DATA_FILE)
    if not isinstance(doc, dict) or not {"cards", "priors", "source"} <= set(doc):
        raise ValueError(f"{DATA_FILE} lacks cards, priors or source")
    return doc


def _priors() -> dict[str, object]:
    priors = _doc()["priors"]
    if not isinstance(priors, dict):
        raise ValueError(f"{DATA_FILE}: priors is not a table")
    return priors


def _pairs(points: object) -> tuple[tuple[float, float], ...]:
    if not isinstance(points, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(v, (int, float)) for v in p)
        for p in points
    ):
        raise ValueError(f"{DATA_FILE}: {points!r} is not a list of [x, y] pairs")
    return tuple((float(x), float(y)) for x, y in points)


class _Curves(Mapping[str, Curve]):
    """Efficiency curves by name (a dtype), each made from its points, and checked
    (`efficiency_curve`), the first time it is read: a card's tables hold a hundred curves, of
    which a plan reads a few, and making them all had cost a few ms of every run."""

    def __init__(self, points: Mapping[str, object]) -> None:
        self._points = points
        self._made: dict[str, Curve] = {}

    def __getitem__(self, name: str) -> Curve:
        made = self._made.get(name)
        if made is None:
            made = self._made[name] = efficiency_curve(self._points[name])
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._points)

    def __len__(self) -> int:
        return len(self._points)

    def __repr__(self) -> str:
        return repr(dict(self))


def _curves(got: Mapping[str, object], kind: str) -> Mapping[str, Curve]:
    table = got.get(kind, {})
    if not isinstance(table, dict):
        raise ValueError(f"{DATA_FILE}: {kind} is not a table by dtype")
    return _Curves({str(k): v for k, v in table.items()})


def _collectives(got: Mapping[str, object], kind: str) -> dict[int, Collective]:
    table = got.get(kind, {})
    if not isinstance(table, dict):
        raise ValueError(f"{DATA_FILE}: {kind} is not a table by ranks")
    return {int(n): Collective(points) for n, v in table.items() if (points := _pairs(v))}


def _backends(key: str) -> dict[str, Any]:
    """The tables card `key` was measured with, by engine (none where it is not covered)."""
    covered = _doc()["cards"]
    assert isinstance(covered, dict)
    entry = covered.get(key)
    got = entry.get("backends", {}) if isinstance(entry, dict) else {}
    assert isinstance(got, dict)
    return got


def _measured(key: str, backend: str) -> tuple[str, str, Mapping[str, object]] | None:
    """The covered card, engine and tables that stand for `key` under `backend`, if any."""
    got = _backends(key)
    if backend in got:
        return key, backend, got[backend]
    for other in sorted(got):
        return key, other, got[other]
    return None


def _other_moe(
    key: str, engine: str
) -> tuple[str, Mapping[str, Curve], dict[int, Mapping[str, Curve]]] | None:
    """The grouped-GEMM curves (whole and sliced) measured on card `key` under an engine other
    than `engine`."""
    got = _backends(key)
    for other in sorted(got):
        if other != engine and isinstance(got[other], dict):
            moes = _curves(got[other], "moe")
            if moes:
                return other, moes, _sliced(got[other])
    return None


def _engines() -> set[str]:
    """The engines some table was measured under (the file's to say, not this module's)."""
    covered = _doc()["cards"]
    assert isinstance(covered, dict)
    return {b for c in covered.values() if isinstance(c, dict) for b in c.get("backends", {})}


@cache
def curves_for(card_key: str, architecture: str, backend: str) -> KernelCurves:
    """The curves a serving model prices `card_key` by under `backend`, an engine's name as the
    file keys it; an engine no table was measured under takes the priors (its kernels were not
    measured)."""
    card = cards.spec(card_key)
    link = card.link_bandwidth if card is not None else 0.0
    src = f"aiconfigurator {_source_version()}"
    found, how = None, ""
    if backend in _engines():
        found = _measured(card_key, backend)
        if found is None and architecture in REPRESENTATIVE:
            found = _measured(REPRESENTATIVE[architecture], backend)
            how = f" (the {architecture} card measured)"
    if found is None:
        priors = _priors()
        return KernelCurves(
            card_key, backend,
            f"prior: the lowest efficiency any card {src} measured reaches, at each size",
            False, _curves(priors, "gemm"), _curves(priors, "moe"),
            efficiency_curve(priors["attention_decode"]),
            efficiency_curve(priors["attention_prefill"]),
            efficiency_curve(priors["mla_decode"]), {}, {}, link,
        )  # fmt: skip
    key, engine, got = found
    said = f"{src}: measured on {key}{how} under {engine}"
    if engine != backend:
        said += f" (no {backend} table)"
    moes = _curves(got, "moe")
    sliced = _sliced(got)
    if not moes:
        # A table with no grouped GEMM (aiconfigurator measured none under vLLM on the A100):
        # the same card's own under another engine, not the priors' lowest of every card, which
        # priced gpt-oss-120b's MXFP4 experts on an A100 at three times their measured TPOT.
        other = _other_moe(key, engine)
        if other is not None:
            moes, sliced = other[1], other[2]
            said += f"; its grouped GEMM measured under {other[0]}"
    mla = got.get("mla_decode")
    return KernelCurves(
        card_key, backend, said, True, _curves(got, "gemm"), moes,
        efficiency_curve(got["attention_decode"]), efficiency_curve(got["attention_prefill"]),
        efficiency_curve(mla) if mla else None,
        _collectives(got, "allreduce"), _collectives(got, "alltoall"), link, sliced,
        _by_kernel(key, engine),
    )  # fmt: skip


def _by_kernel(key: str, engine: str) -> dict[str, Mapping[str, Curve]]:
    """Card `key`'s grouped GEMM kernel by kernel ("moe_kernels"): `engine`'s tables, then the
    other engines' for a kernel and dtype `engine`'s did not measure."""
    got = _backends(key)
    points: dict[str, dict[str, object]] = {}
    for name in [engine, *sorted(b for b in got if b != engine)]:
        table = got.get(name, {}).get("moe_kernels", {}) if isinstance(got.get(name), dict) else {}
        if not isinstance(table, dict):
            raise ValueError(f"{DATA_FILE}: moe_kernels is not a table by kernel")
        for kernel, by_dtype in table.items():
            if not isinstance(by_dtype, dict):
                raise ValueError(f"{DATA_FILE}: moe is not a table by dtype")
            for dtype, curve in by_dtype.items():
                points.setdefault(str(kernel), {}).setdefault(str(dtype), curve)
    return {kernel: _Curves(by_dtype) for kernel, by_dtype in points.items()}


def _sliced(got: Mapping[str, object]) -> dict[int, Mapping[str, Curve]]:
    """A table's grouped-GEMM curves by the width its experts are cut to ("moe_sliced")."""
    table = got.get("moe_sliced", {})
    if not isinstance(table, dict):
        raise ValueError(f"{DATA_FILE}: moe_sliced is not a table by width")
    return {int(n): _curves({"moe": v}, "moe") for n, v in table.items()}


def _source_version() -> str:
    source = _doc()["source"]
    assert isinstance(source, dict)
    return str(source["version"])
