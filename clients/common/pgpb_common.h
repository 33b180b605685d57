/*
 * What the C clients (pgpb_libpq, pgpb_odbc) share of clients/CONTRACT.md: the command line,
 * errors, the clock, the COPY-text rendering of rows, its checksum (pgpb_checksum.h),
 * the histogram of iteration times, the output and the JSON line. Included once per client (everything is static); define CLIENT and USAGE first.
 */
#ifndef PGPB_COMMON_H
#define PGPB_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pgpb_checksum.h"
#include "pgpb_histogram.h"
#ifdef __SSE2__
#include <emmintrin.h> /* clean_words */
#endif

#define OUTBUF_SIZE (1 << 20) /* output is written in 1 MiB blocks, never per row; hashed per row */

/* ---- options -------------------------------------------------------------------------- */
static const char *conninfo, *sql, *dest = "/dev/null", *mode = "normal";
static long keep = 1, iterations = 1, print = 0;

/* ---- measurements --------------------------------------------------------------------- */
static long long rows, nbytes;
static pgpb_rowhash row_sums = PGPB_ROWHASH_INIT; /* the checksum: rows ended, the row begun */
static double connect_s, exec_s, fetch_s;
static double connect_began;                /* clock read that began the last connection */

/* An iteration ended at the clock read `ended` (its last row read, its statement closed); it began
 * with its query (the clock read `query_began`), or with -k 0 with its connection. */
static inline void iteration_done(double query_began, double ended)
{
    hist_record(keep ? query_began : connect_began, ended);
}

static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(CLIENT ": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n" USAGE, stderr);
    exit(2);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        usage_error("-%s: '%s' is not an integer in %ld..%ld", opt, s, min, max);
    return v;
}

