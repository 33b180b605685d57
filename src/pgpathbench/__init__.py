"""pgpathbench: a benchmark laboratory for PostgreSQL data-access paths."""

__version__ = "0.1.0"
