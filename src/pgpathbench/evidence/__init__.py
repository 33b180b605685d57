"""Evidence of what the servers did during one measurement (statistics views, wait events,
CPU from /proc), recorded beside the client-side metrics; see collect.collected()."""

from .collect import Evidence, Watched, collected
from .summary import REMOTE_METRICS, flush_statistics, remote_metrics, summary

__all__ = ["Evidence", "Watched", "collected", "summary", "remote_metrics", "REMOTE_METRICS", "flush_statistics"]