/* The contract's command line; -h prints the usage and exits 0. */
static void parse_args(int argc, char **argv)
{
    int opt;
    opterr = 0;
    while ((opt = getopt(argc, argv, ":c:s:k:n:p:o:m:h")) != -1) {
        switch (opt) {
        case 'c': conninfo = optarg; break;
        case 's': sql = optarg; break;
        case 'k': keep = parse_long("k", optarg, 0, 1); break;
        case 'n': iterations = parse_long("n", optarg, 1, 1000000000); break;
        case 'p': print = parse_long("p", optarg, 0, 1); break;
        case 'o': dest = optarg; break;
        case 'm': mode = optarg; break;
        case 'h': fputs(USAGE, stdout); exit(0);
        case ':': usage_error("-%c needs a value", optopt); break;
        default: usage_error("unknown option -%c", optopt);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (!conninfo || !sql)
        usage_error("-c CONNINFO and -s SQL are required");
}

/* The query to send: SQL without a trailing ';' or white space (COPY (...) and cursors reject
 * them), inside COPY (...) TO STDOUT when copy is set. */
static char *query_text(int copy)
{
    size_t len = strlen(sql);
    while (len > 0 && strchr(" \t\r\n;", sql[len - 1]))
        len--;
    char *q = malloc(len + 32);
    snprintf(q, len + 32, copy ? "COPY (%.*s) TO STDOUT" : "%.*s", (int) len, sql);
    return q;
}

/* ---- output: COPY-text rendering into one buffer, hashed per row, written per block ---- */
static unsigned char *outbuf;
static size_t out_len, out_cap = OUTBUF_SIZE;
static int out_fd = -1;

/* Escapes of COPY TO's text format (CopyAttributeOutText): 0 = copy the byte as it is. */
static const unsigned char esc[256] = {
    ['\\'] = '\\', ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't', ['\v'] = 'v',
};

/* The contract's checksum of the next n bytes of COPY text (pgpb_checksum.h). */
static void hash(const unsigned char *p, size_t n)
{
#ifndef PGPB_NO_CHECKSUM
    pgpb_rowhash_text(&row_sums, p, n);
#else /* pgpb_libpq_nochecksum: only to measure what the checksum costs (interfaces-fidelity) */
    (void) p;
#endif
    nbytes += n;
}

/* Whole words, a byte, 1 to 7 bytes, the end of the row begun (none in pgpb_libpq_nochecksum). */
static inline void hash_words(pgpb_rowhash *s, const unsigned char *p, size_t n)
{
#ifndef PGPB_NO_CHECKSUM
    pgpb_rowhash_words(s, p, n);
#else
    (void) s, (void) p, (void) n;
#endif
}

static inline void hash_byte(pgpb_rowhash *s, unsigned char b)
{
#ifndef PGPB_NO_CHECKSUM
    pgpb_rowhash_byte(s, b);
#else
    (void) s, (void) b;
#endif
}

static inline void hash_partial(pgpb_rowhash *s, uint64_t v, unsigned k)
{
#ifndef PGPB_NO_CHECKSUM
    pgpb_rowhash_partial(s, v, k);
#else
    (void) s, (void) v, (void) k;
#endif
}

static inline void hash_row_end(pgpb_rowhash *s)
{
#ifndef PGPB_NO_CHECKSUM
    pgpb_rowhash_end(s);
#else
    (void) s;
#endif
}

static void out_open(void)
{
    if ((out_fd = open(dest, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        usage_error("-o: cannot open %s: %s", dest, strerror(errno));
    outbuf = malloc(out_cap);
}

static void write_all(const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(out_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            fprintf(stderr, CLIENT ": -o: cannot write %s: %s\n", dest, strerror(errno));
            exit(1);
        }
        p += w;
        n -= w;
    }
}

/* Rows are hashed as they come (out_end_row, out_raw), not a whole block at flush: a 1 MiB burst
 * of hashing (about 1 ms) left the server blocked on a full unix socket buffer (about 200 KiB), and
 * made COPY over a unix socket some 25% slower than psql's (interfaces-fidelity). */
static size_t out_hashed; /* bytes of outbuf already hashed */

static void out_flush(void)
{
    hash(outbuf + out_hashed, out_len - out_hashed);
    if (print)
        write_all(outbuf, out_len);
    out_len = out_hashed = 0;
}

/* The last block, counted as fetch time; then the file is closed. */
static void out_close(void)
{
    double t = now();
    out_flush();
    fetch_s += now() - t;
    close(out_fd);
}

/* Room for n more bytes; a value larger than the buffer grows it (rare, no per-row cost). */
static inline void out_reserve(size_t n)
{
    if (out_len + n <= out_cap)
        return;
    out_flush();
    if (n > out_cap) {
        out_cap = n;
        if (!(outbuf = realloc(outbuf, out_cap))) {
            fputs(CLIENT ": out of memory\n", stderr);
            exit(1);
        }
    }
}

/* A separator or a row's end ('\n'), or a byte of \N. */
static inline void out_byte(char c)
{
    if (!print) {
        hash_byte(&row_sums, c);
        if (c == '\n')
            hash_row_end(&row_sums);
        nbytes++;
        return;
    }
    out_reserve(1);
    outbuf[out_len++] = c;
}

/* Whether one of w's 8 bytes may need an escape: one below 0x0E (which covers \b \t \n \v \f \r)
 * or a backslash. Most words of text have none and go whole (SWAR: a byte's borrow or zero sets
 * its high bit; bytes of 0x80 and over never do). */
static inline int may_need_escape(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t bs = w ^ (ones * '\\');
    return ((((w - ones * 0x0E) & ~w) | ((bs - ones) & ~bs)) & highs) != 0;
}

/* One byte of a value into the row's hash, escaped: 1 if it took an escape. */
static inline size_t hash_escaped(pgpb_rowhash *s, unsigned char b)
{
    unsigned char c = esc[b];
    if (!c) {
        hash_byte(s, b);
        return 0;
    }
    hash_byte(s, '\\');
    hash_byte(s, c);
    return 1;
}

static inline int needs_no_escape(uint64_t w)
{
    return !may_need_escape(w);
}

/* How many whole words from p (up to e) hold no byte that needs an escape: 16 bytes a test with
 * SSE2 (every x86-64 has it), then 8 (SWAR). */
static inline size_t clean_words(const unsigned char *p, const unsigned char *e)
{
    const unsigned char *q = p;
#ifdef __SSE2__
    const __m128i backslash = _mm_set1_epi8('\\'), last_escaped = _mm_set1_epi8(0x0D);
    for (; e - q >= 16; q += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *) q);
        __m128i low = _mm_cmpeq_epi8(_mm_subs_epu8(v, last_escaped), _mm_setzero_si128()); /* v <= 0x0D */
        if (_mm_movemask_epi8(_mm_or_si128(low, _mm_cmpeq_epi8(v, backslash))))
            break;
    }
#endif
    while (e - q >= 8 && needs_no_escape(pgpb_load_le64(q)))
        q += 8;
    return (size_t) (q - p) / 8;
}

/* -p 0 writes nothing, so a value's COPY text is hashed as it is rendered instead of being stored
 * and read again: the same bytes, so the same bytes and checksum, whole words where none of their
 * bytes needs an escape, byte by byte where one does. A value holds no raw '\n', so no row ends
 * inside it. */
static inline void hash_text(const unsigned char *v, size_t n)
{
    pgpb_rowhash s = row_sums; /* a local copy stays in registers */
    size_t escaped = 0;
    const unsigned char *p = v, *e = v + n;
    for (;;) {
        unsigned lack = pgpb_rowhash_lack(&s); /* first complete the row's word, if clean */
        uint64_t w;
        if (lack && e - p >= 8 && needs_no_escape(w = pgpb_load_le64(p))) {
            hash_partial(&s, pgpb_first_bytes(w, lack), lack);
            p += lack;
            lack = 0;
        }
        if (!lack) { /* then the row's words are whole words from p */
            size_t words = clean_words(p, e);
            hash_words(&s, p, words);
            p += 8 * words;
        }
        if (e - p < 8)
            break;
        for (const unsigned char *q = p + 8; p < q; p++) /* a word that needs an escape */
            escaped += hash_escaped(&s, *p);
    }
    if (p < e && n >= 8 && needs_no_escape(pgpb_load_le64(e - 8))) /* the last bytes, clean */
        hash_partial(&s, pgpb_last_bytes(e, e - p), e - p);
    else
        for (; p < e; p++)
            escaped += hash_escaped(&s, *p);
    row_sums = s;
    nbytes += n + escaped;
}

/* One byte of a value, escaped, at o: past it. */
static inline unsigned char *put_escaped(unsigned char *o, unsigned char b)
{
    unsigned char c = esc[b];
    if (!c) {
        *o++ = b;
        return o;
    }
    *o++ = '\\';
    *o++ = c;
    return o;
}

/* Text of a value, escaped (escaping is per byte, so a value may come in pieces); whole words are
 * copied at once where none of their bytes needs an escape. */
static inline void out_text(const char *v, size_t n)
{
    if (!print) {
        hash_text((const unsigned char *) v, n);
        return;
    }
    out_reserve(2 * n); /* worst case: every byte escaped */
    unsigned char *o = outbuf + out_len;
    const unsigned char *p = (const unsigned char *) v, *e = p + n;
    for (;;) {
        size_t clean = 8 * clean_words(p, e);
        memcpy(o, p, clean);
        o += clean;
        p += clean;
        if (e - p < 8)
            break;
        for (const unsigned char *w = p + 8; p < w; p++)
            o = put_escaped(o, *p);
    }
    for (; p < e; p++)
        o = put_escaped(o, *p);
    out_len = o - outbuf;
}

static inline void out_null(void)
{
    out_byte('\\');
    out_byte('N');
}

/* One whole field: separator (if not first), then the value escaped, or \N for NULL. */
static inline void out_field(int first, const char *v, size_t n, int isnull)
{
    if (!first)
        out_byte('\t');
    if (isnull)
        out_null();
    else
        out_text(v, n);
}

static inline void out_end_row(void)
{
    out_byte('\n');
    rows++;
    hash(outbuf + out_hashed, out_len - out_hashed);
    out_hashed = out_len;
}

/* COPY data is already in this form: hash it directly, or buffer it when printing. */
static inline void out_raw(const char *p, size_t n)
{
    rows++;
    if (!print) {
        hash((const unsigned char *) p, n);
        return;
    }
    out_reserve(n);
    hash((const unsigned char *) p, n);
    memcpy(outbuf + out_len, p, n);
    out_len += n;
    out_hashed = out_len;
}

/* ---- the contract's one JSON line ------------------------------------------------------ */
static void print_result(const char *client, const char *version, double total_s)
{
    printf("{\"client\":\"%s\",\"version\":\"%s\",\"mode\":\"%s\",\"iterations\":%ld,"
           "\"rows\":%lld,\"bytes\":%lld,\"checksum\":\"%016llx\",\"connect_s\":%.6f,\"exec_s\":%.6f,"
           "\"fetch_s\":%.6f,\"total_s\":%.6f,\"iteration_us\":",
           client, version, mode, iterations, rows, nbytes, (unsigned long long) row_sums.sum,
           connect_s, exec_s, fetch_s, total_s);
    hist_print(stdout);
    fputs("}\n", stdout);
}

#endif
