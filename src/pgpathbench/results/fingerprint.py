"""The environment fingerprint: a typed, versioned record of what produced a run's numbers.

One `Fingerprint` per start or resume of a run (a session), with fixed sections:
- machine: CPU model, cores, memory, kernel, OS, host, user, Python, load average, and the tool
  itself: pgpathbench (its version), pgpathbench_commit and pgpathbench_dirty (environment.tool_version);
- servers: by role (pg15_source, ...): version, non-default settings, auth;
- paths: by path id: kind, added latency, jitter, bandwidth;
- tools: name -> version (pgbench, clients, drivers, tpchgen...);
- setup: per PostgreSQL major, per study: what prepare() set up (scale, sizes, plans...).
`compare` checks the facts listed in CHECKED (as pyperf checks its metadata), nothing else.
Version 1 (a flat dict per session) is read by `from_json` and mapped onto the sections.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

FINGERPRINT_VERSION = 2
MACHINE_KEYS = ("host", "cpu_model", "cores", "memory_bytes", "memory_limit_bytes", "kernel", "os", "python",
                "pgpathbench", "user", "load_avg_at_start")


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
        if d.get("version", 1) >= 2:
            return cls(dict(d.get("machine") or {}), dict(d.get("servers") or {}), dict(d.get("paths") or {}),
                       dict(d.get("tools") or {}), dict(d.get("setup") or {}), int(d["version"]))
        # Version 1: machine keys, servers, links, client versions and study set-ups side by side.
        fp = cls(version=1)
        for key, value in d.items():
            if key in MACHINE_KEYS:
                fp.machine[key] = value
            elif key == "servers":
                fp.servers = dict(value or {})
            elif key == "links":
                fp.paths = dict(value or {})
            elif isinstance(value, dict):
                fp.setup.setdefault("", {})[key] = value
            elif isinstance(value, str):
                fp.tools[key] = value
        return fp

    def setup_of(self, study_key: str) -> dict:
        """A study's set-up facts, merged over majors (the last major's value wins per key)."""
        out: dict = {}
        for per_study in self.setup.values():
            out.update(per_study.get(study_key) or {})
        return out


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
                               "config_file", "hba_file", "ident_file", "external_pid_file"})
CHECKED = (
    "machine: CPU model, cores, memory",
    "servers: version (major.minor) and every non-default setting, by role",
    "paths: kind, added latency, jitter, bandwidth, by path id",
    "tools: every recorded version (pgbench as major.minor)",
    "study parameters: every --option the run's studies took",
)
