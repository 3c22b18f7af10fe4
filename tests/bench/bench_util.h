/* bench_util.h - what the benchmarks share: a monotonic clock in seconds,
 * this thread's CPU clock, and quantiles of a sample. */
#ifndef OMLD_BENCH_UTIL_H
#define OMLD_BENCH_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time in microseconds (oml-ann-bench's measure: a busy
 * shared machine moves it less than the wall clock). */
static inline double cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v[n / 2] of v (n > 0; sorted in place). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The q-quantile of v (n; sorted in place), NAN for an empty sample. */
static inline double quantile(double *v, int n, double q)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

#endif
