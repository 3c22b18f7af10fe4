/* coalesce.c - concurrent single Classify requests on one view answered
 * together (issue 14 item 4).
 *
 * DESIGN
 * Loop thread, but for group_work (threadpool). A groupable request
 * (omld_query_groupable: a live-model Classify without a metadata filter
 * on a view that scans every row) starts alone, as any query does, while
 * fewer than query_group_jobs (co_max; 0, the default, never groups; 4 is
 * libuv's pool, so its threads keep their share of the cores beside the
 * learner and the indexer) groupable jobs are on the pool; past that
 * it waits in the server's FIFO, and when such a job ends everything
 * waiting (up to OMLD_COALESCE_MAX) goes as one job against the view
 * current then: every query resolved alone, then one GEMM per head and
 * block of rows for all of them (omld_query_classify_group), each answer
 * bit for bit its single one, each reply its own. So a lone client never
 * waits for anything, and the queries that arrived while the pool was
 * busy share one pass over the embeddings. If the current view no longer
 * scans every row (inverted lists, a fresh view: a batch would answer one
 * query at a time), each waiting request starts alone.
 *
 * A waiting slot is in state SLOT_WORK with its view and its connection's
 * reference taken, exactly like a slot on the pool, so a connection that
 * closes meanwhile is freed only after the group answered (and dropped)
 * it. */
#include <stdlib.h>

#include "log.h"
#include "query.h"
#include "server_int.h"

typedef struct group {
    uv_work_t work;
    omld_server *srv;
    omld_view *view;              /* the group's reference */
    size_t n;
    omld_slot *slot[OMLD_COALESCE_MAX];
} group;

int omld_coalesce_admit(omld_slot *sl)
{
    omld_server *s = sl->conn->srv;
    sl->coalesced = 0;
    sl->co_next = NULL;
    if (s->co_max <= 0 || !omld_query_groupable(sl->view, sl->req))
        return 0;
    if (s->co_jobs < s->co_max && s->co_head == NULL) {
        s->co_jobs++;
        sl->coalesced = 1;
        return 0;
    }
    if (s->co_tail)
        s->co_tail->co_next = sl;
    else
        s->co_head = sl;
    s->co_tail = sl;
    return 1;
}

static void group_work(uv_work_t *w)
{
    group *g = container_of(w, group, work);
    const Omld__Request *reqs[OMLD_COALESCE_MAX];
    omld_reply *rs[OMLD_COALESCE_MAX];
    for (size_t i = 0; i < g->n; i++) {
        omld_slot *sl = g->slot[i];
        omld_reply_init(&sl->reply, sl->req->request_id);
        reqs[i] = sl->req;
        rs[i] = &sl->reply;
    }
    omld_query_classify_group(&g->srv->qctx, g->view, reqs, rs, g->n);
    for (size_t i = 0; i < g->n; i++) {
        omld_slot *sl = g->slot[i];
        sl->recall = sl->reply.after; /* run once the reply is out */
        sl->reply.after = NULL;
        omld_slot_pack(sl); /* off the loop, as query_work does */
    }
}

static void group_after(uv_work_t *w, int status)
{
    group *g = container_of(w, group, work);
    omld_server *s = g->srv;
    for (size_t i = 0; i < g->n; i++)
        omld_route_query_finish(g->slot[i], status);
    omld_view_release(g->view);
    free(g);
    omld_coalesce_done(s);
}

/* The waiting slots, in order, up to OMLD_COALESCE_MAX, as one job on v. */
static void start_group(omld_server *s, omld_view *v)
{
    group *g = malloc(sizeof *g);
    if (g != NULL) {
        g->srv = s;
        g->view = v;
        g->n = 0;
        while (s->co_head && g->n < OMLD_COALESCE_MAX) {
            omld_slot *sl = s->co_head;
            s->co_head = sl->co_next;
            sl->co_next = NULL;
            g->slot[g->n++] = sl;
        }
        if (s->co_head == NULL)
            s->co_tail = NULL;
        if (uv_queue_work(s->loop, &g->work, group_work, group_after) == 0) {
            s->co_jobs++;
            omld_count(&s->metrics->query_groups, 1);
            omld_count(&s->metrics->queries_grouped, g->n);
            return;
        }
        /* Not queued: the slots go back to the front, and start alone below. */
        for (size_t i = g->n; i-- > 0;) {
            g->slot[i]->co_next = s->co_head;
            s->co_head = g->slot[i];
            if (s->co_tail == NULL)
                s->co_tail = g->slot[i];
        }
        free(g);
    }
    omld_view_release(v);
    LOG_WARN("query", "could not start a group of classify requests; each starts alone");
    while (s->co_head) {
        omld_slot *sl = s->co_head;
        s->co_head = sl->co_next;
        sl->co_next = NULL;
        omld_route_query_queue(sl);
    }
    s->co_tail = NULL;
}

void omld_coalesce_done(omld_server *s)
{
    s->co_jobs--;
    while (s->co_head && s->co_jobs < s->co_max) {
        omld_view *v = omld_views_acquire(s->views);
        if (omld_query_groupable(v, s->co_head->req)) {
            start_group(s, v);
            continue;
        }
        omld_view_release(v);
        while (s->co_head) { /* the view no longer scans every row: alone */
            omld_slot *sl = s->co_head;
            s->co_head = sl->co_next;
            sl->co_next = NULL;
            omld_route_query_queue(sl);
        }
        s->co_tail = NULL;
    }
}
