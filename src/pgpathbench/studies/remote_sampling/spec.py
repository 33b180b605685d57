"""remote-sampling's vocabulary: its dimensions, presets, metric catalogue, the names of its
tables and views, and the parsers of its options.

Row counts are written canonically ('10k', '1M'): they name the tables (`t_10M`), whose
identifiers keep their case, so every statement names them through psycopg.sql.Identifier.
"""

from __future__ import annotations

import re

from ... import validate
from ...matrix import Dimension, Preset
from ...metrics import Metric, catalogue
from ...results.baseline import Baseline
from ..base import Role, Vocabulary, BANDWIDTH, LATENCY, PG, TLS, EVIDENCE, UNTIL_CI, knob_families
from ...servers.paths import DIRECT

NA = "-"   # the value of a dimension the case's test does not have
SAMPLING_METHODS = ("full", "system", "bernoulli", "random")
ANALYZE_MODES = ("local", "off", "auto", "random", "system", "bernoulli")
ROW_BYTES = 250            # on disk per row of the test table (heap, with pad), for the disk check
FRACTIONS_PAPER = ("0.01", "0.02", "0.05", "0.1", "0.2", "0.3", "0.5", "0.7", "0.9", "1")
UNITS = {"": 1, "k": 1000, "m": 1_000_000}


def parse_rows(text: str) -> str:
    """'10k' -> '10k', '1000000' -> '1M': a row count, canonically written."""
    m = re.fullmatch(r"([0-9]{1,15})([kKmM]?)", text.strip())
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"'{text}' is not a row count (e.g. 10k, 1M, 10M)")
    n = int(m.group(1)) * UNITS[m.group(2).lower()]
    validate.at_most(n, validate.MAXIMA["rows"], text, "rows")
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def row_count(text: str) -> int:
    """A canonical row count ('10k', '1M', '1500') -> the number of rows."""
    return int(text[:-1]) * UNITS[text[-1].lower()] if text[-1] in "kM" else int(text)


def parse_fraction(text: str) -> str:
    try:
        f = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a fraction (e.g. 0.01)") from None
    if not 0 < f <= 1:
        raise ValueError(f"a sample fraction is in (0, 1], got {text}")
    return f"{f:g}"


def parse_target(text: str) -> str:
    if not validate.digits(text) or not 1 <= int(text) <= 10000:
        raise ValueError(f"a statistics target is a whole number from 1 to 10000, got '{text}'")
    return str(int(text))


def table_name(rows: str) -> str:
    """The sampled table of a size: 't_10k', 't_10M' (a case-sensitive identifier)."""
    return f"t_{rows}"


def view_name(rows: str, method: str, fraction: str) -> str:
    """The view that samples a table where it lives: 'v_10k_full', 'v_10k_system_0_1'."""
    return f"v_{rows}_full" if method == "full" else f"v_{rows}_{method}_{fraction.replace('.', '_')}"


# What ANALYZE's statistics miss, against the whole table (unit 1, lower is better).
STATISTICS_ERRORS = {
    "ndistinct_error": "|estimated - true| / true number of distinct values of column a (uniform ints)",
    "null_frac_error": "|estimated - true| fraction of NULLs of column c",
    "mcv_freq_error": "mean |estimated - true| frequency of column c's most common values",
    "histogram_error": "mean relative deviation of the share of the table's rows in each bucket of column b's "
                       "histogram from 1/buckets",
}
# SQL texts kept with the measurement as evidence of where the sampling ran: facts, not figures.
SQL_TEXTS = {
    "remote_sql": "through the FDW: the SQL postgres_fdw sent (sampling: EXPLAIN VERBOSE's Remote SQL; analyze: "
                  "pg_stat_statements on the source)",
    "remote_view_sql": "sampling through the FDW: the definition of the view the remote SQL reads (where the "
                       "sampling happens)",
    "local_filter": "sampling through the FDW: the filters applied on arrival (EXPLAIN VERBOSE), empty when the "
                    "source sampled",
}
METRICS = catalogue(
    Metric("duration_ms", "ms", "lower", "wall time of the sampling query (count of the sampled rows) or of "
           "ANALYZE VERBOSE, as the client sees it; connection set-up excluded"),
    Metric("rows_table", "rows", "none", "rows in the sampled table"),
    Metric("rows_sampled", "rows", "none", "sampling: rows the query counted; analyze: rows in ANALYZE's sample "
           "(its VERBOSE message)"),
    Metric("rows_transferred", "rows", "none", "sampling: rows postgres_fdw sent over the link (every row for "
           "full, the sample otherwise; 0 when direct)"),
    Metric("sampled_fraction", "1", "none", "sampling: rows_sampled / rows_table"),
    *(Metric(name, "1", "lower", f"analyze: {meaning}") for name, meaning in STATISTICS_ERRORS.items()),
    *(Metric(name, "text", "none", meaning) for name, meaning in SQL_TEXTS.items()),
    Metric("tls", "text", "none", "through the FDW: the TLS its connection to the source negotiated (protocol, "
           "cipher, bits; off: none), from the source's pg_stat_ssl (runs with --tls on)"),
)


