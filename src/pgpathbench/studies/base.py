"""The shape every study has, and what the runner hands it.

A study is a package of three modules (studies/<name>/): spec.py declares its vocabulary
(dimensions, parameters, presets, the metric catalogue and the primary metric); study.py turns
options into cases, prepares servers and data once per session and major, and measures one
repeat of one case; report.py turns the result model (results/model.py) into its tables and
plots. The runner owns the loop, the store and the servers' life; the shared report code owns
the run header, failed measurements and the environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

import psycopg

from .. import validate
from ..errors import UserError
from ..evidence import Watched
from ..results.baseline import Baseline
from ..results.convergence import MIN_ROUNDS
from ..matrix import Case, Dimension, KnobFamily, Parameter, Preset, StudyOptions
from ..metrics import Metric
from ..report import Plot, Table
from ..results import upgrade
from ..results.model import StudyResult
from ..results.upgrade import StoredRun
from ..servers import guc, parse_check, tls
from ..servers.binaries import PgBinaries
from ..servers.network import parse_bandwidth, parse_latency
from ..servers.paths import DIRECT, NetworkPath
from ..servers.topology import ServerScope


def _latency_value(text: str) -> str:
    return f"{parse_latency(text)}ms"


# Shared by every study with a remote role: the emulated link in front of it (see servers/network.py).
LATENCY = Dimension("latency", "round-trip time added by an emulated link to the remote role "
                    "(whole ms: 0,1ms,5ms; 0 = direct loopback)", parse=_latency_value)


def latencies_with_direct(requested) -> tuple[str, ...]:
    """The latency values a study's matrix needs: the direct path is always measured (local
    roles never cross a link), and each requested link for the remote role."""
    return tuple(dict.fromkeys((DIRECT, *requested)))


def links_requested(options: "StudyOptions") -> bool:
    """Whether the remote role sits behind an emulated link (then on its own network stack)."""
    return options.dims["latency"] != (DIRECT,) or bool(options.params.get("bandwidth"))


# Shared by the studies whose clients or FDW hop connect over TCP: TLS on that hop (servers/tls.py).
# A knob: compare pairs runs that differ only in it case by case, the report has its cost per case.
TLS = Dimension("tls", "TLS on the TCP hop: off, or on (the managed servers get a certificate of the run's CA, "
                "which clients verify: sslmode=verify-full); a user server's TLS is its DSN's", tls.VALUES,
                knob=True, quiet=tls.OFF)


def tls_values(options: "StudyOptions") -> tuple[str, ...]:
    """The run's --tls values (off for runs stored before the dimension)."""
    return tuple(options.dims.get("tls", (tls.OFF,)))


def check_tls_given(options: "StudyOptions", given: set[str]) -> None:
    """--tls varies TLS on managed servers only: with a user server, TLS is its DSN's."""
    dsns = user_roles(options)
    if "tls" in given and dsns:
        raise UserError(f"--tls: your server (--server {', '.join(sorted(dsns))}) uses the TLS its DSN asks for "
                        "(sslmode=...), which pgpathbench does not vary; leave --tls out")


# Shared by every study: the PostgreSQL major of its managed servers (15 Debian's, 16-18 Maven Central's).
PG = Dimension("pg", "PostgreSQL major version of the managed servers (15: Debian; 16, 17, 18: Maven Central)",
               ("15", "16", "17", "18"))

def _on_off(text: str) -> str:
    if text not in ("on", "off"):
        raise ValueError("on or off")
    return text


# Shared by every study: whether each measurement carries its evidence (evidence/, pgbench's log).
EVIDENCE = Parameter("evidence", "collect each measurement's evidence: what the servers did (statistics, "
                     "CPU, wait events) and pgbench's log (on, off)", _on_off, "on")


def evidence_on(options: "StudyOptions") -> bool:
    return options.params["evidence"] == "on"


# Shared by every study: adaptive repetition (results/convergence.py). A case stops being measured once
# the 95% interval of its primary metric, or of its ratio to its baseline where the study declares one,
# lies within PCT% of the median, after MIN_ROUNDS (the first count whose median interval covers 95%:
# 6 rounds; with 5 the min..max covers 93.75%), and up to --repeat rounds.
def _until_ci(text: str) -> float:
    return validate.percent(text, maximum=100)


