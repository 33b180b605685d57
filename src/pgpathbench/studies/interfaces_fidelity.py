"""interfaces-fidelity: are the native clients the bottleneck of the interfaces study?

Side by side in one run, on the same server, table and transport, interleaved in the same
rounds, each client against the tool that does the same job with the least work:

  copy   the whole of t10m (seed 003's shape): `psql -c "COPY (select * from t10m) TO STDOUT"
         > /dev/null` against each client's COPY (`-m copy -p 1 -o /dev/null`); ODBC has no
         COPY, so it runs its normal fetch (a finding about ODBC, not a like-for-like ratio).
  loop   sql001's 1-row query N times on one connection: `pgbench -n -f script -t N -c 1`
         (the query in a -f script, simple protocol, as the clients use) against each client's
         normal mode (`-m normal -k 1 -n N -p 0`).

Every run is one process measured from outside the same way (wall time from fork to exit,
CPU and peak RSS from os.wait4), so process start counts alike. The ratio client/reference is
paired by round, with its 95% interval. Target: the libpq client no more than 5% slower than
the reference in both; the other clients' ratios are findings. The clients still checksum
every byte (their contract): a COPY client's rows, bytes and checksum are checked against the
reference as in the interfaces study. The reference tools compute no checksum, so a diagnostic
tool, `libpq-nochecksum` (pgpb_libpq built without its checksum loop), splits libpq's ratio
into what the client's use of libpq costs and what the checksum costs.
"""

from __future__ import annotations

import re
import shlex
import statistics
import subprocess
import time
from collections import defaultdict

from ..clients import CLIENTS, require_clients, run_native_client, session_env, spawn_measured
from ..errors import CaseError, UserError
from ..matrix import Case, Dimension, Parameter, Preset, cross
from ..report import Table
from ..stats import ratio_summary, summarise
from .base import PG, StudyEnv, StudyOptions
from .interfaces import (DB, DEFAULT_JVM_OPTIONS, QUERIES, SEED_ID, copy_reference, parse_jvm_options,
                         parse_positive, parse_rows, row_bytes, table_sql)

TOOLS = ("reference", "libpq", "libpq-nochecksum", "odbc", "jdbc", "psycopg")
DIAGNOSTIC = "libpq-nochecksum"     # pgpb_libpq without the contract's checksum: what the checksum costs
WORKLOADS = ("copy", "loop")
TRANSPORTS = ("unix", "tcp")
TARGET = 1.05          # the libpq client: at most 5% slower than the reference tool
REFERENCE_TOOL = {"copy": "psql COPY > /dev/null", "loop": "pgbench -f (same query)"}
CLIENT_MODE = {("copy", "libpq"): "copy", ("copy", DIAGNOSTIC): "copy", ("copy", "odbc"): "normal",
               ("copy", "jdbc"): "copy", ("copy", "psycopg"): "copy", ("loop", "libpq"): "normal",
               ("loop", DIAGNOSTIC): "normal", ("loop", "odbc"): "normal", ("loop", "jdbc"): "normal",
               ("loop", "psycopg"): "normal"}


