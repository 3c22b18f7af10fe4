/* trainer_admin.c - the handlers of the ADMIN rows of the operation table
 * (ops.h): TrainStart (the job's spec from the request, the training data
 * copied out of the store under its read lock, the job queued),
 * TrainStatus, TrainCancel, ListModels and DeleteModel. On libuv's
 * threadpool; the trainer's mutex guards the job list. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "log.h"
#include "ops.h"
#include "trainer_int.h"
#include "validate.h"

#define INVALID OMLD__STATUS__CODE__INVALID_ARGUMENT

/* ------------------------------------------------------------ answers */

static Omld__JobInfo *job_msg(omld_reply *r, const omld_job_info *in)
{
    Omld__JobInfo *m = omld_reply_alloc(r, sizeof *m);
    if (m == NULL)
        return NULL;
    omld__job_info__init(m);
    m->id = in->id;
    m->method = omld_reply_strdup(r, in->method, strlen(in->method));
    m->variant = omld_reply_strdup(r, in->variant, strlen(in->variant));
    m->state = (Omld__JobInfo__State)in->state;
    m->epoch = (uint32_t)(in->epoch > 0 ? in->epoch : 0);
    m->epochs = (uint32_t)(in->epochs > 0 ? in->epochs : 0);
    m->step = (uint64_t)(in->step > 0 ? in->step : 0);
    m->steps_total = (uint64_t)(in->steps_total > 0 ? in->steps_total : 0);
    m->loss = in->loss;
    m->val_r1 = in->val_r1;
    m->best_val_r1 = in->best_val_r1;
    m->eta_s = in->eta_s;
    m->elapsed_s = in->elapsed_s;
    m->error = omld_reply_strdup(r, in->error, strlen(in->error));
    m->model = omld_reply_strdup(r, in->model, strlen(in->model));
    m->items = in->items;
    m->classes = in->classes;
    m->cancel_requested = in->cancel_requested != 0;
    if (!m->method || !m->variant || !m->error || !m->model)
        return NULL;
    return m;
}

static int oom(omld_reply *r)
{
    return omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
}

/* The part of a job's spec every method shares: the live layout, the depth
 * (checked against the live L), the schedule, the seed and the progress
 * hooks. 0 or the error in r. */
static int spec_base(omld_trainer *t, job *j, const Omld__TrainParams *p, omld_reply *r)
{
    const method_def *m = j->m;
    oml_batch_spec *s = &j->spec;
    oml_batch_spec_default(s, m->id);
    s->hidden = t->live.hidden;
    s->emb = t->live.emb;
    int32_t depth = s->depth < t->live.layers ? s->depth : t->live.layers;
    if (m->id == OML_BATCH_LANML)
        depth = 0;
    if (p->depth_opt_case == OMLD__TRAIN_PARAMS__DEPTH_OPT_DEPTH) {
        if (p->depth > (uint32_t)t->live.layers)
            return omld_reply_error(r, INVALID, "train_start.params.depth",
                                    "depth %u is deeper than the live model (L = %d): a batch "
                                    "model must fit the live layout to be served and promoted",
                                    p->depth, t->live.layers);
        if (m->id == OML_BATCH_LANML && p->depth != 0)
            return omld_reply_error(r, INVALID, "train_start.params.depth",
                                    "lanml learns a linear map (M = L^T L): depth must be 0");
        depth = (int32_t)p->depth;
    }
    s->depth = depth;
    if (p->epochs)
        s->epochs = (int32_t)p->epochs;
    if (p->learning_rate > 0)
        s->lr = p->learning_rate;
    if (p->batch_m)
        s->m = (int32_t)p->batch_m;
    if (p->batch_k)
        s->k = (int32_t)p->batch_k;
    if (p->patience)
        s->patience = (int32_t)p->patience;
    s->seed = p->seed_opt_case == OMLD__TRAIN_PARAMS__SEED_OPT_SEED ? p->seed : 1;
    if (p->validation_fraction_opt_case ==
        OMLD__TRAIN_PARAMS__VALIDATION_FRACTION_OPT_VALIDATION_FRACTION)
        s->val_frac = p->validation_fraction;
    s->cancel = &j->cancel;
    s->progress = omld_job_progress;
    s->progress_ctx = j;
    s->progress_every = 10;
    return 0;
}

