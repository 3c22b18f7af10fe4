/* test_log.c - log lines (daemon/log.c): under systemd's journal (stderr is
 * the stream JOURNAL_STREAM names) every line starts with its syslog
 * priority; a long message (a recovery error with two paths and a hint) is
 * not cut at 1 KiB. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static void test_journal_priorities(void **state)
{
    (void)state;
    char path[] = "/tmp/omld-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char env[64];
    snprintf(env, sizeof env, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", env, 1);
    fflush(stderr);
    int saved = dup(2);
    assert_int_equal(dup2(fd, 2), 2);
    omld_log_set_level(OMLD_LOG_DEBUG);
    LOG_ERROR("t", "an error");
    LOG_WARN("t", "a warning");
    LOG_INFO("t", "some news");
    LOG_DEBUG("t", "details");
    char big[1800];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    LOG_ERROR("t", "%s END", big);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    const char *want[] = {"<3>", "<4>", "<6>", "<7>", "<3>"};
    for (int i = 0; i < 5; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        assert_memory_equal(line, want[i], 3);
    }
    assert_non_null(strstr(line, "x END\n"));
    fclose(f);
    close(fd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_journal_priorities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
