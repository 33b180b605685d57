"""The shape every study has, and what the runner hands it.

A study declares dimensions, parameters and presets; turns options into cases; prepares its
servers and data once per session; measures one repeat of one case; and turns stored
measurements into report tables. The runner owns the loop, the store and the servers' life.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from ..matrix import Case, Dimension, Parameter, Preset
from ..report import Plot, Table
from ..servers.binaries import PgBinaries
from ..servers.network import parse_bandwidth, parse_latency
from ..servers.topology import ServerScope


def _latency_value(text: str) -> str:
    return f"{parse_latency(text)}ms"


# Shared by every study with a remote role: the emulated link in front of it (see servers/network.py).
LATENCY = Dimension("latency", "round-trip time added by an emulated link to the remote role "
                    "(whole ms: 0,1ms,5ms; 0 = direct loopback)", parse=_latency_value)
DIRECT = "0ms"   # the latency value of a direct path (no emulated link)


def latencies_with_direct(requested) -> tuple[str, ...]:
    """The latency values a study's matrix needs: the direct path is always measured (local
    roles never cross a link), and each requested link for the remote role."""
    return tuple(dict.fromkeys((DIRECT, *requested)))


def links_requested(options: "StudyOptions") -> bool:
    """Whether the remote role sits behind an emulated link (then on its own network stack)."""
    return options.dims["latency"] != (DIRECT,) or bool(options.params.get("bandwidth"))


def measured_rtt(probes: list[dict]) -> dict[str, float]:
    """Per link name: the median of its probes' median round trips (what reports quote)."""
    by: dict[str, list[float]] = {}
    for p in probes:
        by.setdefault(p["link"], []).append(p["rtt_median_ms"])
    return {link: statistics.median(v) for link, v in by.items()}


def link_text(pg: str, latency: str, rtt: dict[str, float], name: str = "source") -> str:
    """'direct, 0.02 ms' or '2ms link, 2.33 ms': the path to a role, with its measured RTT."""
    measured = rtt.get(pg_link_name(pg, f"{name}_{latency}"))
    where = "direct" if latency == DIRECT else f"{latency} link"
    return f"{where}, {measured:.2f} ms" if measured is not None else where


# Shared by every study: the PostgreSQL major of its managed servers (15 Debian's, 16-18 Maven Central's).
PG = Dimension("pg", "PostgreSQL major version of the managed servers (15: Debian; 16, 17, 18: Maven Central)",
               ("15", "16", "17", "18"))


def pg_link_name(major: str, name: str) -> str:
    """The name a link gets in the store: the scope's prefix and the study's own name."""
    return f"pg{major}_{name}"


BANDWIDTH = Parameter("bandwidth", "bandwidth limit of emulated links, each direction (e.g. 1gbit, 100mbit)",
                      parse_bandwidth)


@dataclass(frozen=True)
class StudyOptions:
    """Validated, frozen options of one study in one run (stored with the run, for resume)."""
    study: str
    preset: str
    repeat: int
    params: Mapping[str, Any]
    dims: Mapping[str, tuple[str, ...]]

    def to_json(self) -> dict:
        return {"study": self.study, "preset": self.preset, "repeat": self.repeat,
                "params": dict(self.params), "dims": {k: list(v) for k, v in self.dims.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "StudyOptions":
        return cls(d["study"], d["preset"], d["repeat"], d["params"],
                   {k: tuple(v) for k, v in d["dims"].items()})


@dataclass
class StudyEnv:
    """What a study works with during a session, for one PostgreSQL major: its options, the
    major's binaries and servers, a log line."""
    options: StudyOptions
    bins: PgBinaries
    servers: ServerScope
    log: Callable[[str], None]
    fingerprint: dict = field(default_factory=dict)   # the study adds client versions, sizes...
    state: dict = field(default_factory=dict)         # the study's own handles between calls


class Study(Protocol):
    name: str
    title: str
    seeds: tuple[str, ...]
    required_tools: tuple[str, ...]          # checked before anything is written
    dimensions: Mapping[str, Dimension]
    parameters: Mapping[str, Parameter]
    presets: Mapping[str, Preset]
    # The metric `pgpathbench compare` sets two runs side by side on (a key of measurement
    # metrics), and which way is better: fdw-overhead's is 'tps', higher is better.
    primary_metric: str
    higher_is_better: bool

    def cases(self, options: StudyOptions) -> list[Case]: ...
    def prepare(self, env: StudyEnv) -> None: ...
    def measure(self, env: StudyEnv, case: Case) -> dict: ...
    def report(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Table]: ...

    def plots(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Plot]:
        """The charts of a run, from the same inputs as report(): `run` (the stored run row),
        `measurements` (every stored measurement of the run, all studies, with dims and
        metrics; failed ones have ok false) and `probes` (the link probes). Values are medians
        with their 95% CI as error bars (stats.summarise), labels carry units. A study
        without charts returns []. Drawn by report/html.py (`pgpathbench report RUN --html`)."""
        ...
