/*
 * The contract's checksum for pgpb_psycopg and the orchestrator's reference (loaded with ctypes by
 * clients/psycopg/pgpb_rowhash.py): it runs over every byte of every row, and a Python loop over
 * them would make the client, not psycopg, the bottleneck. The C clients' code (pgpb_checksum.h).
 * Built by scripts/build-clients into .tools/clients/libpgpb_rowhash.so.
 */
#include "../common/pgpb_checksum.h"

/* The hash of one row, p[0..n) being all its bytes (its '\n' included). */
uint64_t pgpb_row_hash(const unsigned char *p, size_t n)
{
    pgpb_rowhash s = PGPB_ROWHASH_INIT;
    pgpb_rowhash_bytes(&s, p, n);
    pgpb_rowhash_end(&s);
    return s.sum;
}

/* The checksum of COPY text in pieces: state as pgpb_rowhash, {0, PGPB_ROWHASH_BASIS, 0, 0} to start. */
void pgpb_rowhash_rows(pgpb_rowhash *state, const unsigned char *p, size_t n)
{
    pgpb_rowhash_text(state, p, n);
}
