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
#include <libpq-fe.h>
#include <sql.h>
#include <sqlext.h>

#define CLIENT "pgpb_odbc"
#define CELL_SIZE (64 << 10)  /* SQLGetData buffer; longer values arrive in pieces */
#ifndef PGPB_ODBC_DRIVER
#define PGPB_ODBC_DRIVER "/usr/lib/x86_64-linux-gnu/odbc/psqlodbcw.so"
#endif
#define USAGE "usage: " CLIENT " -c CONNINFO -s SQL [-k 0|1] [-n ITERATIONS] [-p 0|1] [-o DEST]\n" \
              "       [-m normal|cursor:N]   (see clients/CONTRACT.md)\n"
#include "../common/pgpb_common.h"

static long fetch_rows = 0;
static char *query;   /* SQL without a trailing ';' */
static char *connstr; /* the ODBC connection string built from CONNINFO */
static char version[256];

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
    double t = connect_began = now();
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
    double began = now(), t = began;

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
                    out_null();
                    break;
                }
                int truncated = ind == SQL_NO_TOTAL || ind >= (SQLLEN) sizeof cell;
                out_text(cell, truncated ? sizeof cell - 1 : (size_t) ind);
                if (!truncated)
                    break;
            }
        }
        out_end_row();
    }
    if (rc != SQL_NO_DATA)
        server_error("SQLFetch failed", SQL_HANDLE_STMT, st);
    SQLFreeHandle(SQL_HANDLE_STMT, st); /* closes the cursor (and its transaction) */
    double ended = now();
    fetch_s += ended - t;
    iteration_done(began, ended);
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
    parse_args(argc, argv);
    parse_mode();
    build_connstr();
    query = query_text(0);
    out_open();

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
    out_close();
    double total_s = now() - t0;
    SQLFreeHandle(SQL_HANDLE_ENV, env);

    print_result("odbc", version, total_s);
    return 0;
}
