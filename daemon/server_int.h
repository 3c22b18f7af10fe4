/* server_int.h - what the RPC server's files share: the server, its
 * connections and their request slots (server.c: listeners and drain;
 * conn.c: connections; route.c: the routes a request takes). Loop thread
 * only, but for what a slot's work touches on the threadpool. */
#ifndef OMLD_SERVER_INT_H
#define OMLD_SERVER_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "auth.h"
#include "frame.h"
#include "local.h"
#include "ops.h"
#include "query.h"
#include "reply.h"
#include "server.h"
#include "tls.h"
#include "trainer.h"
#include "validate.h"
#include "view.h"

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

enum slot_state { SLOT_PARKED = 0, SLOT_ENGINE, SLOT_WORK, SLOT_READY };

typedef struct omld_conn omld_conn;

typedef struct omld_slot {
    struct omld_slot *prev, *next;   /* the connection's FIFO */
    omld_conn *conn;
    Omld__Request *req;              /* owned until the answer is ready */
    const omld_op *op;               /* its row, once routed (NULL before) */
    int state;                       /* enum slot_state */
    int close_after;                 /* close the connection once this is written */
    uint64_t cost;
    uint64_t t0;                     /* decoded, omld_now_ns() */
    omld_view *view;                 /* queries: referenced on the loop, released there */
    const omld_query_ctx *qctx;
    uint32_t max_frame;
    uv_work_t work;
    omld_reply reply;                /* queries: built and packed on the pool */
    struct omld_recall_job *recall;  /* queries: a recall sample to run after the reply */
    size_t in_bytes;                 /* frame bytes counted in conn->held_in until answered */
    size_t out_est;                  /* the answer's size bound, counted in conn->out_expected
                                        until the answer is packed */
    size_t out_counted;              /* out_len, counted in conn->out_held while READY */
    uint8_t *out;                    /* the packed answer frame (READY) */
    size_t out_len;
    int code;                        /* its status code */
    struct omld_slot *co_next;       /* coalesce.c: waiting for a group */
    int coalesced;                   /* coalesce.c: its job counts in co_jobs */
} omld_slot;

struct omld_conn {
    omld_stream io;                  /* its handle (first) and, with TLS, its session */
    omld_server *srv;
    omld_conn *prev, *next;          /* the server's connections */
    omld_conn *park_prev, *park_next;
    int park_listed;
    oml_frame_reader rd;
    omld_slot *head, *tail;
    uint32_t inflight;               /* slots in the FIFO */
    size_t unsent;                   /* bytes given to uv_write, not yet completed */
    size_t out_held;                 /* packed answers of READY slots not yet written */
    size_t out_expected;             /* size bounds of the answers still being computed */
    int refs;
    omld_slot *parked;               /* the slot waiting for room in the engine */
    unsigned closing : 1, reading : 1, eof : 1, fatal : 1, out_paused : 1, in_pump : 1;
    unsigned in_paused : 1;          /* reading off: max_conn_input_bytes held */
    size_t held_in;                  /* payload bytes of decoded requests not yet answered */
    uint64_t rx_total;               /* bytes read */
    uint64_t frames_seen;            /* frames decoded */
    uint64_t last_active_ns;         /* last byte read or answer written */
    uint64_t tx_progress_ns;         /* last write completion (or start of unsent output) */
    uint64_t partial_t0;             /* a partial frame is being read since (0: none) */
    uint64_t partial_rx0;            /* rx_total at its start, less what it had already */
    uint64_t partial_frames;         /* frames_seen at its start */
    uint64_t read_t0;                /* first read started (a TLS handshake's clock) */
    omld_session session;            /* its rights (auth.h) */
    char peer[80];                   /* "HOST:PORT" or "unix", for logs */
};

struct omld_server {
    uv_loop_t *loop;
    const omld_config *cfg;
    omld_engine *engine;
    omld_views *views;
    omld_metrics *metrics;
    omld_limits lim;
    omld_query_ctx qctx;
    uint64_t start_ns;
    uint32_t max_frame;
    uint32_t max_pipeline;
    int co_max;                      /* coalesce.c: query_group_jobs (0: never grouped) */
    uint64_t max_connections;
    uint64_t max_in, out_high, out_low;
    omld_answer_dims dims;           /* of the live model (answer size bounds) */
    uint64_t idle_ns, request_ns, min_rate;
    const omld_tokens *tokens;       /* NULL or empty: no authorisation */
    const char *not_primary;         /* a read replica: writes refused with this (replica.c) */
    omld_trainer *trainer;           /* NULL: trainer requests are UNAVAILABLE */
    void *control;                   /* CONTROL rows' context (promote_replica.c); NULL: CONFLICT */
    /* a router (router.c): every routed request but INLINE goes here */
    int (*forward)(void *ctx, const Omld__Request *req, omld_reply *now,
                   void (*done)(void *ctx, omld_reply *reply), void *done_ctx);
    void *forward_ctx;
    omld_tls *tls;                   /* NULL: TCP connections are plain */
    uint8_t *tls_refusal;            /* the answer a plain client gets on a TLS port */
    size_t tls_refusal_len;
    uv_timer_t sweep_timer;
    int sweep_open;

    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_timer_t drain_timer;
    int tcp_open, pipe_open, timer_open, timer_closing;
    int handles_open;                /* of the three above, not yet closed */
    int failed;                      /* start failed: free once handles are closed */
    struct sockaddr_storage bound;

    omld_conn *conns;
    uint64_t n_conns;
    omld_conn *park_head, *park_tail;
    omld_slot *co_head, *co_tail;    /* coalesce.c: Classify requests waiting for a group */
    int co_jobs;                     /* coalesce.c: groupable jobs on the pool */

    int draining, done_called;
    void (*drain_done)(void *arg);
    void *drain_arg;

    char rbuf[65536];                /* shared: libuv never interleaves alloc/read across streams */
};

/* conn.c */
void omld_conn_accept(uv_stream_t *listener, int status); /* uv_listen callback */
void omld_conn_pump(omld_conn *c);
void omld_conn_close(omld_conn *c);
void omld_conn_unref(omld_conn *c);
void omld_conn_sweep(uv_timer_t *t);
void omld_slot_answer(omld_slot *sl, omld_reply *r);
void omld_slot_error(omld_slot *sl, Omld__Status__Code code, const char *message);
void omld_slot_pack(omld_slot *sl);
void omld_slot_ready(omld_slot *sl);
void omld_slot_discard(omld_slot *sl);

/* route.c */
void omld_route_start(omld_slot *sl);
/* A QUERY slot's answer, on the loop once its work ended (status: the
 * work callback's): the view released, the answer made ready (or dropped
 * on a closing connection), its recall sample queued, the connection's
 * reference dropped. */
void omld_route_query_finish(omld_slot *sl, int status);
/* Queues a QUERY slot (view taken, state SLOT_WORK, the connection's
 * reference taken) alone on the pool; an error answers it. */
void omld_route_query_queue(omld_slot *sl);

/* coalesce.c: concurrent single Classify requests answered together */
#define OMLD_COALESCE_MAX 128   /* requests in one group */
/* 1 if sl (a QUERY slot, view taken, state SLOT_WORK) now waits for a
 * group; 0 if it starts alone (counted when groupable). */
int omld_coalesce_admit(omld_slot *sl);
/* A counted job ended: starts what waits, as far as co_max allows. */
void omld_coalesce_done(omld_server *s);
void omld_route_wake(void *server);
void omld_park_remove(omld_conn *c);

/* server.c */
void omld_server_maybe_done(omld_server *s);

#endif
