/* repl_fixture.h - what the replication tests share (test_replica,
 * test_failover): a redis-server on loopback for the whole group, small
 * items and triplets with known ids, and the check that two daemons answer
 * classify and retrieve bit for bit at one model version. cmocka asserts. */
#ifndef OMLD_REPL_FIXTURE_H
#define OMLD_REPL_FIXTURE_H

#include <jansson.h>
#include <sys/types.h>

#include "harness.h"
#include "omlclient.h"

#define REDIS_SERVER "/usr/bin/redis-server"
#define TIMEOUT_MS 20000
#define DIM 8
#define N_ITEMS 80
/* Checkpoints in the foreground: a background one forks, and under
 * AddressSanitizer the child can block forever in malloc on a lock another
 * thread held at the fork (glibc's malloc is fork-safe, ASan's allocator
 * in GCC 12 is not; seen with the checkpoint reads of this publisher).
 * checkpoint_done publishes both kinds the same way. */
#define PRIMARY_CKPT "--checkpoint_background=0"

/* The group's redis-server (pid 0: not installed, each test skips). */
extern pid_t g_redis;
extern int g_port;
extern char g_dir[256];

/* cmocka group setup / teardown: starts and stops it. */
int repl_setup(void **state);
int repl_teardown(void **state);

json_t *status(const omld_proc *p);
json_int_t figure(const json_t *s, const char *section, const char *key);
double now_s(void);
/* Item i's features (DIM). */
void features(int i, float *x);
/* Items it<from> .. it<to - 1>, labelled c<i % 4>, one request each. */
void put_items(omlc *c, int from, int to);
/* Triplets seq .. seq + m - 1 (m <= 64: same-class positive, other-class
 * negative) into t, their ids in ids. */
void make_triplets(int seq, int m, char ids[3][64][32], omlc_triplet *t);
/* n triplets in batches of `batch` (at most 64), from sequence number seq on. */
void add_triplets(omlc *c, int seq, int n, int batch);
/* Until the primary's view version has not moved for a second and the
 * replica serves the same version over as many items: that version. */
uint64_t wait_same_version(const omld_proc *pri, const omld_proc *rep);
/* The same classify and retrieve answers from both, bit for bit, at the
 * same model version: `version`, or the next both settle on when the
 * primary publishes again meanwhile (up to 6 tries). */
void expect_same_answers(const omld_proc *pri, const omld_proc *rep, uint64_t version);
/* Until the n daemons serve one version: p[0]'s, once it stopped moving for
 * a second (shards index fewer items, so only versions are compared). */
uint64_t wait_all_versions(const omld_proc *p, int n);
/* Two retrievals' hits are the same, bit for bit (ids, labels, order,
 * scores, similarities). */
void expect_hits_equal(const omlc_hit *a, size_t na, const omlc_hit *b, size_t nb);
/* Two classifications are the same, bit for bit (version, label, scores). */
void expect_class_equal(const omlc_classification *a, const omlc_classification *b);

/* Replication lag under a steady write rate (figures, not asserted here). */
typedef struct lag_figures {
    double rate;                           /* triplets/s sent */
    size_t samples;
    double rec_p50, rec_p99, rec_max;      /* lag_records */
    double sec_p50, sec_p99, sec_max;      /* lag_seconds */
    double delay_p50, delay_p99, delay_max; /* apply_delay_seconds */
} lag_figures;
/* Sends c batches of 50 triplets 100 times a second (5,000/s) for secs,
 * numbered from seq, sampling /status replication of the n_rep daemons in
 * rep every 20 ms (each sample one daemon, in turn). */
void measure_lag(omlc *c, const omld_proc *rep, int n_rep, double secs, int seq,
                 lag_figures *f);
int cmp_double(const void *a, const void *b);

#endif
