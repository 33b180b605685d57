"""remote-sampling without servers: value parsing, the matrix, plots and per-row fits from given measurements."""

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from pgpathbench.errors import UserError
from pgpathbench.report import render
from pgpathbench.results.model import RunResult
from pgpathbench.matrix import StudyOptions
from pgpathbench.studies.remote_sampling import RemoteSampling, spec, study
from pgpathbench.studies.remote_sampling.spec import parse_fraction, parse_rows, row_count

STUDY = RemoteSampling()
GOLDEN = Path(__file__).resolve().parent.parent / "golden"


@pytest.mark.parametrize("raw, canon, n", [("10k", "10k", 10_000), ("1000000", "1M", 1_000_000),
                                           ("100M", "100M", 100_000_000), ("1500", "1500", 1500)])
def test_rows(raw, canon, n):
    assert parse_rows(raw) == canon and row_count(canon) == n


def test_fraction():
    assert parse_fraction("0.10") == "0.1" and parse_fraction("1") == "1"
    with pytest.raises(ValueError):
        parse_fraction("0")


def options(**dims):
    return StudyOptions(STUDY.name, "quick", 3, {}, {**STUDY.default_dims, **dims})


def test_matrix_keeps_each_test_to_its_own_dimensions():
    cases = STUDY.cases(options(rows=("10k",), fraction=("0.1", "1"), stats_target=("100",), latency=("0ms", "2ms")))
    sampling = [c for c in cases if c["test"] == "sampling"]
    analyze = [c for c in cases if c["test"] == "analyze"]
    # 4 methods x 2 fractions x (direct at 0ms + fdw at 0ms and 2ms)
    assert len(sampling) == 4 * 2 * 3
    assert all(c["analyze_sampling"] == "-" and c["stats_target"] == "-" for c in sampling)
    assert all(c["latency"] == "0ms" for c in sampling if c["access"] == "direct")
    # local once (direct), five foreign modes over two links
    assert len(analyze) == 1 + 5 * 2
    assert all(c["method"] == "-" and c["fraction"] == "-" for c in analyze)
    assert {c["access"] for c in analyze if c["analyze_sampling"] == "local"} == {"direct"}


def test_old_major_is_refused_for_analyze_sampling():
    with pytest.raises(UserError, match="^--pg: analyze_sampling"):
        STUDY.cases(options(pg=("15",)))
    assert STUDY.cases(options(pg=("15",), analyze_sampling=("local", "off")))


def measurement(round_no, access, method, fraction, ms, rows="10k", latency="0ms"):
    n = row_count(rows)
    sent = (n if method == "full" else int(n * float(fraction))) if access == "fdw" else 0
    return _measured(round_no, {"test": "sampling", "rows": rows, "method": method, "fraction": fraction,
                                "access": access, "analyze_sampling": "-", "stats_target": "-", "latency": latency},
                     {"duration_ms": ms, "rows_transferred": sent, "rows_table": n})


def analyze_measurement(round_no, mode, target, ms, rows="10k", latency="0ms"):
    """ANALYZE of the table itself (mode local: direct, at 0ms) or of its foreign table over `latency`."""
    local = mode == "local"
    return _measured(round_no, {"test": "analyze", "rows": rows, "method": "-", "fraction": "-",
                                "access": "direct" if local else "fdw", "analyze_sampling": mode,
                                "stats_target": target, "latency": "0ms" if local else latency},
                     {"duration_ms": ms, "rows_table": row_count(rows)})


def _measured(round_no, dims, metrics):
    dims = {**dims, "pg": "17"}
    return {"study": STUDY.name, "ok": True, "round": round_no, "dims": dims, "case_id": ":".join(dims.values()),
            "metrics": metrics}


def study_result(measurements):
    """The result model of a run holding these measurements (as an export would carry them)."""
    run = {"run_id": "r1", "studies": [STUDY.name], "options": {"model_version": 2}}
    return RunResult.from_rows(run, [], measurements, []).study


