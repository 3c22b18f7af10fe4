/* trainer.h - batch-training jobs on one dedicated thread, and the
 * requests about them and about batch models.
 *
 * One trainer thread runs jobs one at a time in the order they were started
 * (a FIFO). TrainStart copies the training data at once, under the store's
 * read lock (the labelled live items, or those with the given labels:
 * features + label ids), checks there is enough of it, and queues the job;
 * the lock is never held while training. The job runs oml_batch_train (or
 * the DAML / DAMLRRM entry points) with the job's cancel flag and a
 * progress callback that updates the job's state (epoch, step, loss,
 * validation R@1, ETA) under the trainer's mutex. A job that ends DONE
 * hands its model to the registry (models.h) under the job's model name.
 * Jobs never block ingest or queries: separate thread, BLAS on one thread
 * (main.c), the store lock only for the copy.
 *
 * The method registry is a table in trainer.c: one line per method name.
 *
 * Requests: omld_trainer_handle() answers TrainStart, TrainStatus,
 * TrainCancel, ListModels and DeleteModel (the server's ADMIN route, run on
 * libuv's threadpool since a copy or an indexer join may take a while).
 * Promote and Rollback are engine mutations (apply.c). Thread-safe. */
#ifndef OMLD_TRAINER_H
#define OMLD_TRAINER_H

#include <stdint.h>

#include "config.h"
#include "metrics.h"
#include "models.h"
#include "omld.pb-c.h"
#include "reply.h"
#include "store.h"
#include "view.h"

#define OMLD_TRAINER_MAX_QUEUED 8    /* jobs waiting (not running) */
#define OMLD_TRAINER_KEEP_DONE 64    /* finished jobs remembered for TrainStatus */

enum omld_job_state {
    OMLD_JOB_QUEUED = 1,
    OMLD_JOB_RUNNING = 2,
    OMLD_JOB_DONE = 3,
    OMLD_JOB_FAILED = 4,
    OMLD_JOB_CANCELLED = 5
};

typedef struct omld_job_info {
    uint64_t id;
    char method[32];
    char variant[32];
    char model[OMLD_MODEL_NAME_MAX + 1];
    char error[256];
    int state;                   /* enum omld_job_state */
    int cancel_requested;
    int32_t epoch, epochs;
    int64_t step, steps_total;
    double loss, val_r1, best_val_r1;
    double eta_s, elapsed_s;     /* eta_s < 0: unknown */
    double progress;             /* 0..1 */
    uint32_t items, classes;
} omld_job_info;

typedef struct omld_trainer omld_trainer;

/* Method names: is name a known method (1) and variant valid for it (1)? */
int omld_trainer_method_known(const char *name);
int omld_trainer_variant_ok(const char *method, const char *variant);
/* "triplet, lanml, ..." for messages. */
const char *omld_trainer_method_list(void);
const char *omld_job_state_name(int state);

/* Starts the trainer thread. Everything is borrowed and must outlive it. */
int omld_trainer_start(omld_trainer **out, omld_models *models, const oml_config *live,
                       const oml_store *store, omld_store_lock *lock);
/* Cancels the running job, drops the queued ones, joins the thread, frees.
 * Accepts NULL. */
void omld_trainer_stop(omld_trainer *t);

/* Answers one ADMIN request (train_start, train_status, train_cancel,
 * list_models, delete_model) into r by its row's handler (ops.h). Any
 * thread. */
void omld_trainer_handle(omld_trainer *t, const Omld__Request *req, omld_reply *r);

/* The handlers of the ADMIN rows (ops.c); req has passed its check. */
void omld_trainer_train_start(omld_trainer *t, const Omld__Request *req, omld_reply *r);
void omld_trainer_train_status(omld_trainer *t, const Omld__Request *req, omld_reply *r);
void omld_trainer_train_cancel(omld_trainer *t, const Omld__Request *req, omld_reply *r);
void omld_trainer_list_models(omld_trainer *t, const Omld__Request *req, omld_reply *r);
void omld_trainer_delete_model(omld_trainer *t, const Omld__Request *req, omld_reply *r);

/* Up to cap jobs (newest first) for /status; returns how many were written. */
int omld_trainer_jobs(omld_trainer *t, omld_job_info *out, int cap);

/* Blocks until job id has finished (tests); 1 if it did within timeout_ms. */
int omld_trainer_wait(omld_trainer *t, uint64_t id, int timeout_ms);

#endif
