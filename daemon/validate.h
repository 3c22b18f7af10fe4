/* validate.h - every check of a request that needs no state, at the edge.
 *
 * Runs on the loop thread right after decoding, before anything is queued,
 * so that a bad request changes nothing and gets a named error: the body is
 * set; batches hold 1..max_batch entries; ids and labels are 1..255 bytes
 * without NUL; no id twice in one PutItems / DeleteItems / GetItems batch;
 * feature vectors (items and inline refs) have exactly dim values, all
 * finite and within +-max_abs (option max_feature_abs);
 * every triplet member and pair member is set; a triplet's negative is not
 * its anchor or positive (the same id, or equal inline vectors); a pair's relation is
 * SIMILAR or DISSIMILAR; k, when given, is in 1..max_k; a threshold, when
 * given, is in (0, 1]; the queries of a batch (classify_batch,
 * retrieve_batch) each pass their single check and name one model. Checks
 * that need the store (unknown ids) or the
 * model registry (unknown model names) happen where that state lives.
 * Pure functions; thread-safe. */
#ifndef OMLD_VALIDATE_H
#define OMLD_VALIDATE_H

#include <stdint.h>

#include "omld.pb-c.h"
#include "options.h"
#include "ops.h"
#include "reply.h"

#define OMLD_ID_MAX 255 /* bytes in an id, a label or a model name (omld.proto) */

typedef struct omld_limits {
    int32_t dim;
    uint32_t max_batch;
    uint32_t max_k;
    uint32_t default_k;
    float default_threshold;
    float max_abs;           /* largest |feature value| accepted; 0: no bound */
    uint32_t max_answer;     /* largest answer frame (max_frame_bytes); 0: no bound */
    uint32_t rerank_k;       /* candidates per head a fresh view's query re-ranks */
    float depth_target;      /* ann_target_recall: the share their depth must keep (depth.h) */
    uint32_t max_meta_entries, max_meta_key, max_meta_value; /* item metadata bounds */
} omld_limits;

/* Index of the first value of x (n) that is NaN, infinite or (max_abs > 0)
 * larger than max_abs in magnitude, or n if there is none. Linear,
 * branch-free over a vector that passes. Thread-safe. */
size_t omld_first_bad_feature(const float *x, size_t n, float max_abs);

/* Checks req by its row's check (ops.h). On success returns 0 and sets
 * *route (enum omld_route) and *cost (entries the request carries, >= 1:
 * items, triplets, pairs or ids). On failure fills r with the error (code,
 * field path such as "put_items.items[3].features", message) and returns
 * the code (> 0). */
int omld_validate(const Omld__Request *req, const omld_limits *lim, omld_reply *r,
                  int *route, uint64_t *cost);

/* The limits the options set (server.c's edge, apply.c's partial batches). */
omld_limits omld_limits_of(const omld_config *cfg);

/* One triplet of an AddTriplets batch, entry i (for the field path): every
 * member a valid ref, the negative another item than the other two. 0 or
 * the code (r filled). */
int omld_check_triplet(const Omld__Triplet *t, size_t i, const omld_limits *lim, omld_reply *r);

/* One ItemRef: set, id 1..255 bytes without NUL or vector of dim finite
 * values. field is the path used in errors. 0 or the code (r filled). */
int omld_validate_ref(const Omld__ItemRef *ref, const omld_limits *lim, const char *field,
                      omld_reply *r);

/* The checks of the operation table's rows, one per request kind that
 * carries something to check (a GetItems whose features alone would not
 * fit in max_answer is RESOURCE_EXHAUSTED): 0, or the code with r filled. */
int omld_check_put_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_delete_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_get_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_add_triplets(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_add_pairs(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_classify(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_verify(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_retrieve(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
/* Each query as its single request is checked (paths "classify_batch.
 * queries[i]..."), 1..max_batch of them, all naming one model. */
int omld_check_classify_batch(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_retrieve_batch(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
/* Recommend: 1..OMLD_RECOMMEND_MAX positive examples and 0..OMLD_RECOMMEND_MAX
 * negative ones (each an id or a vector), then k, offset, model and the
 * filters as retrieve's ("recommend.k", "recommend.positive[2].id"). */
#define OMLD_RECOMMEND_MAX 64
/* The retrieve fields a recommend shares (k, model, filters, page), as a
 * RetrieveRequest without a query; its pointers are m's. */
void omld_recommend_as_retrieve(const Omld__RecommendRequest *m, Omld__RetrieveRequest *out);
/* ListItems: limit 0..max_batch (0: OMLD_LIST_DEFAULT), the labels as names. */
#define OMLD_LIST_DEFAULT 100
int omld_check_list_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
/* CountItems: the labels as names, the metadata filter. */
int omld_check_shard_retrieve(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_count_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
/* A metadata filter at path `at` ("retrieve.metadata"): at most
 * max_metadata_entries conditions, each a valid key and 1..max_batch valid
 * values ("retrieve.metadata[1].values[0]"). 0 or the code (r filled). */
int omld_check_meta_filter(Omld__MetadataCondition *const *c, size_t n, const omld_limits *lim,
                           const char *at, omld_reply *r);
int omld_check_recommend(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
/* A triplet's weight is in (0, OMLD_MAX_TRIPLET_WEIGHT] (omld.proto). */
#define OMLD_MAX_TRIPLET_WEIGHT 100.0f

int omld_check_embed(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_export_model(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_train_start(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_train_status(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_train_cancel(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_delete_model(const Omld__Request *req, const omld_limits *lim, omld_reply *r);
int omld_check_promote(const Omld__Request *req, const omld_limits *lim, omld_reply *r);

#endif