def test_per_row_transfer_cost_is_fitted_from_fdw_minus_direct():
    # Direct: 1 ms; FDW: 1 ms plus 2 us per row sent -> the fit must find 2 us per row.
    ms = []
    for r in (1, 2, 3):
        for f in ("0.1", "0.5", "1"):
            ms.append(measurement(r, "direct", "bernoulli", f, 1.0))
            ms.append(measurement(r, "fdw", "bernoulli", f, 1.0 + 0.002 * 10_000 * float(f)))
            for size, per_row in (("10k", 1e-4), ("100k", 1e-4)):
                ms.append(measurement(r, "direct", "random", f, 0.5 + per_row * row_count(size), rows=size))
    result = study_result(ms)
    tables = STUDY.report(result)
    per_row = next(t for t in tables if t.title.startswith("Per-row costs"))
    send = next(row for row in per_row.rows if row[1].startswith("send"))
    read = next(row for row in per_row.rows if row[1].startswith("read"))
    assert send[3] == pytest.approx(2.0) and read[3] == pytest.approx(0.1)
    plots = STUDY.plots(result)
    assert [p.title.split(",")[0] for p in plots][:2] == ["Sampling 10k rows directly on the source",
                                                         "Sampling 10k rows through postgres_fdw (direct)"]
    fdw = plots[1].series["bernoulli"]
    assert [p.x for p in fdw] == [0.1, 0.5, 1.0] and fdw[-1].y == pytest.approx(21.0)


def golden_run() -> RunResult:
    """The earlier version's stored quick run (tests/golden), read into today's model."""
    return RunResult.from_export(json.loads((GOLDEN / "remote-sampling.export.json").read_text()))


def test_every_metric_a_measurement_carries_is_declared():
    # The earlier version's stored quick run carries every key measure() writes, for both tests and
    # both accesses (its durations read as *_ms, as today's measure() writes them); tls is written
    # through the FDW of runs with --tls on, which it is not.
    run = golden_run()
    written = {k for c in run.study.cases for m in c.ok for k in m.metrics}
    assert written | {"tls"} == set(STUDY.metrics)
    assert STUDY.metrics[STUDY.primary_metric].better == "lower" and STUDY.metrics["duration_ms"].unit == "ms"
    texts = {"remote_sql", "remote_view_sql", "local_filter"}
    assert all(STUDY.metrics[k].better == "none" for k in texts | {"rows_sampled", "rows_transferred"})
    assert all(STUDY.metrics[k].better == "lower" for k in written if k.endswith("_error"))


class Recorder:
    """A connection that records the SQL it is given, rendered as the server would get it."""

    def __init__(self, rows=()):
        self.statements, self.rows = [], list(rows)

    def execute(self, query, params=None):
        self.statements.append(query if isinstance(query, str) else query.as_string(None))
        return self

    def fetchone(self):
        return (None,)

    def fetchall(self):
        return self.rows


def test_tables_and_views_are_named_as_quoted_identifiers():
    # An unquoted t_10M is folded to t_10m by the server: every name must reach it quoted.
    conn = Recorder()
    study.load_table(conn, "10M", ("0.1",))
    study.set_analyze_sampling(conn, "t_10M", "system")
    named = [s for s in conn.statements if "_10M" in s]
    assert len(named) == 4 + 4 + 1    # the table (drop, create, insert, vacuum), 4 views, ALTER
    for s in named:
        assert not re.search(r'(?<!")\b[tv]_10M', s), s
    assert 'CREATE VIEW "v_10M_system_0_1" AS SELECT * FROM "t_10M" TABLESAMPLE SYSTEM (10.0) OFFSET 0' in conn.statements
    assert any(s.startswith('ALTER FOREIGN TABLE "t_10M" OPTIONS (ADD analyze_sampling') for s in named)


def test_quick_preset_has_real_intervals():
    assert STUDY.presets["quick"].repeat >= 6


def test_histogram_error_counts_buckets_as_width_bucket_does():
    # width_bucket: bucket i holds bounds[i-1] <= b < bounds[i]; a value on a bound goes up.
    assert study.histogram_error([0, 1, 2, 3], [0, 2, 4]) == 0          # 2 and 2: perfect
    # [0, 2): 0, 1, 1.5; [2, 4): 2 (4 and 5 are above the last bound, still in the total of 6)
    error = study.histogram_error([0, 1, 1.5, 2, 4, 5], [0, 2, 4])
    assert error == pytest.approx((abs(3 / 6 * 2 - 1) + abs(1 / 6 * 2 - 1)) / 2)