/* Which of the optional loss hyper-parameters the request gives (the
 * others keep the method's defaults). */
typedef struct hp_given {
    int margin, g1, g2, l1, l2;
} hp_given;

static hp_given params_given(const Omld__TrainParams *p)
{
    hp_given g = {
        .margin = p->margin_opt_case == OMLD__TRAIN_PARAMS__MARGIN_OPT_MARGIN,
        .g1 = p->gamma1_opt_case == OMLD__TRAIN_PARAMS__GAMMA1_OPT_GAMMA1,
        .g2 = p->gamma2_opt_case == OMLD__TRAIN_PARAMS__GAMMA2_OPT_GAMMA2,
        .l1 = p->lambda1_opt_case == OMLD__TRAIN_PARAMS__LAMBDA1_OPT_LAMBDA1,
        .l2 = p->lambda2_opt_case == OMLD__TRAIN_PARAMS__LAMBDA2_OPT_LAMBDA2,
    };
    return g;
}

/* The loss of a KIND_BATCH method (triplet, lanml, danml) and its
 * hyper-parameters; v: the variant. 0 or the error in r. */
static int batch_loss(job *j, const Omld__TrainParams *p, const hp_given *g, const char *v,
                      omld_reply *r)
{
    oml_batch_spec *s = &j->spec;
    if (j->m->id == OML_BATCH_TRIPLET) {
        j->tri.margin = g->margin ? p->margin : 0.2f;
        j->tri.mining = strcmp(v, "random") == 0;
        s->loss = oml_triplet_loss;
        s->loss_hp = &j->tri;
    } else if (j->m->id == OML_BATCH_LANML) {
        oml_lanml_hp_default(&j->lan);
        if (g->margin) j->lan.margin = p->margin;
        if (g->g1) j->lan.gamma1 = p->gamma1;
        if (g->g2) j->lan.gamma2 = p->gamma2;
        if (g->l1) j->lan.lambda = p->lambda1;
        s->loss = oml_lanml_loss;
        s->loss_hp = &j->lan;
    } else {
        oml_danml_hp_default(&j->dan);
        if (g->margin) j->dan.margin = p->margin;
        if (g->g1) j->dan.gamma1 = p->gamma1;
        if (g->g2) j->dan.gamma2 = p->gamma2;
        if (g->l1) j->dan.lambda1 = p->lambda1;
        if (g->l2) j->dan.lambda2 = p->lambda2;
        if (strcmp(v, "hinge") == 0)
            j->dan.loss = OML_DANML_HINGE;
        else if (strcmp(v, "logistic") == 0)
            j->dan.loss = OML_DANML_LOGISTIC;
        if (!(j->dan.gamma1 < 0 && j->dan.gamma2 > 0))
            return omld_reply_error(r, INVALID, "train_start.params.gamma1",
                                    "danml needs gamma1 < 0 < gamma2 (got %g, %g)",
                                    (double)j->dan.gamma1, (double)j->dan.gamma2);
        s->loss = oml_danml_loss;
        s->loss_hp = &j->dan;
    }
    return 0;
}

/* The method's own hyper-parameters (margin, gammas, lambdas, variant), by
 * its kind. 0 or the error in r. */
