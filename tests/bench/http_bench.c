/* http_bench.c - the HTTP/JSON API against the protobuf RPC on the same
 * daemon, side by side (omld-bench --http): classify latency (one client,
 * vector queries of the test half and queries by stored id, k = 5) and
 * triplet ingest (batches by id, one request in flight), alternating rounds
 * so the machine's noise falls on both. A vector query's JSON spells 784
 * floats as text (written by the client, parsed by the daemon); a query by
 * id is a few bytes: the two show what the numbers cost and what the
 * transport does. */
#include "http_bench.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bench_util.h"

#define ROUNDS 4

typedef struct http_client {
    int fd;
    char *buf;
    size_t cap;
} http_client;

static int http_connect(http_client *h, const char *host_port)
{
    char host[128];
    snprintf(host, sizeof host, "%s", host_port);
    char *colon = strrchr(host, ':');
    if (colon == NULL)
        return -1;
    *colon = '\0';
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, host, &a.sin_addr);
    h->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(h->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    h->cap = 1 << 20;
    h->buf = malloc(h->cap);
    return connect(h->fd, (struct sockaddr *)&a, sizeof a);
}

/* One POST on the keep-alive connection; the status code, or -1. The
 * answer's body is read whole (Content-Length) and dropped. */
static int http_post(http_client *h, const char *path, const char *body, size_t n)
{
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      path, n);
    /* Head and body in one write, as curl and Python's http.client send a
     * small request: two writes cost the daemon a second wakeup. */
    struct iovec iov[2] = {{head, (size_t)hl}, {(void *)body, n}};
    if (writev(h->fd, iov, 2) != (ssize_t)hl + (ssize_t)n)
        return -1;
    size_t got = 0;
    char *end = NULL;
    while (end == NULL) {
        ssize_t r = read(h->fd, h->buf + got, h->cap - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        h->buf[got] = '\0';
        end = strstr(h->buf, "\r\n\r\n");
    }
    int code = 0;
    sscanf(h->buf, "HTTP/1.1 %d", &code);
    const char *cl = strstr(h->buf, "Content-Length: ");
    size_t len = cl ? strtoul(cl + 16, NULL, 10) : 0, have = got - (size_t)(end + 4 - h->buf);
    while (have < len) {
        ssize_t r = read(h->fd, h->buf, h->cap);
        if (r <= 0)
            return -1;
        have += (size_t)r;
    }
    return code;
}

/* {"query": [x0, x1, ...], "k": 5} */
static size_t classify_json(char *out, size_t cap, const float *x, int32_t dim)
{
    size_t n = (size_t)snprintf(out, cap, "{\"query\":[");
    for (int32_t j = 0; j < dim; j++)
        n += (size_t)snprintf(out + n, cap - n, "%s%.9g", j ? "," : "", (double)x[j]);
    n += (size_t)snprintf(out + n, cap - n, "],\"k\":5}");
    return n;
}

/* {"triplets": [{"anchor": "id", "positive": "id", "negative": "id"}, ...]} */
static size_t triplets_json(char *out, size_t cap, const omlc_triplet *t, size_t n_t)
{
    size_t n = (size_t)snprintf(out, cap, "{\"triplets\":[");
    for (size_t i = 0; i < n_t; i++)
        n += (size_t)snprintf(out + n, cap - n,
                              "%s{\"anchor\":\"%s\",\"positive\":\"%s\",\"negative\":\"%s\"}",
                              i ? "," : "", t[i].anchor.id, t[i].positive.id, t[i].negative.id);
    n += (size_t)snprintf(out + n, cap - n, "]}");
    return n;
}

