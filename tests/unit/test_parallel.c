/* test_parallel.c - numbered tasks on a few threads (src/parallel.c):
 * every task runs once, on a worker numbered below the threads asked for,
 * and at most that many at a time; thread counts out of range are
 * clamped; a failed task's status is returned and the others still run. Also run under ThreadSanitizer (label `threads`). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "parallel.h"

typedef struct seen {
    int threads;
    atomic_int runs[1000];
    atomic_int worker_of[1000];
    atomic_int running, most;
    int32_t fail_at; /* the task that fails (with 7), or -1 */
} seen;

static int task(void *ctx, int worker, int32_t i)
{
    seen *s = ctx;
    int now = atomic_fetch_add(&s->running, 1) + 1;
    for (int m = atomic_load(&s->most); now > m && !atomic_compare_exchange_weak(&s->most, &m, now);)
        ;
    atomic_fetch_add(&s->runs[i], 1);
    atomic_store(&s->worker_of[i], worker);
    if (i % 97 == 0)
        usleep(1000); /* some tasks long: the others go to the other workers */
    atomic_fetch_sub(&s->running, 1);
    return i == s->fail_at ? 7 : 0;
}

static void run(int threads, int32_t tasks, int want_most)
{
    static seen s;
    memset(&s, 0, sizeof s);
    s.fail_at = tasks > 1 ? tasks / 2 : -1;
    /* a failed task's status comes back, and the others still ran */
    assert_int_equal(oml_parallel_run(threads, tasks, task, &s), tasks > 1 ? 7 : 0);
    for (int32_t i = 0; i < tasks; i++) {
        assert_int_equal(atomic_load(&s.runs[i]), 1);
        int w = atomic_load(&s.worker_of[i]);
        assert_true(w >= 0 && w < (want_most > 0 ? want_most : 1));
    }
    assert_true(atomic_load(&s.most) <= (want_most > 0 ? want_most : 1));
}

static void test_every_task_once(void **state)
{
    (void)state;
    run(1, 1000, 1);
    run(2, 1000, 2);
    run(3, 7, 3);
    run(4, 2, 2);      /* no more threads than tasks */
    run(0, 10, 1);     /* < 1 counts as 1 */
    run(-5, 10, 1);
    run(1000, 1000, OML_PARALLEL_MAX); /* at most OML_PARALLEL_MAX */
    run(2, 0, 1);      /* nothing to do */
}

static void test_cores(void **state)
{
    (void)state;
    int c = oml_parallel_cores();
    assert_true(c >= 1 && c <= OML_PARALLEL_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_task_once),
        cmocka_unit_test(test_cores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
