"""interfaces-fidelity: are the native clients the bottleneck of the interfaces study?

Side by side in one run, on the same server, table and transport, interleaved in the same
rounds, each client against the tool that does the same job with the least work (spec.py: the
copy and loop workloads). Every run is one process measured from outside the same way
(tools/spawn.py: wall time from fork to exit, CPU and peak RSS from os.wait4), so process start
counts alike. The ratio client/reference is paired by round, with its 95% interval. Target: the
libpq client no more than 5% slower than the reference in both; the other clients' ratios are
findings. The clients still checksum every byte (their contract): a COPY client's rows, bytes
and checksum are checked against psql's COPY (tools/psql_copy.py) as in the interfaces study.
The reference tools compute no checksum, so a diagnostic tool, `libpq-nochecksum` (pgpb_libpq
built without its checksum loop), splits libpq's ratio into what the client's use of libpq
costs and what the checksum costs.

The server may be the user's (--server local=DSN): the tables go into a database of ours there,
and every client and reference tool connects by the DSN, over its transport only (interfaces'
local role: studies/interfaces/local.py).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from dataclasses import dataclass

from ...tools.clients import check_jdbc_dsns, require_clients, run_native_client
from ...datasets import seed003
from ...datasets.seed003 import QUERIES, SEED_ID
from ...errors import CaseError, UserError
from ...matrix import Case, StudyOptions, cross
from ...report import Plot, Table
from ...results.model import StudyResult
from ...servers import guc
from ...servers.paths import NetworkPath
from ...tools.psql_copy import Reference, copy_reference
from ...tools.spawn import spawn_measured
from ..base import Declared, Setup, StudyEnv
from ..interfaces.local import Target, local_targets, refine_local, say_local
from ..interfaces.spec import LOCAL_ROLE, client_times, process_figures
from . import report as study_report, spec
from .spec import CLIENT_MODE, DIAGNOSTIC, REFERENCE_TOOL

T50K_ROWS = max(SEED_ID, 5000)      # sql001 reads the row 4242 of t50k


@dataclass
class InterfacesFidelityState:
    """What prepare() makes for one major's measurements (StudyEnv.state)."""
    targets: dict[str, Target]      # transport -> where the clients and the reference tools connect
    script: str                     # pgbench's file of the loop's query
    reference: Reference            # psql COPY's rows, bytes and checksum of sql10m
    client_env: dict[str, str]      # the clients' environment: PGPASSFILE, the case's PGOPTIONS (--set)
    jvm_options: list[str]          # --jvm-options, split as the jdbc client takes them