int omld_http_bench(omlc *c, const char *http, const float *queries, int32_t n_queries,
                    int32_t dim, const omlc_triplet *t, size_t n_triplets, int per_round)
{
    http_client h;
    if (http_connect(&h, http) != 0) {
        fprintf(stderr, "omld-bench: cannot connect to %s\n", http);
        return 1;
    }
    size_t cap = (size_t)dim * 20 + 4096 + 256 * 120;
    char *body = malloc(cap);
    double *rpc_lat = malloc((size_t)per_round * ROUNDS * sizeof(double));
    double *http_lat = malloc((size_t)per_round * ROUNDS * sizeof(double));
    double *rpc_id = malloc((size_t)per_round * ROUNDS * sizeof(double));
    double *http_id = malloc((size_t)per_round * ROUNDS * sizeof(double));
    double *http_enc = malloc((size_t)per_round * ROUNDS * sizeof(double));
    double rpc_ingest_s = 0, http_ingest_s = 0;
    size_t rpc_triplets = 0, http_triplets = 0, next_t = 0;
    omlc_error err;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < per_round; i++) {
            const float *x = queries + (size_t)((round * per_round + i) % n_queries) * dim;
            omlc_ref q = {NULL, x, (uint32_t)dim};
            omlc_classification cl;
            double t0 = now_s();
            if (omlc_classify(c, &q, 5, NULL, &cl, &err) != 0) {
                fprintf(stderr, "omld-bench: classify: %s\n", err.message);
                return 1;
            }
            rpc_lat[round * per_round + i] = (now_s() - t0) * 1e3;
            t0 = now_s(); /* the client's encoding is timed, as omlc's is */
            size_t n = classify_json(body, cap, x, dim);
            http_enc[round * per_round + i] = (now_s() - t0) * 1e3;
            if (http_post(&h, "/v1/classify", body, n) != 200) {
                fprintf(stderr, "omld-bench: HTTP classify failed\n");
                return 1;
            }
            http_lat[round * per_round + i] = (now_s() - t0) * 1e3;
            /* The same by a stored id (the anchors of the triplets). */
            const char *id = t[(size_t)(round * per_round + i) % n_triplets].anchor.id;
            omlc_ref qid = {id, NULL, 0};
            t0 = now_s();
            if (omlc_classify(c, &qid, 5, NULL, &cl, &err) != 0) {
                fprintf(stderr, "omld-bench: classify: %s\n", err.message);
                return 1;
            }
            rpc_id[round * per_round + i] = (now_s() - t0) * 1e3;
            t0 = now_s();
            n = (size_t)snprintf(body, cap, "{\"query\":\"%s\",\"k\":5}", id);
            if (http_post(&h, "/v1/classify", body, n) != 200) {
                fprintf(stderr, "omld-bench: HTTP classify by id failed\n");
                return 1;
            }
            http_id[round * per_round + i] = (now_s() - t0) * 1e3;
        }
        /* Ingest: 20 batches of 256 each way. */
        for (int b = 0; b < 20 && next_t + 512 <= n_triplets; b++) {
            double t0 = now_s();
            if (omlc_add_triplets(c, t + next_t, 256, NULL, NULL, &err) != 0) {
                fprintf(stderr, "omld-bench: triplets: %s\n", err.message);
                return 1;
            }
            rpc_ingest_s += now_s() - t0;
            rpc_triplets += 256;
            next_t += 256;
            t0 = now_s();
            size_t n = triplets_json(body, cap, t + next_t, 256);
            if (http_post(&h, "/v1/add_triplets", body, n) != 200) {
                fprintf(stderr, "omld-bench: HTTP triplets failed\n");
                return 1;
            }
            http_ingest_s += now_s() - t0;
            http_triplets += 256;
            next_t += 256;
        }
    }
    int q = per_round * ROUNDS;
    /* The same vector's two queries, sent back to back, differ by the
     * HTTP/JSON path's own cost whatever the machine's load does to both:
     * their median difference moves far less than the p50s on a busy host
     * (taken before quantile() sorts the latencies). */
    double *pair_diff = malloc((size_t)q * sizeof(double));
    for (int i = 0; i < q; i++)
        pair_diff[i] = http_lat[i] - rpc_lat[i];
    double r50 = quantile(rpc_lat, q, 0.5), h50 = quantile(http_lat, q, 0.5);
    double r99 = quantile(rpc_lat, q, 0.99), h99 = quantile(http_lat, q, 0.99);
    double rr = rpc_triplets / rpc_ingest_s, hr = http_triplets / http_ingest_s;
    double ri50 = quantile(rpc_id, q, 0.5), hi50 = quantile(http_id, q, 0.5);
    double e50 = quantile(http_enc, q, 0.5);
    printf("  classify, one client, %d queries each way: RPC p50 %.3f ms p99 %.3f ms; "
           "HTTP/JSON p50 %.3f ms p99 %.3f ms: p50 ratio %.2f\n", q, r50, r99, h50, h99, h50 / r50);
    printf("  (of the HTTP/JSON time, the client writing the vector's JSON: p50 %.3f ms)\n", e50);
    double d50 = quantile(pair_diff, q, 0.5);
    printf("  paired (each vector both ways, back to back): median HTTP - RPC %.3f ms, "
           "1 + that / RPC p50 = %.2f\n", d50, 1 + d50 / r50);
    printf("  classify by stored id: RPC p50 %.3f ms, HTTP/JSON p50 %.3f ms: p50 ratio %.2f\n", ri50,
           hi50, hi50 / ri50);
    printf("  triplets in batches of 256, one in flight: RPC %.0f/s, HTTP/JSON %.0f/s: ratio %.2f\n",
           rr, hr, hr / rr);
    printf("{\"bench\":\"http\",\"classify_rpc_p50_ms\":%.3f,\"classify_http_p50_ms\":%.3f,"
           "\"classify_p50_ratio\":%.3f,\"classify_http_encode_p50_ms\":%.3f,"
           "\"classify_paired_diff_ms\":%.3f,"
           "\"classify_id_p50_ratio\":%.3f,\"triplets_rpc_per_s\":%.0f,"
           "\"triplets_http_per_s\":%.0f,\"triplets_ratio\":%.3f}\n", r50, h50, h50 / r50,
           e50, d50, hi50 / ri50, rr, hr, hr / rr);
    close(h.fd);
    free(h.buf);
    free(body);
    free(rpc_lat);
    free(http_lat);
    free(rpc_id);
    free(http_id);
    free(http_enc);
    free(pair_diff);
    return 0;
}
