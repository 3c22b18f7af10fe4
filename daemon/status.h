/* status.h - rendering what the daemon knows: GET /status (JSON) and
 * GET /metrics (Prometheus text exposition 0.0.4).
 *
 * Pure functions of an omld_status_input gathered on the loop thread, so
 * both pages always agree and both are unit-testable without a daemon. */
#ifndef OMLD_STATUS_H
#define OMLD_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "metrics.h"
#include "models.h"
#include "options.h"
#include "trainer.h"

#define OMLD_STATUS_MAX_JOBS 32   /* newest jobs shown */

typedef struct omld_status_input {
    const char *version;            /* "0.1.0" */
    uint64_t uptime_ms;
    const omld_config *cfg;
    const omld_model_stats *model;
    const omld_metrics *metrics;
    int ready, draining;
    const char *not_ready;          /* why not ready (a sentence), or NULL */
    const omld_job_info *jobs;      /* newest first; may be NULL */
    int n_jobs;
    const omld_model_info *models;  /* by name; may be NULL */
    int n_models;
    const char *rollback;           /* the promoted model a Rollback would undo, or NULL */
    const omld_promote_event *promotes; /* oldest first; may be NULL */
    int n_promotes;
    const struct omld_ingest_stats *ingest; /* the Redis Stream consumer; NULL: not rendered */
    uint64_t now_unix_ms;           /* wall clock (checkpoint age); 0: not known */
    /* the process (main.c reads /proc/self; have_process 0: not rendered) */
    int have_process;
    uint64_t rss_bytes, open_fds;
    double cpu_seconds, start_unix_seconds;
} omld_status_input;

/* malloc'd NUL-terminated text, its length in *len; NULL on OOM. */
char *omld_status_json(const omld_status_input *in, size_t *len);
char *omld_metrics_text(const omld_status_input *in, size_t *len);

#endif
