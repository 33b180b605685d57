"""Reading runs stored by earlier versions: what changed, mapped onto today's model.

Model version 1 stored durations in seconds under `*_s` names (connect_s, duration_s...) beside
others in milliseconds; version 2 keeps every duration in milliseconds (`*_ms`), as the metric
catalogues declare. Rates (`*_per_s`) keep their names.

Up to version 2, a pgbench run that logged a random sample of its transactions (latency_log_rate
below 1) stored the sample's largest latency as latency_max_ms; version 3 gives latency_max_ms
only over every transaction (tools/pgbench_log.py). A sample's maximum is no run's maximum (one
was found below the run's average): it is not read as one. Its percentiles keep their meaning.

Fingerprint version 1 kept a session's facts in one flat dict (machine keys, servers, links,
client versions and study set-ups side by side); version 2 has fixed sections (fingerprint.py).
"""

from __future__ import annotations

from typing import Any, Mapping


def upgrade_metrics(study: str, metrics: Mapping[str, Any], version: int) -> Mapping[str, Any]:
    if version < 3 and metrics.get("latency_log_rate", 1) < 1 and "latency_max_ms" in metrics:
        metrics = {k: v for k, v in metrics.items() if k != "latency_max_ms"}
    if version >= 2:
        return metrics
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if key.endswith("_s") and not key.endswith("_per_s") and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            out[key[:-2] + "_ms"] = value * 1000.0
        else:
            out[key] = value
    return out


# The machine section's keys of a version-1 fingerprint.
MACHINE_KEYS = ("host", "cpu_model", "cores", "memory_bytes", "memory_limit_bytes", "kernel", "os", "python",
                "pgpathbench", "user", "load_avg_at_start")


def upgrade_fingerprint(d: Mapping[str, Any]) -> Mapping[str, Any]:
    """A session's stored fingerprint in version 2's sections; a version-1 one keeps its version."""
    if d.get("version", 1) >= 2:
        return d
    sections: dict[str, Any] = {"machine": {}, "servers": {}, "paths": {}, "tools": {}, "setup": {}, "version": 1}
    for key, value in d.items():
        if key in MACHINE_KEYS:
            sections["machine"][key] = value
        elif key == "servers":
            sections["servers"] = dict(value or {})
        elif key == "links":
            sections["paths"] = dict(value or {})
        elif isinstance(value, dict):
            sections["setup"].setdefault("", {})[key] = value
        elif isinstance(value, str):
            sections["tools"][key] = value
    return sections
