"""The shape every study has, and what the runner hands it.

A study declares dimensions, parameters and presets; turns options into cases; prepares its
servers and data once per session; measures one repeat of one case; and turns stored
measurements into report tables. The runner owns the loop, the store and the servers' life.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from ..matrix import Case, Dimension, Parameter, Preset
from ..report import Table
from ..servers.binaries import PgBinaries
from ..servers.network import parse_bandwidth, parse_latency
from ..servers.topology import Servers


def _latency_value(text: str) -> str:
    return f"{parse_latency(text)}ms"


# Shared by every study with a remote role: the emulated link in front of it (see servers/network.py).
LATENCY = Dimension("latency", "round-trip time added by an emulated link to the remote role "
                    "(whole ms: 0,1ms,5ms; 0 = direct loopback)", parse=_latency_value)
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
    """What a study works with during a session: its options, binaries, servers, a log line."""
    options: StudyOptions
    bins: PgBinaries
    servers: Servers
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

    def cases(self, options: StudyOptions) -> list[Case]: ...
    def prepare(self, env: StudyEnv) -> None: ...
    def measure(self, env: StudyEnv, case: Case) -> dict: ...
    def report(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Table]: ...
