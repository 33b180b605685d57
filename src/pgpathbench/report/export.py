"""The result model -> JSON and CSV, one object or row per measurement.

JSON (format_version 3): {"format_version": 3, "run": {...the stored run row...},
"measurements": [{run_id, study, case_id, round, session, started_at, ok, error, duration_s,
dims: {...as stored}, metrics: {...}, path, attempts, previous_errors, series, evidence}], "link_probes": [{link, round, phase, session, measured_at,
rtt_median_ms, rtt_p95_ms, rtt_min_ms, round_trips}]}.
Version 2 changed the meaning of fields of version 1: every duration metric is in milliseconds
(`connect_ms`, not `connect_s`); `path` (the network path's id), `attempts` and
`previous_errors` (a failed measurement measured again by `run --resume`) are new.
Added within version 2 (no field changed meaning): `series` (per-second points) and `evidence`
(what the servers did), see store/schema.sql; the latency percentile metrics.
Added within version 3: `pgpathbench` (the exporting tool: version, git commit, dirty) and, per
session, the measuring tool's in its machine section (pgpathbench, pgpathbench_commit, pgpathbench_dirty);
`findings` (only when the study concludes something the export should carry, read from the
measurements: fdw-overhead's knee per path under --rate, {"roof": [...]}).
CSV: the same fields, the measuring session's tool (TOOL_FIELDS), dims as dim_<name> columns and
metrics as their own columns.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from datetime import datetime

from ..environment import tool_version
from ..results.exported import FORMAT_VERSION
from ..results.model import CaseResult, Measurement, RunResult

FIELDS = ["run_id", "study", "case_id", "round", "session", "started_at", "ok", "error", "duration_s"]
# The tool that took a measurement, from its session's machine section (not recorded: "unknown").
TOOL_FIELDS = ["pgpathbench", "pgpathbench_commit", "pgpathbench_dirty"]


def _default(o: object) -> str:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def measurement_json(run: RunResult, case: CaseResult, m: Measurement) -> dict:
    return {"run_id": run.run_id, "study": case.study, "case_id": case.case_id, "round": m.round,
            "session": m.session, "started_at": m.started_at, "ok": m.ok, "error": m.error,
            "duration_s": m.duration_s, "dims": case.stored_dims, "metrics": dict(m.metrics), "path": m.path,
            "attempts": m.attempts, "previous_errors": list(m.previous_errors), "series": list(m.series),
            "evidence": dict(m.evidence)}


def to_json(run: RunResult, findings: dict | None = None) -> str:
    return json.dumps({"format_version": FORMAT_VERSION, "pgpathbench": tool_version(), "run": run.row,
                       "measurements": [measurement_json(run, c, m) for c in run.cases for m in c.measurements],
                       "link_probes": [asdict(p) for p in run.probes], **({"findings": findings} if findings else {})},
                      default=_default, indent=2)


def runs_to_json(runs: list[dict]) -> str:
    return json.dumps(runs, default=_default, indent=2)


def to_csv(run: RunResult) -> str:
    rows = [measurement_json(run, c, m) for c in run.cases for m in c.measurements]
    dims = sorted({k for m in rows for k in m["dims"]})
    metrics = sorted({k for m in rows for k in m["metrics"]})
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS + TOOL_FIELDS + [f"dim_{d}" for d in dims] + metrics)
    sessions = run.environment.sessions
    for m in rows:
        started = m["started_at"].isoformat() if isinstance(m["started_at"], datetime) else m["started_at"]
        machine = sessions[m["session"] - 1].machine if 0 < m["session"] <= len(sessions) else {}
        w.writerow([m[f] if f != "started_at" else started for f in FIELDS]
                   + [machine.get(f, "unknown") for f in TOOL_FIELDS]
                   + [m["dims"].get(d, "") for d in dims]
                   + [_csv_value(m["metrics"].get(k)) for k in metrics])
    return buf.getvalue()


def _csv_value(v: object) -> object:
    return "" if v is None else json.dumps(v) if isinstance(v, (dict, list)) else v
