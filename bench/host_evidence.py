#!/usr/bin/env python3
"""Benchmark: what reading a server's CPU on its host over SSH costs (issue 47, evidence/host_cpu.py).

On a namespace host of tests/hosts.py (its own sshd, logged into as a non-root user over one
multiplexed connection; it shares this machine's PID namespace, so the same postmaster can also be
read from /proc here), a PostgreSQL 15 started there by the login (tests/host_postgres.py):

1. One reading: host_cpu.group_ticks over the connection and proc_cpu.group_ticks here, of the
   same postmaster, --readings of each in pairs of a shuffled order: the wall time of a reading
   (median and 95% CI) and the CPU one costs, here (this process, the ssh clients, the master
   connection) and on the host (its sshd processes, the shell and awk they start).
2. What it costs a measured figure: pgbench -S (1 client, --duration s, from here over the LAN to
   the host) with no evidence ("off"), with the evidence read here ("proc": only because the PID
   namespace is shared) and read over SSH ("ssh": Watched.host), each round in a shuffled order:
   TPS off / ssh and proc / ssh, and the measurement's wall time ssh - proc (evidence included),
   paired by round, with the SSH readings' own time (cpu_read_ms).

    .venv/bin/python bench/host_evidence.py [--readings 200] [--rounds 30] [--duration 3] [--save FILE]

Needs root (network namespaces) and Debian's PostgreSQL 15, as the integration tests do.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))   # the test hosts: tests/hosts.py, tests/host_postgres.py

from host_postgres import PORT, USER, HostPostgres  # noqa: E402
from hosts import SshHosts  # noqa: E402

from pgpathbench.evidence import Watched, collected, host_cpu  # noqa: E402
from pgpathbench.evidence.proc_cpu import group_ticks, read_stat, ticks_to_ms  # noqa: E402
from pgpathbench.servers import binaries  # noqa: E402
from pgpathbench.servers.hosts import Hosts, SshSettings, parse_hosts  # noqa: E402
from pgpathbench.stats import ratio_summary, summarise  # noqa: E402
from pgpathbench.tools import pgbench  # noqa: E402

MODES = ("off", "proc", "ssh")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ticks(pids) -> int:
    """user + system ticks of these processes and of the children they reaped."""
    stats = [read_stat(p) for p in pids]
    return sum(s.utime + s.stime + s.cutime + s.cstime for s in stats if s)


def sshd_pids(host) -> list[int]:
    """The host's sshd processes (the listener, its sessions): who runs what we send there."""
    return [p for p in host.pids() if Path(f"/proc/{p}/comm").read_text().strip() == "sshd"]


def readings(conn, host, postmaster: int, n: int) -> dict:
    """n readings each way, paired, in a shuffled order per pair; wall ms of each, CPU per reading."""
    wall: dict[str, list[float]] = {"ssh": [], "proc": []}
    own = {"ssh": 0.0, "proc": 0.0}
    sessions = sshd_pids(host)
    there0, master0, children0 = ticks(sessions), ticks([conn.master.pid]), children_cpu_s()
    for i in range(n):
        for way in random.Random(i).sample(list(wall), 2):
            cpu0, t0 = time.process_time(), time.monotonic()
            if way == "ssh":
                host_cpu.group_ticks(conn, postmaster)
            else:
                group_ticks(postmaster)
            wall[way].append((time.monotonic() - t0) * 1000)
            own[way] += time.process_time() - cpu0
    here_ms = (own["ssh"] + children_cpu_s() - children0) * 1000 + ticks_to_ms(ticks([conn.master.pid]) - master0)
    return {"wall_ms": wall, "cpu_ms": {"proc_here": own["proc"] * 1000 / n, "ssh_here": here_ms / n,
                                        "ssh_host": ticks_to_ms(ticks(sessions) - there0) / n},
            "sshd_pids": sessions}


def measure(mode: str, conn, pg, tool, spec) -> dict:
    """One pgbench run with the mode's evidence; its TPS, its wall time with the evidence, the readings'."""
    started = time.monotonic()
    if mode == "off":
        tps = pgbench.run(tool, spec, log=False)["tps"]
        return {"tps": tps, "wall_ms": (time.monotonic() - started) * 1000}
    watched = Watched("source", pg.connect, pg.postmaster, ("bench",), host=conn if mode == "ssh" else None)
    with collected([watched]) as ev:
        tps = pgbench.run(tool, spec, log=False)["tps"]
    server = ev.data["servers"]["source"]
    if "source.cpu_ms" in ev.data["missing"]:
        raise RuntimeError(f"{mode}: no CPU: {ev.data['missing']['source.cpu_ms']}")
    return {"tps": tps, "wall_ms": (time.monotonic() - started) * 1000, "cpu_ms": server["cpu_ms"],
            "cpu_read_ms": server.get("cpu_read_ms"), **{k: ev.timings["source"][k] for k in ("before_ms", "after_ms")}}


