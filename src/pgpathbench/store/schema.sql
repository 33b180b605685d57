-- pgpathbench results database. Append-only tables (but for a failed measurement, replaced when it is
-- measured again, its error kept); views do the analysis.
-- Applied on every connection: everything here is idempotent.
CREATE SCHEMA IF NOT EXISTS pgpathbench;

CREATE TABLE IF NOT EXISTS pgpathbench.run (
    run_id       text PRIMARY KEY,
    studies      text[] NOT NULL,
    preset       text,
    options      jsonb NOT NULL,            -- everything needed to resume the run
    environment  jsonb NOT NULL DEFAULT '{}',  -- {"sessions": [fingerprint, ...]}: one per start or resume
    seed         bigint NOT NULL,           -- fixes the shuffled order of every round
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    status       text NOT NULL DEFAULT 'running'
                 CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
    pid          integer,                   -- the process running it, to tell a killed run
    host         text,
    summary      jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE IF NOT EXISTS pgpathbench.run_case (
    run_id         text NOT NULL REFERENCES pgpathbench.run ON DELETE CASCADE,
    study          text NOT NULL,
    case_id        text NOT NULL,
    dims           jsonb NOT NULL,
    planned_order  integer NOT NULL,
    PRIMARY KEY (run_id, study, case_id)
);

CREATE TABLE IF NOT EXISTS pgpathbench.measurement (
    run_id       text NOT NULL,
    study        text NOT NULL,
    case_id      text NOT NULL,
    round        integer NOT NULL CHECK (round > 0),
    session      integer NOT NULL DEFAULT 1,   -- index into run.environment->'sessions'
    started_at   timestamptz NOT NULL,
    ok           boolean NOT NULL,
    error        text,
    duration_s   double precision,             -- wall time of the measurement itself
    metrics      jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, study, case_id, round),  -- a resumed run cannot measure twice
    FOREIGN KEY (run_id, study, case_id) REFERENCES pgpathbench.run_case ON DELETE CASCADE
);
-- A failed measurement is measured again by `run --resume`: the new attempt replaces the row,
-- and the failed one is kept here ({"session", "started_at", "error"} each, oldest first).
-- Added by ALTER so that results databases made before upgrade in place.
ALTER TABLE pgpathbench.measurement ADD COLUMN IF NOT EXISTS attempts integer NOT NULL DEFAULT 1;
ALTER TABLE pgpathbench.measurement ADD COLUMN IF NOT EXISTS previous_errors jsonb NOT NULL DEFAULT '[]';

-- The network path (servers/paths.py id) a measurement crossed; added after the first version.
ALTER TABLE pgpathbench.measurement ADD COLUMN IF NOT EXISTS path text;

-- The measured round trip of every network path (link) of a run, before and after each round.
CREATE TABLE IF NOT EXISTS pgpathbench.link_probe (
    run_id       text NOT NULL REFERENCES pgpathbench.run ON DELETE CASCADE,
    round        integer NOT NULL,
    phase        text NOT NULL CHECK (phase IN ('before', 'after')),
    session      integer NOT NULL,
    link         text NOT NULL,
    measured_at  timestamptz NOT NULL DEFAULT now(),
    rtt_median_ms double precision NOT NULL,
    rtt_p95_ms   double precision,
    rtt_min_ms   double precision,
    round_trips  integer NOT NULL
);
CREATE INDEX IF NOT EXISTS link_probe_run ON pgpathbench.link_probe (run_id, link);

-- Per run and link: the median of its probes' medians, what reports quote as "measured RTT".
CREATE OR REPLACE VIEW pgpathbench.link_rtt AS
SELECT run_id, link, count(*) AS probes,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY rtt_median_ms) AS rtt_ms,
       min(rtt_median_ms) AS rtt_min_ms, max(rtt_median_ms) AS rtt_max_ms
FROM pgpathbench.link_probe GROUP BY run_id, link;

