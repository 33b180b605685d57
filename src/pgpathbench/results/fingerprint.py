"""The environment fingerprint: a typed, versioned record of what produced a run's numbers.

One `Fingerprint` per start or resume of a run (a session), with fixed sections:
- machine: CPU model, cores, memory, kernel, OS, host, user, Python, load average, and the tool
  itself: pgpathbench (its version), pgpathbench_commit and pgpathbench_dirty (environment.tool_version);
- servers: by role (pg15_source, ...): version, non-default settings, auth;
- paths: by path id: kind, added latency, jitter, bandwidth;
- tools: name -> version (pgbench, clients, drivers, tpchgen...);
- setup: per PostgreSQL major, per study: what prepare() set up (scale, sizes, plans...).
`compare` checks the facts CHECKED gives (as pyperf checks its metadata), nothing else.
Version 1 (a flat dict per session) is mapped onto the sections on read (upgrade.py).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Mapping

from .upgrade import upgrade_fingerprint

FINGERPRINT_VERSION = 2


@dataclass
class Fingerprint:
    machine: dict[str, Any] = field(default_factory=dict)
    servers: dict[str, dict] = field(default_factory=dict)
    paths: dict[str, dict] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)
    setup: dict[str, dict[str, dict]] = field(default_factory=dict)   # major -> study -> facts
    version: int = FINGERPRINT_VERSION

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping) -> "Fingerprint":
        d = upgrade_fingerprint(d)
        return cls(dict(d.get("machine") or {}), dict(d.get("servers") or {}), dict(d.get("paths") or {}),
                   dict(d.get("tools") or {}), dict(d.get("setup") or {}), int(d["version"]))

    def setup_of(self, study_key: str) -> dict:
        """A study's set-up facts, merged over majors (the last major's value wins per key)."""
        out: dict = {}
        for per_study in self.setup.values():
            out.update(per_study.get(study_key) or {})
        return out


def cpu_text(machine: Mapping) -> str:
    """The CPU's model name, and its signature where recorded: 'AMD EPYC (family 25 model 17 stepping 1)'."""
    signature = machine.get("cpu_signature")
    return f"{machine.get('cpu_model', '?')}" + (f" ({signature})" if signature else "")


def memory_text(machine: Mapping) -> str:
    """The machine's memory, and the cgroup limit the run had under it: '23.5 GiB' or
    '23.5 GiB, of which the run's cgroup may use 8.0 GiB'."""
    total, limit = machine.get("memory_bytes"), machine.get("memory_limit_bytes")
    text = f"{total / 2 ** 30:.1f} GiB" if isinstance(total, (int, float)) else "—"
    return text + (f", of which the run's cgroup may use {limit / 2 ** 30:.1f} GiB" if limit else "")


def tool_text(machine: Mapping) -> str:
    """The tool that measured, in words: '0.1.0, commit 2a31ff41b820 (work tree modified)';
    commit unknown for a run stored before it was recorded, or run outside a git checkout."""
    commit = str(machine.get("pgpathbench_commit") or "unknown")
    state = {True: " (work tree modified)", False: " (clean)"}.get(machine.get("pgpathbench_dirty"), "")
    return f"{machine.get('pgpathbench') or 'unknown'}, commit {commit[:12]}{state}"


@dataclass
class Environment:
    sessions: list[Fingerprint]

    def tool_versions(self) -> str:
        """tool_text of every session, each distinct one once (a resumed run may span versions)."""
        return "; ".join(dict.fromkeys(tool_text(s.machine) for s in self.sessions)) or "unknown"

    @classmethod
    def from_json(cls, d: Mapping) -> "Environment":
        return cls([Fingerprint.from_json(s) for s in d.get("sessions") or []])

    @property
    def last(self) -> Fingerprint:
        return self.sessions[-1] if self.sessions else Fingerprint()

    def setup_of(self, study_key: str) -> dict:
        """A study's set-up facts as the last session that recorded them saw them."""
        for s in reversed(self.sessions):
            facts = s.setup_of(study_key)
            if facts:
                return facts
        return {}


