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
    http_conn *conns;   /* doubly linked */
    int nconns;
    int closing;
    int listener_open;
    char rbuf[READ_BUF]; /* shared: every read is consumed before the next alloc */
};

struct http_conn {
    uv_tcp_t tcp;
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

/* http_routes.c: answers the request the parser just completed. */
void omld_http_answer(http_conn *c, int keep_alive);

#endif
