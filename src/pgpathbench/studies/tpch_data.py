"""TPC-H data for file-fdw-tpch: generation with tpchgen-cli (cached per scale in the workspace),
parallel loading with COPY, answer comparison, plan shapes and the parse-rate arithmetic.

Pure helpers and the load machinery live here so that the study module keeps the study's
shape and bench/tpch_load.py can time the very same code.

Generation: `tpchgen-cli tbl -s SF` writes one file per table; for the partitioned and
scale-out layouts `--parts N --part K` writes part K of lineitem and orders (each part holds
whole orders, a contiguous order-key range: the concatenation of the parts is the full file).
Files are written to a temporary directory and renamed into the cache only when complete, so a
killed generation is never reused.

Loading: every line ends with '|', which COPY would read as one column too many. The files are
streamed to COPY FROM STDIN with that final '|' cut (a byte replace of '|\\n' per 1 MB block,
never inside a line: blocks are cut at the last newline). Large files are split at line
boundaries into slices loaded concurrently, so that every core works (a single COPY is bound to
one core: bench/tpch_load.py measures both).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Callable, Iterable, Sequence

import psycopg

from ..errors import UserError
from . import tpch

BLOCK = 1 << 20
MB = 1e6


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
        return {t: self.file(t).stat().st_size for t in tpch.TABLES}

    def part_sizes(self, parts: int) -> dict[str, list[int]]:
        return {t: [self.part_file(t, parts, k).stat().st_size for k in range(1, parts + 1)]
                for t in tpch.PARTITIONED}

    def complete(self, parts: int | None = None) -> bool:
        d = self.dir if parts is None else self.parts_dir(parts)
        return (d / "complete.json").exists()

    def ensure(self, tool: str, log: Callable[[str], None]) -> dict:
        """Generate every table once per scale; reuse the cache after. Returns time and rate."""
        if self.complete():
            info = json.loads((self.dir / "complete.json").read_text())
            return {**info, "cached": True}
        self.root.mkdir(parents=True, exist_ok=True)
        _readable(self.root)
        tmp = self.root / f".sf{scale_text(self.scale)}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.monotonic()
        _run_tpchgen(tool, ["-s", scale_text(self.scale), "-o", str(tmp)])
        seconds = time.monotonic() - t0
        total = sum(f.stat().st_size for f in tmp.glob("*.tbl"))
        info = {"seconds": round(seconds, 3), "bytes": total, "mb_per_s": round(total / MB / seconds, 1),
                "command": f"tpchgen-cli tbl -s {scale_text(self.scale)}"}
        (tmp / "complete.json").write_text(json.dumps(info))
        _readable(tmp)
        self._publish(tmp, self.dir)
        log(f"TPC-H SF {scale_text(self.scale)} generated: {total / MB:,.0f} MB in {seconds:.1f} s "
            f"({info['mb_per_s']:,.0f} MB/s)")
        return {**info, "cached": False}

    def ensure_parts(self, tool: str, parts: int, log: Callable[[str], None]) -> dict:
        """lineitem and orders in `parts` parts: one tpchgen-cli --parts N --part K per part."""
        if self.complete(parts):
            info = json.loads((self.parts_dir(parts) / "complete.json").read_text())
            return {**info, "cached": True}
        tmp = self.dir / f".parts{parts}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.monotonic()
        for k in range(1, parts + 1):
            _run_tpchgen(tool, ["-s", scale_text(self.scale), "-o", str(tmp), "-T", ",".join(tpch.PARTITIONED),
                                "--parts", str(parts), "--part", str(k)])
        seconds = time.monotonic() - t0
        total = sum(f.stat().st_size for f in tmp.rglob("*.tbl"))
        info = {"seconds": round(seconds, 3), "bytes": total, "mb_per_s": round(total / MB / max(seconds, 1e-9), 1),
                "command": f"tpchgen-cli tbl -s {scale_text(self.scale)} -T lineitem,orders --parts {parts} --part K"}
        (tmp / "complete.json").write_text(json.dumps(info))
        _readable(tmp)
        self._publish(tmp, self.parts_dir(parts))
        log(f"lineitem and orders in {parts} parts generated: {total / MB:,.0f} MB in {seconds:.1f} s")
        return {**info, "cached": False}

    @staticmethod
    def _publish(tmp: Path, final: Path) -> None:
        if final.exists() and not (final / "complete.json").exists():
            shutil.rmtree(final, ignore_errors=True)  # a half-written directory of an older version
        try:
            tmp.rename(final)
        except OSError:  # another run published it first
            shutil.rmtree(tmp, ignore_errors=True)

    def partition_bounds(self, parts: int) -> list[tuple[int | None, int | None]]:
        """The order-key range of each part, [low, high): part K starts at the first order key of
        its orders file; None is MINVALUE/MAXVALUE. Every part's lineitem and orders keys are
        checked to fall inside (the files are sorted by order key), since PostgreSQL trusts a
        foreign partition's bounds without checking them."""
        firsts = [_first_key(self.part_file("orders", parts, k)) for k in range(1, parts + 1)]
        bounds = [(None if k == 0 else firsts[k], None if k == parts - 1 else firsts[k + 1]) for k in range(parts)]
        for k, (low, high) in enumerate(bounds, 1):
            for t in tpch.PARTITIONED:
                f = self.part_file(t, parts, k)
                if f.stat().st_size == 0:
                    continue
                first, last = _first_key(f), _last_key(f)
                if (low is not None and first < low) or (high is not None and last >= high):
                    raise RuntimeError(f"{f}: order keys {first}..{last} outside part bounds [{low}, {high})")
        return bounds


