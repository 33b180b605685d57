"""`pgpathbench doctor`: what is installed, what is missing, and how to get it."""

from __future__ import annotations

import importlib.metadata
import os
import statistics
import time
from typing import Mapping
import psycopg

from .clientenv import user_conninfo
from .errors import UserError
from .servers import binaries, citus, pgbouncer, user_checks
from .servers.user import UserDsn
from .servers.host_facts import FACTS_SCRIPT, HostFacts
from .results.fingerprint import cpu_text
from .servers.hosts import Connection, Hosts
from .servers.ssh_route import reached_from_here
from .servers.ssh_route import source_address
from .servers.postmaster import postmaster_pid
from .servers.network import available_link_kinds
from .workspace import Workspace

OK, MISSING, NOTE = "ok", "MISSING", "note"


def checks(workspace: str | None, server_user: str | None, pg_bindir: str | None,
           results_dsn: str | None, user_dsns: Mapping[str, UserDsn] | None = None,
           hosts: Hosts | None = None) -> tuple[list[list[str]], bool]:
    rows: list[list[str]] = []

    def add(name: str, good: bool, detail: str, required: bool = True) -> None:
        rows.append([name, OK if good else (MISSING if required else NOTE), detail])

    try:
        bins = binaries.resolve(15, pg_bindir)
        for tool in (*binaries.SERVER_TOOLS, *binaries.CLIENT_TOOLS):
            path = bins.path(tool)
            add(tool, path.is_file(), str(path) if path.is_file() else f"{path}: make bootstrap installs postgresql-15")
        if bins.path("postgres").is_file():
            add("server version", True, bins.version())
        for ext in ("postgres_fdw", "file_fdw"):
            add(f"extension {ext}", bins.has_extension(ext), str(bins.sharedir() / "extension"))
        add("citus", *citus.describe(bins), required=False)
    except UserError as e:
        add("PostgreSQL binaries", False, str(e))
    for pkg in ("psycopg", "rich"):
        try:
            add(f"python {pkg}", True, importlib.metadata.version(pkg))
        except importlib.metadata.PackageNotFoundError:
            add(f"python {pkg}", False, "make bootstrap")
    add("libpq (psycopg)", True, str(psycopg.pq.version()))
    try:
        ws = Workspace.open(workspace, server_user)
        add("workspace", os.access(ws.root, os.W_OK), str(ws.root))
        add("server user", True, f"{ws.server_user.name} (uid {ws.server_user.uid})"
            + (" — pgpathbench runs as root, servers do not" if os.geteuid() == 0 else ""))
        running = postmaster_pid(ws.results_dir / "data")
        add("results cluster", True, (f"{ws.results_dir} (running, pid {running})" if running else
                                      f"{ws.results_dir} (stopped)" if (ws.results_dir / "data").exists() else
                                      "not created yet: made on first use"))
        leftovers = [p for p in ws.servers_dir.glob("*/*/data") if postmaster_pid(p)]
        add("running study servers", True, f"{len(leftovers)}" + (" (pgpathbench clean stops them)" if leftovers else ""))
    except UserError as e:
        add("workspace", False, str(e))
    if results_dsn:
        try:
            psycopg.connect(user_conninfo(results_dsn), connect_timeout=5).close()
            add("--results-dsn", True, "reachable")
        except psycopg.Error as e:
            add("--results-dsn", False, str(e).strip().splitlines()[-1])
    found = pgbouncer.binary()
    add("pgbouncer", found is not None, f"{found} ({pgbouncer.version()})" if found else
        "--via/--fdw-via pgbouncer need it: make bootstrap installs Debian's pgbouncer", required=False)
    for kind, status in available_link_kinds().items():
        add(f"link: {kind}", status.startswith("ok"), status, required=False)
    for name, good, detail, required in user_checks.doctor_rows(user_dsns or {}):
        add(name, good, detail, required)
    for connection in (hosts.connections.values() if hosts else ()):
        for name, good, detail, required in host_rows(connection):
            add(name, good, detail, required)
    return rows, all(r[1] != MISSING for r in rows)


DOCTOR_MAJOR = 15        # the default major of every study (its --pg)
RTT_PROBES = 5


def host_rows(connection: Connection) -> list[tuple[str, bool, str, bool]]:
    """(check, ok, detail, required) for one --host, over its open connection; a host whose address this
    machine cannot reach is refused (as a run would refuse it)."""
    name = f"host {connection.spec.name}"
    address = reached_from_here(connection.route, connection.spec.name)
    facts = HostFacts.parse(connection.output(FACTS_SCRIPT, "reading its facts"))
    v = facts.values
    login = f"{v.get('user')} (uid {v.get('uid')})" + (
        ": servers would run there as an unprivileged account, never as root" if v.get("uid") == "0" else "")
    free_kb = int(v.get("disk_free_kb") or 0)
    can_run, pg = facts.postgres_text(DOCTOR_MAJOR)
    fp = facts.fingerprint()
    return [(name, True, f"{connection.spec.shown}: reachable, host key known, {v.get('hostname')}", True),
            (f"{name}: route", True, f"{connection.route.shown} (ssh config); database connections from here "
                                     f"({source_address(address)}) to {address}: it answers TCP", True),
            (f"{name}: login", True, login, True),
            (f"{name}: workspace", free_kb > 0, f"{v.get('workspace')}: {free_kb / 1024 ** 2:.1f} GiB free", True),
            (f"{name}: PostgreSQL", can_run, pg, True),
            (f"{name}: machine", True, f"{cpu_text(fp)}, {fp['cores']} cores, "
                                       f"{(fp['memory_bytes'] or 0) / 1024 ** 3:.1f} GiB, {v.get('os')} "
                                       f"{fp['kernel']} {fp['arch']}, clock {fp['clocksource']}", False),
            (f"{name}: machine-id", True, str(fp["machine_id"]), False),
            (f"{name}: round trip", True, _round_trip(connection), False)]


def _round_trip(connection: Connection) -> str:
    """The median time of `true` over the open connection: ssh's own start and a session there
    included (no SELECT 1 probe before a server runs on the host)."""
    times = []
    for _ in range(RTT_PROBES):
        started = time.perf_counter()
        connection.output("true", "the round-trip probe")
        times.append((time.perf_counter() - started) * 1000)
    return (f"median {statistics.median(times):.1f} ms of {RTT_PROBES} `true` over the open SSH connection "
            "(an ssh client's start and a shell there included: not the network's round trip)")
