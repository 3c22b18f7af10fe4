/* main.c - the omld executable: options, logging, startup, the address
 * file, signals and graceful shutdown.
 *
 * DESIGN
 * Everything runs on one libuv loop owned here. Startup: options (exit 2 on
 * a bad one), log level, fixed BLAS threading, the data directory and its
 * lock (<data_dir>/omld.lock, flock: a second omld on the same data_dir is
 * refused with the holder's pid before it reads or writes anything there),
 * the RPC and HTTP listeners (bound before recovery, so a busy port fails
 * the start without touching data_dir), the status history and the signal
 * handlers; then the recovery (checkpoint + log replay + first view) runs on
 * its own thread while the loop serves HTTP (/livez 200, /readyz 503 with
 * its progress) and accepts RPC connections without reading them. When it
 * is done (on_recovered, on the loop): the engine's learner thread, the
 * RPC server gets the engine, the trainer, then the address file
 * <data_dir>/omld.addr (temp + rename) with the ports actually bound, so
 * scripts can start omld on port 0 and wait for it to be ready. A signal
 * during recovery drains at once and stops the engine when the recovery
 * thread is done (it is never abandoned half-way).
 *
 * The status history (history.h, GET /status/history) is sampled once a
 * second by a timer started next to the HTTP endpoint, from the same
 * gather() the endpoint uses.
 *
 * Shutdown (SIGTERM / SIGINT, or a failed start): set draining (/readyz and
 * Health turn not-ready), drain the RPC server (answer every decoded
 * request, close the connections), close HTTP and the history timer, stop
 * the trainer (a running
 * job is cancelled), stop the engine (it
 * finishes its queue and joins its threads), close the signal handles; then
 * uv_run returns, the engine is destroyed and uv_loop_close must succeed:
 * every handle has been closed by its owner. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "atomic_file.h"
#include "bigmem.h"
#include "engine.h"
#include "ingest.h"
#include "history.h"
#include "http.h"
#include "log.h"
#include "notify.h"
#include "metrics.h"
#include "options.h"
#include "role.h"
#include "server.h"
#include "status.h"
#include "tls.h"
#include "trainer.h"
#include "view.h"

/* OpenBLAS has no public header of ours to include for this one call. */
extern void openblas_set_num_threads(int);

typedef struct omld_main {
    uv_loop_t loop;
    omld_config cfg;
    omld_metrics metrics;
    uint64_t start_ns;
    double start_unix;           /* wall clock at start, seconds (process_start_time_seconds) */
    omld_engine *engine;
    omld_server *server;
    omld_http *http;
    omld_history *history;       /* GET /status/history; sampled by its timer */
    omld_ingest *ingest;         /* the Redis Stream consumer (option ingest), or NULL */
    omld_ingest_stats ingest_stats; /* storage the HTTP gather callback points into */
    omld_role *role;             /* replication: primary, replica, promotion (role.h) */
    int serving;                 /* the RPC server has the engine (a primary: holds its lease) */
    omld_repl_stats repl_stats;  /* storage the HTTP gather callback points into */
    omld_config engine_cfg;      /* cfg, but a replica's state lives in data_dir/replica */
    char rpc_addr[128];          /* the RPC address replicas name as the primary */
    omld_trainer *trainer;
    uv_signal_t sigterm, sigint;
    int signals_open;
    int draining, engine_stopped, exit_code;
    omld_model_stats stats;      /* storage the HTTP gather callback points into */
    omld_job_info jobs[OMLD_STATUS_MAX_JOBS];
    omld_model_info models[OMLD_MODELS_MAX];
    char rollback[OMLD_MODEL_NAME_MAX + 1];
    omld_promote_event promotes[OMLD_PROMOTES_KEPT];
    omld_tokens tokens;          /* authorisation (tokens.n == 0: off); wiped at exit */
    omld_tls *tls;               /* tls_cert/tls_key (NULL: plain); freed after the loop */
    char addr_path[OMLD_STR_MAX + 32];
    char addr_text[3 * OMLD_STR_MAX]; /* what the address file will say */
    char not_ready[600];         /* why /readyz is 503 (storage for gather) */
    /* recovery (recover_main): started by start(), finished by on_recovered */
    int recovering;
    pthread_t rec_thread;
    uv_async_t rec_done;
    uv_timer_t rec_tick;         /* the recovery's progress to systemd, each second */
    uint64_t rec_notified;       /* ... the replayed count last sent */
    omld_engine *rec_engine;     /* written by the thread, read after the join */
    int rec_rc;
    char rec_err[1536];
} omld_main;

