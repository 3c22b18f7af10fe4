/* trainer.c - the trainer thread, its jobs, the method registry and the
 * queue (see trainer.h); the ADMIN handlers are trainer_admin.c.
 *
 * DESIGN
 * Jobs live in one list (newest first) guarded by t->mu; the thread takes
 * the oldest QUEUED job, marks it RUNNING and trains without the mutex,
 * which the progress callback takes only to copy numbers in. The training
 * data (X, y) belongs to the job from TrainStart until the job ends; it is
 * freed then, so only queued and running jobs hold data (at most
 * OMLD_TRAINER_MAX_QUEUED + 1 copies). Finished jobs are kept (without
 * data) for TrainStatus, the oldest dropped past OMLD_TRAINER_KEEP_DONE.
 *
 * Networks follow the live model's family: the live hidden width and
 * embedding size, depth <= the live L, so that the model can be served in
 * the live layout and promoted (models.h). Normalisation and every other
 * default is the method's own (src/batch.h, daml.h, damlrrm.h); serving
 * always L2-normalises the head, as the live model does. */
#include "trainer_int.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "anml.h"
#include "batch.h"
#include "daml.h"
#include "damlrrm.h"
#include "err.h"
#include "log.h"
#include "ops.h"
#include "validate.h"


/* ------------------------------------------------------------ methods */

/* The method registry: one line per name. */
static const method_def METHODS[] = {
    {"triplet", OML_BATCH_TRIPLET, KIND_BATCH, 0, "|semihard|random"},
    {"lanml", OML_BATCH_LANML, KIND_BATCH, 0, ""},
    {"danml", OML_BATCH_DANML, KIND_BATCH, 0, "|logistic|hinge"},
    {"contrastive", OML_BATCH_CONTRASTIVE, KIND_DAML_PLAIN, OML_DAML_CONTRASTIVE, ""},
    {"lifted", OML_BATCH_LIFTED, KIND_DAML_PLAIN, OML_DAML_LIFTED, ""},
    {"npair", OML_BATCH_NPAIR, KIND_DAML_PLAIN, OML_DAML_NPAIR, ""},
    {"daml-contrastive", OML_BATCH_DAML_CONTRASTIVE, KIND_DAML, OML_DAML_CONTRASTIVE, "|adversarial|literal"},
    {"daml-triplet", OML_BATCH_DAML_TRIPLET, KIND_DAML, OML_DAML_TRIPLET, "|adversarial|literal"},
    {"daml-lifted", OML_BATCH_DAML_LIFTED, KIND_DAML, OML_DAML_LIFTED, "|adversarial|literal"},
    {"daml-npair", OML_BATCH_DAML_NPAIR, KIND_DAML, OML_DAML_NPAIR, "|adversarial|literal"},
    {"damlrrm", OML_BATCH_DAMLRRM, KIND_DAMLRRM, 0, ""},
};
#define N_METHODS (sizeof METHODS / sizeof METHODS[0])

const method_def *omld_method_find(const char *name)
{
    for (size_t i = 0; name && i < N_METHODS; i++)
        if (strcmp(METHODS[i].name, name) == 0)
            return &METHODS[i];
    return NULL;
}

int omld_trainer_method_known(const char *name)
{
    return omld_method_find(name) != NULL;
}

int omld_trainer_variant_ok(const char *method, const char *variant)
{
    const method_def *m = omld_method_find(method);
    if (m == NULL)
        return 0;
    if (variant == NULL || variant[0] == '\0')
        return 1;
    size_t n = strlen(variant);
    for (const char *p = m->variants; *p;) {
        const char *q = strchr(p, '|');
        size_t l = q ? (size_t)(q - p) : strlen(p);
        if (l == n && memcmp(p, variant, n) == 0)
            return 1;
        if (!q)
            break;
        p = q + 1;
    }
    return 0;
}

const char *omld_trainer_method_list(void)
{
    static char list[512];
    static atomic_int built;
    if (!atomic_load(&built)) {
        char tmp[512];
        size_t o = 0;
        for (size_t i = 0; i < N_METHODS && o < sizeof tmp; i++)
            o += (size_t)snprintf(tmp + o, sizeof tmp - o, "%s%s", i ? ", " : "", METHODS[i].name);
        memcpy(list, tmp, sizeof list);
        atomic_store(&built, 1);
    }
    return list;
}

