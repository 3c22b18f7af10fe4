/* http_server.h - the daemon's status HTTP server (daemon/http.c) on a
 * libuv loop of its own thread, on 127.0.0.1 and an ephemeral port, for the
 * unit tests that talk to it over a real socket (test_http, test_history,
 * test_dashboard). */
#ifndef OML_TEST_HTTP_SERVER_H
#define OML_TEST_HTTP_SERVER_H

#include <pthread.h>
#include <uv.h>

#include "http.h"

typedef struct oml_test_http_server {
    uv_loop_t loop;
    uv_async_t stop;
    omld_http *http;
    pthread_t thread;
    int port;
} oml_test_http_server;

/* Starts it with the gather callback; configure (may be NULL) runs before
 * the loop thread starts, e.g. to attach a history or tokens. Fails the
 * test on error. */
oml_test_http_server *oml_test_http_start(omld_http_gather_fn gather,
                                          void (*configure)(omld_http *h, void *arg), void *arg);

/* Closes the server from its own loop, joins the thread, and asserts that
 * the loop closes with no handle left. */
void oml_test_http_stop(oml_test_http_server *s);

/* Sends req (a whole HTTP request; with Connection: close) to 127.0.0.1:port
 * on a connection of its own and reads until the server closes it: the
 * whole answer, NUL-terminated and malloc'd, its length in *len (may be
 * NULL). Fails the test on a socket error or after 5 s of silence. */
char *oml_test_http_exchange(int port, const char *req, size_t *len);

#endif
