"""A user's files (files.py): one rule for every file an option reads, and the atomic write."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from pgpathbench import files

LIMIT = 1 << 20
WHAT = "a pgbench script"


@pytest.fixture
def kinds(tmp_path):
    """Path -> what the refusal must say, one of each kind a user may name by mistake."""
    fifo, directory, sock = tmp_path / "fifo.sql", tmp_path / "dir.sql", tmp_path / "sock.sql"
    os.mkfifo(fifo)
    directory.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    sparse = tmp_path / "sparse.sql"
    with open(sparse, "wb") as f:
        f.truncate(2 << 30)   # 2 GiB, no block written
    yield {fifo: "is a FIFO", directory: "is a directory", sock: "is a socket",
           "/dev/zero": "is a character device", "/dev/urandom": "is a character device",
           sparse: "is over 1 MiB", tmp_path / "none.sql": "cannot read .*: No such file or directory"}
    server.close()


def test_only_regular_files_within_the_bound_are_read(kinds):
    for path, message in kinds.items():
        with pytest.raises(ValueError, match=message):
            files.read_bounded(path, LIMIT, WHAT)


def test_a_file_that_claims_no_size_is_read_at_most_to_its_bound():
    # /proc/self/environ is a regular file whose stat size is 0: the read itself is bounded
    data = files.read_bounded("/proc/self/environ", LIMIT, WHAT)
    assert 0 < len(data) <= LIMIT
    with pytest.raises(ValueError, match="over 16 bytes"):
        files.read_bounded("/proc/self/environ", 16, WHAT)


def test_the_bound_itself_is_allowed(tmp_path):
    exact, over = tmp_path / "exact.sql", tmp_path / "over.sql"
    exact.write_bytes(b"x" * 100)
    over.write_bytes(b"x" * 101)
    assert files.read_bounded(exact, 100, WHAT) == b"x" * 100
    with pytest.raises(ValueError, match="is over 100 bytes; give a pgbench script of at most 100 bytes"):
        files.read_bounded(over, 100, WHAT)


@pytest.mark.parametrize("content, message", [
    (b"SELECT 1;\x00TOKEN_7f3q\n", "line 1 holds control character U\\+0000"),
    (b"SELECT 1;\nSELECT 2;\x1b[31mTOKEN_7f3q\n", "line 2 holds control character U\\+001B"),
    ("SELECT 'TOKEN_7f3q é';".encode("latin-1"), "is not UTF-8 text \\(byte 20 is not\\)"),
    (bytes(range(256)), "is not UTF-8 text|is not text"),
])
def test_text_is_utf8_without_control_characters_and_never_quoted(tmp_path, content, message):
    path = tmp_path / "f.sql"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as refused:
        files.read_text(path, LIMIT, WHAT)
    assert "TOKEN_7f3q" not in str(refused.value)


def test_blanks_are_text(tmp_path):
    path = tmp_path / "f.sql"
    path.write_bytes("SELECT\t1\r\n\v\f-- é\n".encode())
    assert files.read_text(path, LIMIT, WHAT) == "SELECT\t1\r\n\v\f-- é\n"


def test_size_text():
    assert [files.size_text(n) for n in (1 << 20, 64 << 20, 1 << 30, 1536, 100)] == \
        ["1 MiB", "64 MiB", "1 GiB", "1536 bytes", "100 bytes"]


def test_write_atomically_replaces_only_when_told(tmp_path):
    target = tmp_path / "report.html"
    files.write_atomically(target, "one", overwrite=False)
    with pytest.raises(FileExistsError):
        files.write_atomically(target, "two", overwrite=False)
    assert target.read_text() == "one"
    files.write_atomically(target, "three")
    assert target.read_text() == "three"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"], "no temporary file is left"


def test_a_private_file_is_never_readable_by_others_nor_seen_half_written(tmp_path):
    """A password file: 0600 from its creation, whatever the umask, and replaced whole (a reader
    that opens it while it is rewritten reads the old text or the new, never an empty file)."""
    target = tmp_path / "pgpass"
    umask = os.umask(0)
    try:
        files.write_atomically(target, "*:*:*:u:one\n", private=True)
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        reader = open(target)
        files.write_atomically(target, "*:*:*:u:two\n", private=True)
    finally:
        os.umask(umask)
    with reader:
        assert reader.read() == "*:*:*:u:one\n", "the open file was truncated under its reader"
    assert target.read_text() == "*:*:*:u:two\n" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["pgpass"]