const char *omld_job_state_name(int s)
{
    switch (s) {
    case OMLD_JOB_QUEUED: return "queued";
    case OMLD_JOB_RUNNING: return "running";
    case OMLD_JOB_DONE: return "done";
    case OMLD_JOB_FAILED: return "failed";
    case OMLD_JOB_CANCELLED: return "cancelled";
    default: return "unknown";
    }
}

/* ------------------------------------------------------------ jobs */

job *omld_job_find(omld_trainer *t, uint64_t id)
{
    for (job *j = t->jobs; j; j = j->next)
        if (j->info.id == id)
            return j;
    return NULL;
}

void omld_job_free(job *j)
{
    if (j == NULL)
        return;
    free(j->X);
    free(j->y);
    free(j);
}

/* Drops finished jobs beyond the kept number (t->mu held). */
static void trim_done(omld_trainer *t)
{
    int kept = 0;
    for (job **pp = &t->jobs; *pp;) {
        job *j = *pp;
        int done = j->info.state >= OMLD_JOB_DONE;
        if (done && ++kept > OMLD_TRAINER_KEEP_DONE) {
            *pp = j->next;
            omld_job_free(j);
            continue;
        }
        pp = &j->next;
    }
}

/* A job's progress, from the training loop (the job's spec.progress). */
void omld_job_progress(void *ctx, const oml_batch_progress *p)
{
    job *j = ctx;
    omld_job_info *in = &j->info;
    double frac = p->steps_total > 0 ? (double)p->step / (double)p->steps_total : 0.0;
    if (frac > 1)
        frac = 1;
    pthread_mutex_lock(&j->t->mu);
    in->epoch = p->epoch;
    in->epochs = p->epochs;
    in->step = p->step;
    in->steps_total = p->steps_total;
    in->loss = p->loss;
    in->val_r1 = p->val_r1;
    in->best_val_r1 = p->best_val_r1;
    in->elapsed_s = p->elapsed_s;
    in->progress = frac;
    in->eta_s = frac > 0.001 ? p->elapsed_s * (1.0 - frac) / frac : -1.0;
    pthread_mutex_unlock(&j->t->mu);
}

static int run_method(job *j, int32_t dim, oml_batch_model **out, oml_diag *d)
{
    switch (j->m->kind) {
    case KIND_BATCH:
        return oml_batch_train(&j->spec, j->X, j->y, j->n, dim, out, d);
    case KIND_DAML_PLAIN:
        return oml_daml_train_plain(&j->spec, &j->daml, j->X, j->y, j->n, dim, out, d);
    case KIND_DAML:
        return oml_daml_train(&j->spec, &j->daml, j->X, j->y, j->n, dim, out, d);
    case KIND_DAMLRRM:
        return oml_damlrrm_train(&j->spec, &j->rrm, j->X, j->y, j->n, dim, out, d);
    default:
        return oml_diag_set(d, OML_EINVAL, "method", "no trainer for this method");
    }
}