def rounds(conn, pg, bins, args, save) -> dict:
    spec = pgbench.TimedRun("bench", pg.address, PORT, USER, clients=1, duration_s=args.duration, select_only=True,
                            passfile=str(pg.passfile))
    tool = bins.path("pgbench")
    with pg.connect() as c:
        c.execute("CREATE DATABASE bench")
    pgbench.initialize(tool, "bench", pg.address, PORT, USER, scale=1, passfile=str(pg.passfile))
    got: dict[str, dict[int, dict]] = {m: {} for m in MODES}
    for r in range(1, args.rounds + 1):
        for mode in random.Random(1000 + r).sample(MODES, len(MODES)):
            got[mode][r] = measure(mode, conn, pg, tool, spec)
        print(f"round {r}/{args.rounds}: TPS " + ", ".join(f"{m} {got[m][r]['tps']:.0f}" for m in MODES),
              file=sys.stderr)
        save({"rounds": got})
    return got


def report(cost: dict, got: dict) -> None:
    ssh, proc = summarise(cost["wall_ms"]["ssh"]), summarise(cost["wall_ms"]["proc"])
    print(f"one reading, wall ms: over SSH {ssh.median:.2f} {ssh.ci_text}, /proc here {proc.median:.3f} "
          f"{proc.ci_text} (n={ssh.n} each; SSH / here {ssh.median / proc.median:.0f}x)")
    c = cost["cpu_ms"]
    print(f"one reading, CPU ms: over SSH {c['ssh_here']:.2f} here + {c['ssh_host']:.2f} on the host; "
          f"/proc here {c['proc_here']:.3f}")
    if not got["ssh"]:
        return
    tps = {m: {r: v["tps"] for r, v in got[m].items()} for m in MODES}
    for a, b in (("off", "ssh"), ("proc", "ssh"), ("off", "proc")):
        s = ratio_summary(tps[a], tps[b])
        print(f"TPS {a} / {b}: {s.median:.4f} {s.ci_text} n={s.n}")
    extra = summarise([got["ssh"][r]["wall_ms"] - got["proc"][r]["wall_ms"] for r in got["ssh"]])
    print(f"a measurement's wall time, ssh - proc: {extra.median:.1f} ms {extra.ci_text}")
    for k in ("before", "after"):   # before: with the wait there for our snapshot's backend to be reaped
        reads = summarise([v["cpu_read_ms"][k] for v in got["ssh"].values()])
        print(f"its SSH reading {k} (cpu_read_ms): {reads.median:.1f} ms {reads.ci_text}")
    for m in ("proc", "ssh"):
        cpu = summarise([v["cpu_ms"]["user"] + v["cpu_ms"]["system"] for v in got[m].values()])
        print(f"server CPU ({m}): {cpu.median:.0f} ms {cpu.ci_text}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readings", type=int, default=200, help="readings each way (part 1)")
    ap.add_argument("--rounds", type=int, default=30, help="rounds of the three modes (part 2; 0: none)")
    ap.add_argument("--duration", type=int, default=3, help="seconds per pgbench run")
    ap.add_argument("--save", metavar="FILE", help="every figure as JSON, rewritten after each round")
    args = ap.parse_args()
    out = {"load_start": os.getloadavg(), "args": vars(args)}

    def save(extra: dict) -> None:
        out.update(extra)
        if args.save:
            Path(args.save).write_text(json.dumps(out, indent=1))
    bins = binaries.resolve(15)
    with tempfile.TemporaryDirectory(prefix="pgpb-host-evidence-") as tmp, \
            SshHosts(Path(tmp) / "hosts", ("a",)) as made:
        h = made["a"]
        (Path(tmp) / "known_hosts").write_text(h.known_hosts_line + "\n")
        specs = parse_hosts([f"a={h.url()}"])
        with Hosts(specs, SshSettings.checked(Path(tmp), str(h.identity), (), specs)) as hosts, \
                HostPostgres(hosts["a"], h, made.lan.root_address, bins.bindir, Path(tmp)) as pg:
            conn = hosts["a"]
            cost = readings(conn, h, pg.postmaster, args.readings)
            save({"readings": cost, "load_after_readings": os.getloadavg()})
            got = rounds(conn, pg, bins, args, save) if args.rounds else {m: {} for m in MODES}
            save({"load_end": os.getloadavg()})
    print(f"load average: start {out['load_start'][0]:.1f}, end {out['load_end'][0]:.1f}")
    report(cost, got)
    return 0


if __name__ == "__main__":
    sys.exit(main())
