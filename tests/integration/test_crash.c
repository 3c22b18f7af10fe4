/* test_crash.c - SIGKILL at random moments while a client streams items and
 * triplets, and while the daemon rehearses; after each restart, everything
 * acknowledged is there and the model is bit-identical to the run that was
 * killed (issue 11: "Rehearsal keeps recovery bit-identical, including a
 * kill during rehearsal").
 *
 * Each trial: a fresh omld, one client putting 300 items and then streaming
 * triplet batches of 64, a SIGKILL. Trials cycle through four kinds:
 *
 *   plain      rehearsal off (--rehearse=0 --rehearse_idle=0), a checkpoint
 *              every 40 log records (kills land before, during and after
 *              checkpoints); killed after a random delay.
 *   stream     rehearsal on (the default preset: 3 rehearsed triplets owed
 *              per new one, paid whenever the learner's queue is empty, i.e.
 *              between the client's requests; --rehearse_idle=4), no
 *              checkpoints; killed after a random delay while streaming.
 *   idle       as stream, but the client stops after a random number of
 *              triplets and watches triplets_rehearsed on Status: 50 ms after
 *              the last request the daemon starts its idle rehearsal (about
 *              4 x 64 = 256 triplets per request it learned, in logged slices
 *              of ~10 ms); the kill fires once a random fraction of it is
 *              done, or, for some trials, after it has finished.
 *   ckpt       stream or idle, with rehearsal on and a checkpoint every 40
 *              records as well (the restart then starts from a checkpoint
 *              holding the rehearsal ring and its owed credit).
 *
 * After each restart:
 *   - every acknowledged item is stored, with its features;
 *   - triplets_applied >= the acknowledged triplets, <= those sent, and a
 *     whole number of batches (a batch is in the log whole or not at all);
 *   - the recovered model is the run's, byte for byte (oml_model_encode).
 *
 * THE REFERENCE. With rehearsal off (plain) the model is a function of the
 * requests alone: the library's learner, prepared from all items and fed
 * the first triplets_applied triplets through oml_replay_learn one request
 * (64) at a time, as omld learns them. With rehearsal on, when the daemon
 * rehearses depends on the clock (an empty queue, 50 ms of quiet), so the
 * model is a function of the log instead: every slice of rehearsal is a
 * record (type 2, u32 step count) between the request records (type 1, a
 * packed Omld__Request). So after the kill and BEFORE the restart, the test
 * copies data_dir/wal aside (what the kill left on disk; its torn tail, if
 * any, is cut on the copy as recovery cuts it) and rebuilds the state with
 * the library alone, record by record, as daemon/apply.c and engine.c do:
 * PutItems into an oml_store; on the first triplet the learner is prepared
 * from every live item in slot order; each AddTriplets resolves ids to
 * slots and goes through oml_replay_learn(ring, learner, rows, slots,
 * n); each rehearsal record is oml_replay_rehearse(ring, learner, store,
 * steps). The log is read from LSN 1, so the checkpoints of the ckpt trials
 * must not have trimmed it: the log is one 64 MB segment here and only
 * whole older segments are ever deleted (checked: the copy starts at LSN 1).
 * The copy's requests are also checked against what the client sent (the
 * items and the triplets in order, exactly the stream's prefix).
 *
 * THE RESTART MOVES ON. A kill can leave rehearsal owed (the ring's credit,
 * which recovery rebuilds), and the restarted daemon pays it as soon as its
 * queue is empty, i.e. possibly before the test's Checkpoint request reaches
 * the learner. (Idle rehearsal cannot run then: its allowance is not
 * durable and restarts at 0.) So the model the Checkpoint request writes at
 * log position L is the recovered model plus whatever rehearsal the new
 * process logged up to L. The test therefore also copies the wal after the
 * Checkpoint (still running; records <= L are committed before the
 * checkpoint is written) and checks that
 *   - its records up to the pre-kill copy's last LSN are the copy's,
 *     byte for byte (recovery neither lost nor changed a record),
 *   - every record after them up to L is rehearsal (no request appears
 *     from nowhere), and in total at most the steps owed at the kill;
 * and compares the checkpoint's model, rehearsal ring and store sections
 * with the reference carried on through those rehearsal records. Taking the
 * model before any restart rehearsal is not possible from outside (owed
 * rehearsal starts at once, and --rehearse_idle=0 does not stop it); this
 * way every byte of the recovered state is still pinned, and nothing the
 * daemon did after the restart is taken on trust but read from its log.
 *
 * The classification printed per trial ("killed during rehearsal") comes
 * from the same replay: at the kill, rehearsal was owed (the ring's credit),
 * or the idle allowance (simulated as engine.c keeps it: + rehearse_idle per
 * new triplet, capped at rehearse_idle x the ring's live triplets, - the
 * steps of every slice taken when nothing was owed) was not used up after
 * idle slices had started.
 *
 * OMLD_CRASH_TRIALS sets the number of trials (default 20; the soak script
 * tests/soak/crash_soak.sh runs hundreds), OMLD_CRASH_SEED the seed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "blobs.h"
#include "checkpoint.h"
#include "config.h"
#include "harness.h"
#include "learner.h"
#include "modelfile.h"
#include "omlclient.h"
#include "replay.h"
#include "store.h"
#include "testutil.h"
#include "wal.h"

/* The daemon fixes BLAS threading (daemon/main.c); the reference must too,
 * or its sums may be taken in another order (OPENBLAS_NUM_THREADS is only
 * read when the library loads, too late to set here). */
