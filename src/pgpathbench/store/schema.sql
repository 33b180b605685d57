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

-- The evidence of why a measurement took what it took (issue 13), both added after the first version:
-- series: per-second points of the measured program, [{"t": s since its first transaction, "tps": transactions
--   completed in that second, "latency_ms": their mean latency}] (pgbench's per-transaction log);
-- evidence: what the servers the case involves did meanwhile (evidence/collect.py): {"servers": {role:
--   {database, io, wal, cpu_ms, statements, waits}}, "missing": {"role.section": reason}}.
ALTER TABLE pgpathbench.measurement ADD COLUMN IF NOT EXISTS series jsonb NOT NULL DEFAULT '[]';
ALTER TABLE pgpathbench.measurement ADD COLUMN IF NOT EXISTS evidence jsonb NOT NULL DEFAULT '{}';

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

-- Seed 003's objects of the earlier version (its driver tables, testcases, testresults, the
-- normalised views and their summaries, as SQL): the analysis is interfaces' report.py now, in
-- Python, read from the result model. Results databases made by that version still have them.
DROP VIEW IF EXISTS pgpathbench.ifmeth_cat_summary, pgpathbench.loccomm_cat_summary,
  pgpathbench.testcase_avg_duration, pgpathbench.ifmeth_cat_results, pgpathbench.loccomm_cat_results,
  pgpathbench.vtestresults, pgpathbench.testresults, pgpathbench.testcases, pgpathbench.interfaces,
  pgpathbench.conninfos, pgpathbench.alternateclientcopy, pgpathbench.sqlstratiter, pgpathbench.printfracdest
  CASCADE;
DROP FUNCTION IF EXISTS pgpathbench.seed003_ifname(text), pgpathbench.seed003_accdesc(text),
  pgpathbench.seed003_conndesc(text, text), pgpathbench.seed003_numiter(bigint);
