/* test_hostport.c - the one HOST:PORT parser (daemon/hostport.c), which the
 * options, the RPC listener and the HTTP listener share (issue 13: it was
 * parsed three ways, with three sets of rules). Known answers by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hostport.h"

static void split_ok(const char *s, const char *want_host, int want_port)
{
    char host[64], err[128] = "";
    int port = -1;
    if (omld_hostport_split(s, host, sizeof host, &port, err, sizeof err) != 0)
        fail_msg("'%s' refused: %s", s, err);
    assert_string_equal(host, want_host);
    assert_int_equal(port, want_port);
}

static void split_refused(const char *s, const char *why)
{
    char host[16], err[128] = "";
    int port = -1;
    assert_int_equal(omld_hostport_split(s, host, sizeof host, &port, err, sizeof err), -1);
    assert_non_null(strstr(err, s));
    assert_non_null(strstr(err, why));
    assert_int_equal(port, -1); /* nothing written on refusal */
}

static void test_accepted(void **state)
{
    (void)state;
    split_ok("127.0.0.1:7600", "127.0.0.1", 7600);
    split_ok("localhost:0", "localhost", 0);       /* 0: any free port */
    split_ok("[::1]:7601", "::1", 7601);           /* brackets removed */
    split_ok("[fe80::1%eth0]:65535", "fe80::1%eth0", 65535);
    split_ok(":80", "", 80);                        /* the caller decides about "" */
    split_ok("*:8080", "*", 8080);
    split_ok("::1:9", "::1", 9);                    /* the last ':' splits */
}

static void test_refused(void **state)
{
    (void)state;
    split_refused("localhost", "not HOST:PORT");
    split_refused("localhost:", "port");
    split_refused("localhost:65536", "port");
    split_refused("localhost:-1", "port");
    split_refused("localhost:+5", "port");
    split_refused("localhost:80x", "port");
    split_refused("localhost: 80", "port");
    split_refused("a-host-name-longer-than-16:80", "too long");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
