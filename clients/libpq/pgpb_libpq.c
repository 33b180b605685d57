/*
 * pgpb_libpq: pgpathbench's libpq client (seed 003's libpqtest). Contract: clients/CONTRACT.md.
 *
 * Modes: normal (PQexec, walk the PGresult), single-row (PQsetSingleRowMode), copy
 * (COPY (SQL) TO STDOUT, PQgetCopyData), chunked:N (PQsetChunkedRowsMode, libpq 17+ only).
 * Build: gcc -O2 -I$(pg_config --includedir) pgpb_libpq.c -L$(pg_config --libdir) -lpq
 */
#include <libpq-fe.h>

#define CLIENT "pgpb_libpq"
#define USAGE "usage: " CLIENT " -c CONNINFO -s SQL [-k 0|1] [-n ITERATIONS] [-p 0|1] [-o DEST]\n" \
              "       [-m normal|single-row|copy|chunked:N]   (see clients/CONTRACT.md)\n"
#include "../common/pgpb_common.h"

static long chunk_rows = 0;
enum { M_NORMAL, M_SINGLE_ROW, M_CHUNKED, M_COPY } mode_kind;
static char *query; /* SQL without a trailing ';', or COPY (SQL) TO STDOUT */

static void server_error(const char *what, const char *msg)
{
    fprintf(stderr, CLIENT ": %s: %s", what, msg);
    if (!*msg || msg[strlen(msg) - 1] != '\n')
        fputc('\n', stderr);
    exit(3);
}

/* ---- the driver ----------------------------------------------------------------------- */
static PGconn *db_connect(void)
{
    /* expand_dbname: CONNINFO is parsed as libpq would; client_encoding after it wins. */
    const char *const keys[] = {"dbname", "client_encoding", NULL};
    const char *const vals[] = {conninfo, "UTF8", NULL};
    double t = connect_began = now();
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
        for (int j = 0; j < nfields; j++) {
            int len = PQgetlength(r, i, j); /* a NULL's is 0: ask only then */
            out_field(j == 0, PQgetvalue(r, i, j), len, len == 0 && PQgetisnull(r, i, j));
        }
        out_end_row();
    }
}

/* The driver call returned the first result: exec_s; reading the rows begins now. */
static double executed(double t)
{
    exec_s += now() - t;
    return now();
}

/* PQexec, timed as exec_s (*t becomes when reading began); a result other than want is an error. */
static PGresult *exec_expecting(PGconn *c, double *t, ExecStatusType want, const char *what)
{
    PGresult *r = PQexec(c, query);
    *t = executed(*t);
    if (PQresultStatus(r) != want)
        server_error(what, PQresultErrorMessage(r));
    return r;
}

/* normal: PQexec returns when the whole result is in memory. Returns when reading began. */
static double run_normal(PGconn *c, double t)
{
    PGresult *r = exec_expecting(c, &t, PGRES_TUPLES_OK, "query failed");
    render(r);
    PQclear(r);
    return t;
}

/* copy: PQexec returns at CopyOutResponse, before any row; one row per CopyData message. */
static double run_copy(PGconn *c, double t)
{
    PGresult *r;
    PQclear(exec_expecting(c, &t, PGRES_COPY_OUT, "COPY failed"));
    char *data;
    int n;
    while ((n = PQgetCopyData(c, &data, 0)) > 0) {
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
    return t;
}

/* single-row, chunked: one small PGresult per row (or per N rows). */
static double run_row_mode(PGconn *c, double t)
{
    if (!PQsendQuery(c, query))
        server_error("query failed", PQerrorMessage(c));
#ifdef LIBPQ_HAS_CHUNK_MODE
    if (mode_kind == M_CHUNKED ? !PQsetChunkedRowsMode(c, (int) chunk_rows) : !PQsetSingleRowMode(c))
#else
    if (!PQsetSingleRowMode(c))
#endif
        server_error("query failed", "cannot set the row mode\n");
    PGresult *r = PQgetResult(c);
    t = executed(t);
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
    return t;
}

/* One iteration's query: exec_s, fetch_s and (iteration_done) its time, from the same clock reads. */
static void run_query(PGconn *c)
{
    double began = now(), t;
    if (mode_kind == M_NORMAL)
        t = run_normal(c, began);
    else if (mode_kind == M_COPY)
        t = run_copy(c, began);
    else
        t = run_row_mode(c, began);
    double ended = now();
    fetch_s += ended - t;
    iteration_done(began, ended);
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
    parse_args(argc, argv);
    parse_mode();

    char *err = NULL;
    PQconninfoOption *parsed = PQconninfoParse(conninfo, &err);
    if (!parsed)
        usage_error("-c: %s", err ? err : "cannot parse the conninfo");
    PQconninfoFree(parsed);

    query = query_text(mode_kind == M_COPY);
    out_open();

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
    out_close();
    double total_s = now() - t0;

    char version[32];
    int v = PQlibVersion();
    snprintf(version, sizeof version, "libpq %d.%d", v / 10000, v % 10000);
    print_result("libpq", version, total_s);
    return 0;
}
