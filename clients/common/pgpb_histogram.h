/*
 * The contract's histogram of iteration times (clients/CONTRACT.md "Iteration times"): whole
 * microseconds in log-linear buckets. A value v < 32 has its own bucket; otherwise, with
 * e = floor(log2(v)) and shift = e - 4, its bucket starts at (v >> shift) << shift and is
 * 1 << shift wide: 16 buckets per power of two, at most 6.25% of their values wide.
 * Recording is an index computation and an increment in a fixed array: nothing allocated,
 * no I/O. Included by pgpb_common.h (libpq and ODBC clients).
 */
#ifndef PGPB_HISTOGRAM_H
#define PGPB_HISTOGRAM_H

#include <stdint.h>
#include <stdio.h>

#define HIST_SUB_BITS 4                       /* 16 sub-buckets per power of two */
#define HIST_SUB (1 << HIST_SUB_BITS)
#define HIST_LINEAR (2 * HIST_SUB)            /* values below 32 have their own bucket */
#define HIST_BUCKETS (64 * HIST_SUB)          /* every uint64 value has its index below this */

static long long hist_counts[HIST_BUCKETS];
static uint64_t hist_min = UINT64_MAX, hist_max;

/* The index of v's bucket: v itself below 32, then 16 per power of two, ascending with v. */
static inline int hist_index(uint64_t v)
{
    if (v < HIST_LINEAR)
        return (int) v;
    int shift = 63 - __builtin_clzll(v) - HIST_SUB_BITS; /* e - 4, at least 1 */
    return (shift << HIST_SUB_BITS) + (int) (v >> shift); /* v >> shift is 16..31 */
}

/* LOWER, the smallest value of bucket i. */
static uint64_t hist_lower(int i)
{
    if (i < HIST_LINEAR)
        return (uint64_t) i;
    int shift = (i >> HIST_SUB_BITS) - 1;
    return (uint64_t) (HIST_SUB + (i & (HIST_SUB - 1))) << shift;
}

/* One iteration, from the clock reads (in seconds) that began and ended it, truncated to
 * whole microseconds. */
static inline void hist_record(double began, double ended)
{
    double us = (ended - began) * 1e6;
    uint64_t v = us > 0 ? (uint64_t) us : 0;
    hist_counts[hist_index(v)]++;
    if (v < hist_min)
        hist_min = v;
    if (v > hist_max)
        hist_max = v;
}

/* The JSON value: {"min":MIN,"max":MAX,"hist":[[LOWER,COUNT],...]}, non-empty buckets only. */
static void hist_print(FILE *f)
{
    fprintf(f, "{\"min\":%llu,\"max\":%llu,\"hist\":[", (unsigned long long) (hist_min == UINT64_MAX ? 0 : hist_min),
            (unsigned long long) hist_max);
    const char *sep = "";
    for (int i = 0; i < HIST_BUCKETS; i++) {
        if (hist_counts[i]) {
            fprintf(f, "%s[%llu,%lld]", sep, (unsigned long long) hist_lower(i), hist_counts[i]);
            sep = ",";
        }
    }
    fputs("]}", f);
}

#endif
