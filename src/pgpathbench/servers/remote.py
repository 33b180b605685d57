"""A managed PostgreSQL on another host, over the run's SSH connection (issue 47, `--place`).

What lands on the host: the run's directory (its workspace's runs/RUN: ~/.local/share/pgpathbench
of a login user, /var/lib/pgpathbench of root), holding a ledger (remote_scripts.py), each placed
server's data, socket directory and log, and a shipped bundle when the host has no PostgreSQL of
the run's major. The host's own installation (a bindir of /usr/lib/postgresql/*/bin or PATH, as
host_facts reads them) comes first; else the pinned bundle this tool fetches (binaries.py) goes
there as a tar stream on ssh's stdin, over the open connection.

Servers never run as root: with a login user, as that user; with a root login, as the account
`pgpathbench`, created (useradd --system) when missing and then recorded, so that it goes too.
The server is reached from here at the host's HostName as the ssh config resolves it (ssh -G: an
alias's HostName, not the alias), its address resolved here, directly (never through SSH or a
ProxyJump: that would not be the real link; a host this machine cannot reach is refused before
anything is made there). It listens there, on the address the host's sshd was reached at
($SSH_CONNECTION: the same unless a jump host or a NAT is between) and on its loopback, on a port
tried free there; pg_hba.conf admits our superuser only from this machine's address as the host
sees it: its address on the route to the host (a connected UDP socket's), and $SSH_CONNECTION's
client (the jump host's, with a ProxyJump); from the addresses `allow` adds (another placed
server's, for postgres_fdw), from the host's loopback, and by its private socket (trust: 0700).
Its password is generated here and goes on ssh's stdin into a 0600 file for initdb (removed
after); clients here read it from a 0600 password file (PGPASSFILE), in-process connections get
it as a keyword: never on a command line, here or there.

The run removes its directory there at its end (HostWorkspace.remove, after SIGINT/SIGTERM too);
a killed run's is found by `clean` through this machine's entry (host_ledger.py).
"""

from __future__ import annotations

import io
import random
import secrets
import subprocess
import tarfile
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path
from typing import Mapping

import psycopg

from ..errors import UserError
from ..evidence import Watched
from ..procs import password_env, write_passfile
from . import citus as engine
from . import remote_scripts as scripts
from .binaries import fetched, host_bundle
from .cluster import SUPERUSER, TCP_AUTH, Statements, fingerprint_of
from .host_facts import FACTS_SCRIPT, HostFacts, citus_refusal, citus_text
from .host_ledger import HostLedger
from .hosts import Connection
from .ssh_route import PORTS, reached_from_here, source_address, unreachable

RUNS_DIR = "runs"
# Our connections to a placed server, and its FDW hop's: a network lost under one fails it within
# about 15 s (keepalives unanswered while it waits, or data unacknowledged), not the kernel's minutes.
KEEPALIVES = {"connect_timeout": "10", "keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2",
              "keepalives_count": "3", "tcp_user_timeout": "15000"}
START_TRIES = 5
SHIP_TIMEOUT_S = 3600    # a file_fdw server's files: GBs at the larger scales


class HostLost(Exception):
    """The host's SSH connection failed under a command: one line naming the host."""


