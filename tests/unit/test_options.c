/* test_options.c - the daemon's option table: defaults, bounds,
 * config file, command line precedence, clear errors, print round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "options.h"
#include "tokens.h"
#include "testutil.h"

static void test_defaults(void **state)
{
    (void)state;
    omld_config c;
    omld_config_defaults(&c);
    assert_string_equal(c.listen, "127.0.0.1:7600");
    assert_string_equal(c.http, "127.0.0.1:7601");
    assert_int_equal(c.dim, 784);
    assert_int_equal(c.layers, -1); /* the preset's */
    assert_true(isnan(c.eta));
    assert_int_equal(c.max_frame_bytes, 4194304);
    char err[256];
    assert_int_equal(omld_config_validate(&c, err, sizeof err), 0);
}

static void test_bad_values_name_the_option(void **state)
{
    (void)state;
    omld_config c;
    omld_config_defaults(&c);
    char err[256];
    assert_int_equal(omld_config_set(&c, "dim", "0", "x", err, sizeof err), -1);
    assert_non_null(strstr(err, "'dim'"));
    assert_non_null(strstr(err, "outside"));
    assert_int_equal(omld_config_set(&c, "tau", "2", NULL, err, sizeof err), -1);
    assert_int_equal(omld_config_set(&c, "eta", "fast", NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a number"));
    assert_int_equal(omld_config_set(&c, "max_k", "12x", NULL, err, sizeof err), -1);
    assert_int_equal(omld_config_set(&c, "no_such", "1", NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown option 'no_such'"));
    assert_int_equal(c.dim, 784); /* unchanged by the refusals */
    assert_int_equal(omld_config_set(&c, "tau", "0.5", NULL, err, sizeof err), 0);
    assert_true(c.tau == 0.5);
    assert_int_equal(omld_config_set(&c, "listen", "nowhere", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "'listen'"));
    /* Presets: the three are taken, a misspelt one is named. */
    const char *presets[] = {"default", "wide", "paper"};
    for (int i = 0; i < 3; i++) {
        omld_config_defaults(&c);
        assert_int_equal(omld_config_set(&c, "preset", presets[i], NULL, err, sizeof err), 0);
        assert_int_equal(omld_config_validate(&c, err, sizeof err), 0);
    }
    assert_int_equal(omld_config_set(&c, "preset", "wider", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "'preset': 'wider'"));
}

static void write_conf(char *path, size_t cap, const char *text)
{
    assert_int_equal(oml_test_tmpfile(path, cap), 0);
    assert_int_equal(oml_test_write_file(path, text, strlen(text)), 0);
}

static void test_file_and_precedence(void **state)
{
    (void)state;
    char path[256], err[512];
    write_conf(path, sizeof path,
               "# omld test\n\n  dim = 32   # inline comment\nlisten=0.0.0.0:9000\neta = 0.05\n");
    omld_config c;
    omld_config_defaults(&c);
    /* The flag wins over the file even though it comes first. */
    char *argv[] = {"omld", "--dim", "64", "--config", path, "--max-frame-bytes=1024", "--print-config"};
    int help, print;
    assert_int_equal(omld_config_parse_args(&c, 7, argv, &help, &print, err, sizeof err), 0);
    assert_int_equal(c.dim, 64);
    assert_string_equal(c.listen, "0.0.0.0:9000");
    assert_true(fabs(c.eta - 0.05) < 1e-12);
    assert_int_equal(c.max_frame_bytes, 1024);
    assert_true(print && !help);
    unlink(path);

    write_conf(path, sizeof path, "dim = 32\nthis line is wrong\n");
    omld_config_defaults(&c);
    assert_int_equal(omld_config_load_file(&c, path, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2:"));
    unlink(path);

    write_conf(path, sizeof path, "dim = 32\nmax_k = 20000\n"); /* over OML_SERVE_MAX_K */
    assert_int_equal(omld_config_load_file(&c, path, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2: option 'max_k'"));
    unlink(path);

    char *missing[] = {"omld", "--dim"};
    assert_int_equal(omld_config_parse_args(&c, 2, missing, &help, &print, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs a value"));
    char *stray[] = {"omld", "dim=3"};
    assert_int_equal(omld_config_parse_args(&c, 2, stray, &help, &print, err, sizeof err), -1);
    char *nofile[] = {"omld", "--config", "/nonexistent/omld.conf"};
    assert_int_equal(omld_config_parse_args(&c, 3, nofile, &help, &print, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/omld.conf"));
}

/* --print-config output is a config file that loads back to the same values. */
static void test_print_round_trip(void **state)
{
    (void)state;
    omld_config a, b;
    omld_config_defaults(&a);
    char err[256];
    assert_int_equal(omld_config_set(&a, "tau", "1.25", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_set(&a, "layers", "3", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_set(&a, "unix_socket", "/run/omld.sock", NULL, err, sizeof err), 0);
    char path[256];
    assert_int_equal(oml_test_tmpfile(path, sizeof path), 0);
    FILE *f = fopen(path, "w");
    omld_config_print(f, &a);
    fclose(f);
    omld_config_defaults(&b);
    assert_int_equal(omld_config_load_file(&b, path, err, sizeof err), 0);
    unlink(path);
    for (const omld_option *o = omld_options; o->name; o++) {
        const char *pa = (const char *)&a + o->offset, *pb = (const char *)&b + o->offset;
        if (o->type == OMLD_OPT_STR)
            assert_string_equal(pa, pb);
        else if (o->type == OMLD_OPT_INT)
            assert_int_equal(*(const int64_t *)(const void *)pa, *(const int64_t *)(const void *)pb);
        else {
            double x = *(const double *)(const void *)pa, y = *(const double *)(const void *)pb;
            assert_true((isnan(x) && isnan(y)) || x == y);
        }
    }
    /* Every option has a description and a default that its own bounds accept. */
    omld_config c;
    for (const omld_option *o = omld_options; o->name; o++) {
        assert_true(o->help && o->help[0]);
        assert_int_equal(omld_config_set(&c, o->name, o->def, NULL, err, sizeof err), 0);
    }
}

/* The connection limits: defaults, and the cross-option check that a
 * largest frame always fits in the per-connection input bound. */
static void test_limits(void **state)
{
    (void)state;
    omld_config c;
    omld_config_defaults(&c);
    assert_int_equal(c.idle_timeout_ms, 300000);
    assert_int_equal(c.request_timeout_ms, 10000);
    assert_int_equal(c.min_request_rate, 1024);
    assert_int_equal(c.max_conn_input_bytes, 16777216);
    assert_int_equal(c.max_conn_output_bytes, 8388608);
    char err[256];
    assert_int_equal(omld_config_set(&c, "max_frame_bytes", "33554432", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "'max_conn_input_bytes'"));
    assert_int_equal(omld_config_set(&c, "max_conn_input_bytes", "33554436", NULL, err, sizeof err),
                     0);
    assert_int_equal(omld_config_validate(&c, err, sizeof err), 0);
    assert_int_equal(omld_config_set(&c, "idle_timeout_ms", "0", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_set(&c, "request_timeout_ms", "-1", NULL, err, sizeof err), -1);
    /* A default k above max_k would refuse every query that gives none. */
    assert_int_equal(omld_config_set(&c, "max_k", "10", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_set(&c, "default_k", "11", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "'default_k' (11) must not exceed max_k (10)"));
    assert_int_equal(omld_config_set(&c, "default_k", "10", NULL, err, sizeof err), 0);
    assert_int_equal(omld_config_validate(&c, err, sizeof err), 0);
}

static void test_tokens(void **state)
{
    (void)state;
    omld_config c;
    omld_config_defaults(&c);
    char err[512];
    omld_tokens t;
    assert_int_equal(omld_tokens_load(&c, &t, err, sizeof err), 0);
    assert_int_equal(t.n, 0);
    assert_int_equal(omld_tokens_check(&t, "x", 1), 1); /* no tokens: everything is rw */

    assert_int_equal(omld_config_set(&c, "tokens", " rw:alpha-secret , ro:beta-secret", NULL, err,
                                     sizeof err), 0);
    assert_int_equal(omld_config_validate(&c, err, sizeof err), 0);
    assert_int_equal(omld_tokens_load(&c, &t, err, sizeof err), 0);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.n_rw, 1);
    assert_int_equal(t.n_ro, 1);
    assert_int_equal(omld_tokens_check(&t, "alpha-secret", 12), 1);
    assert_int_equal(omld_tokens_check(&t, "beta-secret", 11), 0);
    assert_int_equal(omld_tokens_check(&t, "alpha-secre", 11), -1);
    assert_int_equal(omld_tokens_check(&t, "alpha-secretx", 13), -1);
    assert_int_equal(omld_tokens_check(&t, "", 0), -1);
    assert_int_equal(omld_tokens_check(&t, NULL, 0), -1);
    assert_int_equal(omld_tokens_check(&t, "alpha-secret\0", 13), -1);

    /* A file adds to the option; comments and blank lines are skipped. */
    char path[256];
    assert_int_equal(oml_test_tmpfile(path, sizeof path), 0);
    const char *text = "# tokens\n\nro:gamma-secret\n  rw:delta-secret\r\n";
    assert_int_equal(oml_test_write_file(path, text, strlen(text)), 0);
    snprintf(c.tokens_file, sizeof c.tokens_file, "%s", path);
    assert_int_equal(omld_tokens_load(&c, &t, err, sizeof err), 0);
    assert_int_equal(t.n, 4);
    assert_int_equal(omld_tokens_check(&t, "gamma-secret", 12), 0);
    assert_int_equal(omld_tokens_check(&t, "delta-secret", 12), 1);

    /* Errors name where, never the secret. */
    text = "ro:ok-secret\nxx:hidden-secret\n";
    assert_int_equal(oml_test_write_file(path, text, strlen(text)), 0);
    assert_int_equal(omld_tokens_load(&c, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2:"));
    assert_null(strstr(err, "hidden-secret"));
    assert_int_equal(t.n, 0); /* wiped on failure */
    unlink(path);
    assert_int_equal(omld_tokens_load(&c, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "tokens_file"));
    c.tokens_file[0] = 0;

    const char *bad[] = {"rw:", "admin:x", "rw:has space", "rw:a,,ro:b", "ro"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(c.tokens, sizeof c.tokens, "%s", bad[i]);
        assert_int_equal(omld_config_validate(&c, err, sizeof err), -1);
        assert_non_null(strstr(err, "'tokens'"));
    }

    /* --print-config never prints a secret, and what it prints still loads. */
    snprintf(c.tokens, sizeof c.tokens, "rw:printed-secret");
    assert_int_equal(oml_test_tmpfile(path, sizeof path), 0);
    FILE *f = fopen(path, "w");
    omld_config_print(f, &c);
    fclose(f);
    char buf[16384];
    f = fopen(path, "r");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_null(strstr(buf, "printed-secret"));
    assert_non_null(strstr(buf, "# tokens = (1 token(s) set, not printed)"));
    omld_config d;
    omld_config_defaults(&d);
    assert_int_equal(omld_config_load_file(&d, path, err, sizeof err), 0);
    assert_string_equal(d.tokens, "");
    unlink(path);
    omld_tokens_wipe(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_bad_values_name_the_option),
        cmocka_unit_test(test_file_and_precedence),
        cmocka_unit_test(test_print_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
