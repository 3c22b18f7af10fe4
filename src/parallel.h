/* parallel.h - a numbered set of independent tasks run on a few threads.
 *
 * For work with nothing else to share the machine with: the first view
 * at a restart (embedding and listing a million stored items before
 * /readyz says ready) runs its blocks and heads on every core. Tasks are
 * handed out in order from one counter; which thread runs a task never
 * changes what it computes, so the results are the same for any number
 * of threads (the callers' tasks each write their own part of the output
 * with the same blocks a serial run uses). */
#ifndef OML_PARALLEL_H
#define OML_PARALLEL_H

#include <stdint.h>

/* The most threads oml_parallel_run starts (beyond it, memory bandwidth,
 * not cores, bounds these tasks). */
#define OML_PARALLEL_MAX 16

/* Runs task(ctx, worker, i) for every i in [0, tasks), on up to `threads`
 * threads: the caller's (worker 0) and threads - 1 more (workers 1 ..),
 * each worker one task at a time, so a task may use per-worker scratch.
 * Returns when every task has run: OML_OK (0), or the status of a task
 * that failed (each task returns OML_OK or an error; a failure does not
 * stop the others). A thread that cannot be started leaves its share to
 * the others (the tasks still all run). threads < 1 counts as 1. */
int oml_parallel_run(int threads, int32_t tasks, int (*task)(void *ctx, int worker, int32_t i),
                     void *ctx);

/* The threads a run may use on this machine: online cores, at most
 * OML_PARALLEL_MAX. */
int oml_parallel_cores(void);

#endif
