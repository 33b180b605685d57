"""`--place ROLE=NAME` (issue 47): which managed roles of a run live on which --host, checked before
anything is written, and kept with the run's options so that `run --resume` reaches the same hosts.

Built so far: fdw-overhead's and remote-sampling's `source` and `external` (both on hosts, or the
source alone: the external's postgres_fdw here then reaches it over the LAN), interfaces'
`remote`, and file-fdw-tpch's workers, numbered families: the postgres_fdw layout's `worker=NAME`
for every one of them, `workerK=NAME` for worker K alone (one form or the other in a run), and the
citus layout's `citus_worker` and `citus_workerK` alike (a host running Citus of the coordinator's
version, or one this machine's PostgreSQL 15 with Citus can be shipped to). A placed role has
the real link to its host, and --latency adds its delay on top (a Toxiproxy where the path's client
is: here, or on the client's host, host_proxy.py); no bandwidth limit, PgBouncer or TLS of ours in
front of it (refused, naming the option), and a host whose address this machine cannot reach (one
behind its ProxyJump) is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from ..errors import UserError
from .host_facts import FACTS_SCRIPT, HostFacts, citus_refusal
from .hosts import HostSpec, Hosts, SshSettings, parse_host, parse_hosts, readable_file
from .ssh_route import reached_from_here

PLACEABLE = {"fdw-overhead": ("source", "external"), "interfaces": ("remote",),
             "remote-sampling": ("source", "external"), "file-fdw-tpch": ("worker", "citus_worker")}
# The roles issue 47 will place, not built yet: refused as such (not as unknown).
LATER: dict[str, tuple[str, ...]] = {}
# Roles whose servers are numbered (worker1..N): ROLE places them all, ROLEK the K-th alone.
NUMBERED = {"file-fdw-tpch": ("worker", "citus_worker")}
MAX_NUMBER = 16
CITUS_WORKER = "citus_worker"   # a Citus node: the host runs Citus too
# Dimensions whose values put something of ours (a pooler, TLS) on a placed server's path.
DIRECT_ONLY = {"via": "direct", "fdw_via": "direct", "tls": "off"}


@dataclass(frozen=True)
class Placements:
    roles: Mapping[str, str] = field(default_factory=dict)        # role -> host name
    hosts: Mapping[str, HostSpec] = field(default_factory=dict)   # every --host of the run
    identity: str | None = None
    accept: frozenset[str] = frozenset()
    ssh_config: str | None = None    # absolute: --resume reads the same file

    def __bool__(self) -> bool:
        return bool(self.roles)

    def stored(self) -> dict:
        """What the run keeps (no secret: a key's path, never a key)."""
        if not self.roles:
            return {}
        return {"placed": dict(self.roles), "hosts": {n: h.destination for n, h in self.hosts.items()},
                "ssh_identity": self.identity, **({"ssh_config": self.ssh_config} if self.ssh_config else {})}

    @classmethod
    def from_stored(cls, params: Mapping) -> "Placements":
        hosts = {n: parse_host(f"{n}={d}") for n, d in (params.get("hosts") or {}).items()}
        return cls(dict(params.get("placed") or {}), hosts, params.get("ssh_identity"),
                   ssh_config=params.get("ssh_config"))

    @contextlib.contextmanager
    def opened(self, workspace: Path, majors: Iterable[int] = (), citus: str | None = None) -> Iterator[Hosts | None]:
        """The hosts' connections for the whole run (None without a placed role), each placed role's
        host checked first to be reachable from here and to run every major of the run (installed
        there, or a bundle shipped), and a Citus worker's to run Citus of the coordinator's version
        `citus`."""
        if not self.roles:
            yield None
            return
        settings = SshSettings.checked(workspace, self.identity, self.accept, self.hosts, self.ssh_config)
        with Hosts(self.hosts, settings) as hosts:
            for role, name in self.roles.items():
                reached_from_here(hosts[name].route, hosts[name].spec.name)
                facts = HostFacts.parse(hosts[name].output(FACTS_SCRIPT, "reading the host's facts"))
                for major in majors:
                    runs, text = facts.postgres_text(int(major))
                    if not runs:
                        raise UserError(f"--place {role}={name}: {text}")
                why = citus_refusal(facts, citus) if citus and family(role, "file-fdw-tpch") == CITUS_WORKER else None
                if why:
                    raise UserError(f"--place {role}={name}: {why}, or leave --place out")
            yield hosts


def parse_places(values: Iterable[str] | None, hosts: Iterable[str] | None, identity: str | None,
                 accept: Iterable[str] | None, study: str, roles: Mapping[str, Iterable[str]],
                 servers: Iterable[str], ssh_config: str | None = None) -> Placements:
    """--place values against the study's roles (roles: every study's, by name), the --host names and
    the roles --server gives: one line naming the option and the fix for anything wrong."""
    specs = parse_hosts(hosts)
    placed: dict[str, str] = {}
    for value in values or ():
        role, sep, name = value.partition("=")
        role, name = role.strip(), name.strip()
        if not sep or not role or not name:
            raise UserError("--place: give ROLE=NAME; ROLE a role of the study, NAME that of a --host")
        _check_role(family(role, study), study, roles)
        if role in placed:
            raise UserError(f"--place: {role} is placed twice; give each role one --place")
        _check_not_both(role, placed, study)
        if name not in specs:
            raise UserError(f"--place: no --host is named {name}; add --host {name}=ssh://USER@ADDRESS[:PORT]")
        if role in servers:
            raise UserError(f"--place: {role} is also given by --server; give the role one server: its --server "
                            f"or its --place")
        placed[role] = name
    if placed.get("external") and "source" not in placed and study in ("fdw-overhead", "remote-sampling"):
        raise UserError("--place: a placed external reaches the source over the network, and this version keeps "
                        "a source here on loopback; add --place source=NAME")
    unused = sorted(set(specs) - set(placed.values()))
    given = f"--host {unused[0]}" if unused else "--ssh-identity" if identity and not placed else \
        "--accept-host-key" if accept and not placed else "--ssh-config" if ssh_config and not placed else None
    if given:
        raise UserError(f"{given}: a run uses hosts only for --place, and no --place names it; leave {given} "
                        "out, or place a role there (use it with 'pgpathbench doctor' to check a host)")
    config = None if ssh_config is None else str(readable_file("--ssh-config", ssh_config, "an ssh_config(5) file"))
    return Placements(placed, specs, identity, frozenset(accept or ()), config)


def family(role: str, study: str) -> str:
    """The role a numbered server belongs to (worker2 -> worker), else the role itself."""
    m = re.fullmatch(r"([a-z_]+?)([1-9][0-9]?)", role)
    if m and m.group(1) in NUMBERED.get(study, ()):
        if int(m.group(2)) > MAX_NUMBER:
            raise UserError(f"--place: {role}: a run has at most {MAX_NUMBER} of {m.group(1)}1..N; give "
                            f"{m.group(1)}K=NAME with K from 1 to {MAX_NUMBER}, or {m.group(1)}=NAME for all")
        return m.group(1)
    return role


def _check_not_both(role: str, placed: Mapping[str, str], study: str) -> None:
    """worker=NAME (all of them) with workerK=NAME (one) would say two places for worker K."""
    base = family(role, study)
    other = next((r for r in placed if r != role and family(r, study) == base and base in (r, role)), None)
    if other:
        raise UserError(f"--place: {base} places every {base}1..N and {other if other != base else role} one of "
                        f"them; give --place {base}=NAME alone, or {base}K=NAME for each one")


def host_of(placed: Mapping[str, str], server: str) -> str | None:
    """The host of a role's server: placed by its own name (worker2), or by its family's (worker)."""
    if server in placed:
        return placed[server]
    m = re.fullmatch(r"([a-z_]+?)[1-9][0-9]?", server)
    return placed.get(m.group(1)) if m else None


def _check_role(role: str, study: str, roles: Mapping[str, Iterable[str]]) -> None:
    if role in PLACEABLE.get(study, ()):
        return
    if role in LATER.get(study, ()):
        raise UserError(f"--place: {role}: not placeable yet (this version places "
                        f"{', '.join(f'{s} {r}' for s, rs in PLACEABLE.items() for r in rs)}); leave --place "
                        f"{role}=... out")
    if role in roles.get(study, ()):
        raise UserError(f"--place: {role} is not a managed server of {study} that can be placed; place "
                        f"{' or '.join(PLACEABLE.get(study, ())) or 'none of its roles'}")
    elsewhere = sorted(s for s, rs in roles.items() if role in rs)
    if elsewhere:
        raise UserError(f"--place: {role} is a role of {', '.join(elsewhere)}, not of {study}; its roles: "
                        f"{', '.join(roles.get(study, ()))}")
    raise UserError(f"--place: no role {role[:40]} in {study}; its roles: {', '.join(roles.get(study, ()))}")


def check_cases(placements: Placements, cases: Iterable[Mapping[str, str]], bandwidth: int | None) -> None:
    """A placed role's path is the real one (plus --latency's delay): refused when a case puts a bandwidth
    limit, pooler or TLS of ours there."""
    if not placements:
        return
    if bandwidth:
        raise UserError("--bandwidth: a placed server's path is the real link to its host, which no tbf or proxy "
                        "of ours limits; leave --bandwidth out, or leave --place out")
    for case in cases:
        for dim, direct in DIRECT_ONLY.items():
            if case.get(dim, direct) != direct:
                option = "--" + dim.replace("_", "-")
                raise UserError(f"{option}: {case[dim]} cannot apply to a placed server (its path is the real "
                                f"link to its host); leave {option} at {direct}, or leave --place out")
