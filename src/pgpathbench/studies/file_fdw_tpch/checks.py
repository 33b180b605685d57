"""file-fdw-tpch's plans and its warm-up with the answer checks, before the first round.

Every query's plan on every side (EXPLAIN), then every case once (the seed's warm-up run), its
rows compared across storages and layouts and, for TPC-H's queries up to SF 1, with DuckDB's.
A query of the user's (--query-file) is checked across the sides only (DuckDB runs the
specification's texts), and runs here in a read-only transaction: a text the server refuses,
that writes or returns no rows stops the run before anything is measured, as a UserError.
"""

from __future__ import annotations

import psycopg

from ...datasets.tpch.answers import AnswerMismatch, agreement, duckdb_answers
from ...datasets.tpch.files import TpchFiles, scale_text
from ...datasets.tpch.plans import distributed_tasks, plan_shape, plan_workers, read_bytes
from ...errors import UserError
from .spec import CITUS, CORES, DUCKDB_MAX_SCALE


def _refused(q: str, side: str, e: Exception) -> UserError:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return UserError(f"--query-file {q}: the server refuses it on {side}: {first}; give one query that only "
                     "reads the TPC-H tables and returns rows")


def explain(conns, shape) -> dict[tuple[str, str, str], dict]:
    """(query, layout, storage) -> the plan's shape, parallel workers and EXPLAIN text; on the citus
    layout, every task (distributed_tasks: its node, what ran on its shard). A query Citus cannot
    plan (FeatureNotSupported: some of TPC-H's correlated subqueries) gets its reason, "refused":
    its warm-up is skipped and its measurements fail with it."""
    plans = {}
    for q in shape.queries:
        text = shape.text(q)
        for layout, storage in shape.sides:
            conn = conns[(layout, storage)]
            try:
                doc = conn.execute(f"EXPLAIN (FORMAT JSON) {text}\n").fetchone()[0]
                lines = [r[0] for r in conn.execute(f"EXPLAIN (COSTS OFF) {text}\n").fetchall()]
            except psycopg.errors.FeatureNotSupported as e:
                if layout != CITUS:
                    raise
                plans[(q, layout, storage)] = {"shape": "refused by Citus", "workers": 0, "text": "",
                                               "refused": f"Citus cannot run it: {str(e).strip().splitlines()[0]}"}
                continue
            except psycopg.Error as e:
                if q not in shape.user:
                    raise
                raise _refused(q, f"{storage}/{layout}", e) from None
            root = (doc[0] if isinstance(doc, list) else doc)["Plan"]
            plans[(q, layout, storage)] = {"shape": plan_shape(root), "workers": plan_workers(root),
                                           "text": "\n".join(lines),
                                           **({"tasks": distributed_tasks(root)} if layout == CITUS else {})}
    return plans


def reads(conns, shape, plans) -> dict[str, dict]:
    """'query:storage:layout' -> what one execution read (EXPLAIN (ANALYZE, BUFFERS): pages through
    shared buffers and files parsed, plans.read_bytes) and its execution time: the columnar storage
    against the regular tables and file_fdw."""
    out = {}
    for q in shape.queries:
        for layout, storage in shape.sides:
            if "refused" in plans[(q, layout, storage)]:
                continue
            conn = conns[(layout, storage)]
            block = int(conn.execute("SHOW block_size").fetchone()[0])
            try:
                doc = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {shape.text(q)}\n").fetchone()[0]
            except (psycopg.errors.QueryCanceled, psycopg.errors.ConfigurationLimitExceeded) as e:
                out[f"{q}:{storage}:{layout}"] = {"error": str(e).strip().splitlines()[0]}
                continue
            top = doc[0] if isinstance(doc, list) else doc
            out[f"{q}:{storage}:{layout}"] = {**read_bytes(top["Plan"], block),
                                              "execution_ms": round(top.get("Execution Time", 0.0), 3)}
    return out


def _run(conn, q: str, text: str, user: bool, side: str) -> list:
    """One warm-up execution's rows; the user's query in a read-only transaction."""
    if not user:
        return conn.execute(text).fetchall()
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            cur = conn.execute(text)
            if cur.description is None:
                raise UserError(f"--query-file {q}: it returns no rows on {side}; give one query that returns rows")
            return cur.fetchall()
    except (psycopg.errors.QueryCanceled, psycopg.errors.ConfigurationLimitExceeded):
        raise
    except psycopg.Error as e:
        raise _refused(q, side, e) from None


def warm_up_and_check(conns, files: TpchFiles | None, shape, plans=None) -> tuple[dict, dict, dict[str, str]]:
    """Every case once (the warm-up), its rows compared with every other side's and DuckDB's; the
    sides whose plan was refused (explain()) are left out, unchecked. Returns the answers (per
    query), DuckDB's record and the checked digest of each query."""
    results: dict[str, dict[str, list]] = {q: {} for q in shape.queries}
    skipped: dict[str, list[str]] = {q: [] for q in shape.queries}
    for q in shape.queries:
        text = shape.text(q)
        for layout, storage in shape.sides:
            side = f"{storage}/{layout}"
            refused = ((plans or {}).get((q, layout, storage)) or {}).get("refused")
            if refused:
                skipped[q].append(f"{side}: {refused}")
                continue
            try:
                results[q][side] = _run(conns[(layout, storage)], q, text, q in shape.user, side)
            except psycopg.errors.QueryCanceled:
                skipped[q].append(f"{side}: statement timeout")
            except psycopg.errors.ConfigurationLimitExceeded as e:   # temp_file_limit: its measurements fail alike
                skipped[q].append(f"{side}: {str(e).strip().splitlines()[0]}")
    tpch = [q for q in shape.queries if q not in shape.user]
    duck: dict = {"checked": False}
    duck_rows: dict = {}
    if shape.scale <= DUCKDB_MAX_SCALE and tpch:
        duck_rows, info = duckdb_answers(files, tpch, CORES)
        duck = {"checked": True, **info}
    elif tpch:
        duck["reason"] = f"scale {scale_text(shape.scale)} > {scale_text(DUCKDB_MAX_SCALE)}: PostgreSQL sides only"
    else:
        duck["reason"] = "no TPC-H query: the queries of yours are checked across the sides only"
    problems: list[str] = []
    answers = {}
    for q in shape.queries:
        answers[q] = agreement(q, results[q], duck_rows.get(q), problems)
        answers[q].unchecked = skipped[q]
        if q in shape.user:
            answers[q].duckdb = "not applicable (your query: checked across storages and layouts)"
    if problems:
        raise AnswerMismatch("file-fdw-tpch: wrong answers, the run stops here:\n  " + "\n  ".join(problems))
    return {q: a.to_json() for q, a in answers.items()}, duck, {q: a.digest for q, a in answers.items()}


def sort_methods(conn, text: str) -> str:
    """The sorts EXPLAIN ANALYZE reports for the query on this connection (its settings in force):
    'quicksort Memory 25kB; external merge Disk 1216kB', or '' when the plan sorts nothing."""
    doc = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, FORMAT JSON) {text}\n").fetchone()[0]
    found: list[str] = []

    def walk(node: dict) -> None:
        if "Sort Method" in node:
            found.append(f"{node['Sort Method']} {node.get('Sort Space Type', '')} {node.get('Sort Space Used', '')}kB")
        for child in node.get("Plans", ()):
            walk(child)
    walk((doc[0] if isinstance(doc, list) else doc)["Plan"])
    return "; ".join(found)
