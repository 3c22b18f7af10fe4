/* options.c - option table, parsing and printing of the daemon configuration.
 *
 * DESIGN: one table (redis config.c style); nothing else knows the option
 * names. Model hyper-parameters default to "" = "the preset's value", kept
 * as NaN (reals) or -1 (integers) until the model is built. Runs once at
 * startup on the main thread. */
#include "options.h"

#include "tokens.h"
#include "hostport.h"
#include "serve.h" /* OML_SERVE_MAX_K: the one bound on k */
#include "metadata.h" /* the hard bounds of item metadata */

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define OFF(f) offsetof(omld_config, f)
#define STR(f, def, help) {#f, OMLD_OPT_STR, OFF(f), 0, OMLD_STR_MAX - 1, def, help}
#define INT(f, lo, hi, def, help) {#f, OMLD_OPT_INT, OFF(f), lo, hi, def, help}
#define REAL(f, lo, hi, def, help) {#f, OMLD_OPT_REAL, OFF(f), lo, hi, def, help}

const omld_option omld_options[] = {
    STR(listen, "127.0.0.1:7600", "HOST:PORT of the RPC listener (protobuf frames)"),
    STR(unix_socket, "", "also listen on this Unix socket path (empty: none)"),
    STR(http, "127.0.0.1:7601", "HOST:PORT of the HTTP status endpoint"),
    STR(data_dir, "/var/lib/omld", "directory for the write-ahead log and checkpoints"),
    STR(preset, "default", "model preset: default | wide | paper"),
    STR(log_level, "info", "error | warn | info | debug"),
    INT(dim, 1, 1 << 20, "784", "input dimension of every item"),
    INT(layers, 0, 16, "", "hidden layers L (L+1 heads); empty: the preset's"),
    INT(hidden, 1, 65536, "", "units per hidden layer; empty: the preset's"),
    INT(basis, 0, 1, "", "1: the start's projection stays as a fixed basis of emb coordinates that the trained layers read instead of the dim inputs (on in default and wide; no effect at dim <= emb; wide: 1.5x the triplets per second at dim 784; a batch model promoted into it has its first layer fitted onto the basis by least squares); 0: they read the inputs; empty: the preset's"),
    INT(emb, 1, 65536, "", "embedding width of every head; empty: the preset's"),
    INT(seed, 0, 9007199254740991.0, "1", "seed of the model and of closure sampling"),
    REAL(eta, 1e-9, 10, "", "learning rate; empty: the preset's"),
    REAL(tau, 1e-6, 1.999999, "", "ABTL control parameter, (0, 2); empty: the preset's"),
    REAL(beta, 1e-6, 0.999999, "", "hedge discount, (0, 1); empty: the preset's"),
    REAL(s, 0, 1, "", "hedge smooth factor (floor s/(L+1)); empty: the preset's"),
    REAL(prox, 0, 1e6, "", "pull toward the start weights; empty: the preset's"),
    REAL(rehearse, 0, 64, "", "stored triplets rehearsed per new one, as soon as the queue is empty; empty: the preset's"),
    REAL(rehearse_idle, 0, 1000, "4", "... and more per new one while no request arrives (in steps of a few ms, logged)"),
    INT(replay, 0, 1 << 28, "", "newest triplets kept for rehearsal (16 bytes each: the memory bound); empty: the preset's"),
    INT(idempotency_keys, 0, 1 << 24, "100000", "idempotency keys of write requests remembered (the newest; logged and checkpointed, so a retried batch is applied once across restarts); 0: keys are ignored"),
    STR(ingest, "", "redis://HOST:PORT/STREAM: also take items, triplets and pairs from this Redis Stream (consumer group; XACK after the write-ahead log; README); on a replica, read once it is promoted (give it the primary's ingest_consumer); empty: none"),
    STR(ingest_group, "omld", "the Redis consumer group ingest reads as (created at the stream's start if missing)"),
    STR(ingest_consumer, "omld-1", "this daemon's consumer name in the group (pending entries are per consumer: keep it across restarts)"),
    STR(ingest_dead_letter, "", "the stream refused entries are copied to; empty: STREAM:dead"),
    INT(ingest_batch, 1, 4096, "256", "entries read (and in flight) at a time"),
    STR(replicate, "", "redis://HOST:PORT/PREFIX: publish the committed log records to the stream PREFIX:log and each checkpoint to PREFIX:checkpoint, for read replicas (README); empty: none"),
    INT(replicate_maxlen, 1000, 1000000000, "1000000", "entries the stream keeps (XADD MAXLEN ~; an entry holds one or more committed log records, or marks a view): a replica further behind bootstraps again from the checkpoint"),
    INT(replicate_queue_bytes, 1 << 20, 1LL << 34, "67108864", "committed records waiting for Redis at most (bytes); beyond it they are dropped and counted (replicas bootstrap again)"),
    STR(shard, "", "i/n (0 <= i < n <= 1024): a read replica that indexes and retrieves only the items whose id hashes to shard i of n (it still stores and learns from every item); queries fan out over the n shards (omlc_shards_retrieve); empty: every item"),
    STR(router, "", "redis://HOST:PORT/PREFIX: run as a router: answer retrieve and classify by fanning them out over the router_shards shard replicas of that stream (their map PREFIX:shards:N in Redis) and merging (equal to one node's answer); writes and other queries are refused; empty: not a router"),
    INT(router_shards, 0, 1024, "0", "the number of shards a router fans out over (their option shard = i/N)"),
    INT(replicate_lease_ms, 0, 600000, "10000", "the primary lease's time in Redis (PREFIX:lease, SET NX PX, renewed every fifth of it): writes are accepted only while it is held, so a replica promoted after it expired never writes beside this primary; 0: no lease (writes go on with Redis away, and promote-replica cannot tell whether this primary lives)"),
    INT(replicate_sync, 0, 1, "0", "1: a write is answered only once Redis holds its log records (or a checkpoint past them), so a promoted replica has every acknowledged write; held at most replicate_lease_ms (10 s without a lease), then answered UNAVAILABLE"),
    STR(replica_of, "", "redis://HOST:PORT/PREFIX: run as a read replica of the primary publishing there (option replicate): bootstrap from its checkpoint, follow its log, serve queries, refuse writes with NOT_PRIMARY; empty: a primary"),
    INT(max_items, 1, 1LL << 31, "10000000", "most items the store holds (live items: a deleted item's slot is reused)"),
    REAL(max_feature_abs, 1, 3.4e38, "1e6", "largest |value| of a feature (stored items and inline vectors); larger values are refused by name. Above ~1e15 the network's sums can overflow"),
    INT(max_frame_bytes, 64, 1 << 30, "4194304", "largest request frame accepted"),
    INT(max_batch, 1, 1 << 20, "10000", "most items, triplets or pairs in one request"),
    INT(max_connections, 1, 1 << 20, "1024", "most concurrent client connections"),
    INT(max_k, 1, OML_SERVE_MAX_K, "1024", "largest k a query may ask for (its answer must also fit in max_frame_bytes)"),
    INT(default_k, 1, OML_SERVE_MAX_K, "5", "neighbours per head when a query gives no k"),
    INT(max_metadata_entries, 0, OML_META_ENTRIES_MAX, "16", "most metadata key/values per item, and conditions per metadata filter (0: items carry none)"),
    INT(max_metadata_key_bytes, 1, OML_META_KEY_MAX, "64", "longest metadata key, in bytes"),
    INT(max_metadata_value_bytes, 0, OML_META_VALUE_MAX, "256", "longest metadata value, in bytes"),
    REAL(default_threshold, 1e-6, 1, "0.5", "verify threshold T (D/2 < T) when a query gives none"),
    INT(max_pipeline, 1, 65536, "256", "requests in flight per connection before reading pauses"),
    INT(max_conn_input_bytes, 4096, 1LL << 32, "16777216", "request bytes a connection may hold unanswered (buffered + decoded) before its reading pauses; >= max_frame_bytes + 4"),
    INT(max_conn_output_bytes, 4096, 1LL << 32, "8388608", "answer bytes per connection (unsent, waiting their turn, or being computed, at their size bound) before its reading pauses (resumes below 1/8)"),
    INT(idle_timeout_ms, 0, 86400000, "300000", "close a connection with nothing in flight and no bytes for this long, or whose answers are not read for this long; 0: never"),
    INT(request_timeout_ms, 0, 3600000, "10000", "drop a client whose partial frame is not complete within this long (unless it arrives at min_request_rate); 0: never"),
    INT(min_request_rate, 0, 1 << 30, "1024", "bytes/s at which a partial frame may take longer than request_timeout_ms; 0: the timeout is strict"),
    STR(tokens, "", "auth tokens, comma-separated, each rw:SECRET or ro:SECRET; any set => every connection must Auth (never printed)"),
    STR(tokens_file, "", "file of more tokens, one rw:SECRET / ro:SECRET per line, # comments (keep it mode 0600)"),
    STR(tls_cert, "", "PEM certificate (then its chain) of TLS on both the RPC and the HTTP port: set, with tls_key, and both speak TLS only (the Unix socket stays plain); empty: plain"),
    STR(tls_key, "", "PEM private key of tls_cert (keep it mode 0600)"),
    STR(tls_client_ca, "", "PEM CA certificate(s) of the clients (mutual TLS): set, with tls_cert, and both TCP ports require a client certificate that chains to one of them; empty: clients present none"),
    INT(queue_capacity, 1, 1 << 24, "16384", "entries (triplets, items, pairs) queued for the learner before backpressure"),
    STR(fsync, "everysec", "write-ahead log fsync: always (ack after fsync) | everysec | no"),
    INT(wal_salvage, 0, 1, "0", "1: a write-ahead log damaged in the middle is cut at the damage (the records before it are recovered, the ones after it lost; later segments kept as *.corrupt) instead of refusing to start. Start once with it after a refusal that names it, then remove it"),
    INT(checkpoint_every, 1, 1LL << 40, "100000", "write a checkpoint every N log records"),
    INT(checkpoint_background, 0, 1, "1", "1: periodic checkpoints are written by a forked copy of the process while the learner goes on (copy-on-write, as Redis's BGSAVE); 0: the learner writes them and waits"),
    INT(checkpoint_ms, 1000, 86400000, "300000", "... or every T milliseconds when the log grew"),
    INT(huge_pages, 0, 1, "1", "1: the store's features and the index on transparent huge pages, so a background checkpoint's fork stops the learner ~20x shorter (7 against 137 ms at 1M items); 0: 4 KB pages, for workloads that rewrite many stored items while checkpoints run (after a fork the first write to a huge page copies 2 MB)"),
    INT(publish_every, 1, 1 << 30, "10000", "publish a new serving view every N updates"),
    INT(publish_ms, 1, 3600000, "500", "... or every T milliseconds when anything changed"),
    INT(ann_min_items, 0, 1LL << 31, "100000", "from this many stored items each head of the index gets its own inverted lists over int8 codes: queries scan the nearest lists and re-rank the best exactly (recall on /status); 0: every query scans every item"),
    REAL(ann_target_recall, 0, 1, "0.98", "a query of an index with inverted lists scans, per head, the lists that found this share of the exact 10 nearest items on a sample of the index's own rows, each moved as far as its nearest other row, measured when the index is built (a rebuild scans the mean of the last 4 such counts); 0: a quarter of the lists"),
    INT(rerank_min_items, 0, 1LL << 31, "100000", "from this many stored items a new model serves at once, over the last index built: queries re-rank its candidates under the new model while the index is rebuilt behind it, and an index with inverted lists keeps only their codes (built without float embeddings, its lists coded as its items are embedded: queries re-rank from the store); 0: a model serves once its own index is built"),
    INT(rerank_candidates, 1, OML_SERVE_MAX_K, "32", "candidates per head a re-ranking query of 10 neighbours takes from the index: in proportion for more (k + offset), as for 5 for fewer, and at least k + offset; up to 3 times that while a sample of queries says the model has moved too far from its index for it to hold ann_target_recall of the neighbours (/status search.rerank_candidates)"),
    INT(query_group_jobs, 0, 1024, "0", "single classify requests on a view that scans every item (no inverted lists, not fresh) wait once this many of them run on the query pool, and go together as one group (one matrix product per head) when one ends (4: the pool's threads); 0: never grouped (measured no gain on 2 cores at 35,000 items)"),
    REAL(index_duty, 0.01, 1, "0.5", "while new models serve at once over the last index (rerank_min_items), the share of a core that rebuilding the index for a newer model alone may take (each such rebuild waits its own time x (1 - share) / share after the last); items put or deleted start one at once; 1: rebuild without pause"),
    INT(index_cache_items, 0, 1LL << 31, "100000", "with the start's input basis (inputs wider than the heads), the indexer keeps the input projected on it of each of the store's first N slots between builds (4 x emb bytes an item, 38 MB for 100,000 at emb 96), so a rebuild for a new model projects only the items put since; 0: none"),
    INT(first_view_threads, 0, 16, "0", "threads that build the view a start serves first (every stored item embedded, then each head's lists) while nothing else runs yet: /readyz says ready after it; 0: one per core"),
    INT(indexer_nice, 0, 19, "0", "the live model's indexer thread runs at this nice value above the process's (setpriority on its thread), so that the learner, the connections and the queries preempt its index builds; 0: the same priority"),
    {NULL, OMLD_OPT_STR, 0, 0, 0, NULL, NULL},
};

