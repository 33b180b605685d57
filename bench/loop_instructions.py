#!/usr/bin/env python3
"""Where the 1-row loop's CPU goes, deterministically (issue 43): instructions a query of the libpq
client's sql001 loop (`-m normal -k 1 -p 0`) against pgbench's (`-n -c 1 -t N -f` the same query),
counted by callgrind in the client process only, over the unix socket, against a managed
PostgreSQL 15 server made here (t50k, as seed 003) and removed after.

A query's instructions are the difference of two loops' totals over the difference of their
lengths, so that process start and connection cancel out; callgrind counts the same instructions
for the same code and data, unlike a clock on a shared machine.

    .venv/bin/python bench/loop_instructions.py [--binary NAME=PATH ...] [--queries N]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from benchlib import managed_server  # noqa: E402
from pgpathbench.datasets.seed003 import QUERIES, table_sql  # noqa: E402

SHORT = 1000   # the shorter loop; the longer one has --queries more


def instructions(cmd: list[str]) -> int:
    """Instructions callgrind counts in cmd's own process (not the server's)."""
    res = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                         capture_output=True, text=True, check=True)
    return int(re.search(r"Collected : (\d+)", res.stderr).group(1))


def per_query(command, queries: int) -> float:
    """command(n) runs an n-query loop: its instructions a query, start and connection cancelled."""
    return (instructions(command(SHORT + queries)) - instructions(command(SHORT))) / queries


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", action="append", default=[], metavar="NAME=PATH",
                    help="a pgpb_libpq build to count (default: .tools/clients' pgpb_libpq and pgpb_libpq_nochecksum)")
    ap.add_argument("--queries", type=int, default=5000, help="the longer loop's extra queries (default 5000)")
    args = ap.parse_args()
    tools = REPO / ".tools" / "clients"
    binaries = dict(b.split("=", 1) for b in args.binary) or {
        "libpq": str(tools / "pgpb_libpq"), "libpq-nochecksum": str(tools / "pgpb_libpq_nochecksum")}
    with managed_server("loopinsn") as server:
        server.execute("postgres", *table_sql("t50k", 50_000))
        conninfo, sql = server.conninfo(), QUERIES["sql001"]
        script = server.root.parent / "sql001.sql"
        script.write_text(sql + ";\n")
        pgbench = str(server.bins.path("pgbench"))
        base = per_query(lambda n: [pgbench, "-n", "-c", "1", "-t", str(n), "-f", str(script), conninfo],
                         args.queries)
        print(f"pgbench: {base:,.0f} instructions a query")
        for name, path in binaries.items():
            count = per_query(lambda n, path=path: [path, "-c", conninfo, "-s", sql, "-m", "normal", "-k", "1",
                                     "-n", str(n), "-p", "0"], args.queries)
            print(f"{name} ({path}): {count:,.0f} instructions a query, {count / base:.3f}x pgbench's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