/* ------------------------------------------------------------ helpers */

/* mkdir -p path (0755 for what it creates). 0 or -1 with err. */
static int make_dirs(const char *path, char *err, size_t errlen)
{
    char buf[OMLD_STR_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        snprintf(err, errlen, "bad directory name '%s'", path);
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create directory %s: %s", buf, strerror(errno));
            return -1;
        }
        buf[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s is not a directory", path);
        return -1;
    }
    if (access(path, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "directory %s is not writable: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Writes text to path atomically (src/atomic_file.h), so a reader never
 * sees half a file. 0 or -1 with err. */
static int write_file_atomic(const char *path, const char *text, char *err, size_t errlen)
{
    struct iovec part = {(void *)text, strlen(text)};
    enum oml_atomic_stage stage;
    if (oml_atomic_write(path, &part, 1, 0666, &stage) != 0 && stage != OML_ATOMIC_DIR) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Takes the exclusive lock on <data_dir>/omld.lock (flock, held by the
 * open descriptor for the life of the process and dropped by the kernel
 * when it ends, however it ends) and writes our pid into the file. A
 * second omld on the same data_dir finds the lock held and is refused with
 * the holder's pid, before it has read or written anything else there.
 * Returns the descriptor (kept open, never closed), or -1 with err. */
static int lock_data_dir(const char *dir, char *err, size_t errlen)
{
    char path[OMLD_STR_MAX + 32];
    snprintf(path, sizeof path, "%s/omld.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open the lock file %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EWOULDBLOCK) {
            char buf[32] = "";
            ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
            long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
            char who[48] = "another process";
            if (pid > 0)
                snprintf(who, sizeof who, "another omld (pid %ld)", pid);
            snprintf(err, errlen, "data_dir %s is in use by %s: it holds the lock on %s. Stop "
                     "that daemon first, or give this one another data_dir", dir, who, path);
        } else {
            snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
        }
        close(fd);
        return -1;
    }
    char text[32];
    int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n)
        LOG_WARN("main", "cannot write our pid into %s: %s (the lock is held all the same)",
                 path, strerror(errno));
    return fd;
}

/* The process as Prometheus client libraries report it: resident memory
 * (/proc/self/statm), open descriptors (/proc/self/fd), CPU time
 * (getrusage). 0 if /proc is not there. */
static int process_stats(omld_status_input *in)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return 0;
    unsigned long size = 0, resident = 0;
    int ok = fscanf(f, "%lu %lu", &size, &resident) == 2;
    fclose(f);
    if (!ok)
        return 0;
    in->rss_bytes = (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
    DIR *d = opendir("/proc/self/fd");
    uint64_t fds = 0;
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            fds += e->d_name[0] != '.';
        closedir(d);
        fds -= fds > 0; /* the descriptor of the listing itself */
    }
    in->open_fds = fds;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        in->cpu_seconds = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                          (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    return 1;
}

/* The status endpoint's view of the process, gathered per request, and
 * once a second by the history's timer (the same numbers /status shows). */
static void gather(void *arg, omld_status_input *in)
{
    omld_main *m = arg;
    memset(in, 0, sizeof *in);
    m->not_ready[0] = '\0';
    in->version = OMLD_VERSION;
    in->uptime_ms = (omld_now_ns() - m->start_ns) / 1000000u;
    in->cfg = &m->cfg;
    in->metrics = &m->metrics;
    in->draining = m->draining;
    omld_ingest_stats_get(m->ingest, &m->ingest_stats);
    /* a replica given `ingest` consumes only once promoted: not before (no
     * disconnected consumer to alert on) */
    m->ingest_stats.configured = m->ingest != NULL;
    in->ingest = &m->ingest_stats;
    omld_role_stats(m->role, &m->repl_stats);
    in->replication = &m->repl_stats;
    in->now_unix_ms = omld_wall_ms();
    in->start_unix_seconds = m->start_unix;
    in->have_process = process_stats(in);
    if (m->recovering) {
        unsigned long long replayed = omld_read(&m->metrics.recovery_replayed);
        switch (omld_read(&m->metrics.recovery_step)) {
        case OMLD_RECOVERY_CHECKPOINT:
            snprintf(m->not_ready, sizeof m->not_ready,
                     "recovering data_dir: reading the newest checkpoint");
            break;
        case OMLD_RECOVERY_LOG:
            snprintf(m->not_ready, sizeof m->not_ready,
                     "recovering data_dir: %llu log records replayed so far", replayed);
            break;
        default:
            snprintf(m->not_ready, sizeof m->not_ready,
                     "recovering data_dir: building the first view of %llu items (%llu log "
                     "records replayed)",
                     (unsigned long long)omld_read(&m->metrics.recovery_view_items), replayed);
        }
        in->not_ready = m->not_ready;
    } else if (m->engine && !m->engine_stopped) {
        omld_engine_stats(m->engine, &m->stats);
        in->model = &m->stats;
        omld_views *vs = omld_engine_views(m->engine);
        int healthy = omld_views_health(vs, m->not_ready, sizeof m->not_ready);
        in->ready = omld_views_version(vs) > 0 && healthy && !m->draining;
        if (healthy && !m->serving) {
            snprintf(m->not_ready, sizeof m->not_ready, "waiting for the primary lease in "
                     "Redis%s%s", m->repl_stats.last_error[0] ? ": " : "",
                     m->repl_stats.last_error);
            healthy = 0;
            in->ready = 0;
        } else if (healthy && m->repl_stats.role == OMLD_REPL_REPLICA &&
                   !m->repl_stats.bootstrapped) {
            snprintf(m->not_ready, sizeof m->not_ready, "replica: not bootstrapped yet%s%s",
                     m->repl_stats.last_error[0] ? ": " : "",
                     m->repl_stats.last_error);
            healthy = 0;
            in->ready = 0;
        }
        if (!healthy)
            in->not_ready = m->not_ready;
        else if (omld_views_version(vs) == 0)
            in->not_ready = "no model view has been published yet";
        if (m->trainer) {
            in->jobs = m->jobs;
            in->n_jobs = omld_trainer_jobs(m->trainer, m->jobs, OMLD_STATUS_MAX_JOBS);
        }
        if (omld_engine_models(m->engine)) {
            int n = omld_models_list(omld_engine_models(m->engine), m->models, OMLD_MODELS_MAX);
            in->models = m->models;
            in->n_models = n < OMLD_MODELS_MAX ? n : OMLD_MODELS_MAX;
        }
        in->rollback = omld_engine_rollback_info(m->engine, m->rollback, sizeof m->rollback)
                           ? m->rollback
                           : NULL;
        in->promotes = m->promotes;
        in->n_promotes = omld_engine_promotes(m->engine, m->promotes, OMLD_PROMOTES_KEPT);
    }
}

static void on_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    LOG_ERROR("main", "handle still open at exit: %s (%s, %s)",
              uv_handle_type_name(uv_handle_get_type(h)), uv_is_active(h) ? "active" : "inactive",
              uv_is_closing(h) ? "closing" : "not closing");
}

/* ------------------------------------------------------------ shutdown */

/* The RPC server has answered everything and closed: the rest can go. */
static void on_drained(void *arg)
{
    omld_main *m = arg;
    m->server = NULL;
    omld_http_close(m->http);
    m->http = NULL;
    omld_history_stop(m->history); /* the timer closes; freed after the loop */
    /* The trainer first: it adds models to the engine's registry. A running
     * job is cancelled (jobs are not durable; finished models are). */
    omld_trainer_stop(m->trainer);
    m->trainer = NULL;
    if (m->engine && !m->engine_stopped) {
        m->engine_stopped = 1;
        omld_engine_stop(m->engine); /* finishes its queue, joins its threads */
    }
    omld_role_stop(m->role); /* the learner has stopped */
    if (m->signals_open) {
        m->signals_open = 0;
        uv_close((uv_handle_t *)&m->sigterm, NULL);
        uv_close((uv_handle_t *)&m->sigint, NULL);
    }
    if (m->addr_path[0])
        unlink(m->addr_path);
    LOG_INFO("main", "stopped");
}

static void shutdown_begin(omld_main *m)
{
    if (m->draining)
        return;
    m->draining = 1;
    omld_notify_stopping();
    omld_ingest_stop(m->ingest); /* what it has not XACKed stays pending in Redis */
    m->ingest = NULL;
    if (m->server)
        omld_server_drain(m->server, on_drained, m); /* on_drained runs when it is done */
    else
        on_drained(m);
}

static void on_signal(uv_signal_t *h, int signum)
{
    omld_main *m = h->data;
    if (m->draining) {
        LOG_WARN("main", "%s: shutdown already in progress", strsignal(signum));
        return;
    }
    LOG_INFO("main", "%s: draining and shutting down", strsignal(signum));
    shutdown_begin(m);
}

/* ------------------------------------------------------------ startup */

/* Reads the tokens (option tokens, tokens_file) and says what it found,
 * never the secrets. 0 or -1. */
static int load_tokens(omld_main *m)
{
    char err[1536];
    if (omld_tokens_load(&m->cfg, &m->tokens, err, sizeof err) != 0) {
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    if (m->cfg.tokens_file[0]) {
        struct stat st;
        if (stat(m->cfg.tokens_file, &st) == 0 && (st.st_mode & 077) != 0)
            LOG_WARN("main", "tokens_file %s is readable by group or others (mode %04o); "
                     "chmod 600 it", m->cfg.tokens_file, (unsigned)(st.st_mode & 07777));
    }
    for (int i = 0; i < m->tokens.n; i++)
        if (m->tokens.t[i].len < 16)
            LOG_WARN("main", "token %d is only %zu bytes long; use 16 or more random bytes "
                     "(e.g. openssl rand -hex 24)", i + 1, m->tokens.t[i].len);
    atomic_store_explicit(&m->metrics.tokens_rw, (uint64_t)m->tokens.n_rw, memory_order_relaxed);
    atomic_store_explicit(&m->metrics.tokens_ro, (uint64_t)m->tokens.n_ro, memory_order_relaxed);
    if (m->tokens.n > 0)
        LOG_INFO("main", "authorisation on: %d read-write and %d read-only token(s); RPC "
                 "connections must Auth, HTTP needs a bearer token except /livez and /readyz",
                 m->tokens.n_rw, m->tokens.n_ro);
    return 0;
}

/* Reads tls_cert, tls_key and tls_client_ca when set; a missing or malformed file fails
 * the start with its name. 0 or -1. */
static int load_tls(omld_main *m)
{
    if (m->cfg.tls_cert[0] == '\0')
        return 0;
    char err[1536];
    if (omld_tls_load(&m->tls, m->cfg.tls_cert, m->cfg.tls_key, m->cfg.tls_client_ca,
                      &m->metrics, err, sizeof err) != 0) {
        m->tls = NULL;
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    atomic_store_explicit(&m->metrics.tls_on, 1, memory_order_relaxed);
    return 0;
}

/* ------------------------------------------------------------ recovery */

/* The recovery thread: the engine's first half (checkpoint + log replay +
 * first view), which may take a minute on a long log, off the loop, so
 * /livez and /readyz answer meanwhile. Hands the result back through
 * rec_done; the loop joins the thread before it reads it. */
static void *recover_main(void *arg)
{
    omld_main *m = arg;
    m->rec_rc = omld_engine_create(&m->rec_engine, &m->engine_cfg, &m->metrics, m->rec_err,
                                   sizeof m->rec_err);
    uv_async_send(&m->rec_done);
    return NULL;
}

/* After recovery, on the loop: the engine starts, the RPC server gets it
 * (connections accepted meanwhile start being read), the trainer starts,
 * and the address file says the daemon is there. 0 or -1. */
static int finish_start(omld_main *m);

/* The role allows writes (a primary holds its lease): serve. */
static void on_role_ready(void *arg)
{
    omld_main *m = arg;
    if (m->draining)
        return;
    if (finish_start(m) != 0) {
        m->exit_code = 1;
        shutdown_begin(m);
        return;
    }
    m->serving = 1;
    LOG_INFO("main", "ready");
    omld_notify_ready();
}

/* A replica promoted in this run: the stream it was given (option
 * ingest) is read from now on, as its consumer (the old primary's name
 * takes over the entries the old primary was delivered and did not XACK;
 * the log's idempotency keys keep any it learned from being learned again). */
static void on_role_leading(void *arg)
{
    omld_main *m = arg;
    char err[1536];
    if (m->ingest == NULL &&
        omld_ingest_start(&m->ingest, &m->loop, &m->cfg, m->server, err, sizeof err) != 0)
        LOG_ERROR("main", "ingest after the promotion: %s", err);
}

/* The lease was refused before this omld served: it is not the primary. */
static void on_role_refused(void *arg, const char *why)
{
    omld_main *m = arg;
    LOG_ERROR("main", "replicate: %s", why);
    m->exit_code = 1;
    shutdown_begin(m);
}

/* After recovery, on the loop: the learner thread and the role (a
 * replica follows; a primary waits for its lease, then on_role_ready). 0
 * or -1. */
static int run_engine(omld_main *m)
{
    char err[1536];
    omld_engine_set_replicate(m->engine, omld_role_publisher(m->role));
    if (omld_engine_run(m->engine, &m->loop, err, sizeof err) != 0) {
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    omld_role_events ev = {.ready = on_role_ready, .refused = on_role_refused,
                           .leading = on_role_leading, .arg = m};
    if (omld_role_run(m->role, m->engine, m->server, &ev, err, sizeof err) != 0) {
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    return 0;
}

static int finish_start(omld_main *m)
{
    char err[1536];
    omld_server_set_engine(m->server, m->engine);
    const oml_store *store;
    omld_store_lock *lock;
    omld_engine_store_ref(m->engine, &store, &lock);
    if (omld_trainer_start(&m->trainer, omld_engine_models(m->engine),
                           omld_engine_config(m->engine), store, lock) != 0) {
        m->trainer = NULL;
        LOG_ERROR("main", "cannot start the trainer thread");
        return -1;
    }
    omld_server_set_trainer(m->server, m->trainer);
    snprintf(m->addr_path, sizeof m->addr_path, "%s/omld.addr", m->cfg.data_dir);
    if (write_file_atomic(m->addr_path, m->addr_text, err, sizeof err) != 0) {
        m->addr_path[0] = '\0';
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    return 0;
}

static void on_recovered(uv_async_t *h)
{
    omld_main *m = h->data;
    pthread_join(m->rec_thread, NULL); /* the result below is complete */
    m->recovering = 0;
    atomic_store(&m->metrics.recovering, 0);
    uv_close((uv_handle_t *)&m->rec_done, NULL);
    uv_close((uv_handle_t *)&m->rec_tick, NULL);
    if (m->rec_rc != 0) {
        LOG_ERROR("main", "%s", m->rec_err);
        m->exit_code = 1;
        shutdown_begin(m);
        return;
    }
    m->engine = m->rec_engine;
    m->rec_engine = NULL;
    if (m->draining) { /* a signal came during recovery: stop what was recovered */
        m->engine_stopped = 1;
        omld_engine_stop(m->engine);
        return;
    }
    if (run_engine(m) != 0) {
        m->exit_code = 1;
        shutdown_begin(m);
    }
}

static void on_recovery_tick(uv_timer_t *t)
{
    omld_main *m = t->data;
    omld_notify_recovering(omld_read(&m->metrics.recovery_replayed), &m->rec_notified);
}

/* ------------------------------------------------------------ start */

/* Binds the RPC listeners and the HTTP endpoint, with the tokens set on
 * both. Every listener is bound before the engine recovers data_dir: a busy
 * port or a bad socket path fails the start before the log is replayed or
 * anything in data_dir is written. RPC connections are accepted from the
 * start but read only once the engine is there; HTTP is served during
 * recovery (/livez 200, /readyz 503 with the progress). 0 or -1. */
static int start_listeners(omld_main *m, struct sockaddr_storage *http_addr)
{
    char err[1536];
    if (omld_server_start(&m->server, &m->loop, &m->cfg, NULL, &m->metrics, m->start_ns, err,
                          sizeof err) != 0) {
        m->server = NULL;
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    omld_server_set_tokens(m->server, &m->tokens);
    if (m->tls && omld_server_set_tls(m->server, m->tls) != 0) {
        LOG_ERROR("main", "out of memory setting up TLS");
        return -1;
    }
    if (omld_http_start(&m->http, &m->loop, m->cfg.http, gather, m, http_addr, err,
                        sizeof err) != 0) {
        m->http = NULL;
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    omld_http_set_tokens(m->http, &m->tokens, &m->metrics.http_unauthorized);
    omld_http_set_api(m->http, m->server, (uint32_t)m->cfg.max_frame_bytes);
    omld_http_set_tls(m->http, m->tls);
    return 0;
}

/* The status history and its sampling timer, served by the HTTP endpoint.
 * 0 or -1. */
static int start_history(omld_main *m)
{
    m->history = omld_history_new(OMLD_HISTORY_SAMPLES, OMLD_HISTORY_INTERVAL_MS, m->start_ns);
    if (!m->history) {
        LOG_ERROR("main", "out of memory for the status history");
        return -1;
    }
    int hrc = omld_history_start(m->history, &m->loop, gather, m);
    if (hrc != 0) {
        LOG_ERROR("main", "cannot start the status history timer: %s", uv_strerror(hrc));
        return -1;
    }
    omld_http_set_history(m->http, m->history);
    return 0;
}

/* Warns about listeners beyond loopback: without tokens anyone who reaches
 * them reads (and over RPC changes) the model; with tokens but without
 * TLS, those (and the data) travel in clear text. */
static void warn_if_exposed(const omld_main *m, const struct sockaddr_storage *rpc_addr,
                            const char *rpc, const struct sockaddr_storage *http_addr,
                            const char *http)
{
    if (m->tokens.n == 0) {
        if (!omld_addr_is_loopback(rpc_addr))
            LOG_WARN("main", "WARNING: the RPC listener %s is not a loopback address and no "
                     "token is configured: anyone who can reach it can read and change the "
                     "model. Set tokens or tokens_file (see deploy/README.md), or listen on "
                     "127.0.0.1", rpc);
        if (!omld_addr_is_loopback(http_addr))
            LOG_WARN("main", "WARNING: the HTTP status endpoint %s is not a loopback address and "
                     "no token is configured: anyone who can reach it can read /status and "
                     "/metrics. Set tokens or tokens_file, or bind it to 127.0.0.1", http);
    } else if (m->tls == NULL &&
               (!omld_addr_is_loopback(rpc_addr) || !omld_addr_is_loopback(http_addr))) {
        LOG_WARN("main", "WARNING: listening beyond loopback without TLS: tokens and data "
                 "travel in clear text. Set tls_cert and tls_key (see deploy/README.md), or "
                 "keep these ports on a private network");
    }
}

/* Logs the addresses actually bound (port 0 resolved) and keeps them as the
 * address file's text, written once the daemon is ready (finish_start). */
static void announce_listeners(omld_main *m, const struct sockaddr_storage *http_addr)
{
    struct sockaddr_storage rpc_addr;
    omld_server_rpc_address(m->server, &rpc_addr);
    char rpc[128], http[128];
    omld_addr_format(&rpc_addr, rpc, sizeof rpc);
    omld_addr_format(http_addr, http, sizeof http);
    LOG_INFO("main", "listening on %s (rpc)", rpc);
    if (m->cfg.unix_socket[0])
        LOG_INFO("main", "listening on unix:%s (rpc)", m->cfg.unix_socket);
    LOG_INFO("main", "listening on %s://%s (status)", m->tls ? "https" : "http", http);
    if (m->tls)
        LOG_INFO("main", "TLS on both ports (rpc and http): %s", omld_tls_describe(m->tls));
    warn_if_exposed(m, &rpc_addr, rpc, http_addr, http);
    snprintf(m->rpc_addr, sizeof m->rpc_addr, "%s", rpc);
    int n = snprintf(m->addr_text, sizeof m->addr_text, "rpc %s\nhttp %s\n", rpc, http);
    if (m->cfg.unix_socket[0] && n > 0 && (size_t)n < sizeof m->addr_text)
        snprintf(m->addr_text + n, sizeof m->addr_text - (size_t)n, "unix %s\n",
                 m->cfg.unix_socket);
}

/* SIGTERM and SIGINT drain and shut down (on_signal). 0 or -1. */
static int start_signals(omld_main *m)
{
    uv_signal_init(&m->loop, &m->sigterm);
    uv_signal_init(&m->loop, &m->sigint);
    m->sigterm.data = m->sigint.data = m;
    m->signals_open = 1;
    if (uv_signal_start(&m->sigterm, on_signal, SIGTERM) != 0 ||
        uv_signal_start(&m->sigint, on_signal, SIGINT) != 0) {
        LOG_ERROR("main", "cannot install the signal handlers");
        return -1;
    }
    return 0;
}

/* The recovery thread, its completion handle and its progress timer;
 * on_recovered finishes the start. 0 or -1. */
static int start_recovery(omld_main *m)
{
    if (uv_async_init(&m->loop, &m->rec_done, on_recovered) != 0) {
        LOG_ERROR("main", "uv_async_init failed");
        return -1;
    }
    m->rec_done.data = m;
    uv_timer_init(&m->loop, &m->rec_tick);
    m->rec_tick.data = m;
    uv_timer_start(&m->rec_tick, on_recovery_tick, 0, 1000);
    m->recovering = 1;
    atomic_store(&m->metrics.recovery_step, OMLD_RECOVERY_CHECKPOINT);
    atomic_store(&m->metrics.recovering, 1);
    if (pthread_create(&m->rec_thread, NULL, recover_main, m) != 0) {
        m->recovering = 0;
        atomic_store(&m->metrics.recovering, 0);
        uv_close((uv_handle_t *)&m->rec_done, NULL);
        uv_close((uv_handle_t *)&m->rec_tick, NULL);
        LOG_ERROR("main", "cannot start the recovery thread");
        return -1;
    }
    return 0;
}

/* Binds every listener, starts HTTP, the history and the signal handlers,
 * then the recovery thread (on_recovered finishes the start). 0 or -1. */
static int start(omld_main *m)
{
    struct sockaddr_storage http_addr;
    if (load_tokens(m) != 0 || load_tls(m) != 0 || start_listeners(m, &http_addr) != 0 ||
        start_history(m) != 0)
        return -1;
    char err[1536];
    announce_listeners(m, &http_addr);
    if (omld_role_init(&m->role, &m->cfg, &m->engine_cfg, err, sizeof err) != 0 ||
        omld_role_publish(m->role, &m->loop, m->rpc_addr, err, sizeof err) != 0) {
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    /* A replica reads the stream only once promoted (on_role_leading): its
     * writes would all be refused meanwhile. */
    char host[256], stream[256];
    int port;
    if (omld_role_leads(m->role)
            ? omld_ingest_start(&m->ingest, &m->loop, &m->cfg, m->server, err, sizeof err) != 0
            : m->cfg.ingest[0] && omld_ingest_parse_url(m->cfg.ingest, host, sizeof host, &port,
                                                        stream, sizeof stream, err,
                                                        sizeof err) != 0) {
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    oml_bigmem_set_huge((int)m->cfg.huge_pages); /* before recovery maps the store */
    if (start_signals(m) != 0 || start_recovery(m) != 0)
        return -1;
    return 0;
}

/* --version, the options (file and flags), --help and --print-config: the
 * exit code when omld is to stop here (messages printed), or -1 to run. */
static int parse_command_line(omld_main *m, int argc, char **argv)
{
    char err[1536];
    int help = 0, print = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--version") == 0) {
            printf("omld %s\n", OMLD_VERSION);
            return 0;
        }
    omld_config_defaults(&m->cfg);
    if (omld_config_parse_args(&m->cfg, argc, argv, &help, &print, err, sizeof err) != 0) {
        fprintf(stderr, "omld: %s\n", err);
        return 2;
    }
    if (help) {
        omld_config_print_help(stdout); /* starts with the one usage line */
        return 0;
    }
    if (omld_config_validate(&m->cfg, err, sizeof err) != 0) {
        fprintf(stderr, "omld: %s\n", err);
        return 2;
    }
    if (print) {
        omld_config_print(stdout, &m->cfg);
        return 0;
    }
    return -1;
}

/* Process-wide settings: the log level, the signals that must not kill us,
 * one BLAS thread. */
static void process_setup(const omld_main *m)
{
    omld_log_set_level(omld_log_parse_level(m->cfg.log_level));
    signal(SIGPIPE, SIG_IGN);
    /* A file size limit (RLIMIT_FSIZE) must fail the write with EFBIG, which
     * the log reports, instead of killing the process. */
    signal(SIGXFSZ, SIG_IGN);
    openblas_set_num_threads(1); /* fixed BLAS threading: determinism, no oversubscription */
}

/* Creates data_dir, takes its lock (before anything else in it is read or
 * written) and removes a stale address file. 0 or -1 (logged). */
static int claim_data_dir(const omld_main *m)
{
    char err[1536];
    if (make_dirs(m->cfg.data_dir, err, sizeof err) != 0) {
        LOG_ERROR("main", "data_dir: %s", err);
        return -1;
    }
    if (lock_data_dir(m->cfg.data_dir, err, sizeof err) < 0) {
        LOG_ERROR("main", "%s", err);
        return -1;
    }
    /* A stale address file from an earlier run must not be read as ours. */
    char stale[OMLD_STR_MAX + 32];
    snprintf(stale, sizeof stale, "%s/omld.addr", m->cfg.data_dir);
    unlink(stale);
    return 0;
}

/* After the loop has run out: frees the engine and the history and checks
 * that every handle was closed (a leak sets exit code 1). */
static void teardown(omld_main *m)
{
    omld_engine_destroy(m->engine);
    m->engine = NULL;
    omld_history_free(m->history); /* its timer was closed in on_drained */
    m->history = NULL;
    omld_tls_free(m->tls); /* every connection (and its session) is gone */
    m->tls = NULL;
    omld_role_free(m->role);
    m->role = NULL;
    int rc = uv_loop_close(&m->loop);
    if (rc != 0) {
        LOG_ERROR("main", "uv_loop_close: %s; handles left open:", uv_strerror(rc));
        uv_walk(&m->loop, on_walk, NULL);
        m->exit_code = 1;
    }
}

int main(int argc, char **argv)
{
    omld_main *m = calloc(1, sizeof *m);
    if (m == NULL) {
        fprintf(stderr, "omld: out of memory\n");
        return 1;
    }
    m->start_ns = omld_now_ns();
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    m->start_unix = (double)t0.tv_sec + (double)t0.tv_nsec / 1e9;
    int code = parse_command_line(m, argc, argv);
    if (code >= 0) {
        free(m);
        return code;
    }
    process_setup(m);
    if (claim_data_dir(m) != 0) {
        free(m);
        return 1;
    }
    LOG_INFO("main", "omld %s starting (pid %ld, data_dir %s)", OMLD_VERSION, (long)getpid(),
             m->cfg.data_dir);
    int rc = uv_loop_init(&m->loop);
    if (rc != 0) {
        LOG_ERROR("main", "uv_loop_init: %s", uv_strerror(rc));
        free(m);
        return 1;
    }
    if (start(m) != 0) { /* else on_recovered says "ready" */
        m->exit_code = 1;
        shutdown_begin(m);
    }
    uv_run(&m->loop, UV_RUN_DEFAULT);
    teardown(m);
    code = m->exit_code;
    omld_tokens_wipe(&m->tokens);
    free(m);
    return code;
}