-- Every numeric metric of every measurement, one row each: the base of generic summaries.
CREATE OR REPLACE VIEW pgpathbench.metric_value AS
SELECT m.run_id, m.study, m.case_id, c.dims, m.round, k.key AS metric, (k.value #>> '{}')::float8 AS value
FROM pgpathbench.measurement m
JOIN pgpathbench.run_case c USING (run_id, study, case_id)
CROSS JOIN LATERAL jsonb_each(m.metrics) k
WHERE m.ok AND jsonb_typeof(k.value) = 'number';

-- Per case and metric: count, spread and median (the CLI adds intervals and ratios).
CREATE OR REPLACE VIEW pgpathbench.case_summary AS
SELECT run_id, study, case_id, dims, metric,
       count(*) AS n, min(value) AS min, max(value) AS max, avg(value) AS mean,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY value) AS median,
       stddev_samp(value) AS stddev
FROM pgpathbench.metric_value
GROUP BY run_id, study, case_id, dims, metric;

-- fdw-overhead: seed 000's aggregated table, and the overhead ratio local/target.
CREATE OR REPLACE VIEW pgpathbench.fdw_overhead_summary AS
SELECT run_id, dims->>'workload' AS workload, dims->>'target' AS target,
       (dims->>'clients')::int AS clients, metric, n, max, min, mean, median
FROM pgpathbench.case_summary
WHERE study = 'fdw-overhead' AND metric IN ('tps', 'latency_ms');

CREATE OR REPLACE VIEW pgpathbench.fdw_overhead_ratio AS
SELECT t.run_id, t.workload, t.clients, t.target,
       l.median / nullif(t.median, 0) AS tps_ratio_local_over_target
FROM pgpathbench.fdw_overhead_summary t
JOIN pgpathbench.fdw_overhead_summary l
  ON l.run_id = t.run_id AND l.workload = t.workload AND l.clients = t.clients
 AND l.metric = t.metric AND l.target = 'local'
WHERE t.metric = 'tps' AND t.target <> 'local';