UNTIL_CI = Parameter("until_ci", f"adaptive repetition: stop measuring a case once the 95% CI of its primary "
                     "metric (of its ratio to its baseline, where the study has one: fdw-overhead's local) lies "
                     f"within PCT% of the median (at least {MIN_ROUNDS} rounds, at most --repeat); rounds stay "
                     "interleaved over the cases still open, a baseline open while its cases are", _until_ci)


def until_ci(options: "StudyOptions") -> float | None:
    return options.params.get("until_ci")


BANDWIDTH = Parameter("bandwidth", "bandwidth limit of emulated links, each direction (e.g. 1gbit, 100mbit)",
                      parse_bandwidth)


# Shared by every study: `--set NAME=V1,V2`, a server setting as a knob dimension set.NAME
# (servers/guc.py: checked in check(), verified by the server after prepare(), applied per case).
SET = guc.FAMILY


def knob_families(*families: KnobFamily) -> dict[str, KnobFamily]:
    """A study's knob families by prefix: its own, and --set."""
    return {f.prefix: f for f in (*families, SET)}


@dataclass
class StudyEnv:
    """What a study works with during a session, for one PostgreSQL major: its options, the
    major's binaries and servers, a log line, its own handles between calls (`state`: the typed
    object its prepare() makes, a dataclass of its package such as InterfacesState), the
    connections it keeps across measurements (kept_connection), and what --set and --fdw-option
    keep in force (`knobs`)."""
    options: StudyOptions
    major: str
    bins: PgBinaries
    servers: ServerScope
    log: Callable[[str], None]
    state: Any = None
    kept: dict = field(default_factory=dict)
    knobs: guc.KnobState = field(default_factory=guc.KnobState)

    def kept_connection(self, key, connect: Callable[[], psycopg.Connection]) -> psycopg.Connection:
        """A connection kept across measurements (its set-up is not what is measured), made by
        `connect` on first use, and again once lost or closed by close_kept(). Every connection a
        study keeps comes from here, so that a server restart (--set of a postmaster setting)
        closes them all in one place and none is found broken by the next measurement."""
        conn = self.kept.get(key)
        if conn is None or conn.closed:
            conn = self.kept[key] = connect()
        return conn

    def close_kept(self) -> None:
        """Every kept connection closed (before the servers restart); made again at next use."""
        for conn in self.kept.values():
            with contextlib.suppress(Exception):
                conn.close()
        self.kept.clear()


@dataclass
class Setup:
    """What prepare() set up, for the run's fingerprint: tool versions (name -> version) and the
    study's own facts (scale, sizes, plans...), kept per major."""
    tools: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    # Parameters chosen by measuring (param -> {key: value}), merged into the run's stored options
    # so that a resumed run uses them rather than measuring again (fdw-overhead's --rate 0.6x).
    pinned: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class Role:
    """A server a study uses, and whether it can be the user's own (`--server ROLE=DSN`)."""
    name: str
    what: str                                 # what the study keeps and does there
    needs: tuple[str, ...] | None = None      # a user server's requirements (servers/user_checks.py); None: it cannot
    why_not: str = ""                         # when it cannot: why, and what would make it possible
    reaches: tuple[str, ...] = ()             # roles whose server this one connects to (postgres_fdw)
    # More requirements when a dimension takes a value ("target=fdw_local": postgres_fdw runs there then).
    needs_when: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def needs_for(self, dims: Mapping[str, tuple[str, ...]]) -> list[tuple[str, str | None]]:
        """(requirement, the DIM=VALUE that asks for it, or None) for a run of these dimensions."""
        found = [(need, None) for need in self.needs or ()]
        for when, needs in self.needs_when.items():
            dim, _, value = when.partition("=")
            found += [(need, when) for need in needs if value in dims.get(dim, ())]
        return found

    def needs_text(self) -> str:
        """Its requirements in words, for `pgpathbench studies`."""
        return ", ".join([*(self.needs or ()), *(f"{need} with --{when.replace('=', ' ')}"
                                                 for when, needs in self.needs_when.items() for need in needs)])


