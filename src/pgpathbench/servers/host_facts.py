"""What a host is, read there over its SSH connection (issue 47): the facts a placed server's
fingerprint keeps (the same keys as environment.host_fingerprint's, plus what tells two hosts
apart), its login, its workspace's free disk, and the PostgreSQL installations it has.

One POSIX sh script, run once: no Python is assumed on the host. Each line it prints is KEY=VALUE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import citus as engine
from .binaries import BUNDLES, HOST_ONLY_BUNDLES, host_bundle

# Free space a shipped bundle needs in the host's workspace: one extracts to about 60 MiB (17.11.0: 59).
SHIP_ROOM_KB = 128 * 1024
TREE_KB = 64 * 1024      # the tree of PostgreSQL 15 with Citus (servers/citus.py): about 60 MiB

# Where the tool would keep its files there: as here (workspace.default_root), root's apart from
# any login's home.
FACTS_SCRIPT = r"""
export LC_ALL=C
echo "hostname=$(uname -n)"
echo "machine_id=$(cat /etc/machine-id 2>/dev/null)"
echo "cpu_model=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)"
echo "cpu_signature=$(awk -F ':[[:space:]]*' '/^$/ { exit } /^cpu family/ { f = $2 } /^model[[:space:]]*:/ { m = $2 }
  /^stepping/ { s = $2 } END { if (f != "" && m != "" && s != "") print "family " f " model " m " stepping " s }' /proc/cpuinfo)"
