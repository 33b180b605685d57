"""Measurements -> JSON and CSV, one object or row per measurement.

JSON (format_version 1): {"format_version": 1, "run": {...}, "measurements": [{run_id, study,
case_id, round, session, started_at, ok, error, duration_s, dims: {...}, metrics: {...}}],
"link_probes": [{link, round, phase, session, measured_at, rtt_median_ms, rtt_p95_ms, rtt_min_ms,
round_trips}]}.
CSV: the same fields, dims as dim_<name> columns and metrics as their own columns.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime

FORMAT_VERSION = 1
FIELDS = ["run_id", "study", "case_id", "round", "session", "started_at", "ok", "error", "duration_s"]


def _default(o: object) -> str:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def to_json(run: dict, measurements: list[dict], link_probes: list[dict]) -> str:
    return json.dumps({"format_version": FORMAT_VERSION, "run": run, "measurements": measurements,
                       "link_probes": link_probes}, default=_default, indent=2)


def runs_to_json(runs: list[dict]) -> str:
    return json.dumps(runs, default=_default, indent=2)


def to_csv(measurements: list[dict]) -> str:
    dims = sorted({k for m in measurements for k in m["dims"]})
    metrics = sorted({k for m in measurements for k in m["metrics"]})
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS + [f"dim_{d}" for d in dims] + metrics)
    for m in measurements:
        started = m["started_at"].isoformat() if isinstance(m["started_at"], datetime) else m["started_at"]
        w.writerow([m[f] if f != "started_at" else started for f in FIELDS]
                   + [m["dims"].get(d, "") for d in dims]
                   + [_csv_value(m["metrics"].get(k)) for k in metrics])
    return buf.getvalue()


def _csv_value(v: object) -> object:
    return "" if v is None else json.dumps(v) if isinstance(v, (dict, list)) else v