extern void openblas_set_num_threads(int);

#define DIM 16
#define N_ITEMS 300
#define PUT_BATCH 50
#define T_BATCH 64
#define MAX_TRIPLETS 150000
#define TIMEOUT_MS 30000
#define REHEARSE_IDLE 4 /* --rehearse_idle below */

enum { REC_PROBE = 0, REC_REQUEST = 1, REC_REHEARSE = 2 };   /* daemon/persist.c */
enum { SEC_MODEL = 1, SEC_STORE = 2, SEC_REPLAY = 7 };        /* daemon/persist.c */
enum { KIND_PLAIN, KIND_STREAM, KIND_IDLE, KIND_CKPT };
static const char *const KIND_NAME[] = {"plain", "stream", "idle", "ckpt"};

#define COMMON_ARGS                                                                                \
    "--dim=16", "--preset=default", "--layers=2", "--hidden=32", "--emb=8", "--seed=1",            \
        "--publish_ms=50", "--max_batch=1000"

static const char *const ARGS_PLAIN[] = {COMMON_ARGS, "--checkpoint_every=40", "--rehearse=0",
                                         "--rehearse_idle=0", NULL};
/* Rehearsal as the default preset has it; no checkpoint (the log is all). */
static const char *const ARGS_REHEARSE[] = {COMMON_ARGS, "--rehearse_idle=4",
                                            "--checkpoint_every=1000000000",
                                            "--checkpoint_ms=86400000", NULL};
static const char *const ARGS_REHEARSE_CKPT[] = {COMMON_ARGS, "--rehearse_idle=4",
                                                 "--checkpoint_every=40", NULL};

static float X[N_ITEMS][DIM];
static char ID[N_ITEMS][16];
static char LABEL[N_ITEMS][8];

static void make_data(void)
{
    oml_test_blobs(&X[0][0], N_ITEMS, DIM, 4, 777, 0.0f, 0.2f);
    for (int i = 0; i < N_ITEMS; i++) {
        snprintf(ID[i], sizeof ID[i], "item-%d", i);
        snprintf(LABEL[i], sizeof LABEL[i], "c%d", i % 4);
    }
}

static void triplet_members(int i, int m[3])
{
    m[0] = (int)(((unsigned)i * 2654435761u) % N_ITEMS);
    m[1] = (m[0] + 4 * (1 + i % 7)) % N_ITEMS;
    m[2] = (m[0] + 1 + i % 3) % N_ITEMS;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The daemon's model configuration (its options above over the preset). */
static void model_config(oml_config *cfg, int rehearse_off)
{
    assert_int_equal(oml_config_preset(cfg, "default", DIM), 0);
    cfg->layers = 2;
    cfg->hidden = 32;
    cfg->emb = 8;
    cfg->seed = 1;
    if (rehearse_off)
        cfg->rehearse = 0;
}

/* ------------------------------------------------------------ plain reference */

/* The uninterrupted run without rehearsal: the library's learner with the
 * daemon's model configuration, started from all items, fed the first n
 * triplets one request at a time. */
static uint8_t *reference_plain(int n, size_t *len)
{
    oml_config cfg;
    model_config(&cfg, 1);
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &cfg, NULL), 0);
    int32_t labels[N_ITEMS]; /* "cK" was the (K+1)-th label the store saw: id K */
    for (int i = 0; i < N_ITEMS; i++)
        labels[i] = i % 4;
    if (n > 0)
        assert_int_equal(oml_learner_prepare(l, &X[0][0], labels, N_ITEMS), 0);
    oml_replay ring = {0};
    for (int i = 0; i < n; i += T_BATCH) { /* as omld learns each request */
        const float *rows[3 * T_BATCH];
        int b = n - i < T_BATCH ? n - i : T_BATCH;
        for (int t = 0; t < b; t++) {
            int m[3];
            triplet_members(i + t, m);
            for (int k = 0; k < 3; k++)
                rows[3 * t + k] = X[m[k]];
        }
        oml_replay_learn(&ring, l, rows, NULL, NULL, b);
    }
    uint8_t *buf = NULL;
    assert_int_equal(oml_model_encode(l, &buf, len), 0);
    oml_learner_destroy(l);
    return buf;
}

