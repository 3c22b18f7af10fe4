/* follow.c - a read replica's side of the learner thread: it applies the
 * primary's log records as recovery does, and publishes a view exactly
 * where the primary published one, with the primary's version number.
 * Applying is a function of the state and the record (persist.c), so at
 * equal versions the two serve the same model over the same items.
 *
 * A checkpoint from the primary replaces the state: its bytes become the
 * only checkpoint in the replica's own data directory (its log emptied),
 * and the ordinary recovery path loads it. The replica writes no log of
 * its own: a restart bootstraps again from Redis. */
#include <errno.h>
#include <stdlib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "atomic_file.h"
#include "engine_int.h"
#include "log.h"
#include "replication.h"

/* The primary's checkpoint as the state. 0, or -1 with r's error set. */
static int load(omld_engine *e, const omld_repl_batch *b, omld_reply *r)
{
    char wal[OMLD_STR_MAX + 8], path[OMLD_STR_MAX + 64];
    snprintf(wal, sizeof wal, "%s/wal", e->opts.data_dir);
    omld_repl_remove_files(e->opts.data_dir, "checkpoint-");
    omld_repl_remove_files(wal, "wal-");
    snprintf(path, sizeof path, "%s/checkpoint-%016" PRIx64 ".ckpt", e->opts.data_dir,
             b->load_lsn);
    struct iovec v = {.iov_base = b->ckpt, .iov_len = b->ckpt_len};
    enum oml_atomic_stage stage;
    if (oml_atomic_write(path, &v, 1, 0640, &stage) != 0) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "cannot write %s: %s", path,
                         strerror(errno));
        return -1;
    }
    char err[1536];
    if (omld_persist_reload(e, err, sizeof err) != 0) {
        const char *why = strstr(err, ".ckpt: "); /* the path is ours, not news */
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "the primary's checkpoint at "
                         "log position %" PRIu64 " cannot be loaded: %s", b->load_lsn,
                         why ? why + 7 : err);
        return -1;
    }
    if (e->ckpt_lsn != b->load_lsn) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "the primary's checkpoint "
                         "was refused (the daemon's log says why)");
        return -1;
    }
    e->version--; /* served under the checkpoint's own version */
    omld_engine_publish(e);
    return 0;
}

void omld_follow_apply(omld_engine *e, omld_repl_batch *b, omld_reply *r)
{
    if (b->ckpt && load(e, b, r) != 0)
        return;
    b->applied_lsn = b->ckpt ? b->load_lsn : b->applied_lsn;
    e->follow_lsn = b->applied_lsn;
    for (size_t i = 0; i < b->n; i++) {
        const omld_repl_entry *x = &b->e[i];
        if (x->version > 0) {
            if (x->version <= e->version)
                continue; /* a view this replica already serves (or passed) */
            e->version = x->version - 1;
            omld_engine_publish(e);
            continue;
        }
        e->replay_log_ns = omld_now_ns(); /* no "replaying" progress lines: this is no recovery */
        int rc = omld_persist_apply_record(e, x->type, x->lsn, x->payload, x->len);
        free(e->promote_log); /* nothing is logged here */
        e->promote_log = NULL;
        e->promote_log_len = 0;
        if (rc != 0) {
            omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "log record %" PRIu64
                             " from the primary cannot be applied: %s", x->lsn, oml_strerror(rc));
            return;
        }
        b->applied_lsn = x->lsn;
        e->follow_lsn = x->lsn;
    }
    b->version = e->version;
}

void omld_follow_promote(omld_engine *e, struct omld_replicate *pub, omld_reply *r)
{
    if (e->replay.n_pending > 0) { /* every group of the primary ends by learning them */
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "cannot promote: the "
                         "primary's log ends inside a group (a part batch is waiting)");
        return;
    }
    Omld__PromoteReplicaResponse *m = omld_reply_alloc(r, sizeof *m);
    if (m == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    char path[600];
    oml_diag d = {0};
    e->pub = pub; /* the checkpoint below is the first thing it publishes */
    if (omld_persist_rebase(e, e->follow_lsn, path, sizeof path, &d) != OML_OK) {
        e->pub = NULL;
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "cannot promote: %s", d.msg);
        return;
    }
    e->replica = 0;
    e->published_lsn = e->follow_lsn; /* the view serving is of this position */
    e->published_updates = e->learner->stats.updates;
    e->published_ns = omld_now_ns();
    e->dirty = 0;
    LOG_INFO("follow", "promoted: the primary from log position %" PRIu64 " on (view %" PRIu64
             "), checkpoint %s", e->follow_lsn, e->version, path);
    omld__promote_replica_response__init(m);
    m->log_position = e->follow_lsn;
    m->model_version = e->version;
    r->msg.body_case = OMLD__RESPONSE__BODY_PROMOTE_REPLICA;
    r->msg.promote_replica = m;
    r->msg.model_version = e->version;
}
