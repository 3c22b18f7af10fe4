/* redis_uv.c - hiredis's asynchronous contexts on the libuv loop (see
 * redis_uv.h for why not hiredis's own adapter). */
#include "redis_uv.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct watcher {
    uv_poll_t poll;
    redisAsyncContext *ac; /* NULL once hiredis has released the context */
    int events;            /* UV_READABLE | UV_WRITABLE hiredis wants */
} watcher;

static void on_poll(uv_poll_t *h, int status, int events)
{
    watcher *w = h->data;
    /* An error is the event hiredis waits for: it reads the socket's error. */
    int ev = status < 0 ? w->events : events;
    if (w->ac && (ev & UV_READABLE))
        redisAsyncHandleRead(w->ac);
    if (w->ac && (ev & UV_WRITABLE))
        redisAsyncHandleWrite(w->ac);
}

static void update(watcher *w, int events)
{
    w->events = events;
    if (events)
        uv_poll_start(&w->poll, events, on_poll);
    else
        uv_poll_stop(&w->poll);
}

static void add_read(void *p)
{
    watcher *w = p;
    update(w, w->events | UV_READABLE);
}

static void del_read(void *p)
{
    watcher *w = p;
    update(w, w->events & ~UV_READABLE);
}

static void add_write(void *p)
{
    watcher *w = p;
    update(w, w->events | UV_WRITABLE);
}

static void del_write(void *p)
{
    watcher *w = p;
    update(w, w->events & ~UV_WRITABLE);
}

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void cleanup(void *p)
{
    watcher *w = p;
    w->ac = NULL;
    uv_close((uv_handle_t *)&w->poll, on_closed);
}

int omld_redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    if (ac->ev.data != NULL)
        return REDIS_ERR;
    watcher *w = calloc(1, sizeof *w);
    if (w == NULL)
        return REDIS_ERR;
    if (uv_poll_init(loop, &w->poll, ac->c.fd) != 0) {
        free(w);
        return REDIS_ERR;
    }
    w->poll.data = w;
    w->ac = ac;
    ac->ev.data = w;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    return REDIS_OK;
}

redisAsyncContext *omld_redis_uv_connect(uv_loop_t *loop, const char *host, int port, void *data,
                                         redisConnectCallback *on_connect,
                                         redisDisconnectCallback *on_disconnect, char *err,
                                         size_t errlen)
{
    redisAsyncContext *ac = redisAsyncConnect(host, port);
    if (ac == NULL) {
        snprintf(err, errlen, "cannot connect to Redis: out of memory");
        return NULL;
    }
    if (ac->err) {
        snprintf(err, errlen, "cannot connect to Redis: %s", ac->errstr);
        redisAsyncFree(ac);
        return NULL;
    }
    ac->data = data;
    if (omld_redis_uv_attach(ac, loop) != REDIS_OK) {
        snprintf(err, errlen, "cannot watch the Redis connection (uv_poll_init)");
        ac->data = NULL;
        redisAsyncFree(ac);
        return NULL;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    return ac;
}