/* ------------------------------------------------------------ the log */

/* Copies the regular files of src into dst (created). */
static void copy_dir(const char *src, const char *dst)
{
    assert_true(mkdir(dst, 0750) == 0 || errno == EEXIST);
    DIR *d = opendir(src);
    if (d == NULL)
        return; /* killed before the log existed: an empty copy */
    struct dirent *de;
    static char buf[1 << 16];
    while ((de = readdir(d)) != NULL) {
        char from[1024], to[1024];
        snprintf(from, sizeof from, "%s/%s", src, de->d_name);
        snprintf(to, sizeof to, "%s/%s", dst, de->d_name);
        struct stat st;
        if (stat(from, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0640);
        assert_true(in >= 0 && out >= 0);
        ssize_t got;
        while ((got = read(in, buf, sizeof buf)) > 0)
            assert_int_equal(write(out, buf, (size_t)got), got);
        close(in);
        close(out);
    }
    closedir(d);
}

typedef struct rec {
    uint8_t type;
    uint64_t lsn;
    size_t len;
    uint8_t *data;
} rec;

typedef struct reclog {
    rec *r;
    size_t n, cap;
    oml_wal_recovery rep;
} reclog;

static int collect(void *arg, uint8_t type, uint64_t lsn, const uint8_t *payload, size_t len)
{
    reclog *g = arg;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 1024;
        g->r = realloc(g->r, g->cap * sizeof *g->r);
        assert_non_null(g->r);
    }
    rec *r = &g->r[g->n++];
    r->type = type;
    r->lsn = lsn;
    r->len = len;
    r->data = malloc(len ? len : 1);
    assert_non_null(r->data);
    memcpy(r->data, payload, len);
    return 0;
}

/* Copies data_dir/wal aside and reads every record of the copy from LSN 1
 * (recovery on the copy cuts a torn tail there, as the daemon's will). */
static void read_log(const omld_proc *p, const char *tag, reclog *g)
{
    char src[400], dst[400];
    snprintf(src, sizeof src, "%s/wal", p->dir);
    char name[64];
    snprintf(name, sizeof name, "omld-crash-%s", tag);
    assert_int_equal(oml_test_tmpdir(dst, sizeof dst, name), 0);
    copy_dir(src, dst);
    memset(g, 0, sizeof *g);
    oml_wal *w = NULL;
    oml_wal_options o = {.fsync = OML_WAL_FSYNC_NO};
    oml_diag d = {0};
    int rc = oml_wal_open(&w, dst, &o, collect, g, &g->rep, &d);
    if (rc != OML_OK)
        fail_msg("reading the log copy %s: %s", dst, d.msg);
    oml_wal_close(w, NULL);
    oml_test_rmtree(dst);
    if (g->n > 0 && g->rep.first_lsn != 1)
        fail_msg("the log copy %s starts at LSN %llu: a checkpoint trimmed it", dst,
                 (unsigned long long)g->rep.first_lsn);
}

static void reclog_free(reclog *g)
{
    for (size_t i = 0; i < g->n; i++)
        free(g->r[i].data);
    free(g->r);
    memset(g, 0, sizeof *g);
}

/* ------------------------------------------------------------ the log reference */

typedef struct ref {
    oml_learner *l;
    oml_store *store;
    oml_replay ring;
    int items, triplets;          /* the stream's prefix found in the log */
    uint64_t rehearse_records, rehearse_steps;
    double idle;                  /* the engine's idle allowance, simulated */
    int idle_since_request;       /* idle slices after the newest request */
    int last_type;
} ref;

static void ref_init(ref *r)
{
    memset(r, 0, sizeof *r);
    oml_config cfg;
    model_config(&cfg, 0);
    assert_int_equal(oml_learner_create(&r->l, &cfg, NULL), 0);
    assert_int_equal(oml_store_create(&r->store, DIM, 1u << 20), 0);
    assert_int_equal(oml_replay_init(&r->ring, (uint32_t)cfg.replay), 0);
}

