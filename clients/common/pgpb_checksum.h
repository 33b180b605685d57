/*
 * The contract's checksum (clients/CONTRACT.md "Rows, bytes and checksum"): the sum (mod 2^64) of
 * the 64-bit FNV-1a of every row's COPY text, its '\n' included, so that the order of the rows
 * does not matter. One loop for the C clients (pgpb_common.h) and for pgpb_psycopg and the
 * orchestrator (clients/psycopg/fnv1a.c, loaded with ctypes).
 */
#ifndef PGPB_CHECKSUM_H
#define PGPB_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#define FNV_BASIS 0xcbf29ce484222325ULL /* FNV-1a 64 offset basis */
#define FNV_PRIME 0x100000001b3ULL

/* One byte of FNV-1a: a chain of multiplies, each waiting for the last (about 3.3 cycles a byte
 * here), so it bounds every loop that hashes. */
static inline uint64_t pgpb_fnv1a_step(uint64_t h, unsigned char b)
{
    return (h ^ b) * FNV_PRIME;
}

/* COPY text in pieces of any size: a row may span pieces (a full output block), a piece may hold
 * several rows. *sum holds the rows ended so far, *row the FNV-1a of the row begun (FNV_BASIS to
 * start). A raw '\n' ends a row: COPY text escapes the newlines of values. */
static inline void pgpb_hash_rows(uint64_t *sum, uint64_t *row, const unsigned char *p, size_t n)
{
    uint64_t s = *sum, h = *row;
    for (const unsigned char *e = p + n; p < e; p++) {
        h = pgpb_fnv1a_step(h, *p);
        if (*p == '\n') {
            s += h;
            h = FNV_BASIS;
        }
    }
    *sum = s;
    *row = h;
}

#endif
