#!/usr/bin/env python3
"""Benchmark of file-fdw-tpch's data path: TPC-H generated, loaded and analysed, against the
server's own limit.

Target (issue file-fdw-tpch): SF 1 generated (tpchgen-cli, nothing cached), loaded (COPY, in
parallel) and analysed (regular and file_fdw tables of the single layout) in under 60 s on this
machine. For comparison, one plain COPY of lineitem on one connection, twice: streamed by us
(COPY FROM STDIN, the final '|' cut: what each of the study's connections does), and read by the
server itself (COPY FROM 'file' into a table with the extra trailing column: no client at all).
Both are bound to one core: the load rate above them is what the parallel slices buy.

Uses the study's own code (datasets/tpch/, studies/file_fdw_tpch/study.py) on one managed
server with the study's settings, in a private workspace that is removed at the end. Prints
each figure and exits 1 if the target is missed.

    .venv/bin/python bench/tpch_load.py [--scale 1] [--target-s 60] [--workspace DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from pgpathbench.servers import binaries  # noqa: E402
from pgpathbench.servers.topology import Servers  # noqa: E402
from pgpathbench.datasets.tpch.files import MB, TpchFiles, tpchgen_path  # noqa: E402
from pgpathbench.datasets.tpch.load import copy_slice, run_tasks  # noqa: E402
from pgpathbench.datasets.tpch.schema import column_list  # noqa: E402
from pgpathbench.studies.file_fdw_tpch.spec import CLUSTER_SETTINGS, CORES, DB  # noqa: E402
from pgpathbench.studies.file_fdw_tpch.study import Shape, create_objects, load_tasks  # noqa: E402
from pgpathbench.workspace import Workspace  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    ap.add_argument("--target-s", type=float, default=60.0, help="target for generate+load+analyse, seconds")
    ap.add_argument("--workspace", help="private workspace (default: .workspace/bench-tpch-PID, removed after)")
    args = ap.parse_args()
    root = Path(args.workspace or REPO / ".workspace" / f"bench-tpch-{os.getpid()}").absolute()
    ws = Workspace.open(root)
    bins = binaries.resolve(15)
    log = lambda m: print(f"· {m}", flush=True)  # noqa: E731
    files = TpchFiles(root / "data" / "tpch", args.scale)
    shutil.rmtree(files.dir, ignore_errors=True)   # nothing cached: generation is timed too
    try:
        with Servers(ws, f"bench-tpch-{os.getpid()}", bins, log=log) as servers:
            main_cluster = servers.cluster("tpch", settings=CLUSTER_SETTINGS)
            main_cluster.create_database(DB)
            (root / "data").mkdir(parents=True, exist_ok=True)
            os.chmod(root, 0o755)
            os.chmod(root / "data", 0o755)
            total_s, load_s, loaded = generate_load_analyse(main_cluster, files, args, log)
            one_copy(main_cluster, files, load_s, loaded)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ok = total_s < args.target_s
    print(f"{'ok  ' if ok else 'FAIL'} SF {args.scale:g} generated, loaded and analysed in {total_s:.1f} s "
          f"(target < {args.target_s:g} s)")
    return 0 if ok else 1


def generate_load_analyse(main_cluster, files: TpchFiles, args, log) -> tuple[float, float, dict]:
    """The study's single layout, timed: generation, DDL, the parallel load, ANALYZE."""
    single = Shape(args.scale, 1, ("single",), ())
    t_start = time.monotonic()
    gen = files.ensure(tpchgen_path(), log)
    t_gen = time.monotonic()
    create_objects(main_cluster, [], files, single)
    load, analyze = load_tasks(main_cluster, [], files, single)
    t_ddl = time.monotonic()
    loaded = run_tasks(load, CORES)
    t_load = time.monotonic()
    analysed = run_tasks(analyze, CORES)
    t_end = time.monotonic()
    total_bytes = sum(files.sizes().values())
    gen_s, load_s, an_s, total_s = t_gen - t_start, t_load - t_ddl, t_end - t_load, t_end - t_start
    print(f"TPC-H SF {args.scale:g}: {total_bytes / MB:,.0f} MB of files, {CORES} cores")
    print(f"  generate (tpchgen-cli)        {gen_s:6.1f} s  {gen['bytes'] / MB / gen_s:7.1f} MB/s")
    print(f"  load (COPY, {len(load)} slices on {CORES} connections)"
          f" {load_s:6.1f} s  {total_bytes / MB / load_s:7.1f} MB/s")
    print(f"  analyse (regular + file_fdw)  {an_s:6.1f} s  "
          + ", ".join(f"{g} {v['busy_s']:.1f} s" for g, v in analysed.groups.items()))
    print(f"  total                         {total_s:6.1f} s  (target < {args.target_s:g} s)")
    return total_s, load_s, loaded.groups


def one_copy(main_cluster, files: TpchFiles, load_s: float, loaded: dict) -> None:
    """The server's own limit: one COPY of lineitem on one connection, streamed and server-read."""
    path = files.file("lineitem")
    size = path.stat().st_size
    total_bytes = sum(files.sizes().values())
    main_cluster.execute(DB, f"CREATE TABLE plain_stdin ({column_list('lineitem')})",
                         f"CREATE TABLE plain_file ({column_list('lineitem', with_dummy=True)})")
    t0 = time.monotonic()
    copy_slice(main_cluster.conninfo(DB), "plain_stdin", path, 0, size)
    stdin_s = time.monotonic() - t0
    t0 = time.monotonic()
    main_cluster.execute(DB, f"COPY plain_file FROM '{path}' (FORMAT text, DELIMITER '|')")
    file_s = time.monotonic() - t0
    li = loaded.get("single", {})
    print(f"lineitem, {size / MB:,.0f} MB:")
    print(f"  one COPY FROM STDIN (streamed, '|' cut)   {stdin_s:6.1f} s  {size / MB / stdin_s:7.1f} MB/s")
    print(f"  one COPY FROM 'file' (server reads it)    {file_s:6.1f} s  {size / MB / file_s:7.1f} MB/s")
    print(f"  the study's parallel load, all tables     {load_s:6.1f} s  {total_bytes / MB / load_s:7.1f} MB/s "
          f"({total_bytes / MB / load_s / (size / MB / stdin_s):.2f}x one COPY; "
          f"{li.get('busy_s', 0):.1f} s of COPY work in {li.get('span_s', 0):.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