static void ref_free(ref *r)
{
    oml_learner_destroy(r->l);
    oml_store_destroy(r->store);
    oml_replay_free(&r->ring);
}

/* daemon/apply.c prepare_model: the data-dependent start from every live
 * stored item, in slot order, at the first triplet. */
static void ref_prepare(ref *r)
{
    oml_learner *l = r->l;
    if (l->prepared || !oml_config_needs_data(&l->cfg))
        return;
    uint32_t n = oml_store_count(r->store), slots = oml_store_slots(r->store);
    if (n < 2) {
        l->prepared = 1;
        return;
    }
    float *x = malloc((size_t)n * DIM * sizeof *x);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    assert_true(x && labels);
    uint32_t k = 0;
    for (uint32_t s = 0; s < slots; s++)
        if (oml_store_is_live(r->store, s)) {
            labels[k] = oml_store_label(r->store, s);
            memcpy(x + (size_t)k++ * DIM, oml_store_features(r->store, s), DIM * sizeof *x);
        }
    assert_int_equal(oml_learner_prepare(l, x, labels, (int32_t)k), 0);
    free(labels);
    free(x);
}

static void ref_request(ref *r, const rec *g)
{
    Omld__Request *q = omld__request__unpack(NULL, g->len, g->data);
    if (q == NULL)
        fail_msg("log record %llu is not a request", (unsigned long long)g->lsn);
    if (q->body_case == OMLD__REQUEST__BODY_PUT_ITEMS) {
        const Omld__PutItemsRequest *pq = q->put_items;
        for (size_t i = 0; i < pq->n_items; i++) {
            const Omld__Item *it = pq->items[i];
            /* The stream's next item, exactly. */
            assert_true(r->items < N_ITEMS);
            assert_string_equal(it->id, ID[r->items]);
            assert_int_equal(it->n_features, DIM);
            assert_memory_equal(it->features, X[r->items], sizeof X[0]);
            const char *label = it->label_opt_case == OMLD__ITEM__LABEL_OPT_LABEL ? it->label : NULL;
            oml_diag d = {0};
            if (oml_store_put(r->store, it->id, strlen(it->id), it->features, label,
                              label ? strlen(label) : 0, NULL, &d) != OML_OK)
                fail_msg("reference store: %s", d.msg);
            r->items++;
        }
    } else if (q->body_case == OMLD__REQUEST__BODY_ADD_TRIPLETS) {
        const Omld__AddTripletsRequest *aq = q->add_triplets;
        size_t n = aq->n_triplets;
        const float **rows = malloc(3 * n * sizeof *rows);
        uint32_t *slots = malloc(3 * n * sizeof *slots);
        assert_true(rows != NULL && slots != NULL);
        for (size_t i = 0; i < n; i++) {
            const Omld__Triplet *t = aq->triplets[i];
            const Omld__ItemRef *m[3] = {t->anchor, t->positive, t->negative};
            int want[3];
            triplet_members(r->triplets + (int)i, want);
            for (int k = 0; k < 3; k++) {
                assert_int_equal(m[k]->ref_case, OMLD__ITEM_REF__REF_ID);
                assert_string_equal(m[k]->id, ID[want[k]]); /* the stream's next triplet */
                assert_int_equal(oml_store_find(r->store, m[k]->id, strlen(m[k]->id),
                                                &slots[3 * i + k]), OML_OK);
                rows[3 * i + k] = oml_store_features(r->store, slots[3 * i + k]);
            }
        }
        ref_prepare(r);
        oml_replay_learn(&r->ring, r->l, rows, slots, NULL, (int32_t)n);
        r->triplets += (int)n;
        r->idle += (double)n * REHEARSE_IDLE;
        free(rows);
        free(slots);
    } else {
        fail_msg("log record %llu: unexpected request (body %d)", (unsigned long long)g->lsn,
                 (int)q->body_case);
    }
    /* engine.c after each group (one request: the client waits for each
     * answer): the idle allowance is capped by the ring. */
    if (r->idle > REHEARSE_IDLE * (double)r->ring.live)
        r->idle = REHEARSE_IDLE * (double)r->ring.live;
    r->idle_since_request = 0;
    omld__request__free_unpacked(q, NULL);
}