static void run_job(omld_trainer *t, job *j)
{
    oml_batch_model *bm = NULL;
    oml_diag d = {0};
    uint64_t t0 = omld_now_ns();
    LOG_INFO("trainer", "job %llu (%s%s%s, model %s): training on %d items of %u classes",
             (unsigned long long)j->info.id, j->m->name, j->info.variant[0] ? "/" : "",
             j->info.variant, j->info.model, j->n, j->info.classes);
    int rc = run_method(j, t->live.dim, &bm, &d);
    char err[300] = "";
    int state = OMLD_JOB_DONE;
    if (rc == OML_ECANCELED || (rc == OML_OK && atomic_load(&j->cancel))) {
        state = OMLD_JOB_CANCELLED;
        oml_batch_model_destroy(bm);
        bm = NULL;
    } else if (rc != OML_OK) {
        state = OMLD_JOB_FAILED;
        if (rc == OML_EEMPTY)
            snprintf(err, sizeof err, "not enough training data (%d items in %u classes; a job "
                     "needs at least %d items and 2 classes with 2 training items each): %.120s",
                     j->n, j->info.classes, OML_BATCH_MIN_ITEMS, d.msg[0] ? d.msg : oml_strerror(rc));
        else if (rc == OML_ENONFINITE)
            snprintf(err, sizeof err, "training diverged (non-finite loss); try a smaller "
                     "learning_rate: %.200s", d.msg);
        else
            snprintf(err, sizeof err, "%s%s%s%s%s", oml_batch_strerror(rc), d.field[0] ? " (" : "",
                     d.field, d.field[0] ? ")" : "", d.msg[0] ? "" : "");
        if (rc != OML_EEMPTY && rc != OML_ENONFINITE && d.msg[0])
            snprintf(err + strlen(err), sizeof err - strlen(err), ": %.200s", d.msg);
    } else {
        omld_model_info meta;
        memset(&meta, 0, sizeof meta);
        snprintf(meta.name, sizeof meta.name, "%s", j->info.model);
        snprintf(meta.method, sizeof meta.method, "%s", j->m->name);
        snprintf(meta.variant, sizeof meta.variant, "%s", j->info.variant);
        meta.created_ms = omld_wall_ms();
        meta.job_id = j->info.id;
        meta.trained_items = (uint32_t)j->n;
        if (omld_models_add(t->models, &meta, bm, err, sizeof err) != 0)
            state = OMLD_JOB_FAILED;
        bm = NULL;
    }
    double secs = (double)(omld_now_ns() - t0) / 1e9;
    pthread_mutex_lock(&t->mu);
    j->info.state = state;
    j->info.elapsed_s = secs;
    j->info.eta_s = 0;
    if (state == OMLD_JOB_DONE)
        j->info.progress = 1.0;
    snprintf(j->info.error, sizeof j->info.error, "%.*s", (int)sizeof j->info.error - 1, err);
    free(j->X);
    free(j->y);
    j->X = NULL;
    j->y = NULL;
    trim_done(t);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (state == OMLD_JOB_DONE)
        LOG_INFO("trainer", "job %llu done in %.1f s: model %s", (unsigned long long)j->info.id,
                 secs, j->info.model);
    else
        LOG_INFO("trainer", "job %llu %s after %.1f s%s%s", (unsigned long long)j->info.id,
                 omld_job_state_name(state), secs, err[0] ? ": " : "", err);
}

static void *trainer_main(void *arg)
{
    omld_trainer *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        job *next = NULL;
        while (!t->stop) {
            next = NULL;
            for (job *j = t->jobs; j; j = j->next)
                if (j->info.state == OMLD_JOB_QUEUED)
                    next = j; /* the list is newest first: keep the oldest */
            if (next)
                break;
            pthread_cond_wait(&t->cv, &t->mu);
        }
        if (t->stop)
            break;
        next->info.state = OMLD_JOB_RUNNING;
        next->started_ns = omld_now_ns();
        pthread_mutex_unlock(&t->mu);
        run_job(t, next);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int omld_trainer_start(omld_trainer **out, omld_models *models, const oml_config *live,
                       const oml_store *store, omld_store_lock *lock)
{
    omld_trainer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return -1;
    t->models = models;
    t->live = *live;
    t->store = store;
    t->lock = lock;
    t->next_id = 1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, trainer_main, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return -1;
    }
    t->started = 1;
    *out = t;
    return 0;
}

void omld_trainer_stop(omld_trainer *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    for (job *j = t->jobs; j; j = j->next)
        atomic_store(&j->cancel, 1);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (t->started)
        pthread_join(t->thread, NULL);
    for (job *j = t->jobs, *n; j; j = n) {
        n = j->next;
        omld_job_free(j);
    }
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int omld_trainer_jobs(omld_trainer *t, omld_job_info *out, int cap)
{
    int n = 0;
    pthread_mutex_lock(&t->mu);
    for (job *j = t->jobs; j && n < cap; j = j->next)
        out[n++] = j->info;
    pthread_mutex_unlock(&t->mu);
    return n;
}

int omld_trainer_wait(omld_trainer *t, uint64_t id, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&t->mu);
    int done = 0;
    for (;;) {
        job *j = omld_job_find(t, id);
        done = j == NULL || j->info.state >= OMLD_JOB_DONE;
        if (done || pthread_cond_timedwait(&t->cv, &t->mu, &dl) != 0)
            break;
    }
    pthread_mutex_unlock(&t->mu);
    return done;
}
