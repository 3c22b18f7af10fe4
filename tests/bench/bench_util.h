/* bench_util.h - what the benchmarks share: a monotonic clock in seconds
 * and quantiles of a sample. */
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

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
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
