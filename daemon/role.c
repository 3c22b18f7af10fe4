/* role.c - the replication role and its change (role.h).
 *
 * DESIGN. Decided once at start from the options and <data_dir>/promoted;
 * changed once at most, from replica to primary, by a promotion: the
 * publisher promote_replica.c started becomes ours, the replica is stopped, the
 * server stops refusing writes and the marker is written. */
#include "role.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "atomic_file.h"
#include "lease.h"
#include "log.h"
#include "promote_replica.h"
#include "replica.h"
#include "replicate.h"
#include "router.h"
#include "server.h"

struct omld_role {
    const omld_config *cfg;
    uv_loop_t *loop;
    char node_id[OMLD_NODE_ID_LEN + 1];
    char url[OMLD_STR_MAX];     /* the stream this omld publishes to ("" none) */
    char marker[OMLD_STR_MAX + 16];
    char rpc_addr[128];
    int promoted_before;        /* the marker named replica_of: a primary again */
    uint64_t promoted_lsn;      /* promoted in this run, at this position */
    omld_engine *engine;
    struct omld_server *server;
    omld_replicate *pub;
    omld_replica *replica;
    omld_promote *promote;
    omld_router *router;
    omld_role_events ev;
    int ready;
    int stopping;
};

/* The marker's URL ("" none). */
static void read_marker(const char *path, char *url, size_t cap)
{
    url[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    if (fgets(url, (int)cap, f) == NULL)
        url[0] = '\0';
    url[strcspn(url, "\r\n")] = '\0';
    fclose(f);
}

/* A replica's state directory: data_dir/replica, emptied unless it was
 * promoted (its state is then the primary's). 0 or -1. */
static int replica_dir(omld_role *r, omld_config *ecfg, char *err, size_t errlen)
{
    char dir[OMLD_STR_MAX + 16];
    snprintf(dir, sizeof dir, "%s/replica", r->cfg->data_dir);
    if (strlen(dir) >= sizeof ecfg->data_dir || (mkdir(dir, 0755) != 0 && errno != EEXIST)) {
        snprintf(err, errlen, "replica_of: cannot use %s as the replica's state directory", dir);
        return -1;
    }
    memcpy(ecfg->data_dir, dir, strlen(dir) + 1); /* fits: checked above */
    if (r->promoted_before) {
        /* the engine runs as this stream's primary, on the state it kept */
        ecfg->replica_of[0] = '\0';
        snprintf(ecfg->replicate, sizeof ecfg->replicate, "%s", r->cfg->replica_of);
        return 0;
    }
    char wal[sizeof dir + 8];
    snprintf(wal, sizeof wal, "%s/wal", dir);
    omld_repl_remove_files(dir, "checkpoint-");
    omld_repl_remove_files(wal, "wal-");
    return 0;
}

int omld_role_init(omld_role **out, const omld_config *cfg, omld_config *engine_cfg, char *err,
                   size_t errlen)
{
    *out = NULL;
    *engine_cfg = *cfg;
    omld_role *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->cfg = cfg;
    char host[256], prefix[OMLD_REPL_PREFIX_MAX];
    int port;
    const char *which = cfg->replica_of[0] ? "replica_of" : "replicate";
    const char *url = cfg->replica_of[0] ? cfg->replica_of : cfg->replicate;
    if (url[0] && omld_repl_parse_url(which, url, host, sizeof host, &port, prefix,
                                      sizeof prefix, err, errlen) != 0)
        goto fail; /* before anything in data_dir is touched */
    if (url[0] && omld_node_id(cfg->data_dir, r->node_id, err, errlen) != 0)
        goto fail;
    snprintf(r->marker, sizeof r->marker, "%s/promoted", cfg->data_dir);
    if (cfg->replica_of[0]) {
        char was[OMLD_STR_MAX];
        read_marker(r->marker, was, sizeof was);
        r->promoted_before = strcmp(was, cfg->replica_of) == 0;
        if (was[0] && !r->promoted_before)
            LOG_WARN("role", "%s names %s, not replica_of: ignored (this omld follows %s)",
                     r->marker, was, cfg->replica_of);
        if (r->promoted_before)
            LOG_INFO("role", "promoted earlier (%s): running as the primary of %s on %s/replica",
                     r->marker, cfg->replica_of, cfg->data_dir);
        if (replica_dir(r, engine_cfg, err, errlen) != 0)
            goto fail;
    }
    snprintf(r->url, sizeof r->url, "%s", engine_cfg->replicate);
    *out = r;
    return 0;
fail:
    free(r);
    return -1;
}

int omld_role_publish(omld_role *r, uv_loop_t *loop, const char *rpc_addr, char *err,
                      size_t errlen)
{
    r->loop = loop;
    snprintf(r->rpc_addr, sizeof r->rpc_addr, "%s", rpc_addr);
    return omld_replicate_start(&r->pub, loop, r->cfg, r->url, rpc_addr, r->node_id, err, errlen);
}

struct omld_replicate *omld_role_publisher(omld_role *r)
{
    return r->pub;
}

/* ------------------------------------------------------------ the lease */

static void on_lease(void *arg, int held, const char *why)
{
    omld_role *r = arg;
    if (r->ready || r->ev.ready == NULL)
        return; /* later refusals: the publisher logs them, writes stay refused */
    if (held) {
        r->ready = 1;
        r->ev.ready(r->ev.arg);
    } else {
        r->ev.refused(r->ev.arg, why);
    }
}

/* ------------------------------------------------------------ promotion */

static struct omld_replicate *promote_start(void *arg, char *err, size_t errlen)
{
    omld_role *r = arg;
    omld_replicate *pub = NULL;
    if (omld_replicate_start(&pub, r->loop, r->cfg, r->cfg->replica_of, r->rpc_addr,
                             r->node_id, err, errlen) != 0)
        return NULL;
    return pub;
}

static void promoted(void *arg, struct omld_replicate *pub, uint64_t lsn)
{
    omld_role *r = arg;
    if (r->stopping) { /* answered while the engine stopped: the server is gone */
        omld_replicate_stop(pub);
        return;
    }
    omld_server_set_not_primary(r->server, NULL);
    omld_server_set_control(r->server, NULL);
    omld_replica_stop(r->replica);
    r->replica = NULL;
    r->pub = pub;
    r->promoted_lsn = lsn;
    char text[OMLD_STR_MAX + 2];
    int n = snprintf(text, sizeof text, "%s\n", r->cfg->replica_of);
    struct iovec v = {text, (size_t)n};
    enum oml_atomic_stage stage;
    if (oml_atomic_write(r->marker, &v, 1, 0644, &stage) != 0 && stage != OML_ATOMIC_DIR)
        LOG_ERROR("role", "cannot write %s: %s (a restart with the same options would follow "
                  "this stream as a replica again, not lead it)", r->marker, strerror(errno));
    if (r->ev.leading)
        r->ev.leading(r->ev.arg);
}

int omld_role_leads(const omld_role *r)
{
    return r->cfg->replica_of[0] == '\0' || r->promoted_before;
}

/* ------------------------------------------------------------ running */

int omld_role_run(omld_role *r, omld_engine *engine, struct omld_server *server,
                  const omld_role_events *ev, char *err, size_t errlen)
{
    r->engine = engine;
    r->server = server;
    r->ev = *ev;
    if (r->cfg->replica_of[0] && !r->promoted_before) {
        if (omld_replica_start(&r->replica, r->loop, r->cfg, engine, server, r->rpc_addr, err,
                               errlen) != 0)
            return -1;
        omld_promote_hooks hooks = {.start = promote_start, .promoted = promoted, .arg = r};
        if (omld_promote_create(&r->promote, r->loop, r->cfg, r->node_id, r->rpc_addr, engine,
                                r->replica, &hooks, err, errlen) != 0)
            return -1;
        omld_server_set_control(server, r->promote);
    }
    if (omld_router_create(&r->router, r->loop, r->cfg, err, errlen) != 0)
        return -1;
    if (r->router) {
        omld_server_set_forward(server, omld_router_forward, r->router);
        omld_server_set_not_primary(server, "this omld is a router (option router): it "
                                    "holds no data");
    }
    if (r->pub)
        omld_replicate_set_lease_cb(r->pub, on_lease, r);
    else
        on_lease(r, 1, "");
    return 0;
}

void omld_role_stats(omld_role *r, omld_repl_stats *out)
{
    if (r && r->replica)
        omld_replica_stats_get(r->replica, out);
    else
        omld_replicate_stats_get(r ? r->pub : NULL, out);
    if (r && r->pub && !r->replica)
        out->promoted_lsn = r->promoted_lsn;
}

void omld_role_stop(omld_role *r)
{
    if (r == NULL)
        return;
    r->stopping = 1;
    omld_promote_stop(r->promote); /* it may still resume the replica */
    r->promote = NULL;
    omld_replicate_stop(r->pub); /* the learner, which hands it records, has stopped */
    r->pub = NULL;
    omld_replica_stop(r->replica); /* ... and answered its last batch */
    r->replica = NULL;
    omld_router_stop(r->router); /* the server drained: no retrieval in flight */
    r->router = NULL;
}

void omld_role_free(omld_role *r)
{
    free(r);
}
