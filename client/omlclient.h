/* omlclient.h - libomlclient: a blocking C client for omld.
 *
 * One omlc is one connection (TCP "HOST:PORT" or "unix:/path"), used by one
 * thread at a time. Every call sends one Request frame and waits for its
 * Response, with the connection's timeout on connect, on every write and on
 * every read. Request ids are chosen by the library (1, 2, ...) and checked
 * on the answer. Errors:
 *   return 0        OK
 *   return > 0      the daemon's Status.Code (omld.proto), err holds its
 *                   message and field
 *   return < 0      OMLC_E*: the connection failed, timed out, or the answer
 *                   made no sense; the connection is then unusable (close it)
 * Pipelining: omlc_send() many requests, then omlc_recv() their answers in
 * order; the *_pipelined batch helpers do this with a bounded window. */
#ifndef OMLCLIENT_H
#define OMLCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "omld.pb-c.h"
#include "shard_merge.h"

enum omlc_transport_err {
    OMLC_ECONNECT = -1,  /* could not connect / resolve */
    OMLC_EIO = -2,       /* read or write failed, or the daemon closed */
    OMLC_ETIMEOUT = -3,  /* no progress within the timeout */
    OMLC_EPROTO = -4,    /* an answer that is not a valid Response / wrong id */
    OMLC_ENOMEM = -5,
    OMLC_EARG = -6       /* a bad argument to the library itself */
};

typedef struct omlc_error {
    int code;            /* as returned */
    char message[512];
    char field[128];
} omlc_error;

typedef struct omlc omlc;

/* server: "HOST:PORT" or "unix:/path/to/socket". timeout_ms > 0. */
int omlc_connect(omlc **out, const char *server, int timeout_ms, omlc_error *err);

/* TLS to a daemon with tls_cert set (TCP only). */
typedef struct omlc_tls {
    const char *cafile;      /* PEM file of the CA(s) that signed the daemon's certificate
                                (its own file if self-signed); NULL: the system's store */
    const char *server_name; /* the name the certificate must carry (and SNI); NULL or "":
                                the host of server (a DNS name or an IP address) */
    int insecure;            /* 1: encrypt but verify nothing (tests only: anyone in the
                                middle can read and change everything) */
    const char *certfile;    /* PEM client certificate (then its chain) for a daemon with
                                tls_client_ca; NULL: none */
    const char *keyfile;     /* PEM private key of certfile; NULL: in certfile */
} omlc_tls;
/* As omlc_connect; tls NULL: plain. A certificate that does not verify
 * fails with OMLC_ECONNECT and the reason in err; an unreadable certfile or
 * keyfile, or a key that is not the certificate's, with OMLC_EARG naming
 * the file. A daemon that refuses the client's certificate (none, or one
 * its tls_client_ca did not sign) fails the handshake (TLS 1.2) or, since
 * TLS 1.3 finishes the client's side first, the first call, with OMLC_EIO:
 * either way the message says the daemon wants a client certificate or
 * refused this one. */
int omlc_connect_tls(omlc **out, const char *server, const omlc_tls *tls, int timeout_ms,
                     omlc_error *err);
void omlc_close(omlc *c); /* accepts NULL */
void omlc_set_timeout(omlc *c, int timeout_ms);
/* Largest frame the client will accept (default 64 MiB). */
void omlc_set_max_frame(omlc *c, uint32_t bytes);

/* --- the generic layer: any Request, the raw Response --- */

/* Sets req->request_id, sends one frame. */
int omlc_send(omlc *c, Omld__Request *req, omlc_error *err);
/* Receives the next Response (caller frees with omld__response__free_unpacked
 * (r, NULL)). Fills err from its status; returns its code (0 = OK). */
int omlc_recv(omlc *c, Omld__Response **resp, omlc_error *err);
/* send + recv. */
int omlc_call(omlc *c, Omld__Request *req, Omld__Response **resp, omlc_error *err);
/* Writes raw bytes (tests of malformed input). */
int omlc_send_raw(omlc *c, const void *buf, size_t len, omlc_error *err);

/* --- typed operations --- */

/* An item reference: a stored id, or an inline vector of dim floats. */
typedef struct omlc_ref {
    const char *id;        /* used when non-NULL */
    const float *vector;   /* else this, dim floats */
    uint32_t dim;
} omlc_ref;

typedef struct omlc_item {
    const char *id;
    const float *features; /* dim floats */
    uint32_t dim;
    const char *label;     /* NULL: unlabelled */
} omlc_item;

/* Metadata (omld.proto METADATA) every item of the later omlc_put_items*
 * calls on c carries: n key/values, borrowed until replaced (NULL, 0:
 * none, the default). A setting rather than an omlc_item field, so that
 * omlc_item stays as it was for code that fills it positionally. */
