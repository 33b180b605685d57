"""The TPC-H files: generated with tpchgen-cli once per scale (and per number of parts), cached
in the workspace, then reused.

`tpchgen-cli tbl -s SF` writes one file per table; for the partitioned and scale-out layouts
`--parts N --part K` writes part K of lineitem and orders (each part holds whole orders, a
contiguous order-key range: the concatenation of the parts is the full file). Files are written
to a temporary directory and renamed into the cache only when complete, so a killed generation
is never reused. tpchgen-cli runs through the measured spawn (tools/spawn.py): its wall time,
CPU and peak memory are recorded with the files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ...errors import UserError
from ...procs import pid_alive
from ...tools.spawn import Measured, spawn_measured
from .schema import PARTITIONED, TABLES

MB = 1e6
# How long one tpchgen-cli may take: SF 1 takes about 8 s here, so this is generous.
GENERATE_TIMEOUT_S = 300
GENERATE_S_PER_SF = 120


def scale_text(scale: float) -> str:
    """0.1 -> '0.1', 1.0 -> '1', 10 -> '10': how tpchgen-cli and directory names write a scale."""
    return f"{scale:g}"


def tpchgen_path() -> str:
    """tpchgen-cli of the project's environment (beside the interpreter), else on PATH."""
    beside = Path(sys.executable).parent / "tpchgen-cli"
    if beside.exists():
        return str(beside)
    found = shutil.which("tpchgen-cli")
    if not found:
        raise UserError("file-fdw-tpch: tpchgen-cli is not installed; run make bootstrap "
                        "(it is a dependency in pyproject.toml) or pip install tpchgen-cli")
    return found


def tpchgen_version(tool: str) -> str:
    res = subprocess.run([tool, "--version"], capture_output=True, text=True)
    return res.stdout.strip() or res.stderr.strip()


