"""file-fdw-tpch (seed 002): TPC-H on regular tables vs file_fdw over the same files."""

from .study import FileFdwTpch

__all__ = ["FileFdwTpch"]
