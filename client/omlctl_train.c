/* omlctl_train.c - batch-training jobs and named batch models: train (with a
 * progress bar until the job ends, or --detach), train-status,
 * train-cancel, models (table or --json), promote, rollback, delete-model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "omlctl.h"
#include "pbjson.h"

static const char *state_name(int s)
{
    switch (s) {
    case OMLD__JOB_INFO__STATE__QUEUED: return "queued";
    case OMLD__JOB_INFO__STATE__RUNNING: return "running";
    case OMLD__JOB_INFO__STATE__DONE: return "done";
    case OMLD__JOB_INFO__STATE__FAILED: return "failed";
    case OMLD__JOB_INFO__STATE__CANCELLED: return "cancelled";
    default: return "unknown";
    }
}

static void print_job(const Omld__JobInfo *j)
{
    printf("job %llu: %s%s%s  state %s  epoch %u/%u  step %llu/%llu  loss %.4g  val R@1 %.3f  "
           "elapsed %.1fs  model %s\n",
           (unsigned long long)j->id, j->method, j->variant[0] ? "/" : "", j->variant,
           state_name(j->state), j->epoch, j->epochs, (unsigned long long)j->step,
           (unsigned long long)j->steps_total, j->loss, j->val_r1, j->elapsed_s, j->model);
    if (j->error[0])
        printf("  error: %s\n", j->error);
}

/* ---------------------------------------------------------------- train */

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: omlctl train --method M [--variant V] [--labels a,b,...] [--name NAME]\n"
            "                    [--epochs N] [--lr X] [--depth D] [--m M] [--k K] [--margin X]\n"
            "                    [--gamma1 X] [--gamma2 X] [--lambda1 X] [--lambda2 X]\n"
            "                    [--seed N] [--val-frac X] [--patience N] [--detach]\n"
            "Starts a batch-training job on the daemon's labelled items (or those with the\n"
            "given labels) and shows its progress until it ends (a bar on a terminal, one\n"
            "line per second otherwise). The finished job's model is queried with\n"
            "--model NAME (classify, verify, retrieve, embed) and listed by `omlctl models`.\n"
            "  --method M   triplet, lanml, danml, contrastive, lifted, npair, daml-contrastive,\n"
            "               daml-triplet, daml-lifted, daml-npair, damlrrm\n"
            "  --detach     print the job id and return at once\n"
            "Exit status: 0 done, 2 refused / failed / cancelled, 4 transport.\n"
            "example:\n  omlctl train --method daml-triplet --epochs 10 --name dt1\n");
}

