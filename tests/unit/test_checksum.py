"""The contract's checksum (clients/CONTRACT.md "Rows, bytes and checksum") against conftest's
independent implementation of its text: the C library the psycopg client and the orchestrator load
(libpgpb_rowhash.so, through ctypes) and the pure-Python fallback, on rows of 0 to 17 bytes (no
word, a tail only, one word and a tail, two words and a tail) and on COPY text fed in pieces that
end inside words and rows. The clients themselves, the JDBC one included, are held to the same
oracle in tests/integration/test_clients.py (test_checksum_of_rows_around_word_boundaries)."""

from __future__ import annotations

import pytest

from conftest import MASK64, contract_checksum, contract_row_hash
from pgpathbench.tools import clients

# Every length 0..17, and escapes (as COPY renders them: two bytes) across the first word boundary.
ROWS = [bytes(range(0x41, 0x41 + n)) for n in range(18)] + \
    [b"x" * k + esc + b"y\n" for k in (5, 6, 7, 8) for esc in (b"\\t", b"\\\\", b"\\n")]


@pytest.fixture(params=["c", "python"])
def checksum_loop(request, monkeypatch):
    """Both ways the tool computes the checksum: libpgpb_rowhash.so (when built) and pure Python."""
    if request.param == "python":
        monkeypatch.setattr(clients, "_rowhash_lib", False)
    elif clients._rowhash_c() is None:
        pytest.skip("libpgpb_rowhash.so is not built (scripts/build-clients)")
    return request.param


def test_the_oracle_is_the_contracts_text():
    """Two values worked out by hand from CONTRACT.md, so that the oracle itself is pinned: b"" (no
    word, tail 0, length 0) and b"\\n" (tail 0x0a, length 1)."""
    def fmix64(k):
        k = (k ^ k >> 33) * 0xFF51AFD7ED558CCD % 2**64
        k = (k ^ k >> 33) * 0xC4CEB9FE1A85EC53 % 2**64
        return k ^ k >> 33
    basis, mult = 0xCBF29CE484222325, 0x9E3779B97F4A7C15
    assert contract_row_hash(b"") == fmix64(basis * mult % 2**64)
    assert contract_row_hash(b"\n") == fmix64((basis ^ 0x0A) * mult % 2**64 ^ 1)
    # the length counts: a row and the same row with a zero byte more share their words
    assert contract_row_hash(b"ab") != contract_row_hash(b"ab\x00")


def test_every_row_hash_equals_the_oracle(checksum_loop):
    for row in ROWS:
        assert clients.row_hash(row) == contract_row_hash(row), row
    assert len({clients.row_hash(row) for row in ROWS}) == len(ROWS)


def test_checksum_is_the_sum_of_the_row_hashes(checksum_loop):
    assert clients.rows_checksum(b"") == 0                                      # no rows at all
    assert clients.rows_checksum(b"a\n") == contract_row_hash(b"a\n")
    rows = [b"1\tx\n", b"2\t\\N\n", b"3\ta\\tb\n", b"4242\t" + "café".encode() + b"\n", b"\n"]
    rows += [row if row.endswith(b"\n") else row + b"\n" for row in ROWS]
    expected = sum(map(contract_row_hash, rows)) & MASK64
    assert f"{expected:016x}" == contract_checksum(b"".join(rows))
    assert clients.rows_checksum(b"".join(rows)) == expected
    assert clients.rows_checksum(b"".join(reversed(rows))) == expected          # row order does not matter
    assert clients.rows_checksum(b"".join(rows[:-1]) + b"Z" + rows[-1][1:]) != expected   # a changed row does
    # the sum wraps at 2^64
    times = (1 << 64) // contract_row_hash(b"a\n") + 1
    assert times < 100
    assert clients.rows_checksum(b"a\n" * times) == times * contract_row_hash(b"a\n") - (1 << 64)


def test_checksum_takes_the_text_in_pieces_of_any_size(checksum_loop):
    text = b"".join(b"%d\t%s\\t%s\n" % (i, b"x" * i, b"y" * (i % 9)) for i in range(40))
    for size in (1, 3, 7, 8, 9, 64, len(text)):
        checksum = clients.RowChecksum()
        for i in range(0, len(text), size):             # pieces end inside words and rows, hold several rows
            checksum.update(text[i:i + size])
        assert f"{checksum.value:016x}" == contract_checksum(text), size