static uint32_t rehearse_steps(const rec *g)
{
    if (g->len != 4)
        fail_msg("log record %llu: a rehearsal record of %zu bytes", (unsigned long long)g->lsn,
                 g->len);
    return (uint32_t)g->data[0] | (uint32_t)g->data[1] << 8 | (uint32_t)g->data[2] << 16 |
           (uint32_t)g->data[3] << 24;
}

static void ref_record(ref *r, const rec *g)
{
    if (g->type == REC_PROBE)
        return;
    r->last_type = g->type;
    if (g->type == REC_REQUEST) {
        ref_request(r, g);
        return;
    }
    if (g->type != REC_REHEARSE)
        fail_msg("log record %llu of type %u", (unsigned long long)g->lsn, g->type);
    uint32_t steps = rehearse_steps(g);
    if (oml_replay_owed(&r->ring, r->l) <= 0) { /* an idle slice (engine.c rehearse_slice) */
        r->idle -= (double)steps * r->l->cfg.batch;
        r->idle_since_request++;
    }
    oml_replay_rehearse(&r->ring, r->l, r->store, (int32_t)steps);
    r->rehearse_records++;
    r->rehearse_steps += steps;
}

/* ------------------------------------------------------------ the client */

typedef struct killer {
    pid_t pid;
    int delay_ms;
    pthread_t th;
} killer;

static void *killer_main(void *arg)
{
    killer *k = arg;
    sleep_ms(k->delay_ms);
    kill(k->pid, SIGKILL);
    return NULL;
}

/* Streams up to `target` triplets or until the daemon dies; counts what
 * was acknowledged. Returns the open client (NULL if none). */
static omlc *stream(const omld_proc *p, int target, int *items_acked, int *triplets_acked,
                    int *triplets_sent)
{
    *items_acked = *triplets_acked = *triplets_sent = 0;
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, p->rpc, 5000, &err) != 0)
        return NULL;
    for (int at = 0; at < N_ITEMS; at += PUT_BATCH) {
        omlc_item items[PUT_BATCH];
        for (int i = 0; i < PUT_BATCH; i++)
            items[i] = (omlc_item){ID[at + i], X[at + i], DIM, LABEL[at + i]};
        if (omlc_put_items(c, items, PUT_BATCH, NULL, NULL, &err) != 0)
            return c;
        *items_acked = at + PUT_BATCH;
    }
    for (int at = 0; at + T_BATCH <= target; at += T_BATCH) {
        omlc_triplet t[T_BATCH];
        for (int i = 0; i < T_BATCH; i++) {
            int m[3];
            triplet_members(at + i, m);
            t[i] = (omlc_triplet){{ID[m[0]], NULL, 0}, {ID[m[1]], NULL, 0}, {ID[m[2]], NULL, 0}, 0.0f};
        }
        *triplets_sent = at + T_BATCH;
        if (omlc_add_triplets(c, t, T_BATCH, NULL, NULL, &err) != 0)
            return c;
        *triplets_acked = at + T_BATCH;
    }
    return c;
}

static int64_t rehearsed_now(omlc *c)
{
    Omld__Response *r = NULL;
    omlc_error err;
    if (omlc_status(c, &r, &err) != 0)
        return -1;
    int64_t v = (int64_t)r->status_info->triplets_rehearsed;
    omld__response__free_unpacked(r, NULL);
    return v;
}

/* After the stream stopped: watches triplets_rehearsed and kills once
 * `frac` of the idle allowance (rehearse_idle per triplet learned; less if
 * the stream paused long enough for some of it to be paid) is done; frac >
 * 1: once it stopped moving for 200 ms.
 * Returns the ms waited. */
static int kill_in_idle(omld_proc *p, omlc *c, int acked, double frac)
{
    double t0 = now_ms(), changed = t0;
    int64_t start = rehearsed_now(c), last = start;
    double expect = (double)acked * REHEARSE_IDLE; /* the idle allowance (at most) */
    while (start >= 0 && now_ms() - t0 < 10000) {
        int64_t v = rehearsed_now(c);
        if (v < 0)
            break;
        if (v != last)
            changed = now_ms(), last = v;
        if (frac <= 1.0 && (double)(v - start) >= frac * expect)
            break;
        if (frac > 1.0 && now_ms() - changed > 200)
            break;
        sleep_ms(1);
    }
    kill(p->pid, SIGKILL);
    return (int)(now_ms() - t0);
}

/* ------------------------------------------------------------ a trial */

/* The log position the newest start of the daemon recovered from (its
 * checkpoint's; 0: the whole log), from its own log line. */