int ctl_train(ctl *g, int argc, char **argv)
{
    Omld__TrainStartRequest q = OMLD__TRAIN_START_REQUEST__INIT;
    Omld__TrainParams p = OMLD__TRAIN_PARAMS__INIT;
    q.params = &p;
    char *labels_buf = NULL;
    char *labels[256];
    int detach = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (ctl_is_help(argv[i])) {
            train_usage(stdout);
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if ((v = ctl_opt(argc, argv, &i, "--method"))) {
            q.method = (char *)v;
        } else if ((v = ctl_opt(argc, argv, &i, "--variant"))) {
            q.variant = (char *)v;
        } else if ((v = ctl_opt(argc, argv, &i, "--name"))) {
            q.name_opt_case = OMLD__TRAIN_START_REQUEST__NAME_OPT_NAME;
            q.name = (char *)v;
        } else if ((v = ctl_opt(argc, argv, &i, "--labels"))) {
            free(labels_buf);
            labels_buf = strdup(v);
            q.n_labels = 0;
            for (char *s = strtok(labels_buf, ","); s && q.n_labels < 256; s = strtok(NULL, ","))
                labels[q.n_labels++] = s;
            q.labels = labels;
        } else if ((v = ctl_opt(argc, argv, &i, "--epochs"))) {
            p.epochs = (uint32_t)ctl_int("--epochs", v, 1, 10000);
        } else if ((v = ctl_opt(argc, argv, &i, "--lr"))) {
            p.learning_rate = (float)ctl_real("--lr", v, 1e-12, 1e6);
        } else if ((v = ctl_opt(argc, argv, &i, "--depth"))) {
            p.depth_opt_case = OMLD__TRAIN_PARAMS__DEPTH_OPT_DEPTH;
            p.depth = (uint32_t)ctl_int("--depth", v, 0, 16);
        } else if ((v = ctl_opt(argc, argv, &i, "--m"))) {
            p.batch_m = (uint32_t)ctl_int("--m", v, 2, 1024);
        } else if ((v = ctl_opt(argc, argv, &i, "--k"))) {
            p.batch_k = (uint32_t)ctl_int("--k", v, 2, 1024);
        } else if ((v = ctl_opt(argc, argv, &i, "--margin"))) {
            p.margin_opt_case = OMLD__TRAIN_PARAMS__MARGIN_OPT_MARGIN;
            p.margin = (float)ctl_real("--margin", v, -1e6, 1e6);
        } else if ((v = ctl_opt(argc, argv, &i, "--gamma1"))) {
            p.gamma1_opt_case = OMLD__TRAIN_PARAMS__GAMMA1_OPT_GAMMA1;
            p.gamma1 = (float)ctl_real("--gamma1", v, -1e6, 1e6);
        } else if ((v = ctl_opt(argc, argv, &i, "--gamma2"))) {
            p.gamma2_opt_case = OMLD__TRAIN_PARAMS__GAMMA2_OPT_GAMMA2;
            p.gamma2 = (float)ctl_real("--gamma2", v, -1e6, 1e6);
        } else if ((v = ctl_opt(argc, argv, &i, "--lambda1"))) {
            p.lambda1_opt_case = OMLD__TRAIN_PARAMS__LAMBDA1_OPT_LAMBDA1;
            p.lambda1 = (float)ctl_real("--lambda1", v, -1e6, 1e6);
        } else if ((v = ctl_opt(argc, argv, &i, "--lambda2"))) {
            p.lambda2_opt_case = OMLD__TRAIN_PARAMS__LAMBDA2_OPT_LAMBDA2;
            p.lambda2 = (float)ctl_real("--lambda2", v, -1e6, 1e6);
        } else if ((v = ctl_opt(argc, argv, &i, "--seed"))) {
            p.seed_opt_case = OMLD__TRAIN_PARAMS__SEED_OPT_SEED;
            p.seed = (uint64_t)ctl_int("--seed", v, 0, (long long)1 << 62);
        } else if ((v = ctl_opt(argc, argv, &i, "--val-frac"))) {
            p.validation_fraction_opt_case =
                OMLD__TRAIN_PARAMS__VALIDATION_FRACTION_OPT_VALIDATION_FRACTION;
            p.validation_fraction = (float)ctl_real("--val-frac", v, 0, 0.5);
        } else if ((v = ctl_opt(argc, argv, &i, "--patience"))) {
            p.patience = (uint32_t)ctl_int("--patience", v, 1, 10000);
        } else if (strcmp(argv[i], "--detach") == 0) {
            detach = 1;
        } else {
            free(labels_buf);
            return ctl_usage_error("train", "unknown argument '%s'", argv[i]);
        }
    }
    if (q.method == NULL) {
        free(labels_buf);
        return ctl_usage_error("train", "--method is required");
    }
    omlc *c;
    int rc = ctl_connect(g, &c);
    if (rc) {
        free(labels_buf);
        return rc;
    }
    omlc_error err;
    uint64_t id = 0;
    char model[256];
    rc = omlc_train_start(c, &q, &id, model, sizeof model, &err);
    free(labels_buf);
    if (rc) {
        omlc_close(c);
        return ctl_fail("train", rc, &err);
    }
    if (detach) {
        if (g->json)
            ctl_print_json(json_pack("{s:I, s:s}", "job_id", (json_int_t)id, "model", model));
        else
            printf("job %llu started (model %s)\n", (unsigned long long)id, model);
        omlc_close(c);
        return CTL_EXIT_OK;
    }
    fprintf(stderr, "job %llu started (model %s)\n", (unsigned long long)id, model);
    int tty = isatty(1) && isatty(2), exit_code = CTL_EXIT_OK;
    double last = 0;
    for (;;) {
        Omld__Response *r = NULL;
        rc = omlc_train_status(c, id, &r, &err);
        if (rc) {
            omlc_close(c);
            return ctl_fail("train-status", rc, &err);
        }
        const Omld__JobInfo *j = r->train_status->job;
        double frac = j->steps_total ? (double)j->step / (double)j->steps_total : 0.0;
        if (j->state == OMLD__JOB_INFO__STATE__DONE)
            frac = 1.0;
        int ended = j->state >= OMLD__JOB_INFO__STATE__DONE;
        if (tty) {
            int w = 30, fill = (int)(frac * w + 0.5);
            fprintf(stderr, "\r[%.*s%*s] %5.1f%%  epoch %u/%u  loss %-8.4g val R@1 %-6.3f ETA %s",
                    fill, "##############################", w - fill, "", frac * 100.0, j->epoch,
                    j->epochs, j->loss, j->val_r1,
                    j->eta_s >= 0 ? "" : "?");
            if (j->eta_s >= 0)
                fprintf(stderr, "%.0fs   ", j->eta_s);
            if (ended)
                fputc('\n', stderr);
        } else if (ended || ctl_now() - last >= 1.0) {
            last = ctl_now();
            fprintf(stderr, "job %llu %s %.1f%% epoch %u/%u step %llu loss %.4g val_r1 %.3f\n",
                    (unsigned long long)id, state_name(j->state), frac * 100.0, j->epoch,
                    j->epochs, (unsigned long long)j->step, j->loss, j->val_r1);
        }
        if (ended) {
            print_job(j);
            if (j->state != OMLD__JOB_INFO__STATE__DONE)
                exit_code = CTL_EXIT_DAEMON;
            omld__response__free_unpacked(r, NULL);
            break;
        }
        omld__response__free_unpacked(r, NULL);
        usleep(200000);
    }
    omlc_close(c);
    return exit_code;
}

