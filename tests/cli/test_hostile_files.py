"""Every kind of file a user may name, on every option that reads one: refused at once in one line
naming the option, exit 2, nothing written, nothing of the file repeated, the process small.

Beside test_invalid_invocations.py (whose fixtures it shares: a workspace that must not be created,
and tripwires on the results cluster and the runner), in-process for speed, but where a process's
own size is the point (a child's peak RSS, from the kernel) and where a run must find the disk too
small for its scale.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pgpathbench import cli
from pgpathbench.studies.fdw_overhead import spec as fdw_spec
from invalid_invocation_cases import FDW, INTERFACES, TPCH
from test_invalid_invocations import tripwires, ws  # noqa: F401 (their fixtures)

TOKEN = "TOKEN_7f3q"
GOLDEN = Path(__file__).resolve().parent.parent / "golden"
EXPORT = GOLDEN / "fdw-overhead.export.json"
MAX_RSS_KB = 200 * 1024


def _text(path: Path, text: str) -> None:
    path.write_text(text)


def _bytes(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _link(target: str):
    return lambda path: path.symlink_to(target)


@functools.cache
def _bomb() -> bytes:
    """300 kB of gzip that inflates to 65 MiB: past the exports' bound."""
    return gzip.compress(b" " * (65 << 20), 1)