class InterfacesFidelity:
    name = "interfaces-fidelity"
    title = "the native clients against psql COPY and pgbench: are the clients the bottleneck?"
    seeds = ("003",)
    required_tools = ("initdb", "postgres", "psql", "pgbench")
    primary_metric = "duration_s"
    higher_is_better = False
    dimensions = {
        "workload": Dimension("workload", "copy: all of t10m (client COPY vs psql COPY > /dev/null); loop: the "
                              "1-row query N times on one connection (client normal mode vs pgbench -f)", WORKLOADS),
        "tool": Dimension("tool", "reference (psql or pgbench) or a native client", TOOLS),
        "transport": Dimension("transport", "unix socket or loopback TCP (JDBC: TCP only)", TRANSPORTS),
        "pg": PG,
    }
    parameters = {
        "rows": Parameter("rows", "rows of t10m for the copy workload", parse_rows(1)),
        "iterations": Parameter("iterations", "queries of the loop workload (pgbench -t)", parse_rows(1)),
        "jvm_options": Parameter("jvm_options", "JVM options of the JDBC client", parse_jvm_options,
                                 DEFAULT_JVM_OPTIONS),
        "timeout": Parameter("timeout", "seconds one run may take before it is killed", parse_positive("seconds"),
                             3600),
    }
    presets = {
        "quick": Preset("quick", "t10m 200k rows (55 MB), loop x 2000, 6 rounds (tests)", 6,
                        {"rows": 200_000, "iterations": 2000}),
        "standard": Preset("standard", "t10m 1M rows (276 MB), loop x 20000, 10 rounds", 10,
                           {"rows": 1_000_000, "iterations": 20_000}),
        "paper": Preset("paper", "the seed's sizes: t10m 10M rows (2.8 GB), loop x 50k, 10 rounds", 10,
                        {"rows": 10_000_000, "iterations": 50_000}),
    }
    default_dims = {"workload": WORKLOADS, "tool": TOOLS, "transport": TRANSPORTS, "pg": ("15",)}

    def cases(self, options: StudyOptions) -> list[Case]:
        require_clients([t for t in options.dims["tool"] if t != "reference"], option="--tool")
        if "reference" not in options.dims["tool"]:
            raise UserError("--tool: the ratios need the reference tool; add reference (e.g. --tool reference,libpq)")

        def exclude(d: dict[str, str]) -> bool:
            return d["tool"] != "reference" and d["transport"] == "unix" and not CLIENTS[d["tool"]].unix_socket

        return cross(self.name, self.dimensions, options.dims, exclude)

    def prepare(self, env: StudyEnv) -> None:
        p = env.options.params
        t0 = time.monotonic()
        server = env.servers.cluster("local")
        server.create_database(DB)
        with server.connect(DB) as conn:
            for table, rows in (("t50k", max(SEED_ID, 5000)), ("t10m", p["rows"])):
                for statement in table_sql(table, rows):
                    conn.execute(statement)
                conn.execute("SET synchronize_seqscans = off")    # as every session of ours (session_env)
                conn.execute(f"SELECT count(*) FROM {table}")
        env.log(f"t50k (5,000 rows) and t10m ({p['rows']:,} rows) loaded in {time.monotonic() - t0:.1f} s")
        script = env.servers.root / f"fidelity-loop-{env.bins.major}.sql"
        script.write_text(QUERIES["sql001"] + ";\n")
        conninfo = {"unix": server.conninfo(DB, "unix"), "tcp": server.conninfo(DB, "tcp")}
        env.servers.link("local_0ms", server)
        reference = copy_reference(env.bins.path("psql"), conninfo["unix"], QUERIES["sql10m"], p["timeout"])
        pgbench = subprocess.run([str(env.bins.path("pgbench")), "--version"], capture_output=True, text=True)
        psql = subprocess.run([str(env.bins.path("psql")), "--version"], capture_output=True, text=True)
        env.state.update(conninfo=conninfo, script=str(script), reference=reference,
                         jvm_options=shlex.split(p["jvm_options"]))
        env.fingerprint[f"interfaces_fidelity_pg{env.bins.major}"] = {
            "rows": p["rows"], "copy_bytes": row_bytes("t10m", p["rows"]), "iterations": p["iterations"],
            "reference": {"rows": reference.rows, "bytes": reference.bytes, "checksum": reference.checksum},
            "psql": psql.stdout.strip(), "pgbench": pgbench.stdout.strip(), "jvm_options": p["jvm_options"],
            "copy": "psql -X -q -c 'COPY (select * from t10m) TO STDOUT' > /dev/null vs client -m copy -p 1 -o /dev/null",
            "loop": f"pgbench -n -c 1 -t N -f '{QUERIES['sql001']};' vs client -m normal -k 1 -n N -p 0",
        }

    def measure(self, env: StudyEnv, case: Case) -> dict:
        p, st = env.options.params, env.state
        workload, tool, transport = case["workload"], case["tool"], case["transport"]
        conninfo = st["conninfo"][transport]
        n = p["iterations"]
        if tool == "reference":
            return self._reference(env, workload, conninfo, n)
        mode = CLIENT_MODE[(workload, tool)]
        if workload == "copy":
            run = run_native_client(tool, conninfo, QUERIES["sql10m"], mode=mode, print_rows=True, dest="/dev/null",
                                    timeout=p["timeout"], jvm_options=st["jvm_options"])
            ref = st["reference"]
            got = (run.output["rows"], run.output["bytes"], run.output["checksum"])
            if tool == DIAGNOSTIC:      # it computes no checksum: its rows and bytes must still be right
                got, ref = got[:2] + (ref.checksum,), ref
            if got != (ref.rows, ref.bytes, ref.checksum):
                raise CaseError(f"checksum mismatch: {tool} {mode} returned {got}, psql COPY "
                                f"{(ref.rows, ref.bytes, ref.checksum)}")
        else:
            run = run_native_client(tool, conninfo, QUERIES["sql001"], mode=mode, keep=True, iterations=n,
                                    timeout=p["timeout"], jvm_options=st["jvm_options"])
            if run.output["rows"] != n:
                raise CaseError(f"{tool} read {run.output['rows']} rows in {n} queries, expected {n}")
        o = run.output
        return {"duration_s": run.wall_s, "cpu_user_s": run.user_s, "cpu_sys_s": run.sys_s,
                "cpu_s": run.user_s + run.sys_s, "peak_rss_mib": run.peak_rss_kib / 1024, "mode": mode,
                "connect_s": o["connect_s"], "work_s": o["total_s"] - o["connect_s"], "total_s": o["total_s"],
                "rows": o["rows"], "bytes": o["bytes"], "version": o["version"]}

    @staticmethod
    def _reference(env: StudyEnv, workload: str, conninfo: str, n: int) -> dict:
        timeout = env.options.params["timeout"]
        if workload == "copy":
            m = spawn_measured([str(env.bins.path("psql")), "-X", "-q", "-d", conninfo, "-c",
                                f"COPY ({QUERIES['sql10m']}) TO STDOUT"], timeout,
                               env=session_env(), stdout=subprocess.DEVNULL)
        else:
            m = spawn_measured([str(env.bins.path("pgbench")), "-n", "-c", "1", "-t", str(n), "-f",
                                env.state["script"], conninfo], timeout, env=session_env())
        if m.timed_out or m.returncode != 0:
            lines = [line for line in m.stderr.splitlines() if line.strip()]
            raise CaseError(f"reference {workload}: exit {m.returncode}: {lines[-1] if lines else 'no message'}")
        out = {"duration_s": m.wall_s, "cpu_user_s": m.user_s, "cpu_sys_s": m.sys_s, "cpu_s": m.user_s + m.sys_s,
               "peak_rss_mib": m.peak_rss_kib / 1024, "mode": REFERENCE_TOOL[workload]}
        if workload == "loop":
            tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", m.stdout)
            conn = re.search(r"initial connection time = ([\d.]+) ms", m.stdout)
            done = re.search(r"number of transactions actually processed: (\d+)", m.stdout)
            if not tps or not done or int(done.group(1)) != n:
                raise CaseError(f"pgbench did not run {n} transactions: {m.stdout.strip()[-200:]!r}")
            out.update(work_s=n / float(tps.group(1)), connect_s=float(conn.group(1)) / 1000 if conn else None,
                       rows=n)
        return out

    # -- the report -------------------------------------------------------------------------
    def report(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Table]:
        series = fidelity_series(self.name, measurements)
        tables = []
        rows, notes = [], []
        for key in sorted(series, key=_order):
            pg, workload, transport, tool = key
            if tool == "reference":
                continue
            ref = series.get((pg, workload, transport, "reference"))
            if not ref:
                continue
            r = ratio_summary(series[key]["duration_s"], ref["duration_s"])
            w = ratio_summary(series[key]["work_s"], ref["work_s"]) if workload == "loop" and \
                series[key].get("work_s") and ref.get("work_s") else None
            if r is None:
                continue
            mode = series[key]["mode"]
            rows.append([pg, workload, transport, f"{tool} ({mode})", REFERENCE_TOOL[workload],
                         statistics.median(ref["duration_s"].values()),
                         statistics.median(series[key]["duration_s"].values()), r.median, r.ci_text,
                         w.median if w else None, w.ci_text if w else None,
                         target_verdict(r) if tool == "libpq" else
                         "diagnostic: the checksum's cost" if tool == DIAGNOSTIC else "finding"])
        if rows:
            notes = ["Ratio: the client's wall time over the reference tool's (both from fork to exit, os.wait4), "
                     "paired by round. Work only (loop): without connection and process start (the client's total "
                     "minus connect; pgbench's transactions / tps).",
                     f"Target: libpq at most {TARGET - 1:.0%} slower than the reference (ratio <= {TARGET}); "
                     "'met' when the whole 95% interval is at or below it, 'missed' when it is wholly above, "
                     "'undecided' when it spans it (more rounds, a quieter machine). Other clients: findings.",
                     "copy: ODBC has no COPY, it runs its normal fetch. The clients checksum every byte (their "
                     "contract, FNV-1a, about 1 ns per byte of CPU), the reference tools do not: "
                     "libpq-nochecksum is pgpb_libpq built without that loop (not a contract client; its rows "
                     "and bytes are still checked), so that libpq's ratio splits into the client's driver use "
                     "and the checksum's cost."]
            tables.append(Table("Fidelity: each client against the reference tool (same server, table, transport, "
                                "round)", ["PG", "Workload", "Transport", "Client (mode)", "Reference", "Reference s",
                                           "Client s", "Ratio", "95% CI", "Work ratio", "Work 95% CI", "Target"],
                                rows, notes, align_left=5))
        cpu_rows = []
        for key in sorted(series, key=_order):
            pg, workload, transport, tool = key
            s = series[key]
            ref = series.get((pg, workload, transport, "reference"))
            extra = None
            if workload == "copy" and tool != "reference" and ref and s.get("bytes") and ref.get("cpu_s"):
                extra = (_med(s["cpu_s"]) - _med(ref["cpu_s"])) / _med(s["bytes"]) * 1e9
            cpu_rows.append([pg, workload, transport, tool if tool != "reference" else REFERENCE_TOOL[workload],
                             s["mode"], _med(s.get("duration_s")), _med(s.get("cpu_user_s")),
                             _med(s.get("cpu_sys_s")), extra, _med(s.get("peak_rss_mib")), len(s["duration_s"])])
        if cpu_rows:
            tables.append(Table("Fidelity: wall time, CPU and peak memory of each process (medians)",
                                ["PG", "Workload", "Transport", "Tool", "Mode", "Wall s", "CPU user s", "CPU sys s",
                                 "CPU beyond the reference, ns/byte", "Peak RSS MiB", "n"], cpu_rows,
                                ["CPU beyond the reference: the client's CPU time minus the reference tool's, per byte "
                                 "of row data it received; for libpq's COPY it is the contract's checksum (FNV-1a, "
                                 "about 1 ns per byte), the one piece of work psql does not do. On an idle machine it "
                                 "overlaps with the server's work on the other core; on a busy one it adds to the "
                                 "wall time."], align_left=5))
        failed = [m for m in measurements if m["study"] == self.name and not m["ok"]]
        if failed:
            tables.append(Table("Failed measurements", ["Case", "Round", "Error"],
                                [[m["case_id"], m["round"], m["error"]] for m in failed], align_left=3))
        return tables

    def plots(self, run: dict, measurements: list[dict], probes: list[dict]):
        from ..report import Plot, Point
        series = fidelity_series(self.name, measurements)
        points: dict[str, list] = defaultdict(list)
        for key in sorted(series, key=_order):
            pg, workload, transport, tool = key
            ref = series.get((pg, workload, transport, "reference"))
            if tool == "reference" or not ref:
                continue
            r = ratio_summary(series[key]["duration_s"], ref["duration_s"])
            if r is not None:
                points[f"{workload} · {transport}"].append(Point(tool, r.median, r.ci_low, r.ci_high))
        if not points:
            return []
        return [Plot("Client wall time over the reference tool's (psql COPY, pgbench)", "Client",
                     "Ratio client / reference", "bar", dict(points), ref_y=1.0,
                     notes=[f"Target for libpq: at most {TARGET}. Error bars: 95% CI of the paired ratio."])]


def target_verdict(r) -> str:
    """met: the whole 95% interval at or below the target; missed: the whole interval above it;
    otherwise the rounds do not decide (say which side the median is on)."""
    if r.coverage < 0.95:
        return f"too few rounds ({r.n}): median {'within' if r.median <= TARGET else 'above'} target"
    if r.ci_high <= TARGET:
        return "met"
    if r.ci_low > TARGET:
        return "missed"
    return f"undecided: median {'within' if r.median <= TARGET else 'above'}, CI spans {TARGET}"


def fidelity_series(study: str, measurements: list[dict]) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for m in measurements:
        if m["study"] != study or not m["ok"]:
            continue
        d = m["dims"]
        s = out.setdefault((d["pg"], d["workload"], d["transport"], d["tool"]), defaultdict(dict))
        for k, v in m["metrics"].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                s[k][m["round"]] = float(v)
        s["mode"] = m["metrics"].get("mode", "")
    return out


def _order(key: tuple) -> tuple:
    pg, workload, transport, tool = key
    return (int(pg), WORKLOADS.index(workload), TRANSPORTS.index(transport), TOOLS.index(tool))


def _med(values: dict | None) -> float | None:
    return summarise(list(values.values())).median if values else None