DIMENSIONS = {
    "test": Dimension("test", "sampling: sample with a query; analyze: ANALYZE", ("sampling", "analyze")),
    "rows": Dimension("rows", "rows in the sampled table (10k, 1M, 10M, 100M)", parse=parse_rows),
    "method": Dimension("method", "sampling test: full (transfer all, sample locally), TABLESAMPLE system, "
                        "bernoulli, or random() < fraction", SAMPLING_METHODS),
    "fraction": Dimension("fraction", "sampling test: fraction of the table sampled", parse=parse_fraction),
    "access": Dimension("access", "sampling test: on the source itself, or through postgres_fdw",
                        ("direct", "fdw")),
    "analyze_sampling": Dimension("analyze_sampling", "analyze test: ANALYZE the table itself (local), or the "
                                  "foreign table with this analyze_sampling", ANALYZE_MODES),
    "stats_target": Dimension("stats_target", "analyze test: default_statistics_target", parse=parse_target),
    "latency": LATENCY,
    "pg": PG,
    "tls": TLS,   # the FDW hop's: postgres_fdw's connection to the source (direct cases have none: off)
}
PARAMETERS = {"bandwidth": BANDWIDTH, "evidence": EVIDENCE, "until_ci": UNTIL_CI}
# quick: target 100 samples 30,000 rows of 100k (a sample size within a few percent: TABLESAMPLE
# SYSTEM draws whole pages) and all of 10k, as the earlier quick's only sampled point did; the
# whole-table targets and fraction 1 (every row, as full) are left to the larger presets.
PRESETS = {
    "quick": Preset("quick", "10k and 100k rows, 3 fractions, target 100, 6 rounds", 6, {},
                    {"rows": ("10k", "100k"), "fraction": ("0.01", "0.1", "0.5"), "stats_target": ("100",)}),
    # 6 rounds: the fewest whose median has a 95% interval (1 - 2/2^6); with 5 every ratio of the
    # paper run (20261122-220045-6728) read "too few rounds".
    "standard": Preset("standard", "10k and 1M rows, the seed's fractions, targets 100-10000, 6 rounds", 6, {},
                       {"rows": ("10k", "1M")}),
    "paper": Preset("paper", "the seed: 10k and 10M rows (100M with --rows, disk checked), 6 rounds", 6, {},
                    {"rows": ("10k", "10M")}),
}
DEFAULT_DIMS = {"test": ("sampling", "analyze"), "rows": ("10k", "1M"), "method": SAMPLING_METHODS,
                "fraction": FRACTIONS_PAPER, "access": ("direct", "fdw"), "analyze_sampling": ANALYZE_MODES,
                "stats_target": ("100", "1000", "10000"), "latency": (DIRECT,), "pg": ("17",),
                "tls": ("off",)}

# The seed's question is what the FDW costs: sampling through it over the same sample taken on the
# source (direct cases cross no link), ANALYZE of the foreign table over ANALYZE of the local one
# (the direct analyze case, analyze_sampling local) of the same size and statistics target.
BASELINE = Baseline("access", "direct", free=("latency", "analyze_sampling", "tls"))
# The seed's other question, read by the report only: through the FDW, transferring every row
# (`full`, sampled on arrival) over sampling on the source, the same sample fraction, link and
# size: full's duration / the method's, above 1 where sampling remotely is cheaper.
FULL_TRANSFER = Baseline("method", "full", inverse=True)

VOCABULARY = Vocabulary(
    name="remote-sampling", title="sampling directly vs through postgres_fdw, and ANALYZE with analyze_sampling",
    seeds=("004",), required_tools=("initdb", "postgres"),
    dimensions=DIMENSIONS, parameters=PARAMETERS, presets=PRESETS,
    default_dims=DEFAULT_DIMS, metrics=METRICS, primary_metric="duration_ms",
    knob_families=knob_families(), baseline=BASELINE,
    roles={"source": Role("source", "holds the sampled tables and their sampling views (a database of ours); "
                          "direct sampling and local ANALYZE run there", ("createdb",)),
           "external": Role("external", "holds foreign tables of the source (a database of ours per link); "
                            "sampling and ANALYZE through postgres_fdw run there", ("createdb", "postgres_fdw"),
                            reaches=("source",))})