static unsigned long long recovered_from(const omld_proc *p)
{
    FILE *f = fopen(p->log, "r");
    unsigned long long pos = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "replayed after position ");
        if (at)
            pos = strtoull(at + strlen("replayed after position "), NULL, 10);
    }
    if (f)
        fclose(f);
    return pos;
}

typedef struct tally {
    int trials, by_kind[4], identical;
    int during_owed, during_idle, after_idle, torn, restart_rehearsed, from_ckpt;
} tally;

static void check_acknowledged(omld_proc *p, omlc *c, int trial, int items_acked, int acked,
                               int sent, uint64_t *items, uint64_t *applied)
{
    Omld__Response *r = NULL;
    omlc_error err;
    assert_int_equal(omlc_status(c, &r, &err), 0);
    *items = r->status_info->items;
    *applied = r->status_info->triplets_applied;
    omld__response__free_unpacked(r, NULL);

    /* Every acknowledged item, with its features. */
    assert_true(*items >= (uint64_t)items_acked);
    assert_int_equal(*items % PUT_BATCH, 0);
    if (items_acked > 0) {
        const char *ids[N_ITEMS];
        for (int i = 0; i < items_acked; i++)
            ids[i] = ID[i];
        assert_int_equal(omlc_get_items(c, ids, (size_t)items_acked, &r, &err), 0);
        for (int i = 0; i < items_acked; i++)
            assert_memory_equal(r->get_items->items[i]->features, X[i], sizeof X[i]);
        omld__response__free_unpacked(r, NULL);
    }
    /* Every acknowledged triplet, in whole batches. */
    if (*applied < (uint64_t)acked || *applied > (uint64_t)sent || *applied % T_BATCH != 0) {
        omld_proc_dump_log(p);
        fail_msg("trial %d: applied %llu, acknowledged %d, sent %d", trial,
                 (unsigned long long)*applied, acked, sent);
    }
}

static int section_equal(const oml_ckpt *ck, uint32_t tag, const uint8_t *buf, size_t len)
{
    const oml_ckpt_section *s = oml_ckpt_find(ck, tag);
    return s != NULL && s->len == len && memcmp(s->data, buf, len) == 0;
}

/* A well-mixed draw from the trial's seed (the LCG's low bits cycle). */
static unsigned draw(unsigned seed, unsigned salt)
{
    uint32_t z = seed * 0x9e3779b9u + salt * 0x85ebca6bu;
    z = (z ^ (z >> 16)) * 0x7feb352du;
    z = (z ^ (z >> 15)) * 0x846ca68bu;
    return z ^ (z >> 16);
}

/* The daemon of the running trial: a failed check leaves the trial by a
 * long jump, and the teardown then stops it (its data_dir is kept). */
static omld_proc *g_live;

static int stop_leftover(void **state)
{
    (void)state;
    if (g_live && g_live->pid > 0) {
        fprintf(stderr, "    stopping the failed trial's omld (data_dir %s kept)\n", g_live->dir);
        omld_proc_stop(g_live, SIGKILL, 5000);
    }
    g_live = NULL;
    return 0;
}