void omlc_set_item_metadata(omlc *c, Omld__KeyValue *const *kv, size_t n);

int omlc_put_items(omlc *c, const omlc_item *items, size_t n, uint32_t *created,
                   uint32_t *replaced, omlc_error *err);
int omlc_delete_items(omlc *c, const char *const *ids, size_t n, int missing_ok,
                      uint32_t *deleted, omlc_error *err);
/* Answer owned by the caller (omld__response__free_unpacked(*resp, NULL));
 * (*resp)->get_items holds the items in request order. */
int omlc_get_items(omlc *c, const char *const *ids, size_t n, Omld__Response **resp,
                   omlc_error *err);

typedef struct omlc_triplet {
    omlc_ref anchor, positive, negative;
    float weight; /* the loss's scale, (0, 100]; 0: not sent (the daemon's 1) */
} omlc_triplet;
int omlc_add_triplets(omlc *c, const omlc_triplet *t, size_t n, uint32_t *accepted,
                      uint64_t *queue_depth, omlc_error *err);

/* omlc_add_triplets with an idempotency key (1..255 bytes; proto/omld.proto,
 * IDEMPOTENCY): a batch sent again with the same key is learned once;
 * *duplicate (may be NULL) is 1 when the daemon had applied the key
 * before (*accepted is then the first answer's count). */
int omlc_add_triplets_keyed(omlc *c, const omlc_triplet *t, size_t n, const char *key,
                            uint32_t *accepted, int *duplicate, omlc_error *err);

/* One triplet a partial batch left out, with the error it alone would have had. */
typedef struct omlc_rejected {
    size_t index;                /* its position in the batch */
    int code;                    /* a Status.Code, as omlc_code_name names it */
    char field[128];
    char message[256];
} omlc_rejected;
/* The good triplets of t are learned, each bad one reported in rejected
 * (max_rejected entries; *n_rejected gets the count, which may be larger):
 * 0 unless the batch itself is refused (empty, over max_batch) or the call
 * fails. */
int omlc_add_triplets_partial(omlc *c, const omlc_triplet *t, size_t n, uint32_t *accepted,
                              omlc_rejected *rejected, size_t max_rejected, size_t *n_rejected,
                              omlc_error *err);

typedef struct omlc_pair {
    omlc_ref a, b;
    int similar;           /* 1 similar, 0 dissimilar */
} omlc_pair;
int omlc_add_pairs(omlc *c, const omlc_pair *p, size_t n, uint32_t *accepted,
                   uint64_t *derived, omlc_error *err);

#define OMLC_LABEL_MAX 256
typedef struct omlc_class_score {
    char label[OMLC_LABEL_MAX];
    float score;
} omlc_class_score;
typedef struct omlc_classification {
    char label[OMLC_LABEL_MAX];  /* "" if no labelled items */
    int n_scores;
    omlc_class_score scores[16];
    uint64_t model_version;
} omlc_classification;
/* k = 0: the daemon's default. model NULL: the live model. */
int omlc_classify(omlc *c, const omlc_ref *q, uint32_t k, const char *model,
                  omlc_classification *out, omlc_error *err);

typedef struct omlc_verification {
    int similar;
    float score;
    int n_heads;
    float distances[17];
    uint64_t model_version;
} omlc_verification;
/* threshold <= 0: the daemon's default. */
int omlc_verify(omlc *c, const omlc_ref *a, const omlc_ref *b, float threshold,
                const char *model, omlc_verification *out, omlc_error *err);

typedef struct omlc_hit {
    char id[OMLC_LABEL_MAX];
    char label[OMLC_LABEL_MAX];  /* "" if unlabelled */
    float score;                 /* OAHU Eq. 27: changes with k and the page */
    float similarity;            /* the pair's, in [-1, 1], whatever k is */
} omlc_hit;
/* out holds max_hits; *n_hits gets the count. */
int omlc_retrieve(omlc *c, const omlc_ref *q, uint32_t k, const char *model, omlc_hit *out,
                  size_t max_hits, size_t *n_hits, uint64_t *model_version, omlc_error *err);

/* What a retrieval may return (RetrieveRequest in omld.proto). */
typedef struct omlc_retrieve_filter {
    const char *const *labels;      /* only items with one of these labels */
    size_t n_labels;                /* 0: any item */
    const char *const *exclude_ids; /* never returned */
    size_t n_exclude_ids;
    uint32_t offset;                /* skip the best offset hits (paging) */
    int has_min_similarity;         /* 1: drop hits below min_similarity */
    float min_similarity;
    Omld__MetadataCondition *const *metadata; /* only items passing all of these */
    size_t n_metadata;
} omlc_retrieve_filter;
/* omlc_retrieve with a filter (NULL: none). */
int omlc_retrieve_where(omlc *c, const omlc_ref *q, uint32_t k, const char *model,
                        const omlc_retrieve_filter *f, omlc_hit *out, size_t max_hits,
                        size_t *n_hits, uint64_t *model_version, omlc_error *err);

