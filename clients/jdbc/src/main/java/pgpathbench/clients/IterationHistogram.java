/*
 * The contract's histogram of iteration times (clients/CONTRACT.md "Iteration times"), as
 * clients/common/pgpb_histogram.h: whole microseconds in log-linear buckets. A value v < 32 has its
 * own bucket; otherwise, with e = floor(log2(v)) and shift = e - 4, its bucket starts at
 * (v >> shift) << shift and is 1 << shift wide (16 buckets per power of two). Recording is an index
 * computation and an increment in a fixed array: nothing allocated, no I/O.
 */
package pgpathbench.clients;

final class IterationHistogram {
    static final int SUB_BITS = 4;               // 16 sub-buckets per power of two
    static final int SUB = 1 << SUB_BITS;
    static final int LINEAR = 2 * SUB;           // values below 32 have their own bucket
    static final int BUCKETS = 64 * SUB;         // every long >= 0 has its index below this

    private final long[] counts = new long[BUCKETS];
    private long min = Long.MAX_VALUE, max;

    /** The index of v's bucket (v >= 0): v itself below 32, then 16 per power of two. */
    static int index(long v) {
        if (v < LINEAR) return (int) v;
        int shift = 63 - Long.numberOfLeadingZeros(v) - SUB_BITS; // e - 4, at least 1
        return (shift << SUB_BITS) + (int) (v >>> shift);         // v >>> shift is 16..31
    }

    /** LOWER, the smallest value of bucket i. */
    static long lower(int i) {
        if (i < LINEAR) return i;
        int shift = (i >> SUB_BITS) - 1;
        return (long) (SUB + (i & (SUB - 1))) << shift;
    }

    /** One iteration, from the System.nanoTime reads that began and ended it, truncated to whole µs. */
    void record(long beganNs, long endedNs) {
        long v = Math.max(0, (endedNs - beganNs) / 1000);
        counts[index(v)]++;
        if (v < min) min = v;
        if (v > max) max = v;
    }

    /** The JSON value: {"min":MIN,"max":MAX,"hist":[[LOWER,COUNT],...]}, non-empty buckets only. */
    String json() {
        StringBuilder s = new StringBuilder();
        s.append("{\"min\":").append(min == Long.MAX_VALUE ? 0 : min).append(",\"max\":").append(max).append(",\"hist\":[");
        String sep = "";
        for (int i = 0; i < BUCKETS; i++) {
            if (counts[i] == 0) continue;
            s.append(sep).append('[').append(lower(i)).append(',').append(counts[i]).append(']');
            sep = ",";
        }
        return s.append("]}").toString();
    }
}