static int spec_method(job *j, const Omld__TrainStartRequest *q, const Omld__TrainParams *p,
                       omld_reply *r)
{
    const method_def *m = j->m;
    hp_given g = params_given(p);
    const char *v = q->variant ? q->variant : "";
    switch (m->kind) {
    case KIND_BATCH:
        return batch_loss(j, p, &g, v, r);
    case KIND_DAML_PLAIN:
    case KIND_DAML:
        oml_daml_hp_default(&j->daml, m->term);
        if (g.margin) j->daml.alpha = p->margin;
        if (g.l1) j->daml.lambda1 = p->lambda1;
        if (g.l2) j->daml.lambda2 = p->lambda2;
        j->daml.literal = strcmp(v, "literal") == 0;
        if (p->epochs)
            j->daml.joint_epochs = (int32_t)p->epochs;
        break;
    case KIND_DAMLRRM:
        oml_damlrrm_hp_default(&j->rrm);
        if (g.margin) j->rrm.beta = p->margin;
        break;
    }
    return 0;
}

/* The spec and hyper-parameters of a job from the request; stateful checks
 * (depth against the live L). 0 or the error in r. */
static int build_spec(omld_trainer *t, job *j, const Omld__TrainStartRequest *q, omld_reply *r)
{
    const Omld__TrainParams *p = q->params;
    Omld__TrainParams none = OMLD__TRAIN_PARAMS__INIT;
    if (p == NULL)
        p = &none;
    int rc = spec_base(t, j, p, r);
    return rc != 0 ? rc : spec_method(j, q, p, r);
}

/* A job for the request (method, spec, what TrainStatus shows before it
 * runs), not yet queued; NULL with the error in r. */
static job *job_new(omld_trainer *t, const Omld__TrainStartRequest *q, omld_reply *r)
{
    const method_def *m = omld_method_find(q->method);
    if (m == NULL) {
        omld_reply_error(r, INVALID, "train_start.method", "unknown method; one of: %s",
                         omld_trainer_method_list());
        return NULL;
    }
    job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        oom(r);
        return NULL;
    }
    j->m = m;
    j->t = t;
    atomic_init(&j->cancel, 0);
    if (build_spec(t, j, q, r) != 0) {
        omld_job_free(j);
        return NULL;
    }
    snprintf(j->info.method, sizeof j->info.method, "%s", m->name);
    snprintf(j->info.variant, sizeof j->info.variant, "%s", q->variant ? q->variant : "");
    j->info.eta_s = -1;
    j->info.val_r1 = j->info.best_val_r1 = NAN;
    j->info.epochs = j->spec.epochs;
    return j;
}

/* Marks in sel (by the store's label number) the request's labels; the
 * index of the first label no stored item has, or q->n_labels if all are
 * known. Under the store's read lock. */
static size_t select_labels(omld_trainer *t, const Omld__TrainStartRequest *q, int32_t n_lab,
                            unsigned char *sel)
{
    for (size_t i = 0; i < q->n_labels; i++) {
        int32_t found = -1;
        for (int32_t l = 0; l < n_lab && found < 0; l++) {
            size_t len = 0;
            const char *name = oml_store_label_name(t->store, l, &len);
            if (len == strlen(q->labels[i]) && memcmp(name, q->labels[i], len) == 0)
                found = l;
        }
        if (found < 0)
            return i;
        sel[found] = 1;
    }
    return q->n_labels;
}

/* Copies the features and labels of the live labelled items (those with a
 * label in sel, or all when sel is NULL) into j->X, j->y; counts per label
 * in per. The number copied. Under the store's read lock. */
static int32_t copy_items(omld_trainer *t, job *j, int32_t n_lab, const unsigned char *sel,
                          uint32_t *per)
{
    int32_t dim = t->live.dim;
    uint32_t slots = oml_store_slots(t->store);
    int32_t n = 0;
    for (uint32_t s = 0; s < slots; s++) {
        if (!oml_store_is_live(t->store, s))
            continue;
        int32_t lab = oml_store_label(t->store, s);
        if (lab < 0 || lab >= n_lab || (sel && !sel[lab]))
            continue;
        memcpy(j->X + (size_t)n * dim, oml_store_features(t->store, s), (size_t)dim * sizeof(float));
        j->y[n++] = lab;
        per[lab]++;
    }
    return n;
}