def user_roles(options: StudyOptions) -> frozenset[str]:
    """The roles given as user servers (--server ROLE=DSN), as the run's options store them."""
    return frozenset(options.params.get("servers") or ())


def only_served(options: StudyOptions, given: set[str], served: Mapping[str, tuple[str, ...]],
                refusal: Callable[[str, str], str]) -> StudyOptions:
    """The cases a user server can run: in each dimension of `served`, its values only. A value it
    cannot serve is refused (UserError(refusal(dimension, value))) when its option was given, and
    left out otherwise (the study's log says why)."""
    dims = dict(options.dims)
    for dim, ok in served.items():
        unserved = [v for v in dims[dim] if v not in ok]
        if unserved and dim in given:
            raise UserError(refusal(dim, unserved[0]))
        dims[dim] = tuple(v for v in dims[dim] if v in ok)
    return dataclasses.replace(options, dims=dims)


@dataclass(frozen=True)
class Vocabulary:
    """What a study's spec.py declares, and everything the CLI, the runner and compare read of it."""
    name: str                                # "fdw-overhead"
    title: str
    seeds: tuple[str, ...]
    required_tools: tuple[str, ...]          # checked before anything is written
    dimensions: Mapping[str, Dimension]
    parameters: Mapping[str, Parameter]
    presets: Mapping[str, Preset]
    default_dims: Mapping[str, tuple[str, ...]]
    metrics: Mapping[str, Metric]            # every figure a measurement carries (metrics.py)
    primary_metric: str                      # the key of `metrics` compare and summaries use
    # Open-ended knob dimensions (matrix.KnobFamily), by prefix: `--fdw-option fetch_size=1,100`.
    knob_families: Mapping[str, KnobFamily] = field(default_factory=dict)
    # The servers it uses, by role: which can be a user server (--server ROLE=DSN) and what it needs.
    roles: Mapping[str, Role] = field(default_factory=dict)
    # The case each case is compared with in the same round (results/baseline.py), when the
    # study's question is a ratio: its report's ratios and --until-ci read it. None: each case
    # stands on its own metric.
    baseline: Baseline | None = None
    # Its rules for runs stored by its older versions (results/upgrade.py: each says which), after
    # the one every study has: a parameter a run stored before it existed takes its default.
    upgrades: tuple[Callable[[StoredRun], None], ...] = ()

    def __post_init__(self) -> None:
        if self.primary_metric not in self.metrics:
            raise ValueError(f"{self.name}: primary metric {self.primary_metric} is not in its catalogue")
        if self.baseline is not None and self.baseline.dimension not in self.dimensions:
            raise ValueError(f"{self.name}: baseline dimension {self.baseline.dimension} is not a dimension")


