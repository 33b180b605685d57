"""remote-sampling (seed 004): sampling directly vs through postgres_fdw, and ANALYZE with analyze_sampling."""

from .study import RemoteSampling

__all__ = ["RemoteSampling"]