/* The job's training data, copied out of the store under its read lock (the
 * learner may change the store meanwhile; the job must not see it), and
 * refused when too small to train on. 0, or -1 with the error in r. */
static int copy_training_data(omld_trainer *t, job *j, const Omld__TrainStartRequest *q,
                              omld_reply *r)
{
    size_t nl = q->n_labels;
    int32_t dim = t->live.dim;
    pthread_rwlock_rdlock(&t->lock->rw);
    int32_t n_lab = oml_store_label_count(t->store);
    uint32_t live = oml_store_count(t->store);
    unsigned char *sel = calloc((size_t)(n_lab > 0 ? n_lab : 1), 1);
    uint32_t *per = calloc((size_t)(n_lab > 0 ? n_lab : 1), sizeof *per);
    j->X = malloc((size_t)(live ? live : 1) * (size_t)dim * sizeof(float));
    j->y = malloc((size_t)(live ? live : 1) * sizeof(int32_t));
    if (sel == NULL || per == NULL || j->X == NULL || j->y == NULL) {
        pthread_rwlock_unlock(&t->lock->rw);
        free(sel);
        free(per);
        oom(r);
        return -1;
    }
    size_t bad = select_labels(t, q, n_lab, sel);
    if (bad < nl) {
        char qbuf[OMLD_QUOTE_CAP];
        pthread_rwlock_unlock(&t->lock->rw);
        char field[64];
        snprintf(field, sizeof field, "train_start.labels[%zu]", bad);
        omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, field, "no stored item has label %s",
                         omld_reply_quote(qbuf, sizeof qbuf, q->labels[bad],
                                          strlen(q->labels[bad])));
        free(sel);
        free(per);
        return -1;
    }
    int32_t n = copy_items(t, j, n_lab, nl > 0 ? sel : NULL, per);
    pthread_rwlock_unlock(&t->lock->rw);
    uint32_t classes = 0, eligible = 0;
    for (int32_t l = 0; l < n_lab; l++) {
        classes += per[l] > 0;
        eligible += per[l] >= 2;
    }
    free(sel);
    free(per);
    j->n = n;
    j->info.items = (uint32_t)n;
    j->info.classes = classes;
    if (n < OML_BATCH_MIN_ITEMS || eligible < 2) {
        omld_reply_error(r, INVALID, "train_start.labels",
                         "not enough training data: %d labelled item(s) in %u class(es)%s; a job "
                         "needs at least %d items and 2 classes with 2 items each",
                         n, classes, nl ? " with the given labels" : "", OML_BATCH_MIN_ITEMS);
        return -1;
    }
    return 0;
}

/* Names the job's model and queues the job, unless the queue is full or the
 * name is taken by a model or a queued or running job. 0 with the queued
 * job's info in *info, or -1 with the error in r. Takes the trainer's mutex. */
