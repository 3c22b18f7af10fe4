/* parallel.c - see parallel.h. */
#include "parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

typedef struct run {
    int (*task)(void *ctx, int worker, int32_t i);
    void *ctx;
    int32_t tasks;
    atomic_int next;
    atomic_int failed; /* a failed task's status, 0 while none */
} run;

typedef struct worker {
    run *r;
    int id;
} worker;

static void work(run *r, int id)
{
    for (int32_t i; (i = atomic_fetch_add(&r->next, 1)) < r->tasks;) {
        int rc = r->task(r->ctx, id, i);
        if (rc != 0)
            atomic_store(&r->failed, rc);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    work(w->r, w->id);
    return NULL;
}

int oml_parallel_run(int threads, int32_t tasks, int (*task)(void *ctx, int worker, int32_t i),
                     void *ctx)
{
    run r = {.task = task, .ctx = ctx, .tasks = tasks};
    atomic_init(&r.next, 0);
    atomic_init(&r.failed, 0);
    if (threads > OML_PARALLEL_MAX)
        threads = OML_PARALLEL_MAX;
    if (threads > tasks)
        threads = tasks;
    pthread_t th[OML_PARALLEL_MAX];
    worker w[OML_PARALLEL_MAX];
    int started = 0;
    for (int t = 1; t < threads; t++) {
        w[started] = (worker){&r, t};
        if (pthread_create(&th[started], NULL, worker_main, &w[started]) == 0)
            started++;
    }
    work(&r, 0);
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    return atomic_load(&r.failed);
}

int oml_parallel_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > OML_PARALLEL_MAX ? OML_PARALLEL_MAX : (int)n;
}
