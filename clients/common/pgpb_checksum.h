/*
 * The contract's checksum (clients/CONTRACT.md "Rows, bytes and checksum", contract version 2):
 * the sum (mod 2^64) of every row's hash, so that the order of the rows does not matter. A row's
 * hash reads its COPY text, its '\n' included, as 8-byte little-endian words: one multiply per 8
 * bytes instead of FNV-1a's one a byte (version 1), then its tail and length, then murmur3's fmix64.
 * One implementation for the C clients (pgpb_common.h) and for pgpb_psycopg and the orchestrator
 * (clients/psycopg/rowhash.c, loaded with ctypes).
 */
#ifndef PGPB_CHECKSUM_H
#define PGPB_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PGPB_ROWHASH_BASIS 0xcbf29ce484222325ULL /* a row's hash before its first word */
#define PGPB_ROWHASH_MULT 0x9e3779b97f4a7c15ULL  /* odd, its bits spread (2^64 / golden ratio) */

/* The checksum of COPY text fed in pieces: a row may span pieces, a piece may hold several rows. */
typedef struct pgpb_rowhash {
    uint64_t sum;  /* the hashes of the rows ended, mod 2^64 */
    uint64_t h;    /* the row begun: its full words mixed in */
    uint64_t tail; /* its bytes after them (len % 8 of them), little-endian */
    uint64_t len;  /* its length so far */
} pgpb_rowhash;

#define PGPB_ROWHASH_INIT {0, PGPB_ROWHASH_BASIS, 0, 0}

static inline uint64_t pgpb_rowhash_mix(uint64_t h, uint64_t w)
{
    return (h ^ w) * PGPB_ROWHASH_MULT;
}

/* 8 bytes as a little-endian word, at any alignment. */
static inline uint64_t pgpb_load_le64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

static inline void pgpb_rowhash_byte(pgpb_rowhash *s, unsigned char b)
{
    s->tail |= (uint64_t) b << (s->len & 7) * 8;
    if ((++s->len & 7) == 0) {
        s->h = pgpb_rowhash_mix(s->h, s->tail);
        s->tail = 0;
    }
}

/* murmur3's 64-bit finalizer: every bit of k changes about half of the result's. */
static inline uint64_t pgpb_fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* The row begun is complete (its '\n' added): its hash joins the sum and the next row begins. */
static inline void pgpb_rowhash_end(pgpb_rowhash *s)
{
    s->sum += pgpb_fmix64(pgpb_rowhash_mix(s->h, s->tail) ^ s->len);
    s->h = PGPB_ROWHASH_BASIS;
    s->tail = 0;
    s->len = 0;
}

/* 1 to 7 more bytes of the row begun, the k low bytes of v (its others zero). */
static inline void pgpb_rowhash_partial(pgpb_rowhash *s, uint64_t v, unsigned k)
{
    unsigned fill = (unsigned) (s->len & 7);
    s->tail |= v << fill * 8;
    if (fill + k >= 8) { /* fill > 0: the tail is full, v's other bytes begin the next */
        s->h = pgpb_rowhash_mix(s->h, s->tail);
        s->tail = v >> (64 - fill * 8);
    }
    s->len += k;
}

/* The first k (1..7) of 8 bytes read as the word w, as the low bytes of a word. */
static inline uint64_t pgpb_first_bytes(uint64_t w, unsigned k)
{
    return w & ((1ULL << 8 * k) - 1);
}

/* The last k (1..7) of n >= 8 bytes ending at e, as the low bytes of a word (read from e - 8). */
static inline uint64_t pgpb_last_bytes(const unsigned char *e, unsigned k)
{
    return pgpb_load_le64(e - 8) >> (64 - 8 * k);
}

/* How many bytes the row begun lacks to end a whole word (0..7). */
static inline unsigned pgpb_rowhash_lack(const pgpb_rowhash *s)
{
    return (unsigned) -s->len & 7;
}

/* n whole words from p into the row begun, whose length must be a multiple of 8 (no tail). */
static inline void pgpb_rowhash_words(pgpb_rowhash *s, const unsigned char *p, size_t n)
{
    uint64_t h = s->h;
    for (const unsigned char *e = p + 8 * n; p < e; p += 8)
        h = pgpb_rowhash_mix(h, pgpb_load_le64(p));
    s->h = h;
    s->len += 8 * n;
}

/* n more bytes of the row begun (a '\n' among them does not end it): first those that complete its
 * tail, so that the row's words are read whole from p, whatever p's place in the row. */
static inline void pgpb_rowhash_bytes(pgpb_rowhash *s, const unsigned char *p, size_t n)
{
    const unsigned char *e = p + n;
    unsigned lack = pgpb_rowhash_lack(s);
    if (n < 8) {
        while (p < e)
            pgpb_rowhash_byte(s, *p++);
        return;
    }
    if (lack) {
        pgpb_rowhash_partial(s, pgpb_first_bytes(pgpb_load_le64(p), lack), lack);
        p += lack;
    }
    pgpb_rowhash_words(s, p, (size_t) (e - p) / 8);
    p += (size_t) (e - p) / 8 * 8;
    if (p < e)
        pgpb_rowhash_partial(s, pgpb_last_bytes(e, e - p), e - p);
}

/* COPY text in pieces of any size: a raw '\n' ends a row (COPY text escapes values' newlines). */
static inline void pgpb_rowhash_text(pgpb_rowhash *s, const unsigned char *p, size_t n)
{
    const unsigned char *e = p + n, *nl;
    while (p < e && (nl = memchr(p, '\n', e - p))) {
        pgpb_rowhash_bytes(s, p, nl + 1 - p);
        pgpb_rowhash_end(s);
        p = nl + 1;
    }
    pgpb_rowhash_bytes(s, p, e - p);
}

#endif
