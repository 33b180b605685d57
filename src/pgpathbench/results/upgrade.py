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

Every run read back, from the results store or an export, passes `upgrade_run` (the one way in:
RunResult.from_rows, and the runner's --resume for its options): the rules here that need no
study, then the study's own (each study's spec.py declares them, the study registry registers
them: results/ knows no study). A rule is a small named function saying which versions stored
the shape it reads; no report or compare code looks for what an older version left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping


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
            _setup_v1(sections["setup"], key, value)
        elif isinstance(value, str):
            sections["tools"][key] = value
    return sections


# Version 1 kept a study's set-up facts of one major as STUDY_pgN (file_fdw_tpch_pg15), and
# file-fdw-tpch its plans beside them as STUDY_pgN_plans; version 2: setup[N][study-name].
V1_SETUP_KEY = re.compile(r"(?P<study>[a-z][a-z_]*?)_pg(?P<major>\d+)(?P<plans>_plans)?")


def _setup_v1(setup: dict, key: str, facts: dict) -> None:
    m = V1_SETUP_KEY.fullmatch(key)
    if m is None:   # a study's facts of every major (fdw_overhead): kept under its key
        setup.setdefault("", {})[key] = facts
        return
    study = setup.setdefault(m["major"], {}).setdefault(m["study"].replace("_", "-"), {})
    study.update({"plans": facts} if m["plans"] else facts)


# -- a whole run ---------------------------------------------------------------------------------
@dataclass
class StoredRun:
    """A run as stored (run row, planned cases, measurements, link probes: the store's rows or an
    export's objects), copied where the rules change it."""
    run: dict
    cases: list[dict]
    measurements: list[dict]
    probes: list[dict]

    @property
    def study_options(self) -> dict:
        """The options of the run's one study: study, preset, repeat, params, dims (a row without
        options, as tests build them, has nothing there to bring up)."""
        studies = self.run["options"]["studies"]
        return studies[0] if len(studies) == 1 else {"params": {}, "dims": {}}

    @property
    def params(self) -> dict:
        return self.study_options["params"]


StudyRule = Callable[[StoredRun], None]
STUDY_RULES: dict[str, StudyRule] = {}   # by study name; the study registry fills it (studies/__init__.py)


def register(study: str, rule: StudyRule) -> None:
    STUDY_RULES[study] = rule


def upgrade_run(run: Mapping, cases: Iterable[Mapping] = (), measurements: Iterable[Mapping] = (),
                probes: Iterable[Mapping] = ()) -> StoredRun:
    """A stored run in today's shape: its study's rules, then metrics by the model version that
    stored them. The fingerprint is upgraded where it is read (Fingerprint.from_json), the one
    shape it has either way. The rows given are not changed."""
    options = dict(run.get("options") or {})
    options["studies"] = [{**so, "params": dict(so.get("params") or {}), "dims": dict(so.get("dims") or {})}
                          for so in options.get("studies") or []]
    stored = StoredRun({**run, "options": options}, [_with_dims(c) for c in cases],
                       [_with_dims(m) for m in measurements], [dict(p) for p in probes])
    names = list(run.get("studies") or [])
    if len(names) == 1 and names[0] in STUDY_RULES:
        STUDY_RULES[names[0]](stored)
    version = int(options.get("model_version", 1))
    for m in stored.measurements:
        m["metrics"] = upgrade_metrics(m["study"], m.get("metrics") or {}, version)
    return stored


def _with_dims(row: Mapping) -> dict:
    """A copy of a case's or measurement's row whose dims the rules may fill; stored_dims: as stored."""
    stored = dict(row.get("dims") or {})
    return {**row, "dims": dict(stored), "stored_dims": stored}


# -- what study rules use --------------------------------------------------------------------------
def fill_parameters(stored: StoredRun, defaults: Mapping[str, Any]) -> None:
    """A parameter a run stored before it existed: its default, what that version ran with (today
    a run stores every parameter, the ones not given at their default)."""
    for name, value in defaults.items():
        stored.params.setdefault(name, value)


def fill_dimension(stored: StoredRun, name: str, value: Callable[[Mapping[str, str]], str]) -> None:
    """A dimension a run's cases lack (stored before it existed): the value its cases ran with,
    given their other dimensions. Their ids stay as stored: --resume finds its measurements by them."""
    for row in (*stored.cases, *stored.measurements):
        if name not in row["dims"]:
            row["dims"][name] = value(row["dims"])


def rename_paths(stored: StoredRun, rename: Callable[[str], str]) -> None:
    """Path ids as today names them: in the sessions' fingerprints, the link probes and the
    measurements that crossed them."""
    environment = stored.run.get("environment") or {}
    sessions = [dict(s) for s in environment.get("sessions") or []]
    for s in sessions:
        for key in ("paths", "links"):   # version 2's section, version 1's key
            if isinstance(s.get(key), dict):
                s[key] = {rename(name): path for name, path in s[key].items()}
    stored.run["environment"] = {**environment, "sessions": sessions}
    for p in stored.probes:
        p["link"] = rename(p["link"])
    for m in stored.measurements:
        if m.get("path"):
            m["path"] = rename(m["path"])