-- =============================================================================================
-- interfaces (seed 003, Joe Conway's "Postgres Interface Performance"): the seed's objects, fed by
-- the stored measurements. Its driver tables (interfaces, alternateclientcopy, conninfos,
-- sqlstratiter, printfracdest) were filled by hand before its runs; here they are views over
-- what each run planned (run_case.dims, run.options, and the session's fingerprint for the
-- conninfo strings), so they describe exactly that run's cases, for every run and after a
-- resume, and need no write path of their own. Every object starts with run_id (and pg, the
-- PostgreSQL major of the servers), then the seed's columns, then ours. ifname and accdesc are
-- the seed's labels (libpq, ODBC, JDBC; acc-n, acc-a, acc-y); interface and method our values.
-- =============================================================================================
CREATE OR REPLACE FUNCTION pgpathbench.seed003_ifname(interface text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE interface WHEN 'odbc' THEN 'ODBC' WHEN 'jdbc' THEN 'JDBC' ELSE interface END $$;

CREATE OR REPLACE FUNCTION pgpathbench.seed003_accdesc(method text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE method WHEN 'normal' THEN 'acc-n' WHEN 'copy' THEN 'acc-y' ELSE 'acc-a' END $$;

-- lcl:ipc (unix socket), lcl:tcp (loopback), rmt:tcp (the remote server), rmt+5ms:tcp (over a link)
CREATE OR REPLACE FUNCTION pgpathbench.seed003_conndesc(transport text, latency text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE transport WHEN 'unix' THEN 'lcl:ipc' WHEN 'tcp' THEN 'lcl:tcp'
         ELSE CASE WHEN coalesce(latency, '0ms') = '0ms' THEN 'rmt:tcp' ELSE 'rmt+' || latency || ':tcp' END END $$;

-- the seed's way of writing counts: 1 -> 001, 50000 -> 50k, 10000000 -> 10m
CREATE OR REPLACE FUNCTION pgpathbench.seed003_numiter(n bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN n >= 1000000 AND n % 1000000 = 0 THEN (n / 1000000)::text || 'm'
              WHEN n >= 1000 AND n % 1000 = 0 THEN (n / 1000)::text || 'k'
              WHEN n < 1000 THEN lpad(n::text, 3, '0')
              ELSE n::text END $$;

-- interfaces => libpq, ODBC, JDBC (and psycopg)
CREATE OR REPLACE VIEW pgpathbench.interfaces AS
SELECT DISTINCT c.run_id, c.dims->>'pg' AS pg,
       pgpathbench.seed003_ifname(c.dims->>'interface') AS ifname,
       CASE c.dims->>'interface' WHEN 'jdbc' THEN 'java -jar pgpb-jdbc.jar' ELSE 'pgpb_' || (c.dims->>'interface') END
         AS testprog,
       c.dims->>'interface' AS interface
FROM pgpathbench.run_case c
WHERE c.study = 'interfaces';

-- conninfos => lcl:ipc, lcl:tcp, rmt:tcp per interface (no lcl:ipc for JDBC); passwords masked
CREATE OR REPLACE VIEW pgpathbench.conninfos AS
SELECT DISTINCT c.run_id, c.dims->>'pg' AS pg,
       pgpathbench.seed003_conndesc(c.dims->>'transport', c.dims->>'latency') AS conndesc,
       pgpathbench.seed003_ifname(c.dims->>'interface') AS ifname,
       '-c "' || coalesce(r.environment->'sessions'->-1->('interfaces_pg' || (c.dims->>'pg'))->'conninfo'
                          ->>((c.dims->>'transport') || '_' || (c.dims->>'latency')),
                          c.dims->>'transport') || '"' AS conninfo,
       c.dims->>'interface' AS interface, c.dims->>'transport' AS transport, c.dims->>'latency' AS latency
FROM pgpathbench.run_case c
JOIN pgpathbench.run r USING (run_id)
WHERE c.study = 'interfaces';

-- alternateclientcopy => acc-n: normal interface, acc-a: alternate (single-row, cursor), acc-y: COPY
CREATE OR REPLACE VIEW pgpathbench.alternateclientcopy AS
SELECT DISTINCT c.run_id,
       pgpathbench.seed003_accdesc(c.dims->>'method') AS accdesc,
       pgpathbench.seed003_ifname(c.dims->>'interface') AS ifname,
       CASE c.dims->>'method' WHEN 'normal' THEN ''
            WHEN 'cursor' THEN '-m cursor:' || coalesce(r.options->'studies'->0->'params'->>'fetch', '1000')
            ELSE '-m ' || (c.dims->>'method') END AS sw,
       c.dims->>'interface' AS interface, c.dims->>'method' AS method
FROM pgpathbench.run_case c
JOIN pgpathbench.run r USING (run_id)
WHERE c.study = 'interfaces';

-- sqlstratiter => sql001:0:50k (1 row, connect each time, 50k times) ... sql10m:1:001
CREATE OR REPLACE VIEW pgpathbench.sqlstratiter AS
SELECT DISTINCT c.run_id,
       x.query || ':' || x.connstrat || ':' || pgpathbench.seed003_numiter(x.n) AS sqlstratiterdesc,
       '-s "' || x.sqltext || '"' AS sql, '-k ' || x.connstrat AS connstrat, '-n ' || x.n AS numiter,
       c.dims->>'sqlstrat' AS sqlstrat
FROM pgpathbench.run_case c
JOIN pgpathbench.run r USING (run_id)
CROSS JOIN LATERAL (
    SELECT q.query,
           CASE split_part(c.dims->>'sqlstrat', ':', 2) WHEN 'each' THEN '0' ELSE '1' END AS connstrat,
           CASE WHEN q.query = 'sql001'
                THEN coalesce((r.options->'studies'->0->'params'->>'iterations')::bigint, 1) ELSE 1 END AS n,
           CASE q.query WHEN 'sql001' THEN 'select * from t50k where id = 4242'
                        WHEN 'sql50k' THEN 'select * from t50k' ELSE 'select * from t10m' END AS sqltext
    FROM (SELECT split_part(c.dims->>'sqlstrat', ':', 1) AS query) q) x
WHERE c.study = 'interfaces';

-- printfracdest => p-all:null, p-all:file, p-none:null
CREATE OR REPLACE VIEW pgpathbench.printfracdest AS
SELECT DISTINCT c.run_id, c.dims->>'output' AS pfddesc,
       CASE split_part(c.dims->>'output', ':', 1) WHEN 'p-all' THEN '-p 1' ELSE '-p 0' END AS printfrac,
       CASE split_part(c.dims->>'output', ':', 2)
            WHEN 'file' THEN coalesce(jsonb_path_query_first(r.environment, '$.sessions[last].*.outfile') #>> '{}',
                                      'iftest.out')
            ELSE '/dev/null' END AS dest
FROM pgpathbench.run_case c
JOIN pgpathbench.run r USING (run_id)
WHERE c.study = 'interfaces';

-- testcases: every testcase of a run, generated from the driver tables as the seed did (JOIN and
-- CROSS JOIN); case_id is the stored case it is (the set equals the run's run_case rows).
CREATE OR REPLACE VIEW pgpathbench.testcases AS
SELECT i.run_id, i.pg,
       i.ifname || ':' || c.conndesc || ':' || s.sqlstratiterdesc || ':' || a.accdesc || ':' || p.pfddesc AS testcase,
       concat_ws(' ', i.testprog, c.conninfo, s.sql, p.printfrac, s.connstrat, s.numiter, nullif(a.sw, ''),
                 '-o', p.dest) AS testcmd,
       concat_ws(':', i.interface, a.method, c.transport, s.sqlstrat, p.pfddesc, c.latency, i.pg) AS case_id
FROM pgpathbench.interfaces i
JOIN pgpathbench.conninfos c USING (run_id, pg, ifname)
JOIN pgpathbench.alternateclientcopy a USING (run_id, ifname)
CROSS JOIN pgpathbench.printfracdest p
CROSS JOIN pgpathbench.sqlstratiter s
WHERE p.run_id = i.run_id AND s.run_id = i.run_id;

-- testresults: one row per measurement (the seed's iter = our round), duration = the client
-- command's wall time in seconds, as the seed's
CREATE OR REPLACE VIEW pgpathbench.testresults AS
SELECT m.run_id, c.dims->>'pg' AS pg,
       concat_ws(':', pgpathbench.seed003_ifname(c.dims->>'interface'),
                 pgpathbench.seed003_conndesc(c.dims->>'transport', c.dims->>'latency'),
                 split_part(c.dims->>'sqlstrat', ':', 1),
                 CASE split_part(c.dims->>'sqlstrat', ':', 2) WHEN 'each' THEN '0' ELSE '1' END,
                 pgpathbench.seed003_numiter((m.metrics->>'iterations')::bigint),
                 pgpathbench.seed003_accdesc(c.dims->>'method'), c.dims->>'output') AS testcase,
       m.round AS iter, m.started_at AS ts, (m.metrics->>'duration_s')::float8 AS duration, m.case_id
FROM pgpathbench.measurement m
JOIN pgpathbench.run_case c USING (run_id, study, case_id)
WHERE m.study = 'interfaces' AND m.ok;

-- vtestresults: the testcase taken apart
CREATE OR REPLACE VIEW pgpathbench.vtestresults AS
SELECT run_id, pg,
       split_part(testcase, ':', 1) AS iface, split_part(testcase, ':', 2) AS loc,
       split_part(testcase, ':', 3) AS comm, split_part(testcase, ':', 4) AS sql,
       split_part(testcase, ':', 5) AS connstrat, split_part(testcase, ':', 6) AS numiter,
       split_part(testcase, ':', 7) AS extra, split_part(testcase, ':', 8) AS prnt,
       split_part(testcase, ':', 9) AS dest, iter, ts, duration, case_id
FROM pgpathbench.testresults;

-- Results - Interface/Method: each candidate (iface:extra) normalised among the candidates of its
-- testcase. As the seed's, plus run_id and pg in the groups, and 0 (not a division by zero) where
-- a testcase has a single value.
CREATE OR REPLACE VIEW pgpathbench.ifmeth_cat_results AS
SELECT run_id, pg,
       sql || $$:$$ || numiter || $$:$$ || loc || $$:$$ || comm || $$:$$ || connstrat || $$:$$ || prnt ||
       $$:$$ || dest AS testcase
      ,iface || $$:$$ || extra AS candidate
      ,round(duration::numeric, 5) AS duration
      ,round(drange::numeric, 5) AS drange, grpsz
      ,round(coalesce((duration - min(duration) OVER w) /
                      nullif(max(duration) OVER w - min(duration) OVER w, 0), 0)::numeric, 5) AS nml_dur
      ,round(coalesce((drange - min(drange) OVER w) /
                      nullif(max(drange) OVER w - min(drange) OVER w, 0), 0)::numeric, 5) AS nml_drng
FROM (SELECT run_id, pg, iface, loc, comm, connstrat, sql, numiter, extra, prnt, dest
            ,count(1) AS grpsz, avg(duration) AS duration
            ,max(duration) - min(duration) AS drange
      FROM pgpathbench.vtestresults GROUP BY 1,2,3,4,5,6,7,8,9,10,11) AS t
WINDOW w AS (PARTITION BY run_id, pg, sql, numiter, loc, comm, connstrat, prnt, dest
             ORDER BY duration
             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING);

-- Results - Location/Transport: each loc:comm normalised among the transports of its testcase
CREATE OR REPLACE VIEW pgpathbench.loccomm_cat_results AS
SELECT run_id, pg,
       iface || ':' || extra || ':' || sql || ':' || numiter || ':' || connstrat || ':' || prnt || ':' || dest
         AS testcase
      ,loc || ':' || comm AS candidate
      ,round(duration::numeric, 5) AS duration
      ,round(drange::numeric, 5) AS drange, grpsz
      ,round(coalesce((duration - min(duration) OVER w) /
                      nullif(max(duration) OVER w - min(duration) OVER w, 0), 0)::numeric, 5) AS nml_dur
      ,round(coalesce((drange - min(drange) OVER w) /
                      nullif(max(drange) OVER w - min(drange) OVER w, 0), 0)::numeric, 5) AS nml_drng
FROM (SELECT run_id, pg, iface, loc, comm, connstrat, sql, numiter, extra, prnt, dest
            ,count(1) AS grpsz, avg(duration) AS duration
            ,max(duration) - min(duration) AS drange
      FROM pgpathbench.vtestresults GROUP BY 1,2,3,4,5,6,7,8,9,10,11) AS t
WINDOW w AS (PARTITION BY run_id, pg, sql, numiter, iface, extra, connstrat, prnt, dest
             ORDER BY duration
             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING);

-- The seed's summary queries, as views (ORDER BY avg_nml_dur, avg_nml_drng, candidate when reading):
-- Interface/Method Summarized, Location/Transport Summarized, Query/Connect Strategy Summarized.
CREATE OR REPLACE VIEW pgpathbench.ifmeth_cat_summary AS
SELECT run_id, pg, candidate
      ,round(AVG(grpsz), 1) AS avg_grpsz
      ,round(AVG(nml_dur), 3) AS avg_nml_dur
      ,round(AVG(nml_drng), 3) AS avg_nml_drng
FROM pgpathbench.ifmeth_cat_results
GROUP BY run_id, pg, candidate;

CREATE OR REPLACE VIEW pgpathbench.loccomm_cat_summary AS
SELECT run_id, pg, candidate
      ,round(AVG(grpsz), 1) AS avg_grpsz
      ,round(AVG(nml_dur), 3) AS avg_nml_dur
      ,round(AVG(nml_drng), 3) AS avg_nml_drng
FROM pgpathbench.loccomm_cat_results
GROUP BY run_id, pg, candidate;

CREATE OR REPLACE VIEW pgpathbench.testcase_avg_duration AS
SELECT run_id, pg, testcase, round(avg(duration), 3) AS avg_dur, count(*) AS candidates
FROM pgpathbench.ifmeth_cat_results
GROUP BY run_id, pg, testcase;