static void one_trial(unsigned seed, int trial, tally *tl)
{
    int kind = trial % 4;
    int idle = kind == KIND_IDLE || (kind == KIND_CKPT && draw(seed, 1) % 2 == 0);
    const char *const *args = kind == KIND_PLAIN  ? ARGS_PLAIN
                              : kind == KIND_CKPT ? ARGS_REHEARSE_CKPT
                                                  : ARGS_REHEARSE;
    static omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    g_live = &p;

    int items_acked, acked, sent, delay_ms;
    char when[96];
    if (!idle) {
        /* A quarter of the kills land in the first milliseconds (during
         * the puts); with rehearsal on, most of the others land while the
         * owed rehearsal of the last request is paid or its log record
         * written (about 3/4 of the learner's work). */
        killer k = {.pid = p.pid,
                    .delay_ms = draw(seed, 2) % 4 == 0 ? 1 + (int)(draw(seed, 3) % 8)
                                                       : 5 + (int)(draw(seed, 3) % 900)};
        assert_int_equal(pthread_create(&k.th, NULL, killer_main, &k), 0);
        omlc_close(stream(&p, MAX_TRIPLETS, &items_acked, &acked, &sent));
        pthread_join(k.th, NULL);
        delay_ms = k.delay_ms;
        snprintf(when, sizeof when, "killed after %4d ms", delay_ms);
    } else {
        /* Stop after 1,024..16,384 triplets, then kill during (or, one
         * time in six, after) the idle rehearsal that follows. */
        int target = T_BATCH * (16 + (int)(draw(seed, 4) % 241));
        double frac = draw(seed, 5) % 6 == 0 ? 2.0 : 0.05 + (double)(draw(seed, 6) % 1000) / 1000.0;
        omlc *c = stream(&p, target, &items_acked, &acked, &sent);
        if (c == NULL || acked < target)
            fail_msg("trial %d: the stream of %d triplets did not complete (%d)", trial, target,
                     acked);
        delay_ms = kill_in_idle(&p, c, acked, frac);
        omlc_close(c);
        if (frac > 1.0)
            snprintf(when, sizeof when, "stopped at %5d, killed when idle", target);
        else
            snprintf(when, sizeof when, "stopped at %5d, killed at %3.0f%% of idle rehearsal",
                     target, 100 * frac);
    }
    assert_int_equal(omld_proc_stop(&p, SIGKILL, 5000), 128 + SIGKILL);

    /* What the kill left on disk, before the restart touches it. */
    ref rf = {0};
    reclog pre = {0};
    int owed_at_kill = 0, pending_idle = 0;
    if (kind != KIND_PLAIN) {
        read_log(&p, "killed", &pre);
        ref_init(&rf);
        for (size_t i = 0; i < pre.n; i++)
            ref_record(&rf, &pre.r[i]);
        owed_at_kill = oml_replay_owed(&rf.ring, rf.l);
        pending_idle = (int)floor(rf.idle / rf.l->cfg.batch);
        tl->torn += pre.rep.torn;
    }

    if (omld_proc_restart(&p, args, TIMEOUT_MS) != 0) {
        omld_proc_dump_log(&p);
        fail_msg("trial %d: omld did not restart after SIGKILL", trial);
    }
    unsigned long long from = recovered_from(&p);
    tl->from_ckpt += kind != KIND_PLAIN && from > 0;
    omlc *c = NULL;
    omlc_error err;
    assert_int_equal(omlc_connect(&c, p.rpc, TIMEOUT_MS, &err), 0);
    uint64_t items, applied;
    check_acknowledged(&p, c, trial, items_acked, acked, sent, &items, &applied);

    /* The recovered model. */
    Omld__Response *r = NULL;
    assert_int_equal(omlc_checkpoint(c, &r, &err), 0);
    oml_ckpt ck;
    assert_int_equal(oml_ckpt_load_file(r->checkpoint->path, &ck, NULL), 0);
    omld__response__free_unpacked(r, NULL);

    char what[256] = "";
    if (kind == KIND_PLAIN) {
        size_t n_ref = 0;
        uint8_t *ref_buf = reference_plain(items == N_ITEMS ? (int)applied : 0, &n_ref);
        if (!section_equal(&ck, SEC_MODEL, ref_buf, n_ref)) {
            omld_proc_dump_log(&p);
            fail_msg("trial %d: the recovered model (%llu triplets) differs from the "
                     "uninterrupted run", trial, (unsigned long long)applied);
        }
        free(ref_buf);
    } else {
        /* The log the kill left holds the stream's prefix, all of it
         * acknowledged or not, and what was applied after the restart. */
        assert_true(rf.items >= items_acked && rf.triplets >= acked && rf.triplets <= sent);
        if ((uint64_t)rf.items != items || (uint64_t)rf.triplets != applied)
            fail_msg("trial %d: the log holds %d items and %d triplets, the restart has %llu and "
                     "%llu", trial, rf.items, rf.triplets, (unsigned long long)items,
                     (unsigned long long)applied);
        /* What the restarted process logged up to the checkpoint: the
         * killed run's records unchanged, then rehearsal only. */
        reclog post = {0};
        read_log(&p, "restarted", &post);
        assert_true(post.n >= pre.n);
        for (size_t i = 0; i < pre.n; i++) {
            const rec *a = &pre.r[i], *b = &post.r[i];
            if (a->lsn != b->lsn || a->type != b->type || a->len != b->len ||
                memcmp(a->data, b->data, a->len) != 0)
                fail_msg("trial %d: log record %llu differs after the restart", trial,
                         (unsigned long long)a->lsn);
        }
        uint64_t steps_before = rf.rehearse_steps;
        for (size_t i = pre.n; i < post.n && post.r[i].lsn <= ck.lsn; i++) {
            if (post.r[i].type != REC_REHEARSE && post.r[i].type != REC_PROBE)
                fail_msg("trial %d: the restarted daemon logged a record of type %u (LSN %llu) "
                         "before the checkpoint", trial, post.r[i].type,
                         (unsigned long long)post.r[i].lsn);
            ref_record(&rf, &post.r[i]);
        }
        uint64_t after_restart = rf.rehearse_steps - steps_before;
        if (after_restart > (uint64_t)owed_at_kill)
            fail_msg("trial %d: the restarted daemon rehearsed %llu steps, %d were owed", trial,
                     (unsigned long long)after_restart, owed_at_kill);
        tl->restart_rehearsed += after_restart > 0;
        reclog_free(&post);

        uint8_t *mb = NULL, *rb = NULL, *sb = NULL;
        size_t nm = 0, nr = 0, ns = 0;
        assert_int_equal(oml_model_encode(rf.l, &mb, &nm), 0);
        assert_int_equal(oml_replay_encode(&rf.ring, &rb, &nr), 0);
        assert_int_equal(oml_store_encode(rf.store, &sb, &ns), 0);
        int model_ok = section_equal(&ck, SEC_MODEL, mb, nm);
        int ring_ok = section_equal(&ck, SEC_REPLAY, rb, nr);
        int store_ok = section_equal(&ck, SEC_STORE, sb, ns);
        free(mb);
        free(rb);
        free(sb);
        if (!model_ok || !ring_ok || !store_ok) {
            omld_proc_dump_log(&p);
            fail_msg("trial %d (%s): the recovered state differs from the log's (model %s, "
                     "rehearsal ring %s, store %s); %zu records, %llu rehearsal steps, "
                     "%llu of them after the restart", trial, KIND_NAME[kind],
                     model_ok ? "same" : "DIFFERS", ring_ok ? "same" : "DIFFERS",
                     store_ok ? "same" : "DIFFERS", pre.n,
                     (unsigned long long)rf.rehearse_steps, (unsigned long long)after_restart);
        }
        /* How the kill met the rehearsal. */
        const char *during = "";
        if (owed_at_kill > 0) {
            tl->during_owed++;
            during = ", during owed rehearsal";
        } else if (rf.idle_since_request > 0 && pending_idle > 0) {
            tl->during_idle++;
            during = ", during idle rehearsal";
        } else if (rf.idle_since_request > 0) {
            tl->after_idle++;
            during = ", after idle rehearsal";
        }
        snprintf(what, sizeof what, ": %zu records, %llu rehearsal steps (%d idle slices at the "
                 "end, %d steps still allowed, %d owed; %llu paid after the restart%s)%s%s",
                 pre.n, (unsigned long long)(steps_before), rf.idle_since_request, pending_idle,
                 owed_at_kill, (unsigned long long)after_restart,
                 from > 0 ? ", restarted from a checkpoint" : "", pre.rep.torn ? ", torn tail" : "",
                 during);
        ref_free(&rf);
        reclog_free(&pre);
    }
    oml_ckpt_free(&ck);
    omlc_close(c);
    printf("    trial %2d %-6s %s: %3d items, %5d triplets acknowledged, %5llu applied after "
           "restart: identical%s\n", trial, KIND_NAME[kind], when, items_acked, acked,
           (unsigned long long)applied, what);
    fflush(stdout);
    tl->trials++;
    tl->by_kind[kind]++;
    tl->identical++;
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    g_live = NULL;
    omld_proc_cleanup(&p);
}

