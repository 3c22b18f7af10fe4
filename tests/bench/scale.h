/* scale.h - `omld-bench --items N`: omld measured at a catalogue size
 * (scale.c). */
#ifndef OMLD_BENCH_SCALE_H
#define OMLD_BENCH_SCALE_H

#include <stdint.h>

/* Runs every figure at n_items items of the catalogue `kind`
 * (catalogue.h), streaming triplets at `rate` per second for `seconds`
 * for the freshness figure and at `load_rate` per second (0: none) over
 * `load_connections` connections while the queries are timed; faiss: the
 * recall queries through faiss too (when installed). 0, or 1 on failure. */
int omld_scale_bench(int64_t n_items, double rate, double seconds, double load_rate,
                     int load_connections, int kind, int faiss,
                     const char *const *omld_args /* NULL-terminated extra options */);

#endif
