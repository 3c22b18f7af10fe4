/* redis_uv.h - hiredis's asynchronous contexts on the libuv loop.
 *
 * hiredis 0.14's own libuv adapter (hiredis/adapters/libuv.h) drops every
 * poll callback whose status is an error, which is how libuv reports a
 * refused or reset socket: a connection to a Redis that is down then never
 * completes nor fails, and ingest never reconnects. This adapter hands such
 * an event to hiredis as the read or write it was waiting for, so hiredis
 * looks at the socket, sees the error and calls the connect or disconnect
 * callback (the fix hiredis 1.x made). Loop thread only. */
#ifndef OMLD_REDIS_UV_H
#define OMLD_REDIS_UV_H

#include <hiredis/async.h>
#include <uv.h>

/* Watches ac's socket on loop; REDIS_OK or REDIS_ERR. The watcher is
 * released with the context (redisAsyncFree or a disconnect). */
int omld_redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

/* redisAsyncConnect to host:port, watched on loop, with data as its
 * ac->data and the two callbacks set; NULL with err (one sentence) when it
 * cannot even start. */
redisAsyncContext *omld_redis_uv_connect(uv_loop_t *loop, const char *host, int port, void *data,
                                         redisConnectCallback *on_connect,
                                         redisDisconnectCallback *on_disconnect, char *err,
                                         size_t errlen);

#endif