def _run_tpchgen(tool: str, args: Sequence[str]) -> None:
    res = subprocess.run([tool, "tbl", *args, "--no-progress"], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"tpchgen-cli {' '.join(args)} failed: {res.stderr.strip()[-500:]}")


def _first_key(path: Path) -> int:
    with open(path, "rb") as f:
        return int(f.readline().split(b"|", 1)[0])


def _last_key(path: Path) -> int:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 4096))
        return int(f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1].split(b"|", 1)[0])


def split_points(path: Path, pieces: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges of `pieces` slices of a file, each cut just after a newline."""
    size = path.stat().st_size
    points = [0]
    with open(path, "rb") as f:
        for i in range(1, pieces):
            f.seek(max(points[-1], size * i // pieces))
            f.readline()
            pos = f.tell()
            if pos < size and pos > points[-1]:
                points.append(pos)
    points.append(size)
    return [(a, b) for a, b in zip(points, points[1:]) if b > a]


def copy_slice(conninfo: str, table: str, path: Path, start: int, end: int) -> int:
    """COPY one slice of a .tbl file into `table`, without each line's final '|'. Returns bytes."""
    with psycopg.connect(conninfo, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY {table} FROM STDIN (FORMAT text, DELIMITER '|')") as cp, open(path, "rb") as f:
            f.seek(start)
            left, tail = end - start, b""
            while left > 0:
                block = f.read(min(BLOCK, left))
                if not block:
                    raise RuntimeError(f"{path}: ends before byte {end}")
                left -= len(block)
                data = tail + block
                cut = data.rfind(b"\n") + 1
                tail = data[cut:]
                if cut:
                    cp.write(data[:cut].replace(b"|\n", b"\n"))
            if tail:
                raise RuntimeError(f"{path}: slice [{start}, {end}) does not end with a newline")
    return end - start


# --- tasks on a pool of connections ------------------------------------------------------------
@dataclass
class Task:
    """One unit of load work: a slice COPY'd into a table, or one statement (ANALYZE)."""
    group: str                    # what it counts towards: "load single", "analyze foreign partitioned"...
    conninfo: str
    table: str = ""
    path: Path | None = None
    start: int = 0
    end: int = 0
    sql: str = ""
    weight: float = 0.0           # bytes of work, for longest-first ordering

    @property
    def bytes(self) -> int:
        return self.end - self.start if self.path is not None else 0

    def run(self) -> None:
        if self.path is not None:
            copy_slice(self.conninfo, self.table, self.path, self.start, self.end)
        else:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                conn.execute(self.sql)


def copy_tasks(group: str, conninfo: str, table: str, path: Path, slice_bytes: int) -> list[Task]:
    size = path.stat().st_size
    pieces = max(1, math.ceil(size / slice_bytes)) if slice_bytes > 0 else 1
    return [Task(group, conninfo, table=table, path=path, start=a, end=b, weight=b - a)
            for a, b in split_points(path, pieces)]


@dataclass
class PhaseResult:
    wall_s: float
    groups: dict[str, dict] = field(default_factory=dict)   # group -> {busy_s, bytes, tasks}


def run_tasks(tasks: Iterable[Task], workers: int) -> PhaseResult:
    """Longest first on `workers` connections; the first failure stops the phase and is raised."""
    todo = sorted(tasks, key=lambda t: -t.weight)
    groups: dict[str, dict] = {}
    lock = threading.Lock()

    def one(task: Task) -> None:
        t0 = time.monotonic()
        task.run()
        dt = time.monotonic() - t0
        with lock:
            g = groups.setdefault(task.group, {"busy_s": 0.0, "bytes": 0, "tasks": 0, "first": t0, "last": t0 + dt})
            g["busy_s"] += dt
            g["bytes"] += task.bytes
            g["tasks"] += 1
            g["first"], g["last"] = min(g["first"], t0), max(g["last"], t0 + dt)

    t0 = time.monotonic()
    ex = ThreadPoolExecutor(max(1, workers), thread_name_prefix="tpch-load")
    try:
        for fut in [ex.submit(one, t) for t in todo]:
            fut.result()
    except BaseException:
        # A failure or an interrupt: nothing more starts; what runs ends with its connection
        # when the servers stop.
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    wall = time.monotonic() - t0
    out = {}
    for name, g in groups.items():
        span = g["last"] - g["first"]
        out[name] = {"busy_s": round(g["busy_s"], 3), "span_s": round(span, 3), "bytes": g["bytes"],
                     "tasks": g["tasks"]}
        if g["bytes"]:
            out[name]["mb_per_s"] = round(g["bytes"] / MB / max(span, 1e-9), 1)
    return PhaseResult(round(wall, 3), out)


# --- answers -----------------------------------------------------------------------------------
def _exact(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, (date, datetime)):
        return v.isoformat()
    return str(v)


def answer_digest(rows: Sequence[Sequence[object]]) -> str:
    """The same rows give the same digest, in any order (PostgreSQL's values compared exactly)."""
    lines = sorted("|".join(_exact(v) for v in row) for row in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def _loose(v: object) -> object:
    """A value as another engine may write it: numbers as floats, strings without padding."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float, Decimal)):
        return float(v)
    if isinstance(v, str):
        return v.rstrip()
    if isinstance(v, (date, datetime)):
        return v.isoformat()
    return v


def _sort_key(row: tuple) -> tuple:
    return tuple((0, "") if v is None else (1, f"{v:.6e}") if isinstance(v, float) else (2, str(v)) for v in row)


def canonical_rows(rows: Sequence[Sequence[object]]) -> list[tuple]:
    """Rows made comparable across engines and sorted (numbers rounded only for ordering)."""
    return sorted((tuple(_loose(v) for v in row) for row in rows), key=_sort_key)


def values_match(a: object, b: object, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    return a == b


def compare_rows(ours: Sequence[Sequence[object]], theirs: Sequence[Sequence[object]],
                 rel_tol: float = 1e-6) -> str | None:
    """None when both row sets agree (sorted, numbers within rel_tol), else the first difference."""
    a, b = canonical_rows(ours), canonical_rows(theirs)
    if len(a) != len(b):
        return f"{len(a)} rows vs {len(b)}"
    for i, (ra, rb) in enumerate(zip(a, b)):
        if len(ra) != len(rb):
            return f"row {i + 1}: {len(ra)} columns vs {len(rb)}"
        for j, (x, y) in enumerate(zip(ra, rb)):
            if not values_match(x, y, rel_tol):
                return f"row {i + 1}, column {j + 1}: {x!r} vs {y!r}"
    return None


def duckdb_answers(files: TpchFiles, queries: Sequence[str], threads: int) -> tuple[dict[str, list], dict]:
    """Every query run by DuckDB over the same .tbl files (read_csv, '|'), with the
    specification's own text: an engine independent of PostgreSQL and of our rewrites."""
    import duckdb
    t0 = time.monotonic()
    con = duckdb.connect()
    con.execute(f"SET threads TO {max(1, threads)}")
    for table, cols in tpch.TABLES.items():
        spec = ", ".join(f"'{name}': '{tpch.duckdb_type(typ)}'" for name, typ in cols)
        spec += f", '{tpch.DUMMY_COLUMN}': 'VARCHAR'"
        names = ", ".join(name for name, _ in cols)
        path = str(files.file(table)).replace("'", "''")
        con.execute(f"CREATE TABLE {table} AS SELECT {names} FROM read_csv('{path}', delim='|', header=false, "
                    f"quote='', escape='', auto_detect=false, dateformat='%Y-%m-%d', columns={{{spec}}})")
    loaded = time.monotonic() - t0
    out = {q: con.execute(tpch.spec_text(q, files.scale)).fetchall() for q in queries}
    con.close()
    return out, {"version": duckdb.__version__, "load_s": round(loaded, 3),
                 "seconds": round(time.monotonic() - t0, 3)}


# --- plans -------------------------------------------------------------------------------------
_JOINS = {"Hash Join": "HashJoin", "Merge Join": "MergeJoin", "Nested Loop": "NestLoop"}
_SUBPLAN = ("InitPlan", "SubPlan")


def base_table(relation: str) -> str:
    """lineitem_2 (a partition) -> lineitem; other names unchanged."""
    m = re.fullmatch(r"(\w+?)_(\d+)", relation)
    return m.group(1) if m and m.group(1) in tpch.TABLES else relation


def _relations_text(text: str) -> str:
    """postgres_fdw's 'Relations: (lineitem_1 l) INNER JOIN (orders_1)' without parts or aliases."""
    text = re.sub(r"\b\w+\.", "", text)
    text = re.sub(r"\((\w+)(?: \w+)?\)", lambda m: base_table(m.group(1)), text)
    return re.sub(r"\b(\w+?)_\d+\b", lambda m: base_table(m.group(0)), text)


def plan_shape(node: dict) -> str:
    """A plan's join tree in one line, storage-neutral: joins (method and type) over base tables.

    Scans of a table, its partitions, or a foreign table over its file all read as the table;
    sorts, hashes, gathers and aggregates are left out: what remains is what differs when the
    planner chooses differently (join order, join method, a per-partition join). Init and sub
    plans follow in brackets.
    """
    kids = node.get("Plans", [])
    main = [k for k in kids if k.get("Parent Relationship") not in _SUBPLAN]
    subs = [k for k in kids if k.get("Parent Relationship") in _SUBPLAN]
    kind = node.get("Node Type", "?")
    if kind in _JOINS and len(main) == 2:
        jt = node.get("Join Type", "Inner")
        s = f"{_JOINS[kind]}{'' if jt == 'Inner' else '.' + jt.lower()}({plan_shape(main[0])}, {plan_shape(main[1])})"
    elif "Relation Name" in node:
        s = base_table(node["Relation Name"])
    elif kind == "Foreign Scan":        # a join or an aggregate pushed down by postgres_fdw
        s = f"remote({_relations_text(node.get('Relations', '?'))})"
    elif kind == "CTE Scan":
        s = f"cte {node.get('CTE Name', '?')}"
    elif kind in ("Append", "Merge Append"):
        shapes = list(dict.fromkeys(plan_shape(k) for k in main))
        joined = len(main) > 1 and any(n.get("Node Type") in _JOINS for k in main for n in _walk_main(k))
        one = shapes[0] if len(shapes) == 1 else "{" + " | ".join(shapes) + "}"
        s = f"per-partition {one}" if joined else one
    elif len(main) == 1:
        s = plan_shape(main[0])
    elif not main:
        s = kind.lower()
    else:
        s = f"{kind}(" + ", ".join(plan_shape(k) for k in main) + ")"
    for sub in subs:
        s += f" [{sub.get('Subplan Name', 'subplan')}: {plan_shape(sub)}]"
    return s


def _walk_main(node: dict):
    yield node
    for k in node.get("Plans", []):
        if k.get("Parent Relationship") not in _SUBPLAN and k.get("Node Type") not in ("Append", "Merge Append"):
            yield from _walk_main(k)


def plan_workers(node: dict) -> int:
    """The most parallel workers any Gather of the plan asked for (0: a serial plan)."""
    here = int(node.get("Workers Planned", 0)) if node.get("Node Type") in ("Gather", "Gather Merge") else 0
    return max([here, *(plan_workers(k) for k in node.get("Plans", []))])


# --- rates -------------------------------------------------------------------------------------
def parse_rate(file_bytes: int, seconds: float, cores: int = 1) -> tuple[float, float]:
    """MB/s, and MB/s per core, of reading `file_bytes` of text in `seconds` on `cores` cores."""
    if seconds <= 0 or cores < 1:
        raise ValueError("need a positive time and at least one core")
    rate = file_bytes / MB / seconds
    return rate, rate / cores