def test_a_cost_without_enough_points_says_so_and_why():
    # Only one table size: reading a row cannot be fitted; sending can (three fractions).
    ms = [measurement(r, access, "random", f, 1.0 + (0.002 * 10_000 * float(f) if access == "fdw" else 0))
          for r in (1, 2, 3) for f in ("0.1", "0.5", "1") for access in ("direct", "fdw")]
    per_row = next(t for t in STUDY.report(study_result(ms)) if t.title.startswith("Per-row costs"))
    read, send = per_row.rows
    assert read[3:6] == [None, "too few points", 0] and send[3] == pytest.approx(2.0)
    assert per_row.notes[-1].startswith("too few points: reading is fitted from direct random()")


def test_terminal_tables_fit_120_columns():
    # The golden run (3 rounds: every interval carries its coverage) rendered as a terminal shows it.
    for table in STUDY.report(golden_run().study):
        table = dataclasses.replace(table, notes=[])
        lines = []
        for width in (120, 1000):
            out = io.StringIO()
            render.to_terminal([table], Console(file=out, width=width))
            lines.append(len(out.getvalue().splitlines()))
        assert lines[0] == lines[1], f"'{table.title}' wraps at 120 columns"


def test_a_user_external_is_checked_by_its_own_version_not_by_pg():
    # --pg labels the managed servers; a user's external runs ANALYZE with its own postgres_fdw.
    user = StudyOptions(STUDY.name, "quick", 3, {"servers": {"external": "host=db2"}},
                        {**STUDY.default_dims, "pg": ("15",)})
    assert STUDY.cases(user)
    old, new = (dataclasses.make_dataclass("Facts", ["version_num"])(v) for v in (150004, 160002))
    with pytest.raises(UserError, match="^--server external: its postgres_fdw \\(PostgreSQL 15\\) has no analyze_sampling"):
        STUDY.check_user_servers(user, {"external": old}, {})
    STUDY.check_user_servers(user, {"external": new, "source": old}, {})
    local_off = dataclasses.replace(user, dims={**user.dims, "analyze_sampling": ("local", "off")})
    STUDY.check_user_servers(local_off, {"external": old}, {})


def test_analyze_remote_sql_is_the_select_of_the_table_among_what_ran():
    ran = [{"query": "FETCH 100 FROM c1", "calls": 30},
           {"query": "SELECT stats FROM pg_stat_statements WHERE query ILIKE '%t_10k%'", "calls": 2},
           {"query": "DECLARE c1 CURSOR FOR\n SELECT id, a FROM public.t_10k TABLESAMPLE SYSTEM(30)", "calls": 1}]
    assert study.analyze_remote_sql(ran, "t_10k") == "DECLARE c1 CURSOR FOR SELECT id, a FROM public.t_10k TABLESAMPLE SYSTEM(30)"
    assert study.analyze_remote_sql(ran[:1], "t_10k") is None


def ratio_rows(result):
    table = next(t for t in STUDY.report(result) if t.title.startswith("Ratios paired by round"))
    return table, [row[1:9] for row in table.rows]   # rows to n


def test_ratio_table_pairs_each_case_with_its_baseline_and_full_transfer_round_by_round():
    # Durations that drift 10x from round to round: only a pairing by round gives a constant ratio.
    drift = {1: 1.0, 2: 10.0, 3: 100.0}
    ms = []
    for r, k in drift.items():
        ms += [measurement(r, "direct", "system", "0.1", k), measurement(r, "direct", "full", "0.1", 2 * k),
               measurement(r, "fdw", "system", "0.1", 3 * k), measurement(r, "fdw", "full", "0.1", 12 * k),
               # over a 2ms link: the same direct case, its own full transfer
               measurement(r, "fdw", "system", "0.1", 5 * k, latency="2ms"),
               measurement(r, "fdw", "full", "0.1", 40 * k, latency="2ms"),
               analyze_measurement(r, "local", "100", 10 * k), analyze_measurement(r, "local", "1000", 20 * k),
               analyze_measurement(r, "system", "100", 5 * k), analyze_measurement(r, "off", "1000", 60 * k)]
        if r != 3:   # a round missing on one side is no pair
            ms.append(analyze_measurement(r, "bernoulli", "1000", 5 * k))
    table, rows = ratio_rows(study_result(ms))
    assert rows == [
        ["10k", "direct", "full", "0.1", "fdw / direct", 6.0, "[6.000, 6.000] (75%)", 3],
        ["10k", "direct", "system", "0.1", "fdw / direct", 3.0, "[3.000, 3.000] (75%)", 3],
        ["10k", "direct", "system", "0.1", "full / method", 4.0, "[4.000, 4.000] (75%)", 3],
        ["10k", "direct", "system", "target 100", "foreign / local", 0.5, "[0.5000, 0.5000] (75%)", 3],
        ["10k", "direct", "off", "target 1000", "foreign / local", 3.0, "[3.000, 3.000] (75%)", 3],
        ["10k", "direct", "bernoulli", "target 1000", "foreign / local", 0.25, "[0.2500, 0.2500] (50%)", 2],
        ["10k", "2ms link", "full", "0.1", "fdw / direct", 20.0, "[20.00, 20.00] (75%)", 3],
        ["10k", "2ms link", "system", "0.1", "fdw / direct", 5.0, "[5.000, 5.000] (75%)", 3],
        ["10k", "2ms link", "system", "0.1", "full / method", 8.0, "[8.000, 8.000] (75%)", 3]]
    assert {row[-1] for row in table.rows} == {"too few rounds (3)", "too few rounds (2)"}
    # the pairing rule and the seed's own words are in the notes
    assert any("same rows, fraction, link and major" in n for n in table.notes)
    assert any("*all* the sampling methods beat ANALYZE on the local table" in n for n in table.notes)