class InterfacesFidelity(Declared):
    vocabulary = spec.VOCABULARY

    def cases(self, options: StudyOptions) -> list[Case]:
        require_clients([t for t in options.dims["tool"] if t != "reference"], option="--tool")
        if "reference" not in options.dims["tool"]:
            raise UserError("--tool: the ratios need the reference tool; add reference (e.g. --tool reference,libpq)")
        return cross(self.name, self.dimensions, options.dims, spec.excluded)

    def path(self, case: Case) -> NetworkPath | None:
        return spec.network_path(case["transport"], case["pg"])

    def refine(self, options: StudyOptions, given: set[str]) -> StudyOptions:
        """A user server serves its DSN's transport only (interfaces' local role)."""
        return refine_local(options, given)

    def check_user_servers(self, options: StudyOptions, facts, dsns) -> None:
        """The jdbc client connects by the user server's DSN: one it cannot map is refused now."""
        if any(c["tool"] == "jdbc" for c in self.cases(options)):
            check_jdbc_dsns((LOCAL_ROLE,), dsns, "--tool")

    def prepare(self, env: StudyEnv) -> Setup:
        p = env.options.params
        t0 = time.monotonic()
        server = env.servers.server(LOCAL_ROLE)
        say_local(env, server)
        seed003.load(server, {"t50k": T50K_ROWS, "t10m": p["rows"]})
        env.log(f"t50k ({T50K_ROWS:,} rows) and t10m ({p['rows']:,} rows) loaded in {time.monotonic() - t0:.1f} s")
        script = env.servers.root / f"fidelity-loop-{env.major}.sql"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(QUERIES["sql001"] + ";\n")
        targets = local_targets(env, server)
        first = next(iter(targets.values()))
        reference = copy_reference(env.bins.path("psql"), first.conninfo, QUERIES["sql10m"], p["timeout"],
                                   env=first.env())
        env.state = InterfacesFidelityState(targets, str(script), reference,
                                            first.env(),   # PGPASSFILE: no password on a command line
                                            shlex.split(p["jvm_options"]))
        tools = {tool: _version(env, tool) for tool in ("psql", "pgbench")}
        return Setup(tools=tools, facts={
            "rows": p["rows"], "copy_bytes": seed003.row_bytes("t10m", p["rows"]), "iterations": p["iterations"],
            "reference": reference.to_json(), "jvm_options": p["jvm_options"],
            "copy": f"psql -X -q -c 'COPY ({QUERIES['sql10m']}) TO STDOUT' > /dev/null vs client -m copy -p 1 "
                    "-o /dev/null",
            "loop": f"pgbench -n -c 1 -t N -f '{QUERIES['sql001']};' vs client -m normal -k 1 -n N -p 0",
        })

    def before_measure(self, env: StudyEnv, case: Case) -> None:
        """The case's --set session settings in the clients' and the reference tools' PGOPTIONS."""
        env.state.client_env = next(iter(env.state.targets.values())).env(guc.session(env, case))

    def measure(self, env: StudyEnv, case: Case) -> dict:
        p, st = env.options.params, env.state
        workload, tool = case["workload"], case["tool"]
        conninfo = st.targets[case["transport"]].conninfo
        if tool == "reference":
            return _reference(env, workload, conninfo)
        mode = CLIENT_MODE[(workload, tool)]
        if workload == "copy":
            run = run_native_client(tool, conninfo, QUERIES["sql10m"], mode=mode, print_rows=True, dest="/dev/null",
                                    timeout=p["timeout"], jvm_options=st.jvm_options, env=st.client_env)
            ref = st.reference
            got = (run.output["rows"], run.output["bytes"], run.output["checksum"])
            if tool == DIAGNOSTIC:      # it computes no checksum: its rows and bytes must still be right
                got = got[:2] + (ref.checksum,)
            if got != (ref.rows, ref.bytes, ref.checksum):
                raise CaseError(f"checksum mismatch: {tool} {mode} returned {got}, psql COPY "
                                f"{(ref.rows, ref.bytes, ref.checksum)}")
        else:
            n = p["iterations"]
            run = run_native_client(tool, conninfo, QUERIES["sql001"], mode=mode, keep=True, iterations=n,
                                    timeout=p["timeout"], jvm_options=st.jvm_options, env=st.client_env)
            if run.output["rows"] != n:
                raise CaseError(f"{tool} read {run.output['rows']} rows in {n} queries, expected {n}")
        o = run.output
        times = client_times(o)
        return {**process_figures(run), **times, "work_ms": times["total_ms"] - times["connect_ms"], "mode": mode,
                "rows": o["rows"], "bytes": o["bytes"], "version": o["version"]}

    def report(self, result: StudyResult) -> list[Table]:
        return study_report.tables(result)

    def plots(self, result: StudyResult) -> list[Plot]:
        return study_report.plots(result)


def _version(env: StudyEnv, tool: str) -> str:
    return subprocess.run([str(env.bins.path(tool)), "--version"], capture_output=True, text=True).stdout.strip()


def _reference(env: StudyEnv, workload: str, conninfo: str) -> dict:
    """One run of the reference tool: psql's COPY to /dev/null, or pgbench's loop of the same query."""
    p = env.options.params
    if workload == "copy":
        m = spawn_measured([str(env.bins.path("psql")), "-X", "-q", "-d", conninfo, "-c",
                            f"COPY ({QUERIES['sql10m']}) TO STDOUT"], p["timeout"],
                           env=env.state.client_env, stdout=subprocess.DEVNULL)
    else:
        m = spawn_measured([str(env.bins.path("pgbench")), "-n", "-c", "1", "-t", str(p["iterations"]), "-f",
                            env.state.script, conninfo], p["timeout"], env=env.state.client_env)
    if m.timed_out or m.returncode != 0:
        lines = [line for line in m.stderr.splitlines() if line.strip()]
        raise CaseError(f"reference {workload}: exit {m.returncode}: {lines[-1] if lines else 'no message'}")
    out = {**process_figures(m), "mode": REFERENCE_TOOL[workload]}
    return {**out, **_pgbench_loop(m.stdout, p["iterations"])} if workload == "loop" else out


def _pgbench_loop(stdout: str, n: int) -> dict:
    """pgbench's own figures of the loop: its work without connecting, its connection time, rows."""
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", stdout)
    conn = re.search(r"initial connection time = ([\d.]+) ms", stdout)
    done = re.search(r"number of transactions actually processed: (\d+)", stdout)
    if not tps or not done or int(done.group(1)) != n:
        raise CaseError(f"pgbench did not run {n} transactions: {stdout.strip()[-200:]!r}")
    return {"work_ms": n / float(tps.group(1)) * 1000, "connect_ms": float(conn.group(1)) if conn else None,
            "rows": n}