# -- what compare checks ----------------------------------------------------------------------
# Non-default settings that say where a server listens, not how it behaves.
VOLATILE_SETTINGS = frozenset({"listen_addresses", "port", "unix_socket_directories", "data_directory",
                               "config_file", "hba_file", "ident_file", "external_pid_file",
                               "ssl_cert_file", "ssl_key_file"})
# What the tls dimension (a knob, servers/tls.py) turns on in a managed server: runs that differ in it
# differ in --tls, which compare names as a knob, not in their environment.
TLS_SETTINGS = frozenset({"ssl", "log_connections"})
def major_minor(version: str | None) -> str:
    """'PostgreSQL 15.18 (Debian ...) on x86_64...' or 'pgbench (PostgreSQL) 15.18' -> '15.18'."""
    m = re.search(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else (version or "?")


Fact = tuple[str, str, str]   # (group, fact, value): ('server pg15_source', 'version', '15.18')


def _machine_facts(fp: Fingerprint) -> Iterator[Fact]:
    yield "machine", "CPU", str(fp.machine.get("cpu_model"))
    if fp.machine.get("cpu_signature"):   # runs recorded before it have none: not a difference
        yield "machine", "CPU signature", fp.machine["cpu_signature"]
    yield "machine", "cores", str(fp.machine.get("cores"))
    yield "machine", "memory", memory_text(fp.machine)


def _tool_facts(fp: Fingerprint) -> Iterator[Fact]:
    for key, value in fp.tools.items():
        yield "client", key, major_minor(value) if key == "pgbench" else str(value)


def _server_facts(fp: Fingerprint) -> Iterator[Fact]:
    for role, srv in fp.servers.items():
        yield f"server {role}", "version", major_minor(srv.get("version"))
        for name, value in (srv.get("settings") or {}).items():
            if name not in VOLATILE_SETTINGS | TLS_SETTINGS:
                yield f"server {role}", f"setting {name}", str(value)


def _host_facts(fp: Fingerprint) -> Iterator[Fact]:
    """Where each server ran: this machine, or a host over SSH (servers/host_facts.py) and what it is."""
    for role, srv in fp.servers.items():
        host = srv.get("host") or {}
        yield f"server {role}", "host", f"{host.get('host')} ({host.get('machine_id')})" if host else "this machine"
        if host:
            yield f"server {role}", "host CPU", str(host.get("cpu_model"))
            if host.get("cpu_signature"):
                yield f"server {role}", "host CPU signature", host["cpu_signature"]
            yield f"server {role}", "host cores", str(host.get("cores"))
            yield f"server {role}", "host memory", memory_text(host)
            yield f"server {role}", "host kernel", str(host.get("kernel"))
            yield f"server {role}", "host clock source", str(host.get("clocksource"))


def _path_facts(fp: Fingerprint) -> Iterator[Fact]:
    for name, path in fp.paths.items():
        bw = path.get("bandwidth_kbit")
        yield f"link {name}", "kind", str(path.get("kind"))
        yield f"link {name}", "latency", f"{path.get('latency_ms')} ms"
        yield f"link {name}", "jitter", f"{path.get('jitter_ms')} ms"
        yield f"link {name}", "bandwidth", f"{bw} kbit/s" if bw else "unlimited"


# The sections compare checks, in the order it lists differences: what they hold, in words (for
# docs/results.md), and the facts each session's fingerprint gives. Besides these, compare checks
# the run's own options: every --option its studies took, and which roles were the user's servers.
CHECKED: tuple[tuple[str, Callable[[Fingerprint], Iterator[Fact]]], ...] = (
    ("machine: CPU model and signature (x86 family, model, stepping), cores, memory", _machine_facts),
    ("tools: every recorded version (pgbench as major.minor)", _tool_facts),
    ("servers: version (major.minor) and every non-default setting, by role", _server_facts),
    ("paths: kind, added latency, jitter, bandwidth, by path id", _path_facts),
    ("hosts: where each server ran (this machine, or a host's name and machine-id) and that host's CPU model "
     "and signature, cores, memory, kernel and clock source, by role", _host_facts),
)
