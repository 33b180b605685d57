/*
 * pgpb_odbc: pgpathbench's ODBC client (seed 003's odbctest), unixODBC + psqlODBC.
 * Contract: clients/CONTRACT.md.
 *
 * Modes: normal (SQLExecDirect, SQLFetch + SQLGetData), cursor:N (psqlODBC's
 * UseDeclareFetch=1;Fetch=N: DECLARE CURSOR and FETCH N behind the same calls).
 * The connection string is DSN-less and names the driver by path, so Debian's odbcinst.ini
 * (CommLog=1: a log line per call) is not what configures the driver.
 * CONNINFO is a libpq conninfo; libpq's own parser (PQconninfoParse) reads it, so it means
 * exactly what it means to pgpb_libpq. psqlodbcw.so links libpq already: no extra library.
 * Build: gcc -O2 -I$(pg_config --includedir) pgpb_odbc.c -lodbc -L$(pg_config --libdir) -lpq
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
#include <sql.h>
#include <sqlext.h>

#define CLIENT "pgpb_odbc"
#define OUTBUF_SIZE (1 << 20) /* output is hashed and written in 1 MiB blocks, never per row */
#define CELL_SIZE (64 << 10)  /* SQLGetData buffer; longer values arrive in pieces */
#ifndef PGPB_ODBC_DRIVER
#define PGPB_ODBC_DRIVER "/usr/lib/x86_64-linux-gnu/odbc/psqlodbcw.so"
#endif
#define USAGE "usage: " CLIENT " -c CONNINFO -s SQL [-k 0|1] [-n ITERATIONS] [-p 0|1] [-o DEST]\n" \
              "       [-m normal|cursor:N]   (see clients/CONTRACT.md)\n"

/* ---- options -------------------------------------------------------------------------- */
static const char *conninfo, *sql, *dest = "/dev/null", *mode = "normal";
static long keep = 1, iterations = 1, print = 0, fetch_rows = 0;
static char *query;   /* SQL without a trailing ';' */
static char *connstr; /* the ODBC connection string built from CONNINFO */

/* ---- measurements --------------------------------------------------------------------- */
static long long rows, nbytes;
static uint64_t checksum = 0xcbf29ce484222325ULL; /* FNV-1a 64 offset basis */
static double connect_s, exec_s, fetch_s;
static char version[256];

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