@dataclass
class HostWorkspace:
    """The run's directory on one host: made once (with the servers' account), removed at the end."""
    connection: Connection
    run_id: str
    ledger: HostLedger
    facts: HostFacts | None = None
    client_address: str = ""     # this machine, as the host's sshd sees it (a jump host, with ProxyJump)
    source_address: str = ""     # this machine, as the host sees its database connections
    address: str = ""            # the host, as this machine reaches it (its HostName's address)
    sshd_address: str = ""       # the host, where its sshd was reached (from a jump host, with ProxyJump)
    _bins: dict[object, tuple[str, str]] = field(default_factory=dict)   # major, or Citus's version -> (bindir there, origin)

    @property
    def name(self) -> str:
        return self.connection.spec.name

    @property
    def dir(self) -> str:
        return f"{self.facts.values['workspace']}/{RUNS_DIR}/{self.run_id}"

    @property
    def as_root(self) -> bool:
        return self.facts.values.get("uid") == "0"

    @property
    def account(self) -> str:
        return scripts.ACCOUNT if self.as_root else self.facts.values.get("user", "")

    def command_values(self) -> dict[str, str]:
        """The prefixes a script runs the servers' commands with (raw shell: built here, not given)."""
        if not self.as_root:
            return {"as_account": "", "chown": ":"}
        return {"as_account": f"runuser -u {scripts.ACCOUNT} --",
                "chown": f"chown {scripts.ACCOUNT}:{scripts.ACCOUNT}"}

    def prepare(self) -> "HostWorkspace":
        if self.facts is not None:
            return self
        self.facts = HostFacts.parse(self.output(FACTS_SCRIPT, "reading the host's facts"))
        self.ledger.add(self.run_id, self.connection, self.dir)   # before anything is made there
        # every script and command from here on exports the run's marker (CLEANUP's)
        self.connection.prefix = scripts.exported(self.name, self.dir)
        out = self.output(scripts.render(scripts.PREPARE, run=self.dir, account=scripts.ACCOUNT),
                          "making the run's directory")
        connection = next((line.split("=", 1)[1].split() for line in out.splitlines()
                           if line.startswith("connection=")), [])
        if len(connection) != 4:
            raise UserError(f"--host {self.name}: sshd there gives no SSH_CONNECTION; the servers' addresses "
                            "cannot be known")
        self.client_address, self.sshd_address = connection[0], connection[2]
        self.address = reached_from_here(self.connection.route, self.connection.spec.name)
        self.source_address = source_address(self.address)
        return self

    def binaries(self, major: int, workspace) -> tuple[str, str]:
        """(bindir there, where it comes from) for a major: the host's own, else the pinned bundle shipped."""
        if major not in self._bins:
            if major in self.facts.installations:
                bindir, version = self.facts.installations[major]
                self._bins[major] = (bindir, f"the host's own {bindir} ({version})")
            elif self.facts.shippable(major):
                self._bins[major] = self._ship(major, workspace)
            else:
                raise UserError(f"--place: on host {self.name}, {self.facts.postgres_text(major)[1]}")
        return self._bins[major]

    def citus_binaries(self, version: str) -> tuple[str, str]:
        """(bindir there, where it comes from) of PostgreSQL 15 with Citus `version`: the host's own when it
        has that Citus (in its pg_config's pkglibdir), else this machine's tree (servers/citus.py: Debian's
        15 with Citus) shipped, on a Debian 12 amd64 host only; else refused, naming the package."""
        if version not in self._bins:
            if citus_text(self.facts, version) is None:
                bindir, pg = self.facts.installations[engine.MAJOR]
                self._bins[version] = (bindir, f"the host's own {bindir} ({pg}) with Citus {version}")
            else:
                why = citus_refusal(self.facts, version)
                if why:
                    raise UserError(f"--place: on host {self.name}, {why}")
                self._bins[version] = self._ship_citus(version)
        return self._bins[version]

    def _ship_citus(self, version: str) -> tuple[str, str]:
        tree = engine.tree_binaries()
        dest = f"{self.dir}/pg15-citus"
        bindir = f"{dest}/{tree.bindir.relative_to(engine.TREE)}"

        def write(stdin) -> None:
            with tarfile.open(fileobj=stdin, mode="w|") as tar:
                tar.add(engine.TREE, arcname=".")
        res = self.connection.stream(scripts.render(scripts.UNPACK_TREE, dest=dest, bindir=bindir), write)
        if res.returncode != 0:
            raise self.failed(res, f"shipping PostgreSQL 15 with Citus {version}")
        return bindir, f"{tree.origin}, shipped to the host ({res.stdout.strip()})"

    def _ship(self, major: int, workspace) -> tuple[str, str]:
        bundle = host_bundle(major)
        local = fetched(bundle, workspace).bindir.parent   # not resolve(): 15 here is Debian's
        dest = f"{self.dir}/postgresql-{bundle.version}"
        stream = io.BytesIO()
        with tarfile.open(fileobj=stream, mode="w") as tar:
            tar.add(local, arcname=".")
        res = self.connection.send(scripts.render(scripts.UNPACK, dest=dest), stream.getvalue())
        if res.returncode != 0 or f") {bundle.server_version}" not in res.stdout:
            raise self.failed(res, f"shipping PostgreSQL {bundle.version}")
        return f"{dest}/bin", f"{bundle.coordinates}, shipped to the host ({res.stdout.strip()})"

    def output(self, script: str, what: str, timeout: float = 120) -> str:
        try:
            res = self.connection.run(script, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HostLost(f"host {self.name}: {what} took more than {timeout:.0f} s") from None
        if res.returncode != 0:
            raise self.failed(res, what)
        return res.stdout

    def failed(self, res: subprocess.CompletedProcess, what: str) -> Exception:
        last = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        if res.returncode == 255:   # ssh's own failure: the connection, not the script
            return HostLost(f"host {self.name} ({self.connection.spec.shown}) lost: {what}: {last}")
        return UserError(f"--place: {what} failed on host {self.name}: {last}")

    def remove(self) -> list[str]:
        """Everything of the run there (its ledger's), then this machine's entry; what was done."""
        if self.facts is None:
            return []
        done = self.output(scripts.cleanup(self.name, self.dir), "removing the run's directory")
        self.ledger.forget(self.run_id, self.name)
        return [f"host {self.name}: {line}" for line in done.splitlines() if line.strip()]


@dataclass
class RemoteCluster(Statements):
    """One placed server: made, started, stopped and removed over its host's connection; seen by the
    studies as any server (the interface of Cluster and UserServer), reached over TCP only."""
    name: str
    host: HostWorkspace
    major: int
    local_dir: Path                    # this run's server directory here: the password file
    settings: dict[str, str] = field(default_factory=dict)
    allowed: list[str] = field(default_factory=list)   # more client addresses (another placed server)
    port: int | None = None
    pid: int | None = None             # its postmaster's, on the host
    bindir: str = ""
    origin: str = ""
    secret: str | None = field(default=None, repr=False)   # a password given (a Citus cluster's shared one)
    citus: str | None = None           # the Citus version it preloads (its binaries must have it)
    password: str = field(default="", repr=False)
    _running: bool = False

    managed = True
    netns = None
    tls = None
    user = SUPERUSER
    transports = ("tcp",)
    self_host = "127.0.0.1"
    tcp_auth = TCP_AUTH[0]

    @property
    def dir(self) -> str:
        return f"{self.host.dir}/{self.name}"

    @property
    def tcp_host(self) -> str:
        return self.host.address

    @property
    def network(self) -> str:
        """What a path to it crosses (a link's kind): the network to its host."""
        return f"host {self.host.name}"

    @property
    def running(self) -> bool:
        return self._running

    @property
    def passfile(self) -> Path:
        return self.local_dir / f"{self.name}.pgpass"

    def client_env(self, base=None) -> dict[str, str]:
        return password_env(self.passfile, base)

    def _values(self, **more: str) -> dict:
        return {**self.host.command_values(), "dir": self.dir, "bindir": self.bindir,
                "ledger": f"{self.host.dir}/{scripts.LEDGER}", **more}

    def start(self, workspace) -> "RemoteCluster":
        """initdb there (fresh, as a resumed run's servers are), then a start on a port free there."""
        self.host.prepare()
        self.bindir, self.origin = self.host.citus_binaries(self.citus) if self.citus else \
            self.host.binaries(self.major, workspace)
        self.password = self.secret or secrets.token_urlsafe(24)
        self.local_dir.mkdir(parents=True, exist_ok=True)
        write_passfile(self.passfile, self.password, SUPERUSER)
        raw = ("as_account", "chown", "password")
        self.host.output(scripts.render(scripts.INITDB, raw, superuser=SUPERUSER, password=self.password,
                                        **self._values()), f"initdb of {self.name}")
        for attempt in range(START_TRIES):
            self.port = random.randint(*PORTS)
            try:
                self._launch()
                return self
            except UserError as e:
                if not str(e).endswith("port in use") or attempt == START_TRIES - 1:
                    raise
        return self

    def _launch(self) -> None:
        listen = ",".join(dict.fromkeys([self.host.sshd_address, self.host.address, "127.0.0.1"]))
        conf = {"listen_addresses": listen, "port": str(self.port),
                "unix_socket_directories": f"{self.dir}/sock", "unix_socket_permissions": "0700",
                "logging_collector": "off", **self.settings}
        text = "\n".join(f"{k} = '{str(v).replace(chr(39), chr(39) * 2)}'" for k, v in conf.items())
        out = self.host.output(scripts.render(scripts.START, ("as_account", "chown", "conf", "hba"), conf=text,
                                              hba=self._hba(), **self._values()), f"the start of server {self.name}")
        self.pid = int(out.split()[-1])
        self._running = True
        why = unreachable(self.tcp_host, self.port)
        if why:
            raise UserError(f"--place: server {self.name} on host {self.host.name} listens at {self.tcp_host}:"
                            f"{self.port}, which this machine cannot reach ({why}); open the host's TCP ports "
                            f"{PORTS[0]}-{PORTS[1]} to this machine")

    def _clients(self) -> list[str]:
        # its own host's address too: a Citus worker reaches itself by the name pg_dist_node gives it
        return list(dict.fromkeys([self.host.source_address, self.host.client_address, *self.allowed,
                                   self.host.address, "127.0.0.1"]))

    def _hba(self) -> str:
        return "\n".join([f"local all {SUPERUSER} trust",
                          *(f"host all {SUPERUSER} {a}/{ip_address(a).max_prefixlen} {self.tcp_auth}"
                            for a in self._clients())])

    def allow(self, address: str) -> None:
        """Admit our superuser from one more address (postgres_fdw of a server on another host)."""
        if address in self._clients():
            return
        self.allowed.append(address)
        self.host.output(scripts.render("cat > {dir}/data/pg_hba.conf <<'PGPB_HBA_END'\n{hba}\nPGPB_HBA_END\n"
                                        + scripts.RELOAD, ("as_account", "hba"), hba=self._hba(),
                                        **self._values(data=f"{self.dir}/data")), f"pg_hba.conf of {self.name}")

    def server_paths(self, files: Mapping[str, Path]) -> dict[str, str]:
        """Where the server reads these files of this machine (file_fdw's): shipped to its directory
        there as a tar stream over the run's connection, each file's size checked there."""
        dest = f"{self.dir}/files"

        def write(stdin) -> None:
            with tarfile.open(fileobj=stdin, mode="w|") as tar:
                for name, path in files.items():
                    tar.add(path, arcname=name)
        res = self.host.connection.stream(scripts.render(scripts.FILES, dest=dest, ledger=self._values()["ledger"]),
                                          write, timeout=SHIP_TIMEOUT_S)
        what = f"shipping {len(files)} files for {self.name}"
        if res.returncode != 0:
            raise self.host.failed(res, what)
        there = dict(reversed(line.split(None, 1)) for line in res.stdout.splitlines() if line.strip())
        for name, path in files.items():
            if there.get(name) != str(path.stat().st_size):
                raise UserError(f"--place: {what} failed on host {self.host.name}: {name} has "
                                f"{there.get(name, 'no')} bytes there, {path.stat().st_size} here")
        return {name: f"{dest}/{name}" for name in files}

    def writable_dir(self, name: str) -> str:
        """A directory of the run's there that the server writes files to (COPY TO): made, and handed to
        the servers' account."""
        path = f"{self.dir}/{name}"
        self.host.output(scripts.render("mkdir -p {path} && {chown} {path}", ("chown",), path=path,
                                        **self.host.command_values()), f"a directory for {self.name}")
        return path

    def stop(self, immediate: bool = False) -> None:
        if not self._running:
            return
        self._running = False
        self.host.output(scripts.render(scripts.STOP, ("as_account",), data=f"{self.dir}/data",
                                        mode="immediate" if immediate else "fast", **self._values()),
                         f"the stop of server {self.name}")

    def remove(self) -> None:
        """Stopped; its directory there goes with the run's (HostWorkspace.remove)."""
        self.stop(immediate=True)
        self.passfile.unlink(missing_ok=True)

    def exit_reason(self) -> str | None:
        return None   # asked on its host with the others there (PlacedServers.dead, gone_script)

    def gone_script(self) -> str:
        """A script printing 'name<TAB>its log's last line' there if its postmaster no longer runs."""
        return scripts.render(scripts.GONE, pid=self.pid, name=self.name, log=f"{self.dir}/server.log")

    # -- connecting (as Cluster and UserServer) -----------------------------------------------
    def dbname(self, name: str) -> str:
        return name

    def client_args(self, name: str) -> tuple[str, str, int, str]:
        return name, self.tcp_host, self.port, SUPERUSER

    @staticmethod
    def reached_at(link) -> tuple[str, int]:
        return link.host, link.port

    def fdw_target(self, name: str) -> tuple[dict[str, str], str, str | None]:
        return {"dbname": name, **KEEPALIVES}, SUPERUSER, self.password

    def conninfo(self, dbname: str = "postgres", transport: str = "tcp") -> str:
        return f"host={self.tcp_host} port={self.port} user={SUPERUSER} dbname={dbname}"

    def connect(self, dbname: str = "postgres", **kw) -> psycopg.Connection:
        if self.host.connection.lost:   # not connect_timeout's 10 s per try over a network already lost
            raise psycopg.OperationalError(f"host {self.host.name} lost: its SSH connection ended")
        return psycopg.connect(self.conninfo(dbname), autocommit=True, password=self.password,
                               **{**KEEPALIVES, **kw})

    def watched(self, role: str, *databases: str) -> Watched:
        # Its CPU is read on its host, over the run's connection (evidence/host_cpu.py).
        return Watched(role, self.connect, self.pid, databases, host=self.host.connection)

    def fingerprint(self) -> dict:
        with self.connect() as conn:
            found = fingerprint_of(conn)
        return {**found, "major": self.major, "bindir": self.bindir, "binaries": self.origin,
                "placed": {"host": self.host.name, "at": self.host.connection.spec.shown,
                           "address": self.host.address, "os_user": self.host.account,
                           "ssh": self.host.connection.route.fingerprint()},   # as the ssh config resolved it
                "host": self.host.facts.fingerprint(),   # as results/fingerprint.py compares it
                "auth": {"local": "trust (private 0700 socket dir, on the host)", "tcp": self.tcp_auth}}
