/* http_int.h - what the status server's two files share (http.c: the
 * listener, connections and parsing; http_routes.c: what each path
 * answers). Loop thread only. */
#ifndef OMLD_HTTP_INT_H
#define OMLD_HTTP_INT_H

#include <http_parser.h>
#include <stdint.h>
#include <uv.h>

#include "history.h"
#include "http.h"
#include "tls.h"

#define MAX_HEADER_BYTES 8192
#define MAX_CONNS 64
#define READ_BUF 65536
#define IDLE_MS 60000
#define REQUEST_MS 30000
#define LINGER_MS 2000
#define WRITE_HIGH (1u << 20)
#define WRITE_LOW (256u << 10)

typedef struct http_conn http_conn;

struct omld_http {
    uv_loop_t *loop;
    uv_tcp_t listener;
    omld_http_gather_fn gather;
    void *arg;
    const omld_tokens *tokens;      /* NULL or empty: no authorisation */
    atomic_uint_fast64_t *unauthorized;
    const omld_history *history;    /* NULL: /status/history is 404 */
    struct omld_server *rpc;        /* NULL: no /v1 API (api.c) */
    omld_tls *tls;                  /* NULL: plain HTTP */
    uint32_t max_frame;             /* the RPC's frame limit */
    size_t max_body;                /* a /v1 request's JSON body bound */
    http_conn *conns;   /* doubly linked */
    int nconns;
    int closing;
    int listener_open;
    char rbuf[READ_BUF]; /* shared: every read is consumed before the next alloc */
};

struct http_conn {
    omld_stream io;     /* its TCP handle (first) and, with TLS, its session */
    uv_timer_t timer;
    uv_shutdown_t shutdown;
    http_parser parser;
    omld_http *srv;
    http_conn *prev, *next;
    int handles;        /* handles still to be closed (2 -> 0) */
    int closed;         /* uv_close called */
    int finishing;      /* no more requests: shut down, drain, close */
    int reading;
    int eof;            /* the peer will send nothing more */
    int shut_done;      /* our FIN is out (every answer was written) */
    int paused;         /* parser paused for backpressure */
    int reject;         /* HTTP status decided in a callback (413, 414), 0 if none */
    uint64_t since_ns;  /* accepted, or its last request answered (eviction order) */
    char *pending;      /* unparsed input held while paused */
    size_t pending_len;
    size_t url_len;
    char url[MAX_HEADER_BYTES + 1];
    /* the current header field (only "authorization" matters) and the value */
    char field[16];
    size_t field_len;   /* may exceed sizeof field: then it is not ours */
    int in_value;       /* the last callback was a value (a new field starts next) */
    int auth_field;     /* the current field is Authorization */
    int auth_seen;
    size_t auth_len;    /* may exceed the buffer: then it matches nothing */
    char auth[OMLD_TOKEN_MAX + 32];
    /* The /v1 API (api.c): the body being read, the link to the RPC
     * server, and the request being answered (parsing waits for it). */
    char *body;
    size_t body_len, body_cap, body_limit; /* body_limit 0: bodies are refused */
    struct omld_gateway_link *link;
    int awaiting;       /* an API answer is being computed */
    int keep_alive;     /* ... and the connection stays open after it */
    int api_op;         /* ... its body case */
    uint64_t api_t0;
};

typedef struct http_write {
    uv_write_t req;
    http_conn *conn;
    char *body;         /* owned, may be NULL */
    size_t head_len;
    char head[512];
} http_write;

/* http.c */
void omld_http_send_error_and_finish(http_conn *c, int code);
void omld_http_send_response(http_conn *c, int code, const char *ctype, char *body, size_t body_len,
                          int head_only, int keep_alive);
void omld_http_send_text(http_conn *c, int code, const char *text, int head_only, int keep_alive);

/* The request is answered: parse what arrived after it (held while it was
 * being computed) and read again; or end the connection if it asked to. */
void omld_http_request_done(http_conn *c);

/* http_routes.c: answers the request the parser just completed. */
void omld_http_answer(http_conn *c, int keep_alive);
/* The bearer token the request carried (not NUL-terminated), or NULL. */
const char *omld_http_bearer(const http_conn *c, size_t *len);

/* api.c: the /v1 routes and /openapi.json. */
int omld_api_path(const char *path, size_t plen);
/* Answers the API request just completed; may leave c->awaiting set, and
 * then calls omld_http_request_done() once the answer is queued. */
void omld_api_answer(http_conn *c, const char *path, size_t plen, int keep_alive);
/* Releases what a connection's API use holds (its link). */
void omld_api_conn_closed(http_conn *c);

#endif