/* The driver's diagnostics, then exit 3. */
static void server_error(const char *what, SQLSMALLINT type, SQLHANDLE h)
{
    SQLCHAR state[6], msg[1024];
    SQLINTEGER native;
    SQLSMALLINT len;
    fprintf(stderr, CLIENT ": %s:", what);
    for (SQLSMALLINT i = 1; SQLGetDiagRec(type, h, i, state, &native, msg, sizeof msg, &len) == SQL_SUCCESS; i++)
        fprintf(stderr, " [%s] %s", state, msg);
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

/* ---- output: COPY-text rendering into one buffer, hashed (and written) per block ------- */
static unsigned char *outbuf;
static size_t out_len, out_cap = OUTBUF_SIZE;
static int out_fd = -1;

/* Escapes of COPY TO's text format (CopyAttributeOutText): 0 = copy the byte as it is. */
static const unsigned char esc[256] = {
    ['\\'] = '\\', ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't', ['\v'] = 'v',
};

static void hash(const unsigned char *p, size_t n)
{
    uint64_t h = checksum;
    for (const unsigned char *e = p + n; p < e; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    checksum = h;
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

static void out_flush(void)
{
    hash(outbuf, out_len);
    if (print)
        write_all(outbuf, out_len);
    out_len = 0;
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

/* A piece of a value, escaped (escaping is per byte, so pieces can be escaped one by one). */
static inline void out_text(const char *v, size_t n)
{
    out_reserve(2 * n);
    unsigned char *o = outbuf + out_len;
    for (const unsigned char *p = (const unsigned char *) v, *e = p + n; p < e; p++) {
        unsigned char c = esc[*p];
        if (c) {
            *o++ = '\\';
            *o++ = c;
        } else
            *o++ = *p;
    }
    out_len = o - outbuf;
}

static inline void out_byte(char c)
{
    out_reserve(1);
    outbuf[out_len++] = c;
}

/* ---- the driver ----------------------------------------------------------------------- */
static SQLHENV env;

/* Append "Key=value;" to connstr. A value holding ';' or braces goes in braces with '}'
 * doubled; only then, because psqlODBC keeps the braces of some attributes (Port). */
static void add_attr(char **p, const char *key, const char *val)
{
    if (!strpbrk(val, ";{}")) {
        *p += sprintf(*p, "%s=%s;", key, val);
        return;
    }
    *p += sprintf(*p, "%s={", key);
    for (; *val; val++) {
        if (*val == '}')
            *(*p)++ = '}';
        *(*p)++ = *val;
    }
    *p += sprintf(*p, "};");
}

/* libpq conninfo -> psqlODBC attributes; libpq keywords psqlODBC has no name for go to pqopt. */
static void build_connstr(void)
{
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &err);
    if (!opts)
        usage_error("-c: %s", err ? err : "cannot parse the conninfo");
    const char *driver = getenv("PGPB_ODBC_DRIVER") ? getenv("PGPB_ODBC_DRIVER") : PGPB_ODBC_DRIVER;
    if (access(driver, R_OK) != 0)
        usage_error("ODBC driver %s not found (install odbc-postgresql: scripts/build-clients, "
                    "or set PGPB_ODBC_DRIVER)", driver);
    static const struct { const char *libpq, *odbc; } names[] = {
        {"host", "Servername"}, {"port", "Port"}, {"user", "Username"}, {"password", "Password"},
        {"dbname", "Database"}, {"sslmode", "SSLmode"},
    };
    size_t cap = 4 * strlen(conninfo) + strlen(driver) + 512;
    char *s = connstr = malloc(cap), *pq = malloc(cap), *q = pq;
    *q = '\0';
    add_attr(&s, "Driver", driver);
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val)
            continue;
        size_t i;
        for (i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strcmp(o->keyword, names[i].libpq) == 0)
                break;
        if (i < sizeof names / sizeof names[0])
            add_attr(&s, names[i].odbc, o->val);
        else { /* pqopt is itself a libpq conninfo: quote the value as libpq does */
            q += sprintf(q, "%s%s='", q == pq ? "" : " ", o->keyword);
            for (const char *v = o->val; *v; v++) {
                if (*v == '\'' || *v == '\\')
                    *q++ = '\\';
                *q++ = *v;
            }
            q += sprintf(q, "'");
        }
    }
    if (q != pq)
        add_attr(&s, "pqopt", pq);
    if (fetch_rows > 0) /* cursor:N */
        s += sprintf(s, "UseDeclareFetch=1;Fetch=%ld;", fetch_rows);
    else
        s += sprintf(s, "UseDeclareFetch=0;");
    sprintf(s, "CommLog=0;Debug=0");
    free(pq);
    PQconninfoFree(opts);
}

/* psqlODBC reads defaults from the odbcinst.ini section of its own name even for a DSN-less
 * connection, and Debian's turns CommLog on (a log file per process in /tmp, a line per
 * disconnect: seen here). Point unixODBC at the directory of this executable, whose odbcinst.ini
 * is empty (build-clients writes it; unixODBC would create it), unless ODBCSYSINI is set. */
static void no_system_odbcinst(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (getenv("ODBCSYSINI") || n <= 0)
        return;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    setenv("ODBCSYSINI", exe, 1);
}

static SQLHDBC db_connect(void)
{
    SQLHDBC dbc;
    double t = now();
    SQLAllocHandle(SQL_HANDLE_DBC, env, &dbc);
    SQLRETURN rc = SQLDriverConnect(dbc, NULL, (SQLCHAR *) connstr, SQL_NTS, NULL, 0, NULL, SQL_DRIVER_NOPROMPT);
    connect_s += now() - t;
    if (!SQL_SUCCEEDED(rc))
        server_error("connection failed", SQL_HANDLE_DBC, dbc);
    if (!version[0]) {
        char drv[64] = "?", dm[64] = "?";
        SQLGetInfo(dbc, SQL_DRIVER_VER, drv, sizeof drv, NULL);
        SQLGetInfo(dbc, SQL_DM_VER, dm, sizeof dm, NULL);
        snprintf(version, sizeof version, "psqlODBC %s (unixODBC DM %s)", drv, dm);
    }
    return dbc;
}

static void db_disconnect(SQLHDBC dbc)
{
    SQLDisconnect(dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, dbc);
}

static void run_query(SQLHDBC dbc)
{
    static char cell[CELL_SIZE];
    SQLHSTMT st;
    SQLSMALLINT ncols;
    SQLRETURN rc;
    double t = now();

    SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st);
    /* normal: returns with the whole result in the driver; cursor:N: after the first FETCH */
    rc = SQLExecDirect(st, (SQLCHAR *) query, SQL_NTS);
    exec_s += now() - t;
    t = now();
    if (!SQL_SUCCEEDED(rc))
        server_error("query failed", SQL_HANDLE_STMT, st);
    SQLNumResultCols(st, &ncols);

    while ((rc = SQLFetch(st)) == SQL_SUCCESS || rc == SQL_SUCCESS_WITH_INFO) {
        for (SQLUSMALLINT col = 1; col <= ncols; col++) {
            if (col > 1)
                out_byte('\t');
            for (;;) { /* a value longer than the cell arrives in several calls */
                SQLLEN ind;
                rc = SQLGetData(st, col, SQL_C_CHAR, cell, sizeof cell, &ind);
                if (rc == SQL_NO_DATA)
                    break;
                if (!SQL_SUCCEEDED(rc))
                    server_error("SQLGetData failed", SQL_HANDLE_STMT, st);
                if (ind == SQL_NULL_DATA) {
                    out_byte('\\');
                    out_byte('N');
                    break;
                }
                int truncated = ind == SQL_NO_TOTAL || ind >= (SQLLEN) sizeof cell;
                out_text(cell, truncated ? sizeof cell - 1 : (size_t) ind);
                if (!truncated)
                    break;
            }
        }
        out_byte('\n');
        rows++;
    }
    if (rc != SQL_NO_DATA)
        server_error("SQLFetch failed", SQL_HANDLE_STMT, st);
    SQLFreeHandle(SQL_HANDLE_STMT, st); /* closes the cursor (and its transaction) */
    fetch_s += now() - t;
}