def _readable(path: Path) -> None:
    """Directories 0755, files 0644: the servers (another OS user) read them."""
    for p in [path, *path.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


# --- the files ---------------------------------------------------------------------------------
def _any(record: dict) -> bool:
    return True


def _aligned(record: dict) -> bool:
    """Parts cached before align_orders existed (no record of it) are generated again."""
    return "orders_moved" in record


def _cached(final: Path, valid: Callable[[dict], bool]) -> dict | None:
    """The record of a complete cached directory that is `valid`, else None."""
    path = final / "complete.json"
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return record if valid(record) else None


@dataclass
class TpchFiles:
    """The cached .tbl files of one scale: data/tpch/sf<SF>/<table>.tbl and parts<N>/."""
    root: Path          # <workspace>/data/tpch
    scale: float

    @property
    def dir(self) -> Path:
        return self.root / f"sf{scale_text(self.scale)}"

    def parts_dir(self, parts: int) -> Path:
        return self.dir / f"parts{parts}"

    def file(self, table: str) -> Path:
        return self.dir / f"{table}.tbl"

    def part_file(self, table: str, parts: int, part: int) -> Path:
        return self.parts_dir(parts) / table / f"{table}.{part}.tbl"

    def sizes(self) -> dict[str, int]:
        return {t: self.file(t).stat().st_size for t in TABLES}

    def part_sizes(self, parts: int) -> dict[str, list[int]]:
        return {t: [self.part_file(t, parts, k).stat().st_size for k in range(1, parts + 1)]
                for t in PARTITIONED}

    def complete(self, parts: int | None = None) -> bool:
        """Cached and usable as is (ensure/ensure_parts would not generate them again)."""
        if parts is None:
            return _cached(self.dir, _any) is not None
        return _cached(self.parts_dir(parts), _aligned) is not None

    def ensure(self, tool: str, log: Callable[[str], None]) -> dict:
        """Generate every table once per scale; reuse the cache after. Returns time and rate."""
        self.root.mkdir(parents=True, exist_ok=True)
        _readable(self.root)
        scale = scale_text(self.scale)
        info = self._generate(tool, self.dir, [["-s", scale]], f"tpchgen-cli tbl -s {scale}")
        if not info["cached"]:
            log(f"TPC-H SF {scale} generated: {info['bytes'] / MB:,.0f} MB in {info['seconds']:.1f} s "
                f"({info['mb_per_s']:,.0f} MB/s)")
        return info

    def ensure_parts(self, tool: str, parts: int, log: Callable[[str], None]) -> dict:
        """lineitem and orders in `parts` parts: one tpchgen-cli --parts N --part K per part."""
        scale, tables = scale_text(self.scale), ",".join(PARTITIONED)
        runs = [["-s", scale, "-T", tables, "--parts", str(parts), "--part", str(k)] for k in range(1, parts + 1)]
        info = self._generate(tool, self.parts_dir(parts), runs,
                              f"tpchgen-cli tbl -s {scale} -T {tables} --parts {parts} --part K",
                              finish=lambda d: align_orders(d, parts), valid=_aligned)
        if not info["cached"]:
            log(f"lineitem and orders in {parts} parts generated: {info['bytes'] / MB:,.0f} MB in "
                f"{info['seconds']:.1f} s")
        return info

    def _generate(self, tool: str, final: Path, runs: list[list[str]], command: str,
                  finish: Callable[[Path], dict] = lambda d: {}, valid: Callable[[dict], bool] = _any) -> dict:
        """The cached directory's record (when `valid`: else it is made again), or tpchgen-cli run
        once per argument list into a temporary directory, `finish`ed, that becomes `final` only
        when complete."""
        cached = _cached(final, valid)
        if cached is not None:
            return {**cached, "cached": True}
        if final.exists():   # made before what `finish` does now
            shutil.rmtree(final, ignore_errors=True)
        _remove_abandoned(final)
        tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.monotonic()
        spawned = [_run_tpchgen(tool, [*args, "-o", str(tmp)], self.scale) for args in runs]
        seconds = time.monotonic() - t0
        total = sum(f.stat().st_size for f in tmp.rglob("*.tbl"))
        info = {"seconds": round(seconds, 3), "bytes": total, "mb_per_s": round(total / MB / max(seconds, 1e-9), 1),
                "cpu_seconds": round(sum(m.user_s + m.sys_s for m in spawned), 3),
                "peak_rss_kib": max(m.peak_rss_kib for m in spawned), "command": command, **finish(tmp)}
        (tmp / "complete.json").write_text(json.dumps(info))
        _readable(tmp)
        _publish(tmp, final)
        return {**info, "cached": False}

    def partition_bounds(self, parts: int) -> list[tuple[int | None, int | None]]:
        """The order-key range of each part, [low, high): part K starts at the first order key of
        its lineitem file (orders are cut there too, align_orders); None is MINVALUE/MAXVALUE.
        Every part's lineitem and orders keys are checked to fall inside (the files are sorted by
        order key), since PostgreSQL trusts a foreign partition's bounds without checking them."""
        firsts = [_first_key(self.part_file("lineitem", parts, k)) for k in range(1, parts + 1)]
        bounds = [(None if k == 0 else firsts[k], None if k == parts - 1 else firsts[k + 1]) for k in range(parts)]
        for k, (low, high) in enumerate(bounds, 1):
            for t in PARTITIONED:
                f = self.part_file(t, parts, k)
                if f.stat().st_size == 0:
                    continue
                first, last = _first_key(f), _last_key(f)
                if (low is not None and first < low) or (high is not None and last >= high):
                    raise RuntimeError(f"{f}: order keys {first}..{last} outside part bounds [{low}, {high})")
        return bounds


def align_orders(directory: Path, parts: int) -> dict:
    """Cut orders where lineitem is cut. tpchgen-cli's --parts cuts the two tables at different
    order keys (SF 10 in 2 parts: lineitem.2 starts at 29999749, orders.2 at 29999846), and a
    partition bound must fit both: the orders between the two cuts move to the other part."""
    moved = 0
    for k in range(1, parts):
        left, right = (directory / "orders" / f"orders.{j}.tbl" for j in (k, k + 1))
        cut = directory / "lineitem" / f"lineitem.{k + 1}.tbl"
        if any(p.stat().st_size == 0 for p in (left, right, cut)):
            continue
        bound = _first_key(cut)
        if _last_key(left) >= bound or _first_key(right) < bound:
            moved += _recut(left, right, bound)
    return {"orders_moved": moved}


def _recut(left: Path, right: Path, bound: int) -> int:
    """Rewrite two adjacent parts (sorted by key) so that left holds the keys below bound and right
    the others, still sorted; how many lines moved."""
    new_left, new_right = left.with_name(left.name + ".recut"), right.with_name(right.name + ".recut")
    moved = 0
    with open(new_left, "wb") as to_left, open(new_right, "wb") as to_right:
        for source, home in ((left, to_left), (right, to_right)):
            with open(source, "rb") as lines:
                for line in lines:
                    to = to_left if int(line.split(b"|", 1)[0]) < bound else to_right
                    moved += to is not home
                    to.write(line)
    os.replace(new_left, left)
    os.replace(new_right, right)
    return moved


def _run_tpchgen(tool: str, args: Sequence[str], scale: float) -> Measured:
    timeout = GENERATE_TIMEOUT_S + GENERATE_S_PER_SF * scale
    done = spawn_measured([tool, "tbl", *args, "--no-progress"], timeout=timeout)
    if done.timed_out:
        raise RuntimeError(f"tpchgen-cli {' '.join(args)} did not finish in {timeout:.0f} s")
    if done.returncode != 0:
        raise RuntimeError(f"tpchgen-cli {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return done


def _remove_abandoned(final: Path) -> None:
    """Temporary directories of generations whose process is gone (killed, interrupted)."""
    for tmp in final.parent.glob(f".{final.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _publish(tmp: Path, final: Path) -> None:
    if final.exists() and not (final / "complete.json").exists():
        shutil.rmtree(final, ignore_errors=True)  # a half-written directory of an older version
    try:
        tmp.rename(final)
    except OSError:  # another run published it first
        shutil.rmtree(tmp, ignore_errors=True)


def _first_key(path: Path) -> int:
    with open(path, "rb") as f:
        return int(f.readline().split(b"|", 1)[0])


def _last_key(path: Path) -> int:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 4096))
        return int(f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1].split(b"|", 1)[0])


# --- rates -------------------------------------------------------------------------------------
def parse_rate(file_bytes: int, seconds: float, cores: int = 1) -> tuple[float, float]:
    """MB/s, and MB/s per core, of reading `file_bytes` of text in `seconds` on `cores` cores."""
    if seconds <= 0 or cores < 1:
        raise ValueError("need a positive time and at least one core")
    rate = file_bytes / MB / seconds
    return rate, rate / cores