echo "cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)"
echo "memory_kb=$(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\).*/\1/p' /proc/meminfo)"
echo "kernel=$(uname -r)"
echo "arch=$(uname -m)"
echo "os=$(uname -s)"
echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
echo "user=$(id -un)"
echo "uid=$(id -u)"
if [ "$(id -u)" = 0 ]; then ws=/var/lib/pgpathbench; else ws="${XDG_DATA_HOME:-$HOME/.local/share}/pgpathbench"; fi
echo "workspace=$ws"
d=$ws; while [ ! -e "$d" ]; do d=$(dirname "$d"); done
df -Pk "$d" | awk 'NR == 2 { print "disk_free_kb=" $4; print "disk_device=" $1 }'
echo "os_release=$(. /etc/os-release 2>/dev/null; echo "$ID $VERSION_ID")"
for b in /usr/lib/postgresql/*/bin "$(dirname "$(command -v postgres 2>/dev/null || echo /nonexistent/x)")"; do
  [ -x "$b/postgres" ] || continue
  echo "postgres=$b|$("$b/postgres" --version)"
  # Citus in it: citus.so in its pkglibdir, and citus.control's version (Debian's layout without pg_config)
  lib=$("$b/pg_config" --pkglibdir 2>/dev/null || echo "$b/../lib")
  share=$("$b/pg_config" --sharedir 2>/dev/null || echo "/usr/share/postgresql/$(basename "$(dirname "$b")")")
  [ -f "$lib/citus.so" ] && echo "citus=$b|$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$share/extension/citus.control" 2>/dev/null)"
done
exit 0
"""


@dataclass(frozen=True)
class HostFacts:
    values: dict[str, str]
    installations: dict[int, tuple[str, str]]   # major -> (bindir, version text)

    @classmethod
    def parse(cls, text: str) -> "HostFacts":
        values, found = {}, {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if not sep:
                continue
            if key == "citus":
                bindir, _, version = value.partition("|")
                values[f"citus {bindir}"] = version.strip()
            elif key == "postgres":
                bindir, _, version = value.partition("|")
                major = _major(version)
                if major is not None:
                    found.setdefault(major, (bindir, version.strip()))
            else:
                values[key] = value.strip()
        return cls(values, found)

    def fingerprint(self) -> dict:
        """The placed server's host, as its fingerprint keeps it."""
        v = self.values
        return {"host": v.get("hostname"), "machine_id": v.get("machine_id"), "cpu_model": v.get("cpu_model"),
                "cpu_signature": v.get("cpu_signature") or None,
                "cores": _int(v.get("cores")), "memory_bytes": _int(v.get("memory_kb"), 1024),
                "kernel": v.get("kernel"), "clocksource": v.get("clocksource"), "disk": v.get("disk_device"),
                "arch": v.get("arch"), "os": v.get("os")}

    def shippable(self, major: int) -> bool:
        """Whether a pinned bundle of that major runs there (zonky's are Linux x86_64 builds) and fits."""
        return self._unshippable(major) is None

    def _unshippable(self, major: int) -> str | None:
        """Why no bundle of that major can be shipped there; None when one can."""
        v = self.values
        if host_bundle(major) is None:
            return f"no bundle of {major} (bundles: {', '.join(map(str, sorted(BUNDLES | HOST_ONLY_BUNDLES)))})"
        if (v.get("os"), v.get("arch")) != ("Linux", "x86_64"):
            return f"the bundles are Linux x86_64 builds; the host is {v.get('os')} {v.get('arch')}"
        free_kb = _int(v.get("disk_free_kb")) or 0
        if free_kb < SHIP_ROOM_KB:
            return (f"a bundle needs {SHIP_ROOM_KB // 1024} MiB in {v.get('workspace')}, which has "
                    f"{free_kb // 1024} MiB free")
        return None

    def postgres_text(self, major: int) -> tuple[bool, str]:
        """(whether the major can run there, how)."""
        if major in self.installations:
            bindir, version = self.installations[major]
            return True, f"PostgreSQL {major} installed: {bindir} ({version})"
        why = self._unshippable(major)
        if why is None:
            return True, f"PostgreSQL {major} not installed; the pinned bundle {host_bundle(major).version} can be shipped"
        others = ", ".join(str(m) for m in sorted(self.installations)) or "none"
        return False, (f"PostgreSQL {major} neither installed (found: {others}) nor shippable ({why}); "
                       "install it there, or give its bindir")


def citus_text(facts: HostFacts, version: str | None) -> str | None:
    """Why a Citus node of `version` cannot run there on its own PostgreSQL 15; None when it can."""
    bindir = facts.installations.get(engine.MAJOR, ("", ""))[0]
    found = facts.values.get(f"citus {bindir}") if bindir else None
    if found == version:
        return None
    return (f"its PostgreSQL {engine.MAJOR} has Citus {found}, the coordinator's {version}" if found else
            f"its PostgreSQL {engine.MAJOR} has no Citus" if bindir else f"it has no PostgreSQL {engine.MAJOR}")


def citus_refusal(facts: HostFacts, version: str | None) -> str | None:
    """Why no PostgreSQL 15 with Citus `version` can run there, its own or this machine's tree
    (servers/citus.py) shipped to a Debian 12 x86_64 host; None when one can."""
    why = citus_text(facts, version)
    if why is None:
        return None
    v, tree = facts.values, engine.tree_binaries()
    if tree is not None and engine.extension_version(tree) == version and v.get("os_release") == "debian 12" \
            and v.get("arch") == "x86_64" and (_int(v.get("disk_free_kb")) or 0) >= 2 * TREE_KB:
        return None
    return (f"{why}, and this machine's PostgreSQL 15 with Citus ships to Debian 12 x86_64 hosts with "
            f"{2 * TREE_KB // 1024} MiB free only (it is {v.get('os_release') or 'unknown'} {v.get('arch')}); "
            f"install postgresql-15-citus-{(version or '13.2').rsplit('-', 1)[0]} there")


def _major(version: str) -> int | None:
    """'postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)' -> 15."""
    m = re.search(r"\(PostgreSQL\) (\d+)", version)
    return int(m.group(1)) if m else None


def _int(text: str | None, times: int = 1) -> int | None:
    return int(text) * times if text and text.isdigit() else None
