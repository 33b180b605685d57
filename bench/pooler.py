#!/usr/bin/env python3
"""Benchmark: what a PgBouncer in front of the server saves a client that connects per transaction.

Runs fdw-overhead as a user does: pgbench -S (select only) on the local table, a new connection per
transaction (--connect each: pgbench -C), directly and through a managed PgBouncer in each pool mode
(--via direct,pgbouncer --pool-mode session,transaction), trust over the unix socket on both paths
(the server's own socket, or the pooler's), so that the paths differ in the pooler alone. The run
interleaves them: every round measures each case once, in a shuffled order. Prints per case the
median TPS with its 95% interval, and per pool mode the ratio TPS pooled / TPS direct paired by
round, with the pooler's own count of the server connections it used; --save writes the run's export
(json.gz, what `pgpathbench report FILE` reads).

--tls: what TLS costs through the pooler instead. fdw-overhead's fdw_external, whose FDW hop is TCP,
connecting per transaction (each pgbench connection opens its own postgres_fdw connection), with the
hop straight to the source or through a PgBouncer in transaction mode (--fdw-via direct,pgbouncer),
each with TLS off and on (--tls off,on: through the pooler both legs, verify-full). Prints per case
the median TPS, and the ratios TPS on / TPS off per hop and pooled / direct per TLS value, paired by
round.

    .venv/bin/python bench/pooler.py [--rounds 10] [--duration 5] [--clients 1] [--tls] [--workspace DIR] [--save FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from benchlib import by_case
from pgpathbench.stats import ratio_summary, summarise

DIRECT = "ro:local:{clients}:0ms:15:simple"
TLS_RUN = ["--target", "fdw_external", "--fdw-via", "direct,pgbouncer", "--pool-mode", "transaction", "--tls", "off,on"]


def tool(*args: str, workspace: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PGPATHBENCH_HOME": str(workspace)}
    res = subprocess.run([sys.executable, "-m", "pgpathbench.cli", *args], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.exit(f"pooler.py: pgpathbench {' '.join(args[:2])} failed: {res.stderr.strip()[-2000:]}")
    return res


def measure(rounds: int, duration: int, clients: int, workspace: Path, with_tls: bool) -> dict:
    paths = TLS_RUN if with_tls else ["--target", "local", "--via", "direct,pgbouncer", "--pool-mode",
                                      "session,transaction"]
    tool("run", "fdw-overhead", "--preset", "quick", "--scale", "1", "--workload", "ro", *paths,
         "--clients", str(clients), "--connect", "each", "--duration", str(duration), "--repeat", str(rounds),
         workspace=workspace)
    return json.loads(tool("export", "latest", "--format", "json", workspace=workspace).stdout)


def summary_lines(export: dict, clients: int) -> list[str]:
    tps, servers = by_case(export, "tps"), by_case(export, "pooler_server_connections")
    xacts = by_case(export, "pooler_transactions")
    lines = [f"run {export['run']['run_id']}: {len(export['measurements'])} measurements, load average at start "
             f"{export['run']['environment']['sessions'][0].get('machine', {}).get('load_avg_at_start')}"]
    for case, values in sorted(tps.items()):
        s = summarise(list(values.values()))
        extra = ""
        if case in servers:
            extra = (f"; PgBouncer: {summarise(list(xacts[case].values())).median:,.0f} transactions over "
                     f"{summarise(list(servers[case].values())).median:.0f} server connection(s) (median)")
        lines.append(f"{case}: {s.median:,.1f} TPS {s.ci_text} (n={s.n}){extra}")
    direct = tps.get(DIRECT.format(clients=clients), {})
    for case, values in sorted(tps.items()):
        if case.endswith(("session", "transaction")):
            r = ratio_summary(values, direct)
            lines.append(f"{case} / direct: {r.median:.2f}x {r.ci_text} (paired by round)")
    return lines


def tls_lines(export: dict) -> list[str]:
    """--tls: each case's median TPS and its legs' TLS, then on/off per hop and pooled/direct per TLS value."""
    tps, legs = by_case(export, "tps"), by_case(export, "pooler_server_tls")
    lines = [f"run {export['run']['run_id']}: {len(export['measurements'])} measurements, load average at start "
             f"{export['run']['environment']['sessions'][0].get('machine', {}).get('load_avg_at_start')}"]
    cases = {(m["dims"]["fdw_via"], m["dims"]["tls"]): m["case_id"] for m in export["measurements"]}
    for (via, tls), case in sorted(cases.items()):
        s = summarise(list(tps[case].values()))
        leg = f"; pooler to source: {next(iter(legs[case].values()))}" if case in legs else ""
        lines.append(f"FDW hop {via}, tls {tls}: {s.median:,.1f} TPS {s.ci_text} (n={s.n}){leg}")
    for via in ("direct", "pgbouncer"):
        r = ratio_summary(tps[cases[(via, "on")]], tps[cases[(via, "off")]])
        lines.append(f"FDW hop {via}: tls on / off {r.median:.2f}x {r.ci_text} (paired by round)")
    for tls in ("off", "on"):
        r = ratio_summary(tps[cases[("pgbouncer", tls)]], tps[cases[("direct", tls)]])
        lines.append(f"tls {tls}: through PgBouncer / direct {r.median:.2f}x {r.ci_text} (paired by round)")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10, help="rounds (each measures every case once)")
    ap.add_argument("--duration", type=int, default=5, help="seconds per measurement (pgbench -T)")
    ap.add_argument("--clients", type=int, default=1, help="pgbench -c")
    ap.add_argument("--tls", action="store_true", help="what TLS costs on the FDW hop, direct and through the pooler")
    ap.add_argument("--workspace", type=Path, help="pgpathbench's workspace (default: a new temporary one)")
    ap.add_argument("--save", type=Path, help="write the run's export here (json.gz)")
    a = ap.parse_args()
    # made by the tool (reachable by the server user); removed after, unless it is the user's
    workspace = a.workspace or Path.cwd() / ".workspace" / f"pooler-{secrets.token_hex(3)}"
    try:
        export = measure(a.rounds, a.duration, a.clients, workspace, a.tls)
    finally:
        if a.workspace is None:
            tool("clean", "--all", workspace=workspace)
            shutil.rmtree(workspace, ignore_errors=True)
    if a.save:
        with gzip.open(a.save, "wt") as f:
            json.dump(export, f)
    print("\n".join(tls_lines(export) if a.tls else summary_lines(export, a.clients)))


if __name__ == "__main__":
    main()