def test_ratio_table_verdict_needs_six_rounds_and_is_absent_without_pairs():
    ms = [m for r in range(1, 7) for m in (measurement(r, "fdw", "random", "0.5", 1.0 + r),
                                           measurement(r, "fdw", "full", "0.5", 4.0 + r))]
    table, rows = ratio_rows(study_result(ms))
    assert [row[4] for row in rows] == ["full / method"] and table.rows[0][-1] == "yes"
    alone = study_result([measurement(r, "fdw", "random", "0.5", 1.0) for r in (1, 2, 3)])
    assert not any(t.title.startswith("Ratios paired by round") for t in STUDY.report(alone))


def test_every_fdw_sample_has_its_full_transfer_in_the_matrix():
    cases = STUDY.cases(options(rows=("10k",), fraction=("0.1", "1"), latency=("0ms", "2ms")))
    through = [c for c in cases if c["test"] == "sampling" and c["access"] == "fdw"]
    twins = spec.FULL_TRANSFER.twins(through)
    assert set(twins) == {c.case_id for c in through if c["method"] != "full"}
    assert all(t["method"] == "full" and (t["fraction"], t["latency"]) == (c["fraction"], c["latency"])
               for c in through if c.case_id in twins for t in [twins[c.case_id]])


def test_direct_sampling_is_set_against_reading_every_row_round_by_round():
    # system at 0.2 costs twice reading everything whatever the round's drift: the seed's 100M spike
    ms = [m for r, k in {1: 1.0, 2: 10.0, 3: 100.0}.items()
          for m in (measurement(r, "direct", "full", "0.2", 2 * k, rows="100M"),
                    measurement(r, "direct", "system", "0.2", 4 * k, rows="100M"),
                    measurement(r, "direct", "bernoulli", "0.2", k, rows="100M"),
                    measurement(r, "fdw", "system", "0.2", 8 * k, rows="100M"))]
    table = next(t for t in STUDY.report(study_result(ms)) if t.title.startswith("Sampling on the source"))
    assert [row[1:7] for row in table.rows] == [["100M", "system", "0.2", 0.5, "[0.5000, 0.5000] (75%)", 3],
                                                ["100M", "bernoulli", "0.2", 2.0, "[2.000, 2.000] (75%)", 3]]
    assert any("quickly spikes to ~2x" in n for n in table.notes)
    through = study_result([m for m in ms if m["dims"]["access"] == "fdw"])
    assert not any(t.title.startswith("Sampling on the source") for t in STUDY.report(through))


def test_rows_moved_print_as_counts_after_an_even_number_of_rounds():
    # 4 rounds: the median of 0, 0, 0, 0 is 0.0 and of 1,000 x 4 is 1000.0, which cell() prints "0.0000", "1,000"
    ms = [measurement(r, access, "bernoulli", "0.1", 1.0 + r) for r in (1, 2, 3, 4) for access in ("direct", "fdw")]
    table = next(t for t in STUDY.report(study_result(ms)) if t.title.startswith("Sampling: duration"))
    assert [(row[5], row[-1]) for row in table.rows] == [("direct", "0"), ("fdw", "1,000")]