/* --- query batches: many queries in one request (omld.proto QUERY BATCHES).
 * The daemon answers a batch together, with one matrix product per head
 * for up to 128 queries at a time: faster per query than as many single
 * requests (pipelined or not); each answer is the one the query would get
 * alone. n is 1..the daemon's max_batch (10,000 by default) and the answer
 * must fit in its max_frame_bytes. All-or-nothing: an error names the
 * query, e.g. field "classify_batch.queries[3].query.id". --- */

/* Classifies the n queries q with k (0: the daemon's default) against
 * model (NULL: the live one); out (n) gets the answers in order, each
 * with the batch's model_version. */
int omlc_classify_batch(omlc *c, const omlc_ref *q, size_t n, uint32_t k, const char *model,
                        omlc_classification *out, omlc_error *err);

/* Retrieves for the n queries q, query i with filter f[i] (f NULL: none
 * for any; a zeroed filter is none): its hits into out + i * max_hits (at
 * most max_hits kept) and their count into n_hits[i]; *model_version (may
 * be NULL) gets the batch's. */
int omlc_retrieve_batch(omlc *c, const omlc_ref *q, size_t n, uint32_t k, const char *model,
                        const omlc_retrieve_filter *f, omlc_hit *out, size_t max_hits,
                        size_t *n_hits, uint64_t *model_version, omlc_error *err);

/* Answer owned by the caller; (*resp)->embed holds heads and alpha. */
int omlc_embed(omlc *c, const omlc_ref *item, const char *model, Omld__Response **resp,
               omlc_error *err);
/* The serving model as an OMLSNAP file (src/snapshot.h; decode it with
 * oml_snapshot_decode): (*resp)->export_model->model holds the bytes,
 * ->version the model version. model NULL or "live": the live model. */
int omlc_export_model(omlc *c, const char *model, Omld__Response **resp, omlc_error *err);

/* Answer owned by the caller; (*resp)->status_info. */
int omlc_status(omlc *c, Omld__Response **resp, omlc_error *err);
int omlc_health(omlc *c, int *live, int *ready, int *draining, omlc_error *err);
int omlc_checkpoint(omlc *c, Omld__Response **resp, omlc_error *err);

/* Authenticates the connection with token (send it right after connect;
 * omld then accepts the connection's other requests). *read_write (may be
 * NULL) gets 1 for a read-write token (or a daemon without tokens), 0 for a
 * read-only one. A wrong token: OMLD__STATUS__CODE__UNAUTHENTICATED (10);
 * the daemon closes the connection after three. */
int omlc_auth(omlc *c, const char *token, int *read_write, omlc_error *err);

/* --- batch helpers: split into requests of `batch`, keep up to `window`
 * requests in flight, call progress(done, total, arg) after each answer
 * (may be NULL). Stop at the first error (returned, err filled). --- */
typedef void (*omlc_progress_fn)(size_t done, size_t total, void *arg);
int omlc_put_items_pipelined(omlc *c, const omlc_item *items, size_t n, size_t batch,
                             size_t window, omlc_progress_fn progress, void *arg,
                             omlc_error *err);
int omlc_add_triplets_pipelined(omlc *c, const omlc_triplet *t, size_t n, size_t batch,
                                size_t window, omlc_progress_fn progress, void *arg,
                                omlc_error *err);

/* --- additions (not in the first draft of this header) --- */

/* Pairs, batched and pipelined like the helpers above. */
int omlc_add_pairs_pipelined(omlc *c, const omlc_pair *p, size_t n, size_t batch,
                             size_t window, omlc_progress_fn progress, void *arg,
                             omlc_error *err);

/* Classifies n queries with up to `window` requests in flight; out (n) gets
 * the answers in order. Stops at the first error like the helpers above. */
int omlc_classify_pipelined(omlc *c, const omlc_ref *q, size_t n, uint32_t k,
                            const char *model, size_t window, omlc_classification *out,
                            omlc_progress_fn progress, void *arg, omlc_error *err);

/* Sums over the answers of the last *_pipelined call on c (zeroed at its
 * start): what the per-batch answers said, and the last model_version. */
typedef struct omlc_totals {
    uint64_t created, replaced;  /* put_items */
    uint64_t accepted;           /* add_triplets / add_pairs */
    uint64_t derived;            /* add_pairs: derived triplets */
    uint64_t queue_depth;        /* add_triplets: of the last answer */
    uint64_t model_version;      /* of the last answer */
} omlc_totals;
void omlc_last_totals(const omlc *c, omlc_totals *out);