/* ---------------------------------------------------------------- jobs */

static int job_cmd(ctl *g, int argc, char **argv, int cancel)
{
    const char *cmd = cancel ? "train-cancel" : "train-status";
    uint64_t id = 0;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            printf("usage: omlctl %s JOB_ID\n%s\n", cmd,
                   cancel ? "Cancels a queued or running job (it leaves no model)."
                          : "Shows a job's state, epoch, step, loss, validation R@1 and model.");
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if (id == 0) {
            id = (uint64_t)ctl_int("JOB_ID", argv[i], 1, (long long)1 << 62);
        } else {
            return ctl_usage_error(cmd, "unknown argument '%s'", argv[i]);
        }
    }
    if (id == 0)
        return ctl_usage_error(cmd, "a job id is required");
    omlc *c;
    int rc = ctl_connect(g, &c);
    if (rc)
        return rc;
    omlc_error err;
    Omld__Response *r = NULL;
    rc = cancel ? omlc_train_cancel(c, id, &r, &err) : omlc_train_status(c, id, &r, &err);
    omlc_close(c);
    if (rc)
        return ctl_fail(cmd, rc, &err);
    const Omld__JobInfo *job = cancel ? r->train_cancel->job : r->train_status->job;
    if (g->json)
        ctl_print_json(omld_pbjson_write(&job->base));
    else
        print_job(job);
    omld__response__free_unpacked(r, NULL);
    return CTL_EXIT_OK;
}

int ctl_train_status(ctl *g, int argc, char **argv)
{
    return job_cmd(g, argc, argv, 0);
}

int ctl_train_cancel(ctl *g, int argc, char **argv)
{
    return job_cmd(g, argc, argv, 1);
}

/* ---------------------------------------------------------------- models */

