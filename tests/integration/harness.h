/* harness.h - starting the real omld for integration tests and benchmarks.
 *
 * omld runs as a child process in a fresh temporary data directory, on
 * ephemeral ports (127.0.0.1:0); the harness waits for the address file it
 * writes (<data_dir>/omld.addr) and hands back "HOST:PORT" strings that
 * libomlclient and omld_http_get() take. */
#ifndef OMLD_HARNESS_H
#define OMLD_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct omld_proc {
    pid_t pid;
    char dir[256];       /* data directory (removed by omld_proc_cleanup) */
    char rpc[128];       /* "127.0.0.1:PORT" */
    char http[128];
    char log[300];       /* the daemon's stderr, kept in dir */
    long fsize_limit;    /* > 0: RLIMIT_FSIZE of the child */
} omld_proc;

/* Starts OMLD_BIN (compile-time path) with extra "--name=value" args
 * (NULL-terminated list, may be NULL) and waits up to timeout_ms for its
 * address file. 0, or -1 (the child is killed, its log printed). */
int omld_proc_start(omld_proc *p, const char *const *extra_args, int timeout_ms);

/* As omld_proc_start, with the child's file size limit (RLIMIT_FSIZE) set
 * to fsize_bytes: writes past it fail with EFBIG, a stand-in for a full
 * disk. */
int omld_proc_start_fsize(omld_proc *p, const char *const *extra_args, int timeout_ms,
                          long fsize_bytes);

/* A client connection to p's RPC port (libomlclient, timeout_ms per call),
 * or NULL with the reason on stderr. */
struct omlc;
struct omlc *omld_proc_dial(const omld_proc *p, int timeout_ms);

/* Starts omld again on p's data directory (after a stop or a kill), same
 * arguments as given here, new ports. 0 or -1. */
int omld_proc_restart(omld_proc *p, const char *const *extra_args, int timeout_ms);

/* Sends sig and waits up to timeout_ms for the exit; returns the exit
 * status (0..255), 128 + signal if killed by one, or -1 on timeout (the
 * child is then SIGKILLed). */
int omld_proc_stop(omld_proc *p, int sig, int timeout_ms);

/* Stops p with SIGTERM (a clean drain), prints its log unless it exited
 * 0, and removes its data directory: 0 for a clean exit, else -1. */
int omld_proc_finish(omld_proc *p, int timeout_ms);

/* Removes the data directory. */
void omld_proc_cleanup(omld_proc *p);

/* Prints the daemon's log to stderr (for failing tests). */
void omld_proc_dump_log(const omld_proc *p);

/* A blocking HTTP/1.1 GET with Connection: close. Returns the status code
 * and a malloc'd body (*body, may be NULL), or -1. */
int omld_http_get(const char *host_port, const char *path, char **body, size_t *len);
/* The same with an Authorization header (its value, e.g. "Bearer T"; NULL: none). */
int omld_http_get_auth(const char *host_port, const char *path, const char *auth, char **body,
                       size_t *len);

/* Resident set size of a process in KiB (from /proc), or -1. */
/* One HTTP/1.1 request (method, path, optional "Bearer X" auth, optional
 * JSON body) on a new connection: the status code, the body in *body
 * (malloc'd, NUL-terminated; may be NULL), or -1. */
int omld_http_call(const char *host_port, const char *method, const char *path, const char *auth,
                   const char *send_body, char **body, size_t *len);

long omld_proc_rss_kib(pid_t pid);

/* GET /status parsed (json_decref it), or NULL. */
struct json_t;
struct json_t *omld_proc_status(const omld_proc *p);

/* Runs cmd with sh: its exit status (-1 if it did not exit), its stdout and
 * stderr in out (NUL-terminated, truncated to cap - 1; out may be NULL). */
int omld_run_capture(const char *cmd, char *out, size_t cap);

/* A new temporary directory /tmp/PREFIX-XXXXXX in dir (cap bytes) for
 * certificates the openssl command makes: 0, or -1 with the reason on
 * stderr (no openssl command, or no directory). */
int omld_cert_dir(char *dir, size_t cap, const char *prefix);

/* rm -rf dir: 0 or -1. */
int omld_rm_rf(const char *dir);

/* A free TCP port on 127.0.0.1 (bound and released), or -1. */
int omld_free_port(void);

/* Milliseconds on the monotonic clock: for deadlines of tests that wait. */
uint64_t omld_now_ms(void);

/* Starts redis-server (the binary `server`) on 127.0.0.1:port without
 * persistence, its files in dir, and waits until it accepts connections:
 * its pid, or -1. */
pid_t omld_redis_spawn(const char *server, const char *dir, int port);
/* The same with appendonly yes, appendfsync always: a command Redis answered
 * is on disk, and a restart on dir (after a SIGKILL) has it. */
pid_t omld_redis_spawn_aof(const char *server, const char *dir, int port);
/* SIGKILLs it (pid <= 0: none) and removes dir (if set). 0 or -1. */
int omld_redis_stop(pid_t pid, const char *dir);

#endif
