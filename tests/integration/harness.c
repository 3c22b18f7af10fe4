/* harness.c - see harness.h. */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "omlclient.h"
#include <jansson.h>

#ifndef OMLD_BIN
#error "OMLD_BIN must name the omld executable"
#endif

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int read_addr(omld_proc *p)
{
    char path[300];
    snprintf(path, sizeof path, "%s/omld.addr", p->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char key[32], val[120];
    int got = 0;
    while (fscanf(f, "%31s %119s", key, val) == 2) {
        if (strcmp(key, "rpc") == 0)
            got |= 1, snprintf(p->rpc, sizeof p->rpc, "%s", val);
        else if (strcmp(key, "http") == 0)
            got |= 2, snprintf(p->http, sizeof p->http, "%s", val);
    }
    fclose(f);
    return got == 3 ? 0 : -1;
}

static int spawn(omld_proc *p, const char *const *extra, int timeout_ms);

int omld_proc_start(omld_proc *p, const char *const *extra, int timeout_ms)
{
    memset(p, 0, sizeof *p);
    snprintf(p->dir, sizeof p->dir, "%s/omld-it-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(p->dir) == NULL)
        return -1;
    return spawn(p, extra, timeout_ms);
}

int omld_proc_start_fsize(omld_proc *p, const char *const *extra, int timeout_ms, long fsize)
{
    memset(p, 0, sizeof *p);
    snprintf(p->dir, sizeof p->dir, "%s/omld-it-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(p->dir) == NULL)
        return -1;
    p->fsize_limit = fsize;
    return spawn(p, extra, timeout_ms);
}

int omld_proc_restart(omld_proc *p, const char *const *extra, int timeout_ms)
{
    char addr[300];
    snprintf(addr, sizeof addr, "%s/omld.addr", p->dir);
    unlink(addr);
    p->rpc[0] = p->http[0] = 0;
    return spawn(p, extra, timeout_ms);
}

static int spawn(omld_proc *p, const char *const *extra, int timeout_ms)
{
    snprintf(p->log, sizeof p->log, "%s/omld.log", p->dir);
    char dir_arg[300];
    snprintf(dir_arg, sizeof dir_arg, "--data_dir=%s", p->dir);
    const char *argv[64] = {OMLD_BIN, dir_arg, "--listen=127.0.0.1:0", "--http=127.0.0.1:0"};
    int argc = 4;
    for (int i = 0; extra && extra[i] && argc < 63; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* A test that fails or crashes must not leave its omld running. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        if (p->fsize_limit > 0) {
            struct rlimit rl = {(rlim_t)p->fsize_limit, (rlim_t)p->fsize_limit};
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        execv(OMLD_BIN, (char *const *)argv);
        _exit(127);
    }
    p->pid = pid;
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        if (read_addr(p) == 0)
            return 0;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "harness: omld exited during startup (status %d)\n", st);
            omld_proc_dump_log(p);
            p->pid = 0;
            return -1;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "harness: omld did not write %s/omld.addr within %d ms\n", p->dir, timeout_ms);
    omld_proc_dump_log(p);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    p->pid = 0;
    return -1;
}

int omld_proc_stop(omld_proc *p, int sig, int timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    kill(p->pid, sig);
    for (int waited = 0; waited <= timeout_ms; waited += 5) {
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = 0;
            if (WIFEXITED(st))
                return WEXITSTATUS(st);
            return 128 + WTERMSIG(st);
        }
        sleep_ms(5);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
    return -1;
}

void omld_proc_cleanup(omld_proc *p)
{
    if (p->pid > 0)
        omld_proc_stop(p, SIGKILL, 1000);
    if (p->dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", p->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "harness: could not remove %s\n", p->dir);
    }
}

void omld_proc_dump_log(const omld_proc *p)
{
    FILE *f = fopen(p->log, "r");
    if (f == NULL)
        return;
    char line[1024];
    fprintf(stderr, "---- omld log (%s) ----\n", p->log);
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fprintf(stderr, "---- end of log ----\n");
    fclose(f);
}

static int dial(const char *host_port)
{
    char host[128];
    const char *colon = strrchr(host_port, ':');
    if (colon == NULL || (size_t)(colon - host_port) >= sizeof host)
        return -1;
    memcpy(host, host_port, (size_t)(colon - host_port));
    host[colon - host_port] = 0;
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

omlc *omld_proc_dial(const omld_proc *p, int timeout_ms)
{
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, p->rpc, timeout_ms, &err) != 0) {
        fprintf(stderr, "connect %s: %s\n", p->rpc, err.message);
        return NULL;
    }
    return c;
}

int omld_http_get(const char *host_port, const char *path, char **body, size_t *len)
{
    return omld_http_get_auth(host_port, path, NULL, body, len);
}

int omld_http_get_auth(const char *host_port, const char *path, const char *auth, char **body,
                       size_t *len)
{
    return omld_http_call(host_port, "GET", path, auth, NULL, body, len);
}

int omld_http_call(const char *host_port, const char *method, const char *path, const char *auth,
                   const char *send_body, char **body, size_t *len)
{
    if (body)
        *body = NULL;
    int fd = dial(host_port);
    if (fd < 0)
        return -1;
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t blen = send_body ? strlen(send_body) : 0;
    char clen[96] = "";
    if (send_body)
        snprintf(clen, sizeof clen, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                 blen);
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: %s\r\n%s%s%s%sConnection: close\r\n\r\n", method,
                     path, host_port, auth ? "Authorization: " : "", auth ? auth : "",
                     auth ? "\r\n" : "", clen);
    if (n < 0 || (size_t)n >= sizeof head || write(fd, head, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    for (size_t off = 0; off < blen;) {
        ssize_t w = write(fd, send_body + off, blen - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap + 1);
    ssize_t r;
    while (buf && (r = read(fd, buf + got, cap - got)) > 0) {
        got += (size_t)r;
        if (got == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (nb == NULL)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    close(fd);
    if (buf == NULL)
        return -1;
    buf[got] = 0;
    int code = -1;
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1) {
        free(buf);
        return -1;
    }
    char *b = strstr(buf, "\r\n\r\n");
    if (body && b) {
        size_t bl = got - (size_t)(b + 4 - buf);
        *body = malloc(bl + 1);
        if (*body) {
            memcpy(*body, b + 4, bl);
            (*body)[bl] = 0;
            if (len)
                *len = bl;
        }
    }
    free(buf);
    return code;
}

long omld_proc_rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

uint64_t omld_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int omld_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* 1 once something accepts TCP connections on 127.0.0.1:port. */
static int port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* redis-server on 127.0.0.1:port in dir, with or without an fsync'd AOF. */
static pid_t redis_spawn(const char *server, const char *dir, int port, int aof)
{
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        if (freopen("/dev/null", "w", stdout) == NULL)
            _exit(126);
        execl(server, server, "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly",
              aof ? "yes" : "no", "--appendfsync", "always", "--dir", dir, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; pid > 0 && i < 250; i++) {
        if (port_open(port))
            return pid;
        usleep(20000);
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return -1;
}

pid_t omld_redis_spawn(const char *server, const char *dir, int port)
{
    return redis_spawn(server, dir, port, 0);
}

pid_t omld_redis_spawn_aof(const char *server, const char *dir, int port)
{
    return redis_spawn(server, dir, port, 1);
}

json_t *omld_proc_status(const omld_proc *p)
{
    char *text = NULL;
    if (omld_http_get(p->http, "/status", &text, NULL) != 200) {
        free(text);
        return NULL;
    }
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    return j;
}

int omld_redis_stop(pid_t pid, const char *dir)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    if (dir == NULL || dir[0] == '\0')
        return 0;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int omld_run_capture(const char *cmd, char *out, size_t cap)
{
    size_t n = strlen(cmd) + 8;
    char *full = malloc(n);
    if (full == NULL)
        return -1;
    snprintf(full, n, "%s 2>&1", cmd);
    FILE *f = popen(full, "r");
    free(full);
    if (f == NULL)
        return -1;
    size_t got = out && cap > 0 ? fread(out, 1, cap - 1, f) : 0;
    if (out && cap > 0)
        out[got] = '\0';
    while (fgetc(f) != EOF) { /* the rest, so the command never sees a closed pipe */
    }
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int omld_proc_finish(omld_proc *p, int timeout_ms)
{
    int rc = omld_proc_stop(p, SIGTERM, timeout_ms);
    if (rc != 0)
        omld_proc_dump_log(p);
    omld_proc_cleanup(p);
    return rc == 0 ? 0 : -1;
}

int omld_cert_dir(char *dir, size_t cap, const char *prefix)
{
    if (omld_run_capture("openssl version", NULL, 0) != 0) {
        fprintf(stderr, "%s: no openssl command to make certificates\n", prefix);
        return -1;
    }
    snprintf(dir, cap, "/tmp/%s-XXXXXX", prefix);
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "%s: mkdtemp %s: %s\n", prefix, dir, strerror(errno));
        return -1;
    }
    return 0;
}

int omld_rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return omld_run_capture(cmd, NULL, 0) == 0 ? 0 : -1;
}