def _sparse(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(2 << 30)


# kind -> how to make it (the file's name ends in .json, a gzip's in .json.gz: every option takes it, RUN too)
KINDS = {
    "fifo": os.mkfifo,
    "directory": Path.mkdir,
    "socket": lambda path: socket.socket(socket.AF_UNIX).bind(str(path)),
    "dev-zero": _link("/dev/zero"),
    "dev-urandom": _link("/dev/urandom"),
    "proc-environ": _link("/proc/self/environ"),
    "sparse-2g": _sparse,
    "nul": lambda path: _bytes(path, f"SELECT 1;\0{TOKEN}\n".encode()),
    "latin1": lambda path: _bytes(path, f"SELECT '{TOKEN} é';\n".encode("latin-1")),
    "escape": lambda path: _bytes(path, f"SELECT 1;\n\x1b[2J{TOKEN}\n".encode()),
    "gzip-bomb": lambda path: _bytes(path, _bomb()),
    "passwd": lambda path: _text(path, f"root:x:0:0:{TOKEN}:/root:/bin/bash\nbin:x:2:2::/bin:/usr/sbin/nologin\n"),
    "shadow": lambda path: _text(path, f"root:$y$j9T${TOKEN}$Xq:19500:0:99999:7:::\n"),
    "missing": lambda path: None,
}
# option -> its command line with the file, and what the refusal starts with
OPTIONS = {
    "script": (lambda p, good: [*FDW, "--script", p], "--script"),
    "init": (lambda p, good: [*FDW, "--script", good, "--init", p], "--init"),
    "query-file": (lambda p, good: [*INTERFACES, "--query-file", f"mine={p}"], "--query-file: mine:"),
    "tpch-query-file": (lambda p, good: [*TPCH, "--query-file", f"mine={p}"], "--query-file: mine:"),
    "report": (lambda p, good: ["report", p], "RUN:"),
    "export": (lambda p, good: ["export", p, "--format", "csv"], "RUN:"),
    "compare": (lambda p, good: ["compare", str(EXPORT), p], "RUN_B:"),
}


@pytest.fixture
def good_script(tmp_path) -> str:
    path = tmp_path / "good.sql"
    path.write_text("\\set aid random(1, 1000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n")
    return str(path)


@pytest.fixture
def untouched(request) -> Path:
    """test_invalid_invocations' workspace that must not be made, with its tripwires."""
    request.getfixturevalue("tripwires")
    return request.getfixturevalue("ws")


# Text that is no SQL costs a server's parse on --script and --init (2 to 3 s): each kind once there
# (test_invalid_invocations tries /etc/passwd itself as a --script), and marked integration (make test).
SERVER_PARSES = {("script", "shadow"), ("init", "passwd")}
PAIRS = [pytest.param(option, kind, id=f"{option}-{kind}",
                      marks=pytest.mark.integration if (option, kind) in SERVER_PARSES else ())
         for option in OPTIONS for kind in KINDS if (option, kind) not in {("script", "passwd"), ("init", "shadow")}]


@pytest.mark.parametrize("option, kind", PAIRS)
def test_every_kind_of_file_on_every_option(option, kind, tmp_path, good_script, untouched, capsys):
    path = tmp_path / (f"{kind}.json" + ".gz" * kind.startswith("gzip"))
    KINDS[kind](path)
    argv, names = OPTIONS[option]
    code = cli.main(argv(str(path), good_script))
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pgpathbench: error: {names}"), err
    assert ";" in lines[0] and "Traceback" not in err and out == ""
    assert TOKEN not in err, "a refusal repeats what the file holds"
    assert not untouched.exists()


def test_refused_at_once_and_small(tmp_path, untouched):
    """/dev/zero, a FIFO and a 2 GB file as --script and --init: the refusing process never grows past
    200 MB and never blocks. Its peak RSS is its parent's RUSAGE_CHILDREN, the parent a small Python
    of its own: a process counts the resident size of the image it was forked from (at exec, the
    kernel keeps the larger of the two), and a test worker is itself about that size."""
    fifo, sparse = tmp_path / "fifo.sql", tmp_path / "big.sql"
    os.mkfifo(fifo)
    _sparse(sparse)
    argvs = [[*FDW, option, path] for option in ("--script", "--init")
             for path in ("/dev/zero", "/dev/urandom", str(fifo), str(sparse))]
    refusing = f"import json\nfrom pgpathbench import cli\nprint(json.dumps([cli.main(a) for a in {argvs!r}]))"
    parent = ("import json, resource, subprocess, sys\n"
              "r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120)\n"
              "print(json.dumps([r.returncode, r.stdout, r.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    res = subprocess.run([sys.executable, "-c", parent, sys.executable, "-c", refusing], capture_output=True, text=True,
                         env={**os.environ, "PGPATHBENCH_HOME": str(untouched)}, timeout=180)
    assert res.returncode == 0, res.stderr   # a refusal that blocks (a FIFO waiting for a writer) times out
    code, out, err, peak_kb = json.loads(res.stdout)
    assert code == 0 and json.loads(out) == [2] * len(argvs), err
    assert len(err.splitlines()) == len(argvs) and "Traceback" not in err
    assert peak_kb < MAX_RSS_KB, f"peak RSS {peak_kb} kB"   # Linux counts it in kilobytes


@pytest.mark.parametrize("argv", [["runs"], ["report"], ["export"], ["clean"], ["clean", "--all"],
                                  [*FDW], ["run", "--resume", "latest"], ["compare", "latest~1", "latest"]],
                         ids=" ".join)
def test_an_empty_pgpathbench_home_is_no_workspace(argv, monkeypatch, capsys, untouched):
    monkeypatch.setenv("PGPATHBENCH_HOME", "")
    assert cli.main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert err == ("pgpathbench: error: PGPATHBENCH_HOME: set but empty; export PGPATHBENCH_HOME=DIR, or unset it "
                   "for the default workspace\n") and out == ""


@pytest.mark.parametrize("kind", ["anyone may write", "another user's", "a file", "closed to the server user"])
def test_a_templates_folder_not_ours_alone_or_unreachable_is_refused(kind, tmp_path, monkeypatch, capsys, untouched):
    """PGPATHBENCH_TEMPLATES: what is copied from there becomes a server's data directory (its
    postgresql.conf runs commands), so only a folder of ours alone is taken; and one the servers'
    user (root runs them as another) can reach."""
    shared = tmp_path / "templates"
    if kind == "a file":
        shared.write_text("")
    elif os.geteuid() != 0 and kind in ("another user's", "closed to the server user"):
        pytest.skip("servers run as another user, and folders are given to one, as root only")
    else:
        shared.mkdir(mode=0o700)
        if kind == "anyone may write":
            shared.chmod(0o777)
        elif kind == "another user's":
            os.chown(shared, 65534, -1)
    monkeypatch.setenv("PGPATHBENCH_TEMPLATES", str(shared))
    assert cli.main([*FDW]) == 2
    out, err = capsys.readouterr()
    said = {"a file": f"cannot write below {shared} (not a directory); choose a writable directory",
            "closed to the server user": f"{shared} is not reachable by server user 'postgres' ({shared} is not "
                                         "world-searchable); chmod o+x that folder, or choose another"}.get(
        kind, f"{shared} must be a folder of yours that others cannot write; name a new one, or unset "
              "PGPATHBENCH_TEMPLATES for the workspace's own")
    assert out == "" and err == f"pgpathbench: error: PGPATHBENCH_TEMPLATES: {said}\n", err


@pytest.mark.parametrize("command", [["report", str(EXPORT)], ["compare", str(EXPORT), str(EXPORT)]], ids=" ".join)
def test_html_replaces_a_file_only_when_told(command, tmp_path, capsys, untouched):
    target = tmp_path / "page.html"
    target.write_text("mine")
    assert cli.main([*command, "--html", str(target)]) == 2
    out, err = capsys.readouterr()
    assert err == f"pgpathbench: error: --html: {target} exists; pass --overwrite to replace it, or name another " \
                  "file\n" and out == ""
    assert target.read_text() == "mine"
    assert cli.main([*command, "--html", str(target), "--overwrite"]) == 0
    assert capsys.readouterr().out.strip() == str(target)
    assert target.read_text().startswith("<!DOCTYPE html>") and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_scale_the_disk_cannot_hold_is_refused_up_front(untouched, capsys):
    free = shutil.disk_usage(next(p for p in untouched.parents if p.exists())).free
    scale = int(2 * free / (fdw_spec.PGBENCH_BYTES_PER_SCALE * fdw_spec.DISK_SAFETY)) + 1
    if scale > 10_000:   # --scale's own bound
        pytest.skip(f"{free / 1e9:.0f} GB free: every scale --scale takes fits")
    assert cli.main([*FDW, "--scale", str(scale)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pgpathbench: error: --scale: pgbench's tables at scale {scale} need about ") and \
        "give a smaller --scale" in err and err.count("\n") == 1


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_html_never_renames_over_what_is_no_regular_file(kind, tmp_path, capsys, untouched):
    """--overwrite replaces a file: a FIFO, a socket or a device at FILE (as /dev/null would be) is
    refused, and stays what it was."""
    target = tmp_path / "page.html"
    if kind == "device":
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))   # a /dev/null of the test's own
    else:
        KINDS[kind](target)
    before = target.lstat()
    for command in (["report", str(EXPORT)], ["compare", str(EXPORT), str(EXPORT)]):
        assert cli.main([*command, "--html", str(target), "--overwrite"]) == 2
        out, err = capsys.readouterr()
        assert err == f"pgpathbench: error: argument --html: {target} is not a regular file; name a new file\n"
    after = target.lstat()
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
