/*
 * pgpb_libpq: pgpathbench's libpq client (seed 003's libpqtest). Contract: clients/CONTRACT.md.
 *
 * Modes: normal (PQexec, walk the PGresult), single-row (PQsetSingleRowMode), copy
 * (COPY (SQL) TO STDOUT, PQgetCopyData), chunked:N (PQsetChunkedRowsMode, libpq 17+ only).
 * Build: gcc -O2 -I$(pg_config --includedir) pgpb_libpq.c -L$(pg_config --libdir) -lpq
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#define CLIENT "pgpb_libpq"
#define OUTBUF_SIZE (1 << 20) /* output is written in 1 MiB blocks, never per row; hashed per row */
#define USAGE "usage: " CLIENT " -c CONNINFO -s SQL [-k 0|1] [-n ITERATIONS] [-p 0|1] [-o DEST]\n" \
              "       [-m normal|single-row|copy|chunked:N]   (see clients/CONTRACT.md)\n"

/* ---- options -------------------------------------------------------------------------- */
static const char *conninfo, *sql, *dest = "/dev/null", *mode = "normal";
static long keep = 1, iterations = 1, print = 0, chunk_rows = 0;
enum { M_NORMAL, M_SINGLE_ROW, M_CHUNKED, M_COPY } mode_kind;
static char *query; /* SQL without a trailing ';', or COPY (SQL) TO STDOUT */

/* ---- measurements --------------------------------------------------------------------- */
static long long rows, nbytes;
static uint64_t checksum = 0xcbf29ce484222325ULL; /* FNV-1a 64 offset basis */
static double connect_s, exec_s, fetch_s;

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