/* The model_version of the last Response received (0 before any). */
uint64_t omlc_last_model_version(const omlc *c);

/* --- trainer jobs and batch models (omld.proto TRAINER) --- */

/* Starts a job; *job_id and model (the model's name, model_cap bytes) get
 * the answer. The request is borrowed (build it with
 * OMLD__TRAIN_START_REQUEST__INIT). */
int omlc_train_start(omlc *c, const Omld__TrainStartRequest *req, uint64_t *job_id,
                     char *model, size_t model_cap, omlc_error *err);
/* Answers owned by the caller: (*resp)->train_status->job / ->train_cancel->job. */
int omlc_train_status(omlc *c, uint64_t job_id, Omld__Response **resp, omlc_error *err);
int omlc_train_cancel(omlc *c, uint64_t job_id, Omld__Response **resp, omlc_error *err);
/* (*resp)->list_models->models, by name. */
int omlc_list_models(omlc *c, Omld__Response **resp, omlc_error *err);
/* Promote / Rollback answer once the new live view serves; *model_version
 * (may be NULL) is its version. */
int omlc_promote(omlc *c, const char *name, uint64_t *model_version, omlc_error *err);
int omlc_rollback(omlc *c, uint64_t *model_version, omlc_error *err);
int omlc_delete_model(omlc *c, const char *name, omlc_error *err);

/* Makes the read replica at c the primary of its replication stream (it
 * takes the lease in Redis, applies the stream to its end and continues
 * the log): (*resp)->promote_replica (log_position, model_version,
 * primary), owned by the caller. UNAVAILABLE while the old primary's lease
 * lives; CONFLICT on a daemon that is not a replica. */
int omlc_promote_replica(omlc *c, Omld__Response **resp, omlc_error *err);

/* --- shards (omld.proto SHARDS): a retrieval or a classification fanned out over the n read
 * replicas started with shard = i/n, merged into exactly the answer one
 * node holding every item gives (at equal model versions: shards that
 * answer under different versions are asked again, UNAVAILABLE after
 * ~0.5 s). One connection per shard, one thread at a time. --- */
typedef struct omlc_shards omlc_shards;
/* servers[i]: shard i of n. */
int omlc_shards_connect(omlc_shards **out, const char *const *servers, size_t n, int timeout_ms,
                        omlc_error *err);
/* The shard map from Redis: url "redis://HOST:PORT/PREFIX" (the replicas'
 * replica_of), PREFIX:shards:n field i = shard i's address (each shard
 * writes its own). OMLC_ECONNECT naming a shard that is not there. */
int omlc_shards_connect_redis(omlc_shards **out, const char *url, uint32_t n, int timeout_ms,
                              omlc_error *err);
/* omlc_retrieve_where over every shard (k > 0; f may be NULL; its
 * with_metadata is not carried). */
int omlc_shards_retrieve(omlc_shards *s, const omlc_ref *q, uint32_t k,
                         const omlc_retrieve_filter *f, omlc_hit *out, size_t max_hits,
                         size_t *n_hits, uint64_t *model_version, omlc_error *err);
void omlc_shards_close(omlc_shards *s); /* accepts NULL */
size_t omlc_shards_count(const omlc_shards *s);
/* The same for a RetrieveRequest as the wire has it (omld --router): body
 * is sent with k set (its k is overwritten), the merged hits (k of them
 * at most, borrowing from resp) into hits; resp (omlc_shards_count of
 * them, NULL on entry) holds the answers until omlc_shards_free_answers. */
int omlc_shards_merge(omlc_shards *s, Omld__RetrieveRequest *body, uint32_t k,
                      oml_merged_hit *hits, size_t *n_hits, uint64_t *model_version,
                      Omld__Response **resp, omlc_error *err);
void omlc_shards_free_answers(Omld__Response **resp, size_t n);
/* omlc_classify over every shard (k > 0), equal to one node's answer bit
 * for bit: each shard's k nearest per head (ShardRetrieve), the vote over
 * their union (oml_shard_classify: the vote function of src/vote.c). */
int omlc_shards_classify(omlc_shards *s, const omlc_ref *q, uint32_t k,
                         omlc_classification *out, omlc_error *err);
/* The same for a RetrieveRequest carrying a classify's query, k and
 * metadata (omld --router): the merged class into out, borrowing from resp
 * as omlc_shards_merge does. */
int omlc_shards_vote(omlc_shards *s, Omld__RetrieveRequest *body, uint32_t k,
                     oml_merged_class *out, uint64_t *model_version, Omld__Response **resp,
                     omlc_error *err);

/* A static name for a status or transport code ("NOT_FOUND", "timeout"). */
const char *omlc_code_name(int code);

#endif
