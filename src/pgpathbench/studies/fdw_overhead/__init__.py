"""fdw-overhead (seeds 000, 001): pgbench over a local table vs postgres_fdw."""

from .study import FdwOverhead

__all__ = ["FdwOverhead"]
