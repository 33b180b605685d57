/*
 * The contract's checksum for pgpb_psycopg and the orchestrator's reference (loaded with ctypes):
 * it runs over every byte of every row, and a Python loop over bytes (about 50 ns each) would
 * make the client, not psycopg, the bottleneck. The C clients' loop (pgpb_checksum.h).
 * Built by scripts/build-clients into .tools/clients/libpgpb_fnv1a.so.
 */
#include "../common/pgpb_checksum.h"

/* FNV-1a 64 of p[0..n), continuing from h (FNV_BASIS to start): one row's hash. */
uint64_t pgpb_fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
    for (const unsigned char *e = p + n; p < e; p++)
        h = (h ^ *p) * FNV_PRIME;
    return h;
}

/* The checksum of COPY text in pieces: state[0] the sum of the rows ended so far, state[1] the
 * FNV-1a of the row begun (start with {0, FNV_BASIS}). */
void pgpb_fnv1a_rows(uint64_t state[2], const unsigned char *p, size_t n)
{
    pgpb_hash_rows(&state[0], &state[1], p, n);
}
