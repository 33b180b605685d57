/*
 * FNV-1a 64 for pgpb_psycopg (loaded with ctypes): the contract's checksum runs over every byte
 * of every row, and a Python loop over bytes (about 50 ns each) would make the client, not
 * psycopg, the bottleneck. Same loop as the C clients. Built by scripts/build-clients into
 * .tools/clients/libpgpb_fnv1a.so.
 */
#include <stddef.h>
#include <stdint.h>

uint64_t pgpb_fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
    for (const unsigned char *e = p + n; p < e; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return h;
}