static void test_sigkill_loses_nothing_acknowledged(void **state)
{
    (void)state;
    make_data();
    int trials = getenv("OMLD_CRASH_TRIALS") ? atoi(getenv("OMLD_CRASH_TRIALS")) : 20;
    unsigned seed = getenv("OMLD_CRASH_SEED") ? (unsigned)atoi(getenv("OMLD_CRASH_SEED")) : 12345u;
    tally tl = {0};
    double t0 = now_ms();
    for (int t = 0; t < trials; t++) {
        seed = seed * 1103515245u + 12345u;
        one_trial(seed >> 8, t, &tl);
    }
    printf("    %d trials (%d plain, %d stream, %d idle, %d ckpt) in %.1f s: all %d identical; "
           "killed during owed rehearsal %d, during idle rehearsal %d, after it %d; torn tails "
           "%d; rehearsal restarts from a checkpoint %d, that rehearsed before the test's "
           "checkpoint %d\n",
           tl.trials, tl.by_kind[0], tl.by_kind[1], tl.by_kind[2], tl.by_kind[3],
           (now_ms() - t0) / 1e3, tl.identical, tl.during_owed, tl.during_idle, tl.after_idle,
           tl.torn, tl.from_ckpt, tl.restart_rehearsed);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    openblas_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sigkill_loses_nothing_acknowledged, stop_leftover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
