"""Measuring tools below the studies: the measured spawn, pgbench, the psql COPY reference."""