static void parse_mode(void)
{
    if (strcmp(mode, "normal") == 0)
        fetch_rows = 0;
    else if (strncmp(mode, "cursor:", 7) == 0)
        fetch_rows = parse_long("m cursor:N, N", mode + 7, 1, 1000000000);
    else
        usage_error("-m %s: not a mode of this client (normal, cursor:N)", mode);
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
    build_connstr();

    /* Cursors reject a trailing ';': strip it (and white space), as every client does. */
    size_t len = strlen(sql);
    while (len > 0 && strchr(" \t\r\n;", sql[len - 1]))
        len--;
    query = strndup(sql, len);

    if ((out_fd = open(dest, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        usage_error("-o: cannot open %s: %s", dest, strerror(errno));
    outbuf = malloc(out_cap);

    no_system_odbcinst();
    SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &env);
    SQLSetEnvAttr(env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER) SQL_OV_ODBC3, 0);

    double t0 = now();
    SQLHDBC dbc = keep ? db_connect() : NULL;
    for (long i = 0; i < iterations; i++) {
        if (!keep)
            dbc = db_connect();
        run_query(dbc);
        if (!keep)
            db_disconnect(dbc);
    }
    if (keep)
        db_disconnect(dbc);
    double t = now();
    out_flush();
    fetch_s += now() - t;
    close(out_fd);
    double total_s = now() - t0;
    SQLFreeHandle(SQL_HANDLE_ENV, env);

    printf("{\"client\":\"odbc\",\"version\":\"%s\",\"mode\":\"%s\",\"iterations\":%ld,"
           "\"rows\":%lld,\"bytes\":%lld,\"checksum\":\"%016llx\",\"connect_s\":%.6f,\"exec_s\":%.6f,"
           "\"fetch_s\":%.6f,\"total_s\":%.6f}\n",
           version, mode, iterations, rows, nbytes, (unsigned long long) checksum,
           connect_s, exec_s, fetch_s, total_s);
    return 0;
}
