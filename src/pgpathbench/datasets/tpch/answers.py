"""Checking TPC-H answers: a digest of a result that ignores row order, a comparison of two
results across engines (numbers within a relative tolerance, strings without padding), DuckDB's
answers over the same files with the specification's own texts, and the agreement of every side
that ran a query.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Mapping, Sequence

from .files import TpchFiles
from .queries import spec_text
from .schema import DUMMY_COLUMN, TABLES, duckdb_type


class AnswerMismatch(RuntimeError):
    """Two sides (or PostgreSQL and DuckDB) returned different rows for a query."""


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
    for table, cols in TABLES.items():
        spec = ", ".join(f"'{name}': '{duckdb_type(typ)}'" for name, typ in cols)
        spec += f", '{DUMMY_COLUMN}': 'VARCHAR'"
        names = ", ".join(name for name, _ in cols)
        path = str(files.file(table)).replace("'", "''")
        con.execute(f"CREATE TABLE {table} AS SELECT {names} FROM read_csv('{path}', delim='|', header=false, "
                    f"quote='', escape='', auto_detect=false, dateformat='%Y-%m-%d', columns={{{spec}}})")
    loaded = time.monotonic() - t0
    out = {q: con.execute(spec_text(q, files.scale)).fetchall() for q in queries}
    con.close()
    return out, {"version": duckdb.__version__, "load_s": round(loaded, 3),
                 "seconds": round(time.monotonic() - t0, 3)}


@dataclass
class Answer:
    """What the sides that ran one query returned: the reference's row count and digest, the
    sides that agree with it, DuckDB's verdict, and the sides that could not run it."""
    rows: int | None
    digest: str | None
    agreeing: list[str] = field(default_factory=list)
    duckdb: str = "not checked"
    unchecked: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"rows": self.rows, "digest": self.digest, "agreeing": self.agreeing, "duckdb": self.duckdb,
                "unchecked": self.unchecked}


def agreement(query: str, sides: Mapping[str, Sequence[Sequence[object]]],
              duck: Sequence[Sequence[object]] | None, problems: list[str]) -> Answer:
    """One query's results by side label ('regular/single'...), in order: the first is the
    reference; every other must have its digest (exact values, any order), and DuckDB's rows
    (when given) must match it within 1e-6. Each difference is appended to `problems`."""
    if not sides:
        return Answer(None, None, duckdb="not run: no side answered (unchecked says why)")
    ref_label, ref = next(iter(sides.items()))
    answer = Answer(len(ref), answer_digest(ref))
    for label, rows in sides.items():
        if answer_digest(rows) == answer.digest:
            answer.agreeing.append(label)
        else:
            diff = compare_rows(rows, ref, rel_tol=0) or "same values, differently written"
            problems.append(f"{query} on {label} differs from {ref_label}: {diff}")
    if duck is not None:
        diff = compare_rows(ref, duck)
        answer.duckdb = "agrees" if diff is None else f"DIFFERS: {diff}"
        if diff is not None:
            problems.append(f"{query}: PostgreSQL and DuckDB differ: {diff}")
    return answer
