"""The contract's checksum (clients/CONTRACT.md "Rows, bytes and checksum") in Python, for the
psycopg client and the orchestrator (tools/clients.py loads this file): the C loop of
.tools/clients/libpgpb_rowhash.so (clients/common/pgpb_checksum.h) through ctypes, or this file's
own Python, correct but about 100x slower.

The state of a checksum fed COPY text in pieces is C's pgpb_rowhash, four 64-bit words: the sum of
the rows ended, then the row begun: its hash over its full words, its tail (its len % 8 last bytes,
little-endian) and its length.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

BASIS, MULT, MASK64 = 0xCBF29CE484222325, 0x9E3779B97F4A7C15, (1 << 64) - 1
LIB = Path(__file__).resolve().parents[2] / ".tools" / "clients" / "libpgpb_rowhash.so"


def new_state():
    """A checksum of no rows yet, for update()."""
    return (ctypes.c_uint64 * 4)(0, BASIS, 0, 0)


def fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & MASK64
    return k ^ (k >> 33)


def _add(h: int, tail: int, length: int, data: bytes) -> tuple[int, int, int]:
    """data appended to a row begun (h, tail, length): its full words mixed in, the rest the tail."""
    pending = tail.to_bytes(8, "little")[:length % 8] + data
    full = len(pending) - len(pending) % 8
    for i in range(0, full, 8):
        h = ((h ^ int.from_bytes(pending[i:i + 8], "little")) * MULT) & MASK64
    return h, int.from_bytes(pending[full:], "little"), (length + len(data)) & MASK64


def _end(h: int, tail: int, length: int) -> int:
    """The hash of a whole row: its tail, then its length, then fmix64."""
    return fmix64((((h ^ tail) * MULT) & MASK64) ^ length)


def row_hash_python(row: bytes) -> int:
    """The hash of one row, `row` being all its bytes (its newline included)."""
    return _end(*_add(BASIS, 0, 0, row))


def update_python(state, data) -> None:
    """COPY text in pieces, in Python: a raw newline ends a row (values' newlines are escaped)."""
    total, *begun = state
    *ended, rest = bytes(data).split(b"\n")
    for row in ended:
        total = (total + _end(*_add(*begun, row + b"\n"))) & MASK64
        begun = [BASIS, 0, 0]
    state[:] = [total, *_add(*begun, rest)]


def load_c(path: str | Path = LIB):
    """(row_hash, update) of the C library at path, or None if it is missing or stale."""
    try:
        lib = ctypes.CDLL(str(path))
        c_row, c_rows = lib.pgpb_row_hash, lib.pgpb_rowhash_rows
    except (OSError, AttributeError):
        return None
    c_row.argtypes, c_row.restype = (ctypes.c_char_p, ctypes.c_size_t), ctypes.c_uint64
    c_rows.argtypes, c_rows.restype = (ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_size_t), None

    def update(state, data) -> None:
        if data:   # a bytearray's own memory, no copy
            c_rows(state, data if isinstance(data, bytes) else (ctypes.c_char * len(data)).from_buffer(data),
                   len(data))
    return (lambda row: c_row(row, len(row))), update