static void server_error(const char *what, const char *msg)
{
    fprintf(stderr, CLIENT ": %s: %s", what, msg);
    if (!*msg || msg[strlen(msg) - 1] != '\n')
        fputc('\n', stderr);
    exit(3);
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

/* ---- output: COPY-text rendering into one buffer, hashed per row, written per block ---- */
static unsigned char *outbuf;
static size_t out_len, out_cap = OUTBUF_SIZE;
static int out_fd = -1;

/* Escapes of COPY TO's text format (CopyAttributeOutText): 0 = copy the byte as it is. */
static const unsigned char esc[256] = {
    ['\\'] = '\\', ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't', ['\v'] = 'v',
};

static void hash(const unsigned char *p, size_t n)
{
#ifndef PGPB_NO_CHECKSUM
    uint64_t h = checksum;
    for (const unsigned char *e = p + n; p < e; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    checksum = h;
#else /* pgpb_libpq_nochecksum: only to measure what the checksum costs (interfaces-fidelity) */
    (void) p;
#endif
    nbytes += n;
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

/* One field: separator (if not first), then the value escaped, or \N for NULL. */
static inline void out_field(int first, const char *v, size_t n, int isnull)
{
    out_reserve(2 * n + 3); /* worst case: every byte escaped, plus separator */
    unsigned char *o = outbuf + out_len;
    if (!first)
        *o++ = '\t';
    if (isnull) {
        *o++ = '\\';
        *o++ = 'N';
    } else {
        for (const unsigned char *p = (const unsigned char *) v, *e = p + n; p < e; p++) {
            unsigned char c = esc[*p];
            if (c) {
                *o++ = '\\';
                *o++ = c;
            } else
                *o++ = *p;
        }
    }
    out_len = o - outbuf;
}

static inline void out_end_row(void)
{
    out_reserve(1);
    outbuf[out_len++] = '\n';
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

/* ---- the driver ----------------------------------------------------------------------- */
static PGconn *db_connect(void)
{
    /* expand_dbname: CONNINFO is parsed as libpq would; client_encoding after it wins. */
    const char *const keys[] = {"dbname", "client_encoding", NULL};
    const char *const vals[] = {conninfo, "UTF8", NULL};
    double t = now();
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    connect_s += now() - t;
    if (PQstatus(c) != CONNECTION_OK)
        server_error("connection failed", PQerrorMessage(c));
    return c;
}

static void render(const PGresult *r)
{
    int nrows = PQntuples(r), nfields = PQnfields(r);
    for (int i = 0; i < nrows; i++) {
        for (int j = 0; j < nfields; j++)
            out_field(j == 0, PQgetvalue(r, i, j), PQgetlength(r, i, j), PQgetisnull(r, i, j));
        out_end_row();
    }
}

static void run_query(PGconn *c)
{
    PGresult *r;
    double t = now();

    if (mode_kind == M_NORMAL) {
        r = PQexec(c, query); /* returns when the whole result is in memory */
        exec_s += now() - t;
        t = now();
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            server_error("query failed", PQresultErrorMessage(r));
        render(r);
        PQclear(r);
    } else if (mode_kind == M_COPY) {
        r = PQexec(c, query); /* returns at CopyOutResponse, before any row */
        exec_s += now() - t;
        t = now();
        if (PQresultStatus(r) != PGRES_COPY_OUT)
            server_error("COPY failed", PQresultErrorMessage(r));
        PQclear(r);
        char *data;
        int n;
        while ((n = PQgetCopyData(c, &data, 0)) > 0) { /* one row per CopyData message */
            out_raw(data, n);
            PQfreemem(data);
        }
        if (n == -2)
            server_error("COPY failed", PQerrorMessage(c));
        /* The final CommandComplete (or an error) must be read, else the connection stays busy. */
        while ((r = PQgetResult(c)) != NULL) {
            if (PQresultStatus(r) != PGRES_COMMAND_OK)
                server_error("COPY failed", PQresultErrorMessage(r));
            PQclear(r);
        }
    } else { /* single-row, chunked: one small PGresult per row (or per N rows) */
        if (!PQsendQuery(c, query))
            server_error("query failed", PQerrorMessage(c));
#ifdef LIBPQ_HAS_CHUNK_MODE
        if (mode_kind == M_CHUNKED ? !PQsetChunkedRowsMode(c, (int) chunk_rows) : !PQsetSingleRowMode(c))
#else
        if (!PQsetSingleRowMode(c))
#endif
            server_error("query failed", "cannot set the row mode\n");
        r = PQgetResult(c);
        exec_s += now() - t;
        t = now();
        for (; r != NULL; r = PQgetResult(c)) {
            switch (PQresultStatus(r)) {
            case PGRES_SINGLE_TUPLE:
#ifdef LIBPQ_HAS_CHUNK_MODE
            case PGRES_TUPLES_CHUNK:
#endif
            case PGRES_TUPLES_OK: /* the last, empty, result */
                render(r);
                break;
            default:
                server_error("query failed", PQresultErrorMessage(r));
            }
            PQclear(r);
        }
    }
    fetch_s += now() - t;
}

static void parse_mode(void)
{
    if (strcmp(mode, "normal") == 0)
        mode_kind = M_NORMAL;
    else if (strcmp(mode, "single-row") == 0)
        mode_kind = M_SINGLE_ROW;
    else if (strcmp(mode, "copy") == 0)
        mode_kind = M_COPY;
    else if (strncmp(mode, "chunked:", 8) == 0) {
        mode_kind = M_CHUNKED;
        chunk_rows = parse_long("m chunked:N, N", mode + 8, 1, 1000000000);
#ifndef LIBPQ_HAS_CHUNK_MODE
        usage_error("-m %s: chunked needs libpq 17+ (built against libpq %d)", mode, PQlibVersion() / 10000);
#endif
    } else
        usage_error("-m %s: not a mode of this client (normal, single-row, copy, chunked:N)", mode);
}

int main(int argc, char **argv)
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
        case 'h': fputs(USAGE, stdout); return 0;
        case ':': usage_error("-%c needs a value", optopt); break;
        default: usage_error("unknown option -%c", optopt);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (!conninfo || !sql)
        usage_error("-c CONNINFO and -s SQL are required");
    parse_mode();

    char *err = NULL;
    PQconninfoOption *parsed = PQconninfoParse(conninfo, &err);
    if (!parsed)
        usage_error("-c: %s", err ? err : "cannot parse the conninfo");
    PQconninfoFree(parsed);

    /* COPY (...) and cursors reject a trailing ';': strip it (and white space) everywhere. */
    size_t len = strlen(sql);
    while (len > 0 && strchr(" \t\r\n;", sql[len - 1]))
        len--;
    query = malloc(len + 32);
    if (mode_kind == M_COPY)
        snprintf(query, len + 32, "COPY (%.*s) TO STDOUT", (int) len, sql);
    else
        snprintf(query, len + 32, "%.*s", (int) len, sql);

    if ((out_fd = open(dest, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        usage_error("-o: cannot open %s: %s", dest, strerror(errno));
    outbuf = malloc(out_cap);

    double t0 = now();
    PGconn *c = keep ? db_connect() : NULL;
    for (long i = 0; i < iterations; i++) {
        if (!keep)
            c = db_connect();
        run_query(c);
        if (!keep)
            PQfinish(c);
    }
    if (keep)
        PQfinish(c);
    double t = now();
    out_flush();
    fetch_s += now() - t;
    close(out_fd);
    double total_s = now() - t0;

    int v = PQlibVersion();
    printf("{\"client\":\"libpq\",\"version\":\"libpq %d.%d\",\"mode\":\"%s\",\"iterations\":%ld,"
           "\"rows\":%lld,\"bytes\":%lld,\"checksum\":\"%016llx\",\"connect_s\":%.6f,\"exec_s\":%.6f,"
           "\"fetch_s\":%.6f,\"total_s\":%.6f}\n",
           v / 10000, v % 10000, mode, iterations, rows, nbytes, (unsigned long long) checksum,
           connect_s, exec_s, fetch_s, total_s);
    return 0;
}
