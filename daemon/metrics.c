/* metrics.c - latency histograms and the helpers of metrics.h.
 *
 * Any thread observes (relaxed atomic adds, no locks); readers take the
 * bucket counts one by one, so a reader racing a writer may see a sample in
 * its bucket but not yet in `count` or `sum_ns`. Readers therefore derive
 * totals from the buckets themselves (omld_hist_quantile, status.c).
 *
 * Bucket i (0 <= i < 24) holds samples s with bound(i-1) < s <= bound(i),
 * bound(i) = 10 us * 10^(i/4); the last bucket holds everything above
 * bound(23) = 5.62 s (the +Inf bucket). The bounds are a literal table so
 * that observing (in ns) and exposing (in s) use the very same numbers. */
#include "metrics.h"

#include "ops.h"

#include <time.h>

#define NFINITE (OMLD_HIST_BUCKETS - 1)

/* 1e-5 * 10^(i/4) seconds, i = 0..23. */
static const double BOUND_S[NFINITE] = {
    1e-05, 1.7782794100389228e-05, 3.1622776601683795e-05, 5.6234132519034912e-05,
    1e-04, 1.7782794100389228e-04, 3.1622776601683795e-04, 5.6234132519034912e-04,
    1e-03, 1.7782794100389228e-03, 3.1622776601683795e-03, 5.6234132519034912e-03,
    1e-02, 1.7782794100389228e-02, 3.1622776601683795e-02, 5.6234132519034912e-02,
    1e-01, 1.7782794100389228e-01, 3.1622776601683795e-01, 5.6234132519034912e-01,
    1e+00, 1.7782794100389228e+00, 3.1622776601683795e+00, 5.6234132519034912e+00,
};

/* The same bounds in whole nanoseconds (floor), for the hot path: a sample
 * of n ns goes to the first bucket with n <= BOUND_NS[i]. */
static const uint64_t BOUND_NS[NFINITE] = {
    10000ull,      17782ull,      31622ull,      56234ull,
    100000ull,     177827ull,     316227ull,     562341ull,
    1000000ull,    1778279ull,    3162277ull,    5623413ull,
    10000000ull,   17782794ull,   31622776ull,   56234132ull,
    100000000ull,  177827941ull,  316227766ull,  562341325ull,
    1000000000ull, 1778279410ull, 3162277660ull, 5623413251ull,
};

double omld_hist_bound(int i)
{
    if (i < 0)
        return 0.0;
    if (i >= NFINITE)
        return BOUND_S[NFINITE - 1];
    return BOUND_S[i];
}

void omld_hist_observe(omld_histogram *h, uint64_t ns)
{
    /* Binary search for the first bound >= ns (NFINITE if none). */
    int lo = 0, hi = NFINITE;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ns <= BOUND_NS[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    atomic_fetch_add_explicit(&h->bucket[lo], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

/* Prometheus histogram_quantile(): rank = q * total; the first bucket whose
 * cumulative count reaches the rank; linear inside it from its lower bound
 * (0 for the first) to its upper bound. A rank in the +Inf bucket answers
 * the highest finite bound, since nothing is known beyond it. */
double omld_hist_quantile(const omld_histogram *h, double q)
{
    uint64_t c[OMLD_HIST_BUCKETS], total = 0;
    for (int i = 0; i < OMLD_HIST_BUCKETS; i++) {
        c[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        total += c[i];
    }
    if (total == 0 || !(q > 0.0))
        return 0.0;
    if (q > 1.0)
        q = 1.0;
    double rank = q * (double)total;
    uint64_t below = 0;
    for (int i = 0; i < OMLD_HIST_BUCKETS; i++) {
        if ((double)(below + c[i]) >= rank && c[i] > 0) {
            if (i == NFINITE)
                return BOUND_S[NFINITE - 1];
            double lo = i == 0 ? 0.0 : BOUND_S[i - 1];
            double hi = BOUND_S[i];
            return lo + (hi - lo) * ((rank - (double)below) / (double)c[i]);
        }
        below += c[i];
    }
    return BOUND_S[NFINITE - 1]; /* not reached: the last non-empty bucket qualifies */
}

/* The label of a query kind is the name of its row in the operation table. */
const char *omld_query_kind_name(int kind)
{
    int n;
    const omld_op *ops = omld_ops(&n);
    for (int i = 0; i < n; i++)
        if (ops[i].route == OMLD_ROUTE_QUERY && ops[i].metric == kind)
            return ops[i].name;
    return "unknown";
}

uint64_t omld_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t omld_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
