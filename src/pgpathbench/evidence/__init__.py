"""Evidence of what the servers did during one measurement (statistics views, wait events,
CPU from /proc), recorded beside the client-side metrics; see collect.collected()."""

from .collect import Evidence, Watched, collected
from .summary import flush_statistics, summary

__all__ = ["Evidence", "Watched", "collected", "summary", "flush_statistics"]