static int enqueue_job(omld_trainer *t, job *j, const Omld__TrainStartRequest *q,
                       omld_job_info *info, omld_reply *r)
{
    pthread_mutex_lock(&t->mu);
    int queued = 0;
    for (job *o = t->jobs; o; o = o->next)
        queued += o->info.state == OMLD_JOB_QUEUED;
    if (queued >= OMLD_TRAINER_MAX_QUEUED) {
        pthread_mutex_unlock(&t->mu);
        omld_reply_error(r, OMLD__STATUS__CODE__RESOURCE_EXHAUSTED, "train_start",
                         "%d jobs are already waiting; retry when one has run", queued);
        return -1;
    }
    j->info.id = t->next_id;
    if (q->name_opt_case == OMLD__TRAIN_START_REQUEST__NAME_OPT_NAME)
        snprintf(j->info.model, sizeof j->info.model, "%s", q->name);
    else
        snprintf(j->info.model, sizeof j->info.model, "%s-%llu", j->m->name,
                 (unsigned long long)j->info.id);
    int taken = omld_models_exists(t->models, j->info.model);
    for (job *o = t->jobs; o && !taken; o = o->next)
        taken = o->info.state <= OMLD_JOB_RUNNING && strcmp(o->info.model, j->info.model) == 0;
    if (taken) {
        pthread_mutex_unlock(&t->mu);
        omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, "train_start.name",
                         "a model (or a queued or running job's model) is named '%s'",
                         j->info.model);
        return -1;
    }
    t->next_id++;
    j->info.state = OMLD_JOB_QUEUED;
    j->next = t->jobs;
    t->jobs = j;
    pthread_cond_broadcast(&t->cv);
    *info = j->info;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static void handle_start(omld_trainer *t, const Omld__TrainStartRequest *q, omld_reply *r)
{
    job *j = job_new(t, q, r);
    if (j == NULL)
        return;
    omld_job_info info;
    if (copy_training_data(t, j, q, r) != 0 || enqueue_job(t, j, q, &info, r) != 0) {
        omld_job_free(j);
        return;
    }

    Omld__TrainStartResponse *b = omld_reply_alloc(r, sizeof *b);
    char *model = omld_reply_strdup(r, info.model, strlen(info.model));
    if (b == NULL || model == NULL) {
        oom(r);
        return;
    }
    omld__train_start_response__init(b);
    b->job_id = info.id;
    b->model = model;
    b->items = info.items;
    b->classes = info.classes;
    r->msg.body_case = OMLD__RESPONSE__BODY_TRAIN_START;
    r->msg.train_start = b;
}

static void handle_status(omld_trainer *t, uint64_t id, int cancel, omld_reply *r)
{
    const char *op = cancel ? "train_cancel.job_id" : "train_status.job_id";
    pthread_mutex_lock(&t->mu);
    job *j = omld_job_find(t, id);
    if (j == NULL) {
        pthread_mutex_unlock(&t->mu);
        omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, op, "no job has id %llu",
                         (unsigned long long)id);
        return;
    }
    if (cancel) {
        if (j->info.state >= OMLD_JOB_DONE) {
            int st = j->info.state;
            pthread_mutex_unlock(&t->mu);
            omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, op, "job %llu has already ended "
                             "(%s)", (unsigned long long)id, omld_job_state_name(st));
            return;
        }
        atomic_store(&j->cancel, 1);
        j->info.cancel_requested = 1;
        if (j->info.state == OMLD_JOB_QUEUED) {
            j->info.state = OMLD_JOB_CANCELLED;
            free(j->X);
            free(j->y);
            j->X = NULL;
            j->y = NULL;
            pthread_cond_broadcast(&t->cv);
        }
    }
    omld_job_info info = j->info;
    pthread_mutex_unlock(&t->mu);
    Omld__JobInfo *ji = job_msg(r, &info);
    if (ji == NULL) {
        oom(r);
        return;
    }
    if (cancel) {
        Omld__TrainCancelResponse *b = omld_reply_alloc(r, sizeof *b);
        if (b == NULL) {
            oom(r);
            return;
        }
        omld__train_cancel_response__init(b);
        b->job = ji;
        r->msg.body_case = OMLD__RESPONSE__BODY_TRAIN_CANCEL;
        r->msg.train_cancel = b;
    } else {
        Omld__TrainStatusResponse *b = omld_reply_alloc(r, sizeof *b);
        if (b == NULL) {
            oom(r);
            return;
        }
        omld__train_status_response__init(b);
        b->job = ji;
        r->msg.body_case = OMLD__RESPONSE__BODY_TRAIN_STATUS;
        r->msg.train_status = b;
    }
}

