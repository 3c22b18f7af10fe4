/* route.c - where a routed request goes, by its row's route (ops.h).
 *
 * DESIGN
 * INLINE rows are answered at once on the loop (local.c, auth.c). QUERY
 * rows run on libuv's threadpool against a referenced view (none yet:
 * UNAVAILABLE, unless the row needs no model) and ADMIN rows on the same
 * pool through the trainer; both pack their answer there, since a large
 * answer costs its serialisation. MUTATION rows go to the learner's queue
 * (omld_engine_submit); when it has no room the slot is PARKED, the
 * connection stops being read and waits in a FIFO on the server, and the
 * engine's wake callback (omld_route_wake) retries parked connections in
 * order until the queue refuses again. A slot at the engine or on the pool
 * holds a reference on its connection. Loop thread, but for the *_work
 * functions (threadpool). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "recall.h"
#include "server_int.h"

void omld_park_remove(omld_conn *c)
{
    omld_server *s = c->srv;
    if (!c->park_listed)
        return;
    if (c->park_prev)
        c->park_prev->park_next = c->park_next;
    else
        s->park_head = c->park_next;
    if (c->park_next)
        c->park_next->park_prev = c->park_prev;
    else
        s->park_tail = c->park_prev;
    c->park_prev = c->park_next = NULL;
    c->park_listed = 0;
}

static void park_add(omld_conn *c, int at_head)
{
    omld_server *s = c->srv;
    if (c->park_listed)
        return;
    c->park_listed = 1;
    if (at_head) {
        c->park_prev = NULL;
        c->park_next = s->park_head;
        if (s->park_head)
            s->park_head->park_prev = c;
        else
            s->park_tail = c;
        s->park_head = c;
    } else {
        c->park_next = NULL;
        c->park_prev = s->park_tail;
        if (s->park_tail)
            s->park_tail->park_next = c;
        else
            s->park_head = c;
        s->park_tail = c;
    }
}

/* INLINE route: answered now, on the loop (Status, Health, Auth). */
static void start_inline(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    omld_server *s = c->srv;
    omld_local_ctx ctx = {.engine = s->engine, .views = s->views, .metrics = s->metrics,
                          .start_ns = s->start_ns, .draining = s->draining,
                          .tokens = s->tokens, .session = &c->session};
    omld_reply r;
    omld_reply_init(&r, sl->req->request_id);
    r.msg.model_version = omld_views_version(s->views);
    sl->op->handle.local(&ctx, sl->req, &r);
    if (c->session.close) { /* the third wrong token: nothing after this frame is decoded */
        c->fatal = 1;
        sl->close_after = 1;
    }
    omld_slot_answer(sl, &r);
}

static void query_work(uv_work_t *w)
{
    omld_slot *sl = container_of(w, omld_slot, work);
    omld_reply_init(&sl->reply, sl->req->request_id);
    omld_query_run(sl->qctx, sl->view, sl->req, &sl->reply);
    if (sl->reply.msg.model_version == 0 && sl->view != NULL)
        sl->reply.msg.model_version = sl->view->version;
    sl->recall = sl->reply.after; /* run once the reply is out (query_after) */
    sl->reply.after = NULL;
    /* Packed here, off the loop: a large answer costs its serialisation. */
    omld_slot_pack(sl);
}

void omld_route_query_finish(omld_slot *sl, int status)
{
    omld_conn *c = sl->conn;
    omld_view_release(sl->view);
    sl->view = NULL;
    if (status != 0 && sl->out == NULL) { /* cancelled (never by us) */
        sl->code = OMLD__STATUS__CODE__INTERNAL;
        if (omld_reply_pack_error(sl->req->request_id, omld_views_version(c->srv->views),
                                  OMLD__STATUS__CODE__INTERNAL, NULL, "the query was cancelled",
                                  &sl->out, &sl->out_len) != 0)
            sl->out = NULL;
    }
    omld_recall_job *recall = sl->recall;
    sl->recall = NULL;
    if (c->closing) {
        omld_slot_discard(sl);
    } else {
        omld_slot_ready(sl);
        omld_conn_pump(c);
    }
    omld_recall_run_later(c->srv->loop, recall);
    omld_conn_unref(c);
}

static void query_after(uv_work_t *w, int status)
{
    omld_slot *sl = container_of(w, omld_slot, work);
    omld_server *s = sl->conn->srv;
    int counted = sl->coalesced;
    omld_route_query_finish(sl, status);
    if (counted)
        omld_coalesce_done(s);
}

void omld_route_query_queue(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    if (uv_queue_work(c->srv->loop, &sl->work, query_work, query_after) != 0) {
        omld_view_release(sl->view);
        sl->view = NULL;
        sl->state = SLOT_PARKED;
        omld_slot_error(sl, OMLD__STATUS__CODE__INTERNAL, "could not queue the query");
        omld_conn_unref(c); /* the slot's reference */
    }
}

static void start_query(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    omld_server *s = c->srv;
    sl->view = omld_views_acquire(s->views);
    if (sl->view == NULL && sl->op->needs_model) {
        omld_slot_error(sl, OMLD__STATUS__CODE__UNAVAILABLE,
                        "no model view has been published yet; retry later");
        return;
    }
    sl->qctx = &s->qctx;
    sl->max_frame = s->max_frame;
    sl->state = SLOT_WORK;
    c->refs++;
    if (omld_coalesce_admit(sl))
        return; /* it waits for a group (coalesce.c) */
    int counted = sl->coalesced;
    if (uv_queue_work(s->loop, &sl->work, query_work, query_after) != 0) {
        omld_view_release(sl->view);
        sl->view = NULL;
        sl->state = SLOT_PARKED;
        omld_slot_error(sl, OMLD__STATUS__CODE__INTERNAL, "could not queue the query");
        c->refs--;
        if (counted)
            omld_coalesce_done(s);
    }
}

