/* http_server.c - see http_server.h. */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

static void on_stop(uv_async_t *a)
{
    oml_test_http_server *s = a->data;
    omld_http_close(s->http);
    uv_close((uv_handle_t *)&s->stop, NULL);
}

static void *loop_main(void *arg)
{
    oml_test_http_server *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

oml_test_http_server *oml_test_http_start(omld_http_gather_fn gather,
                                          void (*configure)(omld_http *h, void *arg), void *arg)
{
    oml_test_http_server *s = calloc(1, sizeof *s);
    assert_non_null(s);
    assert_int_equal(uv_loop_init(&s->loop), 0);
    struct sockaddr_storage bound;
    char err[256] = "";
    if (omld_http_start(&s->http, &s->loop, "127.0.0.1:0", gather, NULL, &bound, err,
                        sizeof err) != 0)
        fail_msg("omld_http_start: %s", err);
    assert_int_equal(bound.ss_family, AF_INET);
    s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    assert_true(s->port > 0);
    if (configure)
        configure(s->http, arg);
    assert_int_equal(uv_async_init(&s->loop, &s->stop, on_stop), 0);
    s->stop.data = s;
    assert_int_equal(pthread_create(&s->thread, NULL, loop_main, s), 0);
    return s;
}

void oml_test_http_stop(oml_test_http_server *s)
{
    uv_async_send(&s->stop);
    assert_int_equal(pthread_join(s->thread, NULL), 0);
    assert_int_equal(uv_loop_close(&s->loop), 0);
    free(s);
}

char *oml_test_http_exchange(int port, const char *req, size_t *len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (n + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            fail_msg("recv: %s", strerror(errno));
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}
