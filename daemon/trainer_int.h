/* trainer_int.h - what the trainer's two files share: the method
 * registry's rows, a job, the trainer (trainer.c: the thread and its jobs;
 * trainer_admin.c: the ADMIN handlers). */
#ifndef OMLD_TRAINER_INT_H
#define OMLD_TRAINER_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "anml.h"
#include "batch.h"
#include "daml.h"
#include "damlrrm.h"
#include "trainer.h"

enum method_kind {
    KIND_BATCH = 0,        /* oml_batch_train with the method's loss */
    KIND_DAML_PLAIN,       /* oml_daml_train_plain: a metric term alone */
    KIND_DAML,             /* oml_daml_train: the term + the adversarial generator */
    KIND_DAMLRRM           /* oml_damlrrm_train */
};

typedef struct method_def {
    const char *name;
    int32_t id;            /* enum oml_batch_method */
    int kind;              /* enum method_kind */
    int32_t term;          /* DAML: enum oml_daml_term */
    const char *variants;  /* "|"-separated; "" first = the default may be empty */
} method_def;

struct omld_trainer;

typedef struct job {
    struct job *next;          /* newest first */
    struct omld_trainer *t;
    omld_job_info info;        /* guarded by t->mu */
    const method_def *m;
    oml_batch_spec spec;
    oml_triplet_hp tri;
    oml_lanml_hp lan;
    oml_danml_hp dan;
    oml_daml_hp daml;
    oml_damlrrm_hp rrm;
    atomic_int cancel;
    float *X;                  /* (n, dim) owned until the job ends */
    int32_t *y;
    int32_t n;
    uint64_t started_ns;
} job;

struct omld_trainer {
    omld_models *models;
    oml_config live;
    const oml_store *store;
    omld_store_lock *lock;
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* a job queued / finished, or stop */
    job *jobs;
    uint64_t next_id;
    int stop;
    int started;
    pthread_t thread;
};

/* The registry row of a method name, or NULL. */
const method_def *omld_method_find(const char *name);
/* The job of an id, or NULL (t->mu held). */
job *omld_job_find(omld_trainer *t, uint64_t id);
/* Frees a job and its data. Accepts NULL. */
void omld_job_free(job *j);

/* Copies a training loop's progress into its job (ctx). */
void omld_job_progress(void *ctx, const oml_batch_progress *p);

#endif