int ctl_models(ctl *g, int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            printf("usage: omlctl models [--json]\nThe named batch models: method, depth, "
                   "creation time, validation R@1, items indexed.\n");
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            return ctl_usage_error("models", "unknown argument '%s'", argv[i]);
        }
    }
    omlc *c;
    int rc = ctl_connect(g, &c);
    if (rc)
        return rc;
    omlc_error err;
    Omld__Response *r = NULL;
    rc = omlc_list_models(c, &r, &err);
    omlc_close(c);
    if (rc)
        return ctl_fail("models", rc, &err);
    const Omld__ListModelsResponse *l = r->list_models;
    json |= g->json;
    if (json) {
        printf("[");
        for (size_t i = 0; i < l->n_models; i++) {
            const Omld__ModelInfo *m = l->models[i];
            printf("%s{\"name\":", i ? "," : "");
            ctl_json_string(stdout, m->name);
            printf(",\"method\":");
            ctl_json_string(stdout, m->method);
            printf(",\"variant\":");
            ctl_json_string(stdout, m->variant);
            printf(",\"depth\":%u,\"created_ms\":%llu,\"val_r1\":", m->depth,
                   (unsigned long long)m->created_ms);
            if (isfinite(m->val_r1))
                printf("%.6g", m->val_r1);
            else
                printf("null");
            printf(",\"items_indexed\":%llu,\"trained_items\":%u,\"epochs_run\":%u,"
                   "\"job_id\":%llu}",
                   (unsigned long long)m->items_indexed, m->trained_items, m->epochs_run,
                   (unsigned long long)m->job_id);
        }
        printf("]\n");
    } else if (l->n_models == 0) {
        printf("no batch models\n");
    } else {
        printf("%-24s %-18s %5s %-20s %7s %9s\n", "name", "method", "depth", "created", "val_r1",
               "indexed");
        for (size_t i = 0; i < l->n_models; i++) {
            const Omld__ModelInfo *m = l->models[i];
            time_t t = (time_t)(m->created_ms / 1000);
            struct tm tmv;
            char when[32];
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tmv));
            printf("%-24s %-18s %5u %-20s %7.3f %9llu\n", m->name, m->method, m->depth, when,
                   m->val_r1, (unsigned long long)m->items_indexed);
        }
    }
    omld__response__free_unpacked(r, NULL);
    return CTL_EXIT_OK;
}

static int name_cmd(ctl *g, int argc, char **argv, const char *cmd, int needs_name,
                    const char *help)
{
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            printf("usage: omlctl %s%s\n%s\n", cmd, needs_name ? " NAME" : "", help);
            return -1;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if (needs_name && name == NULL) {
            name = argv[i];
        } else {
            return ctl_usage_error(cmd, "unknown argument '%s'", argv[i]);
        }
    }
    if (needs_name && name == NULL)
        return ctl_usage_error(cmd, "a model name is required");
    omlc *c;
    int rc = ctl_connect(g, &c);
    if (rc)
        return rc;
    omlc_error err;
    uint64_t version = 0;
    if (strcmp(cmd, "promote") == 0)
        rc = omlc_promote(c, name, &version, &err);
    else if (strcmp(cmd, "rollback") == 0)
        rc = omlc_rollback(c, &version, &err);
    else
        rc = omlc_delete_model(c, name, &err);
    omlc_close(c);
    if (rc)
        return ctl_fail(cmd, rc, &err);
    if (g->json && strcmp(cmd, "delete-model") == 0)
        ctl_print_json(json_pack("{s:s}", "deleted", name));
    else if (g->json)
        ctl_print_json(json_pack("{s:I}", "model_version", (json_int_t)version));
    else if (strcmp(cmd, "delete-model") == 0)
        printf("model %s deleted\n", name);
    else
        printf("%s: the live model is now version %llu\n", cmd, (unsigned long long)version);
    return CTL_EXIT_OK;
}

int ctl_promote(ctl *g, int argc, char **argv)
{
    int rc = name_cmd(g, argc, argv, "promote", 1,
                      "Makes the batch model NAME the live model's trunk and head at its depth\n"
                      "(the other heads keep their weights, hedge weights reset to uniform).");
    return rc < 0 ? 0 : rc;
}

int ctl_rollback(ctl *g, int argc, char **argv)
{
    int rc = name_cmd(g, argc, argv, "rollback", 0,
                      "Restores the live model as it was before the last promote.");
    return rc < 0 ? 0 : rc;
}

int ctl_delete_model(ctl *g, int argc, char **argv)
{
    int rc = name_cmd(g, argc, argv, "delete-model", 1,
                      "Removes the batch model NAME (and its file).");
    return rc < 0 ? 0 : rc;
}