/* ADMIN route: trainer and model requests on the threadpool (a TrainStart
 * copies the training data; a DeleteModel joins the model's indexer). */
static void admin_work(uv_work_t *w)
{
    omld_slot *sl = container_of(w, omld_slot, work);
    omld_server *s = sl->conn->srv;
    omld_reply_init(&sl->reply, sl->req->request_id);
    sl->op->handle.admin(s->trainer, sl->req, &sl->reply);
    sl->reply.msg.model_version = omld_views_version(s->views);
    omld_slot_pack(sl);
}

static void start_admin(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    omld_server *s = c->srv;
    if (s->trainer == NULL) {
        omld_slot_error(sl, OMLD__STATUS__CODE__UNAVAILABLE, "the trainer is not running");
        return;
    }
    sl->max_frame = s->max_frame;
    sl->state = SLOT_WORK;
    if (uv_queue_work(s->loop, &sl->work, admin_work, query_after) != 0) {
        sl->state = SLOT_PARKED;
        omld_slot_error(sl, OMLD__STATUS__CODE__INTERNAL, "could not queue the request");
        return;
    }
    c->refs++;
}

static void engine_done(void *ctx, omld_reply *reply)
{
    omld_slot *sl = ctx;
    omld_conn *c = sl->conn;
    if (c->closing) {
        omld_reply_free(reply);
        free(reply);
        omld_slot_discard(sl);
    } else {
        omld_slot_answer(sl, reply);
        free(reply);
        omld_conn_pump(c);
    }
    omld_conn_unref(c);
}

/* A request handed to fn(ctx, ...) on the loop, answered through
 * engine_done when it is done (1) or at once in its own reply (0). */
static void start_handed(omld_slot *sl,
                         int (*fn)(void *, const Omld__Request *, omld_reply *,
                                   void (*)(void *, omld_reply *), void *),
                         void *ctx)
{
    omld_conn *c = sl->conn;
    omld_reply now;
    omld_reply_init(&now, sl->req->request_id);
    sl->state = SLOT_ENGINE;
    c->refs++;
    if (fn(ctx, sl->req, &now, engine_done, sl))
        return;
    c->refs--;
    sl->state = SLOT_PARKED;
    omld_slot_answer(sl, &now);
}

/* CONTROL route: the replication control on the loop (promote_replica.c);
 * none (not a replica): CONFLICT. */
static void start_control(omld_slot *sl)
{
    omld_server *s = sl->conn->srv;
    if (s->control == NULL) {
        omld_reply r;
        omld_reply_init(&r, sl->req->request_id);
        omld_reply_error(&r, OMLD__STATUS__CODE__CONFLICT, sl->op->name, "%s: this omld is not "
                         "a read replica (option replica_of)", sl->op->name);
        omld_slot_answer(sl, &r);
        return;
    }
    start_handed(sl, sl->op->handle.control, s->control);
}

/* Hands a mutation to the engine: 0 queued (the slot must not be touched
 * again), 1 no room (the slot is parked and the connection paused). */
static int submit_mutation(omld_slot *sl, int park_at_head)
{
    omld_conn *c = sl->conn;
    omld_server *s = c->srv;
    sl->state = SLOT_ENGINE;
    c->refs++;
    int rc = omld_engine_submit(s->engine, sl->req, sl->cost, engine_done, sl);
    if (rc == 0)
        return 0;
    c->refs--;
    sl->state = SLOT_PARKED;
    if (rc == 1) {
        assert(c->parked == NULL); /* one parked slot stops the connection's reading */
        c->parked = sl;
        park_add(c, park_at_head);
        omld_count(&s->metrics->backpressure_events, 1);
        return 1;
    }
    omld_slot_error(sl, OMLD__STATUS__CODE__INTERNAL, "the learner did not take the request");
    return 0;
}

/* Room was freed in the engine's queue: retry parked connections in order. */
void omld_route_wake(void *arg)
{
    omld_server *s = arg;
    while (s->park_head) {
        omld_conn *c = s->park_head;
        omld_slot *sl = c->parked;
        omld_park_remove(c);
        c->parked = NULL;
        if (submit_mutation(sl, 1) == 1)
            break; /* still full: c is back at the head */
        omld_conn_pump(c);
    }
}

void omld_route_start(omld_slot *sl)
{
    assert(sl->op != NULL && sl->req != NULL && sl->state == SLOT_PARKED);
    omld_server *s = sl->conn->srv;
    if (s->forward && sl->op->route != OMLD_ROUTE_INLINE) { /* a router */
        start_handed(sl, s->forward, s->forward_ctx);
        return;
    }
    switch (sl->op->route) {
    case OMLD_ROUTE_INLINE:
        start_inline(sl);
        break;
    case OMLD_ROUTE_QUERY:
        start_query(sl);
        break;
    case OMLD_ROUTE_ADMIN:
        start_admin(sl);
        break;
    case OMLD_ROUTE_MUTATION:
        submit_mutation(sl, 0);
        break;
    case OMLD_ROUTE_CONTROL:
        start_control(sl);
        break;
    }
}
