"""The calibration file: each pool's scales fitted by `llmfit calibrate`, beside the fleet file
(fleet.toml → fleet.calibration.toml), read by every later plan on that fleet (docs/fleet.md).

Written whole or not at all: to a temporary file in the same folder, flushed to disk, then
renamed over the old one (a rename within a folder is atomic on POSIX), so a plan never reads
half a calibration, and a calibration that fails leaves the old file as it was.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from llmfit.errors import BadInputError
from llmfit.plan.load import Scales
from llmfit.sources.files import FileProblem, read_capped

if TYPE_CHECKING:  # the calibration's nouns load where a file is read (most plans have none)
    from llmfit.plan.calibration import Pool

SCHEMA = 1
MAX_BYTES = 1 << 20
SUFFIX = ".calibration.toml"


class CalibrationFileError(BadInputError):
    """A calibration file that cannot be read or written."""


def beside(fleet_path: str | os.PathLike[str]) -> Path:
    """The calibration file of a fleet file: fleet.toml → fleet.calibration.toml."""
    p = Path(fleet_path)
    return p.with_name(p.stem + SUFFIX)


def fleet_file(source: str) -> Path | None:
    """The fleet file a fleet was read from (Fleet.source), or None: inline, this machine."""
    path = source.split(": ", 1)[1] if source.startswith("$LLMFIT_FLEET: ") else source
    if not path or source.startswith("inline") or source == "this machine":
        return None
    p = Path(path)
    return p if p.is_file() else None


def for_fleet(source: str, given: str | None = None) -> tuple[Pool, ...]:
    """The calibration a plan on the fleet applies: the file `given` (--calibration, which must
    be there), else the one beside the fleet file where there is one, else none."""
    if given is not None:
        path = Path(given)
        if not os.path.lexists(path):
            raise CalibrationFileError(f"{path}: no such calibration file.")
        return read_calibration(path)
    fleet = fleet_file(source)
    return read_calibration(beside(fleet)) if fleet is not None else ()


def read_calibration(path: Path) -> tuple[Pool, ...]:
    """The pools of a calibration file; none where there is no file."""
    if not os.path.lexists(path):
        return ()
    import tomllib  # only where there is a file: a plan without one does not import it

    try:
        raw = read_capped(path, MAX_BYTES, "calibration file")
        doc = tomllib.loads(raw.decode("utf-8"))
    except FileProblem as e:
        raise CalibrationFileError(f"{path} {e.problem}.") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CalibrationFileError(
            f"{path} is not a calibration file llmfit can read ({e}).",
            hint="run `llmfit calibrate` again, or plan with --no-calibration",
        ) from None
    if doc.get("schema") != SCHEMA:
        raise CalibrationFileError(f"{path}: schema is {doc.get('schema')!r}, not {SCHEMA}.")
    pools = doc.get("pool", [])
    if not isinstance(pools, list):
        raise CalibrationFileError(f"{path}: pool is not a list of tables.")
    return tuple(_pool(path, i, p) for i, p in enumerate(pools))


def _pool(path: Path, i: int, t: object) -> Pool:
    from llmfit.plan.calibration import MAX_SCALE, MIN_SCALE, Pool

    where = f"{path}: pool {i + 1}"
    if not isinstance(t, dict):
        raise CalibrationFileError(f"{where} is not a table.")

    def text(key: str) -> str:
        v = t.get(key)
        if not isinstance(v, str) or not v:
            raise CalibrationFileError(f"{where}: {key} is {v!r}, not a name.")
        return v

    def number(key: str, lo: float, hi: float) -> float:
        v = t.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise CalibrationFileError(f"{where}: {key} is {v!r}, not a finite number.")
        if not lo <= v <= hi:
            raise CalibrationFileError(f"{where}: {key} is {v:g}, outside {lo:g} to {hi:g}.")
        return float(v)

    runs = t.get("runs")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise CalibrationFileError(f"{where}: runs is {runs!r}, not a count of runs.")
    sources = t.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise CalibrationFileError(f"{where}: sources is not a list of file names.")
    # The batches its runs ran at (a file written before they were kept: whole at every batch).
    batches = (0.0, math.inf)
    if "batch_low" in t or "batch_high" in t:
        batches = (number("batch_low", 0.0, 1e9), number("batch_high", 0.0, 1e9))
        if batches[0] > batches[1]:
            raise CalibrationFileError(
                f"{where}: batch_low {batches[0]:g} is above batch_high {batches[1]:g}."
            )
    return Pool(
        card=text("card"),
        engine=text("engine"),
        scales=Scales(
            number("decode", MIN_SCALE, MAX_SCALE), number("prefill", MIN_SCALE, MAX_SCALE)
        ),
        runs=runs,
        error_before=number("error_before", 0.0, 1e6),
        error_after=number("error_after", 0.0, 1e6),
        sources=tuple(sources),
        batches=batches,
    )


def render(pools: tuple[Pool, ...]) -> str:
    """The calibration file's text."""
    lines = [
        "# llmfit calibration: the scales `llmfit calibrate` fitted to your benchmark runs, a",
        "# pool (card class × engine) each; plans on this fleet apply them (docs/fleet.md).",
        f"schema = {SCHEMA}",
    ]
    for p in pools:
        lines += [
            "",
            "[[pool]]",
            f"card = {json.dumps(p.card)}",
            f"engine = {json.dumps(p.engine)}",
            f"decode = {p.scales.decode:.6g}",
            f"prefill = {p.scales.prefill:.6g}",
            f"runs = {p.runs}",
            f"error_before = {p.error_before:.6g}",
            f"error_after = {p.error_after:.6g}",
            f"sources = [{', '.join(json.dumps(s) for s in p.sources)}]",
        ]
        lo, hi = p.batches
        if math.isfinite(hi):
            lines += [f"batch_low = {lo:.6g}", f"batch_high = {hi:.6g}"]
    return "\n".join(lines) + "\n"


def write_calibration(path: Path, pools: tuple[Pool, ...]) -> None:
    """Write the file whole, or leave the old one as it was (CalibrationFileError)."""
    # Imported here, where a file is written: tempfile brings shutil and the compression
    # modules, which every plan (that only reads a calibration) would otherwise import.
    import tempfile

    text = render(pools)
    folder = path.parent if str(path.parent) else Path(".")
    fd = -1
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = ""
    except OSError as e:
        raise CalibrationFileError(
            f"{path} could not be written ({e.strerror or e}); the old calibration is as it was."
        ) from None
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