class Declared:
    """A study class whose declarations are its spec's Vocabulary (`vocabulary = spec.VOCABULARY`)."""
    vocabulary: Vocabulary

    def __getattr__(self, attr: str):
        if attr in Vocabulary.__dataclass_fields__:
            return getattr(self.vocabulary, attr)
        raise AttributeError(attr)

    def refine(self, options: StudyOptions, given: set[str]) -> StudyOptions:
        """Options the study derives from others, before its cases are made (`given`: the
        dimensions named on the command line); UserError for combinations it refuses."""
        return options

    def upgrade(self, stored: StoredRun) -> None:
        """A run of this study stored by an older version, brought to today's shape (results/upgrade.py
        calls it for every run read back: the registry registers it)."""
        upgrade.fill_parameters(stored, {name: p.default for name, p in self.parameters.items()})
        for rule in self.upgrades:
            rule(stored)

    def check(self, options: StudyOptions, bins: PgBinaries) -> None:
        """Checks that need the binaries (a user's script parsed by pgbench), before anything is
        written; UserError naming the option. Here: --set's names, contexts and values' form (an
        override calls it too)."""
        guc.check(options, bins)

    def user_sql(self, options: StudyOptions) -> list[parse_check.Sql]:
        """The SQL of the user's files the run sends as it is (a --script's commands), which a server
        parses before anything is written (servers/parse_check.py)."""
        return []

    def check_space(self, options: StudyOptions, workspace) -> None:
        """The workspace's free space against what the run's data takes there, before anything is
        written; UserError naming the option that sizes the data."""

    def server_binaries(self, options: "StudyOptions", bins: PgBinaries) -> PgBinaries:
        """The build the study's managed servers of this major run: the run's (`bins`), unless the
        study needs another (file-fdw-tpch's Citus); UserError naming the option when it is missing."""
        return bins

    def probe(self, env: "StudyEnv") -> list[dict]:
        """Timings the study takes before and after each round beside the links' round trips
        (stored alike: {"link", "median_ms", "p95_ms", "min_ms", "n"}), e.g. a one-row foreign scan."""
        return []

    def expected_measurement_s(self, options: StudyOptions) -> float | None:
        """About how long one measurement takes, for the plan's estimate (None: the store's history on this
        host tells, where it can: plan.py)."""
        return None

    def check_user_servers(self, options: StudyOptions, facts: Mapping[str, Any], dsns: Mapping[str, Any]) -> None:
        """Checks that need what the user's servers say of themselves (servers/user_checks.Facts by
        role: their versions...) or hold (dsns: servers/user.UserDsn by role, to read from), before
        anything is written; UserError naming the option."""

    def before_measure(self, env: "StudyEnv", case: Case) -> None:
        """What a measurement needs done first, outside its timing and its evidence (a vacuum)."""

    def watched(self, env: "StudyEnv", case: Case) -> list[Watched]:
        """The servers a case's measurement involves, whose activity is its evidence."""
        return []

    def evidence_metrics(self, env: "StudyEnv", case: Case, metrics: Mapping[str, Any], evidence: dict) -> dict:
        """Figures the study derives from a measurement's evidence, stored as metrics beside the
        measured ones; called after the evidence is collected, outside the timing, so it may also
        measure what the timed run must not pay for (fdw-overhead's statement passes) and add it
        to `evidence`."""
        return {}

    def findings(self, result: StudyResult) -> dict:
        """What the study's report concludes that the export carries beside the measurements
        (fdw-overhead's knee per path); {} for none."""
        return {}


class Study(Protocol):
    """A study: its spec's Vocabulary (read as attributes: study.name, study.metrics... see
    Declared), and what it does."""
    vocabulary: Vocabulary

    def cases(self, options: StudyOptions) -> list[Case]: ...
    def prepare(self, env: StudyEnv) -> Setup: ...
    def path(self, case: Case) -> NetworkPath | None:
        """The network path the case's measurement crosses (its id is stored with it), or None."""
        ...
    def measure(self, env: StudyEnv, case: Case) -> dict:
        """Metrics of one repeat (numbers); the key "series" may hold per-second points."""
        ...
    def refine(self, options: StudyOptions, given: set[str]) -> StudyOptions: ...
    def upgrade(self, stored: StoredRun) -> None: ...
    def check(self, options: StudyOptions, bins: PgBinaries) -> None: ...
    def user_sql(self, options: StudyOptions) -> list[parse_check.Sql]: ...
    def check_space(self, options: StudyOptions, workspace) -> None: ...
    def server_binaries(self, options: StudyOptions, bins: PgBinaries) -> PgBinaries: ...
    def expected_measurement_s(self, options: StudyOptions) -> float | None: ...
    def probe(self, env: StudyEnv) -> list[dict]: ...
    def check_user_servers(self, options: StudyOptions, facts: Mapping[str, Any], dsns: Mapping[str, Any]) -> None: ...
    def before_measure(self, env: StudyEnv, case: Case) -> None: ...
    def watched(self, env: StudyEnv, case: Case) -> list[Watched]: ...
    def evidence_metrics(self, env: "StudyEnv", case: Case, metrics: Mapping[str, Any], evidence: dict) -> dict: ...
    def report(self, result: StudyResult) -> list[Table]: ...
    def findings(self, result: StudyResult) -> dict: ...
    def plots(self, result: StudyResult) -> list[Plot]:
        """The charts of a run: medians with their 95% CI as error bars, labels with units."""
        ...
