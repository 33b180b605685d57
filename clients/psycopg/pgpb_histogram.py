"""The contract's histogram of iteration times (clients/CONTRACT.md "Iteration times"), in Python:
pgpb_psycopg records into it, and the orchestrator (pgpathbench.tools.clients) reads the other clients'
histograms with the same bucket function. No imports: the client loads it from its own directory.

Whole microseconds in log-linear buckets: a value v < 32 has its own bucket; otherwise, with
e = floor(log2(v)) and shift = e - 4, its bucket starts at LOWER = (v >> shift) << shift and is
1 << shift wide (16 buckets per power of two, at most 6.25% of their values wide).
"""

SUB_BITS = 4              # 16 sub-buckets per power of two
SUB = 1 << SUB_BITS
LINEAR = 2 * SUB          # values below 32 have their own bucket
BUCKETS = 64 * SUB        # every value below 2**64 has its index below this


def bucket_index(v: int) -> int:
    """The index of v's bucket (v >= 0): v itself below 32, then 16 per power of two."""
    if v < LINEAR:
        return v
    shift = v.bit_length() - 1 - SUB_BITS   # e - 4, at least 1
    return (shift << SUB_BITS) + (v >> shift)  # v >> shift is 16..31


def bucket_lower(index: int) -> int:
    """LOWER, the smallest value of the bucket of that index."""
    if index < LINEAR:
        return index
    return (SUB + (index & (SUB - 1))) << ((index >> SUB_BITS) - 1)


def bucket(v: int) -> int:
    """LOWER of v's bucket: v below 32; e.g. 33 -> 32, 1000 -> 992."""
    return bucket_lower(bucket_index(v))


def bucket_width(lower: int) -> int:
    """How many whole values the bucket starting at LOWER holds: 1 below 32, else 1 << (e - 4)."""
    return 1 if lower < LINEAR else 1 << (lower.bit_length() - 1 - SUB_BITS)


class IterationHistogram:
    """Iteration times recorded into a fixed list of counts (an index and an increment each)."""

    def __init__(self) -> None:
        self.counts = [0] * BUCKETS
        self.min = None
        self.max = 0

    def record(self, began: float, ended: float) -> None:
        """One iteration, from the perf_counter reads that began and ended it, truncated to whole µs."""
        v = max(0, int((ended - began) * 1e6))
        self.counts[bucket_index(v)] += 1
        if self.min is None or v < self.min:
            self.min = v
        if v > self.max:
            self.max = v

    def json(self) -> str:
        """The JSON value: {"min":MIN,"max":MAX,"hist":[[LOWER,COUNT],...]}, non-empty buckets only."""
        hist = ",".join(f"[{bucket_lower(i)},{n}]" for i, n in enumerate(self.counts) if n)
        return f'{{"min":{self.min or 0},"max":{self.max},"hist":[{hist}]}}'