static const omld_option *find(const char *name, size_t len)
{
    for (const omld_option *o = omld_options; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

int omld_config_fail(char *err, size_t errlen, const char *where, const char *fmt, ...)
{
    int n = where ? snprintf(err, errlen, "%s: ", where) : 0;
    if (n < 0 || (size_t)n >= errlen)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int set_option(omld_config *c, const omld_option *o, const char *value, const char *where,
                      char *err, size_t errlen)
{
    char *field = (char *)c + o->offset;
    if (o->type == OMLD_OPT_STR) {
        if (strlen(value) > (size_t)o->max)
            return omld_config_fail(err, errlen, where, "option '%s': value too long (max %d bytes)", o->name,
                        OMLD_STR_MAX - 1);
        memcpy(field, value, strlen(value) + 1);
        return 0;
    }
    if (*value == '\0') { /* empty: the preset's value */
        if (o->type == OMLD_OPT_INT)
            *(int64_t *)(void *)field = -1;
        else
            *(double *)(void *)field = NAN;
        return 0;
    }
    char *end;
    errno = 0;
    double v = o->type == OMLD_OPT_INT ? (double)strtoll(value, &end, 10) : strtod(value, &end);
    if (errno != 0 || end == value || *end != '\0' || !isfinite(v))
        return omld_config_fail(err, errlen, where, "option '%s': '%s' is not a number", o->name, value);
    if (v < o->min || v > o->max) {
        return omld_config_fail(err, errlen, where, "option '%s': '%s' is outside [%g, %g]", o->name, value,
                    o->min, o->max);
    }
    if (o->type == OMLD_OPT_INT)
        *(int64_t *)(void *)field = (int64_t)v;
    else
        *(double *)(void *)field = v;
    return 0;
}

void omld_config_defaults(omld_config *c)
{
    memset(c, 0, sizeof *c);
    char err[256];
    for (const omld_option *o = omld_options; o->name; o++)
        set_option(c, o, o->def, NULL, err, sizeof err); /* defaults are in bounds */
}

int omld_config_set(omld_config *c, const char *name, const char *value, const char *where,
                    char *err, size_t errlen)
{
    const omld_option *o = find(name, strlen(name));
    if (o == NULL)
        return omld_config_fail(err, errlen, where, "unknown option '%s'%s (omld --help lists them)", name, "");
    return set_option(c, o, value, where, err, errlen);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

int omld_config_load_file(omld_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return omld_config_fail(err, errlen, NULL, "cannot open config file %s: %s", path, strerror(errno));
    char line[1024], where[320];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        if (strchr(line, '\n') == NULL && !feof(f)) {
            rc = omld_config_fail(err, errlen, where, "line longer than %d bytes", (int)sizeof line - 1);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (*s == '\0')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            rc = omld_config_fail(err, errlen, where, "expected 'name = value', got '%s'", s);
            break;
        }
        *eq = '\0';
        rc = omld_config_set(c, trim(s), trim(eq + 1), where, err, errlen);
    }
    fclose(f);
    return rc;
}

int omld_config_parse_args(omld_config *c, int argc, char **argv, int *help, int *print,
                           char *err, size_t errlen)
{
    *help = *print = 0;
    /* --config first, so that flags override the file wherever they stand. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0 || strncmp(a, "--config=", 9) == 0) {
            const char *path = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
            if (path == NULL)
                return omld_config_fail(err, errlen, NULL, "option '%s' needs a value", "config");
            if (omld_config_load_file(c, path, err, errlen) != 0)
                return -1;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = 1;
            continue;
        }
        if (strcmp(a, "--print-config") == 0) {
            *print = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0)
            return omld_config_fail(err, errlen, NULL, "unexpected argument '%s'", a);
        const char *name = a + 2, *eq = strchr(name, '='), *value;
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (len == 6 && strncmp(name, "config", 6) == 0) {
            i += eq ? 0 : 1; /* applied above */
            continue;
        }
        if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return omld_config_fail(err, errlen, NULL, "option '%s' needs a value", name);
        }
        char key[64];
        if (len >= sizeof key)
            return omld_config_fail(err, errlen, NULL, "unknown option '%s'", name);
        memcpy(key, name, len);
        key[len] = '\0';
        for (char *p = key; *p; p++) /* --max-frame-bytes == --max_frame_bytes */
            if (*p == '-')
                *p = '_';
        if (omld_config_set(c, key, value, "command line", err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* HOST:PORT with a non-empty host and a port in 0..65535 (0: any). */
static int valid_hostport(const char *s)
{
    char host[OMLD_STR_MAX], why[OMLD_STR_MAX + 64];
    int port;
    return omld_hostport_split(s, host, sizeof host, &port, why, sizeof why) == 0 && host[0];
}

int omld_config_validate(const omld_config *c, char *err, size_t errlen)
{
    if (!valid_hostport(c->listen))
        return omld_config_fail(err, errlen, NULL, "option 'listen': '%s' is not HOST:PORT", c->listen);
    if (!valid_hostport(c->http))
        return omld_config_fail(err, errlen, NULL, "option 'http': '%s' is not HOST:PORT", c->http);
    if (strcmp(c->preset, "default") != 0 && strcmp(c->preset, "wide") != 0 &&
        strcmp(c->preset, "paper") != 0)
        return omld_config_fail(err, errlen, NULL, "option 'preset': '%s' is not default, wide or paper",
                                c->preset);
    const char *levels[] = {"error", "warn", "info", "debug"};
    int ok = 0;
    for (int i = 0; i < 4; i++)
        ok |= strcmp(c->log_level, levels[i]) == 0;
    if (!ok)
        return omld_config_fail(err, errlen, NULL, "option 'log_level': '%s' is not error, warn, info or debug",
                    c->log_level);
    if (strcmp(c->fsync, "always") != 0 && strcmp(c->fsync, "everysec") != 0 &&
        strcmp(c->fsync, "no") != 0)
        return omld_config_fail(err, errlen, NULL, "option 'fsync': '%s' is not always, everysec or no",
                    c->fsync);
    if (c->data_dir[0] == '\0')
        return omld_config_fail(err, errlen, NULL, "option '%s' must not be empty", "data_dir");
    if (c->max_conn_input_bytes < c->max_frame_bytes + 4)
        return omld_config_fail(err, errlen, NULL,
                    "option 'max_conn_input_bytes' (%lld) must be at least max_frame_bytes + 4 "
                    "(%lld), or a largest frame could never be read",
                    (long long)c->max_conn_input_bytes, (long long)c->max_frame_bytes + 4);
    if (c->default_k > c->max_k)
        return omld_config_fail(err, errlen, NULL,
                    "option 'default_k' (%lld) must not exceed max_k (%lld): a query without k "
                    "would be refused", (long long)c->default_k, (long long)c->max_k);
    if (!c->tls_cert[0] != !c->tls_key[0]) /* the files are read at startup */
        return omld_config_fail(err, errlen, NULL, "option '%s' is set without '%s': TLS needs "
                                "both the certificate and its key", c->tls_cert[0] ? "tls_cert"
                                : "tls_key", c->tls_cert[0] ? "tls_key" : "tls_cert");
    if (c->tls_client_ca[0] && !c->tls_cert[0])
        return omld_config_fail(err, errlen, NULL, "option 'tls_client_ca' is set without "
                                "'tls_cert' and 'tls_key': client certificates need TLS on");
    if (c->replica_of[0] && c->replicate[0])
        return omld_config_fail(err, errlen, NULL, "option 'replica_of' excludes 'replicate': a "
                                "replica publishes nothing (promoted, it publishes to the stream "
                                "it followed)");
    if (c->shard[0] && c->ingest[0])
        return omld_config_fail(err, errlen, NULL, "option 'shard' excludes 'ingest': a shard "
                                "is never promoted, so it would never read the stream");
    if (c->router[0] && (c->replica_of[0] || c->replicate[0] || c->ingest[0] || c->shard[0]))
        return omld_config_fail(err, errlen, NULL, "option 'router' excludes replica_of, "
                                "replicate, ingest and shard: a router holds no data");
    if (c->router[0] && c->router_shards < 1)
        return omld_config_fail(err, errlen, NULL, "option 'router' needs router_shards >= 1 "
                                "(the N of the shards' shard = i/N)");
    const char *rs = strncmp(c->router, "redis://", 8) == 0 ? strchr(c->router + 8, '/') : NULL;
    if (c->router[0] && (rs == NULL || rs[1] == '\0' || !strchr(c->router + 8, ':')))
        return omld_config_fail(err, errlen, NULL, "option 'router': '%s' is not "
                                "redis://HOST:PORT/PREFIX", c->router);
    uint32_t si, sn;
    if (c->shard[0] && omld_shard_parse(c->shard, &si, &sn, err, errlen) != 0)
        return -1;
    if (c->shard[0] && !c->replica_of[0])
        return omld_config_fail(err, errlen, NULL, "option 'shard' is for read replicas "
                                "(replica_of): a primary indexes every item");
    if (c->tokens[0]) { /* syntax only: the file is read at startup */
        omld_tokens t;
        memset(&t, 0, sizeof t);
        if (omld_tokens_parse_list(&t, c->tokens, "option 'tokens'", err, errlen) != 0)
            return -1;
        omld_tokens_wipe(&t);
    }
    return 0;
}

static void print_value(FILE *f, const omld_option *o, const omld_config *c)
{
    const char *field = (const char *)c + o->offset;
    if (o->type == OMLD_OPT_STR) {
        fputs(field, f);
    } else if (o->type == OMLD_OPT_INT) {
        int64_t v = *(const int64_t *)(const void *)field;
        if (v >= 0)
            fprintf(f, "%lld", (long long)v);
    } else {
        double v = *(const double *)(const void *)field;
        if (!isnan(v))
            fprintf(f, "%.9g", v);
    }
}

void omld_config_print_help(FILE *f)
{
    fprintf(f, "usage: omld [--config FILE] [--NAME VALUE ...] [--print-config] [--help] "
               "[--version]\n\n"
               "Options (also accepted as `name = value` lines in the config file):\n");
    for (const omld_option *o = omld_options; o->name; o++) {
        char bounds[80] = "";
        if (o->type != OMLD_OPT_STR)
            snprintf(bounds, sizeof bounds, " [%g .. %g]", o->min, o->max);
        fprintf(f, "  --%-18s %s\n  %-20s default: %s%s\n", o->name, o->help, "",
                o->def[0] ? o->def : "(preset)", bounds);
    }
}

void omld_config_print(FILE *f, const omld_config *c)
{
    for (const omld_option *o = omld_options; o->name; o++) {
        if (strcmp(o->name, "tokens") == 0 && c->tokens[0]) {
            /* Secrets are never printed: commented out, so the file still loads. */
            int n = 1;
            for (const char *p = c->tokens; *p; p++)
                n += *p == ',';
            fprintf(f, "# tokens = (%d token(s) set, not printed)\n", n);
            continue;
        }
        fprintf(f, "%s = ", o->name);
        print_value(f, o, c);
        fputc('\n', f);
    }
}

int omld_shard_parse(const char *text, uint32_t *i, uint32_t *n, char *err, size_t errlen)
{
    *i = 0;
    *n = 0;
    if (text[0] == '\0')
        return 0;
    char *end = NULL;
    unsigned long a = strtoul(text, &end, 10), b = 0;
    int ok = end != text && *end == '/';
    if (ok) {
        const char *p = end + 1;
        b = strtoul(p, &end, 10);
        ok = end != p && *end == '\0' && text[0] != '-' && p[0] != '-';
    }
    if (!ok || b < 1 || b > 1024 || a >= b) {
        if (err)
            snprintf(err, errlen, "option 'shard': '%s' is not i/n with 0 <= i < n <= 1024 "
                     "(e.g. 0/2 and 1/2 for two shards)", text);
        return -1;
    }
    *i = (uint32_t)a;
    *n = (uint32_t)b;
    return 0;
}