static void handle_list(omld_trainer *t, omld_reply *r)
{
    omld_model_info *mi = malloc(OMLD_MODELS_MAX * sizeof *mi);
    if (mi == NULL) {
        oom(r);
        return;
    }
    int n = omld_models_list(t->models, mi, OMLD_MODELS_MAX);
    if (n > OMLD_MODELS_MAX)
        n = OMLD_MODELS_MAX;
    Omld__ListModelsResponse *b = omld_reply_alloc(r, sizeof *b);
    Omld__ModelInfo *m = omld_reply_alloc(r, (size_t)(n > 0 ? n : 1) * sizeof *m);
    Omld__ModelInfo **mp = omld_reply_alloc(r, (size_t)(n > 0 ? n : 1) * sizeof *mp);
    if (b == NULL || m == NULL || mp == NULL) {
        free(mi);
        oom(r);
        return;
    }
    omld__list_models_response__init(b);
    for (int i = 0; i < n; i++) {
        omld__model_info__init(&m[i]);
        m[i].name = omld_reply_strdup(r, mi[i].name, strlen(mi[i].name));
        m[i].method = omld_reply_strdup(r, mi[i].method, strlen(mi[i].method));
        m[i].variant = omld_reply_strdup(r, mi[i].variant, strlen(mi[i].variant));
        if (!m[i].name || !m[i].method || !m[i].variant) {
            free(mi);
            oom(r);
            return;
        }
        m[i].depth = (uint32_t)mi[i].depth;
        m[i].created_ms = mi[i].created_ms;
        m[i].val_r1 = mi[i].val_r1;
        m[i].items_indexed = mi[i].items_indexed;
        m[i].trained_items = mi[i].trained_items;
        m[i].epochs_run = (uint32_t)(mi[i].epochs_run > 0 ? mi[i].epochs_run : 0);
        m[i].job_id = mi[i].job_id;
        m[i].index_version = mi[i].index_version;
        mp[i] = &m[i];
    }
    free(mi);
    b->n_models = (size_t)n;
    b->models = mp;
    r->msg.body_case = OMLD__RESPONSE__BODY_LIST_MODELS;
    r->msg.list_models = b;
}

static void handle_delete(omld_trainer *t, const char *name, omld_reply *r)
{
    char qbuf[OMLD_QUOTE_CAP];
    if (omld_models_delete(t->models, name) != OML_OK) {
        omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, "delete_model.name",
                         "no batch model is named %s",
                         omld_reply_quote(qbuf, sizeof qbuf, name, strlen(name)));
        return;
    }
    LOG_INFO("trainer", "model %s deleted", name);
    Omld__DeleteModelResponse *b = omld_reply_alloc(r, sizeof *b);
    if (b == NULL) {
        oom(r);
        return;
    }
    omld__delete_model_response__init(b);
    r->msg.body_case = OMLD__RESPONSE__BODY_DELETE_MODEL;
    r->msg.delete_model = b;
}

void omld_trainer_train_start(omld_trainer *t, const Omld__Request *req, omld_reply *r)
{
    handle_start(t, req->train_start, r);
}

void omld_trainer_train_status(omld_trainer *t, const Omld__Request *req, omld_reply *r)
{
    handle_status(t, req->train_status->job_id, 0, r);
}

void omld_trainer_train_cancel(omld_trainer *t, const Omld__Request *req, omld_reply *r)
{
    handle_status(t, req->train_cancel->job_id, 1, r);
}

void omld_trainer_list_models(omld_trainer *t, const Omld__Request *req, omld_reply *r)
{
    (void)req;
    handle_list(t, r);
}

void omld_trainer_delete_model(omld_trainer *t, const Omld__Request *req, omld_reply *r)
{
    handle_delete(t, req->delete_model->name, r);
}

void omld_trainer_handle(omld_trainer *t, const Omld__Request *req, omld_reply *r)
{
    const omld_op *op = omld_op_of(req);
    if (op == NULL || op->route != OMLD_ROUTE_ADMIN) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, "body",
                         "operation %d is not a trainer request (a routing bug)",
                         (int)req->body_case);
        return;
    }
    op->handle.admin(t, req, r);
}
