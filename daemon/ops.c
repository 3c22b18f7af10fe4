/* ops.c - the operation table (see ops.h).
 *
 * DESIGN
 * One row per field of Request.body, in proto order. Sizes, k and answer
 * bounds are small accessors next to the table, so a row reads whole; the
 * checks live in validate.c and the handlers where their state lives. The
 * lookup is a linear scan over two dozen rows, cheaper than the decode that
 * precedes it. */
#include "ops.h"

#include <stddef.h>

#include "apply.h"
#include "auth.h"
#include "local.h"
#include "metrics.h"
#include "promote_replica.h"
#include "query.h"
#include "trainer.h"
#include "validate.h"

/* ------------------------------------------------------------ sizes */

static uint64_t put_items_n(const Omld__Request *q)
{
    return q->put_items ? q->put_items->n_items : 0;
}

static uint64_t delete_items_n(const Omld__Request *q)
{
    const Omld__DeleteItemsRequest *m = q->delete_items;
    return m ? m->n_ids + m->n_labels + m->n_metadata : 0;
}

/* A page of ListItems: its limit (0: OMLD_LIST_DEFAULT). */
static uint64_t list_items_n(const Omld__Request *q)
{
    return q->list_items && q->list_items->limit ? q->list_items->limit : OMLD_LIST_DEFAULT;
}

static uint64_t get_items_n(const Omld__Request *q)
{
    return q->get_items ? q->get_items->n_ids : 0;
}

static uint64_t add_triplets_n(const Omld__Request *q)
{
    return q->add_triplets ? q->add_triplets->n_triplets : 0;
}

static uint64_t add_pairs_n(const Omld__Request *q)
{
    return q->add_pairs ? q->add_pairs->n_pairs : 0;
}

static uint64_t classify_batch_n(const Omld__Request *q)
{
    return q->classify_batch ? q->classify_batch->n_queries : 0;
}

static uint64_t retrieve_batch_n(const Omld__Request *q)
{
    return q->retrieve_batch ? q->retrieve_batch->n_queries : 0;
}

static uint32_t classify_msg_k(const Omld__ClassifyRequest *m)
{
    return m && m->k_opt_case == OMLD__CLASSIFY_REQUEST__K_OPT_K ? m->k : 0;
}

static uint32_t retrieve_msg_k(const Omld__RetrieveRequest *m)
{
    return m && m->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K ? m->k : 0;
}

static uint32_t classify_k(const Omld__Request *q)
{
    return classify_msg_k(q->classify);
}

static uint32_t retrieve_k(const Omld__Request *q)
{
    return retrieve_msg_k(q->retrieve);
}

/* A batch's k for max_k: the largest its queries ask for. */
static uint32_t classify_batch_k(const Omld__Request *q)
{
    uint32_t k = 0;
    for (uint64_t i = 0; i < classify_batch_n(q); i++) {
        uint32_t ki = classify_msg_k(q->classify_batch->queries[i]);
        k = ki > k ? ki : k;
    }
    return k;
}

static uint32_t retrieve_batch_k(const Omld__Request *q)
{
    uint32_t k = 0;
    for (uint64_t i = 0; i < retrieve_batch_n(q); i++) {
        uint32_t ki = retrieve_msg_k(q->retrieve_batch->queries[i]);
        k = ki > k ? ki : k;
    }
    return k;
}

/* ------------------------------------------------------------ answer bounds */

/* Ids and labels are at most OMLD_ID_MAX bytes; 8 more for their tags. */
#define NAME_BYTES ((uint64_t)OMLD_ID_MAX + 8)

static uint64_t k_or_default(uint32_t k, const omld_answer_dims *d)
{
    return k ? k : d->default_k;
}

static uint64_t get_items_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    return get_items_n(q) * (d->dim * 4 + 2 * NAME_BYTES + d->meta + 16);
}

/* A model file: bounded by the frame (the encoder refuses a larger one). */
static uint64_t export_model_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    (void)q;
    (void)d;
    return (uint64_t)1 << 40; /* capped at the frame; no overflow with the envelope */
}

static uint64_t list_items_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    int feats = q->list_items && q->list_items->with_features;
    return list_items_n(q) * ((feats ? d->dim * 4 : 0) + 2 * NAME_BYTES + d->meta + 16) + 32;
}

static uint64_t retrieve_msg_answer(const Omld__RetrieveRequest *m, const omld_answer_dims *d)
{
    return k_or_default(retrieve_msg_k(m), d) *
           (2 * NAME_BYTES + 16 + (m && m->with_metadata ? d->meta : 0));
}

/* Recommend: its examples are its entries; k and the answer as retrieve's. */
static uint64_t recommend_n(const Omld__Request *q)
{
    return q->recommend ? q->recommend->n_positive + q->recommend->n_negative : 0;
}

static uint32_t recommend_k(const Omld__Request *q)
{
    const Omld__RecommendRequest *m = q->recommend;
    return m && m->k_opt_case == OMLD__RECOMMEND_REQUEST__K_OPT_K ? m->k : 0;
}

static uint64_t recommend_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    const Omld__RecommendRequest *m = q->recommend;
    return k_or_default(recommend_k(q), d) *
           (2 * NAME_BYTES + 16 + (m && m->with_metadata ? d->meta : 0));
}

/* A score per class met per head, and the label. */
static uint64_t classify_msg_answer(const Omld__ClassifyRequest *m, const omld_answer_dims *d)
{
    return k_or_default(classify_msg_k(m), d) * d->heads * (NAME_BYTES + 8) + NAME_BYTES;
}

static uint64_t retrieve_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    return retrieve_msg_answer(q->retrieve, d);
}

static uint32_t shard_retrieve_k(const Omld__Request *q)
{
    return q->shard_retrieve ? retrieve_msg_k(q->shard_retrieve->retrieve) : 0;
}

/* A shard's candidates: offset + k per head, each at most once (id, label,
 * slot, similarity), and per head their indexes and distances. */
static uint64_t shard_retrieve_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    const Omld__RetrieveRequest *m = q->shard_retrieve ? q->shard_retrieve->retrieve : NULL;
    uint64_t ranked = k_or_default(shard_retrieve_k(q), d) + (m ? m->offset : 0);
    return d->heads * ranked * (2 * NAME_BYTES + 16 + 12) + d->heads * 16;
}

static uint64_t classify_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    return classify_msg_answer(q->classify, d);
}

/* A batch's answer: every query's, each in its own field (tag and length:
 * at most 6 bytes). */
#define ANSWER_FRAMING 6

static uint64_t classify_batch_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    uint64_t b = 0;
    for (uint64_t i = 0; i < classify_batch_n(q); i++)
        b += classify_msg_answer(q->classify_batch->queries[i], d) + ANSWER_FRAMING;
    return b;
}

static uint64_t retrieve_batch_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    uint64_t b = 0;
    for (uint64_t i = 0; i < retrieve_batch_n(q); i++)
        b += retrieve_msg_answer(q->retrieve_batch->queries[i], d) + ANSWER_FRAMING;
    return b;
}

static uint64_t embed_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    (void)q;
    return d->heads * (d->emb * 4 + 8) + d->heads * 4;
}

/* Job and model listings: bounded by the registry's own caps. */
static uint64_t listing_answer(const Omld__Request *q, const omld_answer_dims *d)
{
    (void)q;
    (void)d;
    return 64 * 1024;
}

/* ------------------------------------------------------------ the table */

#define BODY(x) OMLD__REQUEST__BODY_##x

static const omld_op OPS[] = {
    {.name = "put_items", .body = BODY(PUT_ITEMS), .route = OMLD_ROUTE_MUTATION, .writes = 1,
     .metric = -1, .entries = put_items_n, .check = omld_check_put_items,
     .handle.apply = omld_apply_put_items},
    {.name = "delete_items", .body = BODY(DELETE_ITEMS), .route = OMLD_ROUTE_MUTATION,
     .writes = 1, .metric = -1, .entries = delete_items_n, .check = omld_check_delete_items,
     .handle.apply = omld_apply_delete_items},
    {.name = "get_items", .body = BODY(GET_ITEMS), .route = OMLD_ROUTE_QUERY, .needs_model = 1,
     .metric = OMLD_Q_GET_ITEMS, .entries = get_items_n, .answer = get_items_answer,
     .check = omld_check_get_items, .handle.query = omld_query_get_items},
    {.name = "list_items", .body = BODY(LIST_ITEMS), .route = OMLD_ROUTE_QUERY,
     .metric = OMLD_Q_LIST_ITEMS, .entries = list_items_n, .answer = list_items_answer,
     .check = omld_check_list_items, .handle.query = omld_query_list_items},
    {.name = "count_items", .body = BODY(COUNT_ITEMS), .route = OMLD_ROUTE_QUERY,
     .metric = OMLD_Q_COUNT_ITEMS, .check = omld_check_count_items,
     .handle.query = omld_query_count_items},
    {.name = "add_triplets", .body = BODY(ADD_TRIPLETS), .route = OMLD_ROUTE_MUTATION,
     .writes = 1, .metric = -1, .entries = add_triplets_n, .check = omld_check_add_triplets,
     .handle.apply = omld_apply_add_triplets},
    {.name = "add_pairs", .body = BODY(ADD_PAIRS), .route = OMLD_ROUTE_MUTATION, .writes = 1,
     .metric = -1, .entries = add_pairs_n, .check = omld_check_add_pairs,
     .handle.apply = omld_apply_add_pairs},
    {.name = "classify", .body = BODY(CLASSIFY), .route = OMLD_ROUTE_QUERY, .needs_model = 1,
     .metric = OMLD_Q_CLASSIFY, .k = classify_k, .answer = classify_answer,
     .check = omld_check_classify, .handle.query = omld_query_classify},
    {.name = "verify", .body = BODY(VERIFY), .route = OMLD_ROUTE_QUERY, .needs_model = 1,
     .metric = OMLD_Q_VERIFY, .check = omld_check_verify, .handle.query = omld_query_verify},
    {.name = "retrieve", .body = BODY(RETRIEVE), .route = OMLD_ROUTE_QUERY, .needs_model = 1,
     .metric = OMLD_Q_RETRIEVE, .k = retrieve_k, .answer = retrieve_answer,
     .check = omld_check_retrieve, .handle.query = omld_query_retrieve},
    {.name = "embed", .body = BODY(EMBED), .route = OMLD_ROUTE_QUERY, .needs_model = 1,
     .metric = OMLD_Q_EMBED, .answer = embed_answer, .check = omld_check_embed,
     .handle.query = omld_query_embed},
    {.name = "classify_batch", .body = BODY(CLASSIFY_BATCH), .route = OMLD_ROUTE_QUERY,
     .needs_model = 1, .metric = OMLD_Q_CLASSIFY_BATCH, .entries = classify_batch_n,
     .k = classify_batch_k, .answer = classify_batch_answer, .check = omld_check_classify_batch,
     .handle.query = omld_query_classify_batch},
    {.name = "retrieve_batch", .body = BODY(RETRIEVE_BATCH), .route = OMLD_ROUTE_QUERY,
     .needs_model = 1, .metric = OMLD_Q_RETRIEVE_BATCH, .entries = retrieve_batch_n,
     .k = retrieve_batch_k, .answer = retrieve_batch_answer, .check = omld_check_retrieve_batch,
     .handle.query = omld_query_retrieve_batch},
    {.name = "recommend", .body = BODY(RECOMMEND), .route = OMLD_ROUTE_QUERY, .needs_model = 1,
     .metric = OMLD_Q_RECOMMEND, .entries = recommend_n, .k = recommend_k,
     .answer = recommend_answer, .check = omld_check_recommend,
     .handle.query = omld_query_recommend},
    {.name = "status", .body = BODY(STATUS), .route = OMLD_ROUTE_INLINE, .metric = -1,
     .handle.local = omld_local_status},
    {.name = "health", .body = BODY(HEALTH), .route = OMLD_ROUTE_INLINE, .metric = -1,
     .handle.local = omld_local_health},
    {.name = "checkpoint", .body = BODY(CHECKPOINT), .route = OMLD_ROUTE_MUTATION, .writes = 1,
     .metric = -1},
    {.name = "export_model", .body = BODY(EXPORT_MODEL), .route = OMLD_ROUTE_QUERY,
     .needs_model = 1, .metric = OMLD_Q_EXPORT_MODEL, .answer = export_model_answer,
     .check = omld_check_export_model, .handle.query = omld_query_export_model},
    {.name = "auth", .body = BODY(AUTH), .route = OMLD_ROUTE_INLINE, .before_auth = 1,
     .metric = -1, .handle.local = omld_auth_answer},
    {.name = "train_start", .body = BODY(TRAIN_START), .route = OMLD_ROUTE_ADMIN, .writes = 1,
     .metric = -1, .check = omld_check_train_start, .handle.admin = omld_trainer_train_start},
    {.name = "train_status", .body = BODY(TRAIN_STATUS), .route = OMLD_ROUTE_ADMIN,
     .metric = -1, .answer = listing_answer, .check = omld_check_train_status,
     .handle.admin = omld_trainer_train_status},
    {.name = "train_cancel", .body = BODY(TRAIN_CANCEL), .route = OMLD_ROUTE_ADMIN,
     .writes = 1, .metric = -1, .check = omld_check_train_cancel,
     .handle.admin = omld_trainer_train_cancel},
    {.name = "list_models", .body = BODY(LIST_MODELS), .route = OMLD_ROUTE_ADMIN, .metric = -1,
     .answer = listing_answer, .handle.admin = omld_trainer_list_models},
    {.name = "promote", .body = BODY(PROMOTE), .route = OMLD_ROUTE_MUTATION, .writes = 1,
     .metric = -1, .check = omld_check_promote, .handle.apply = omld_apply_promote},
    {.name = "rollback", .body = BODY(ROLLBACK), .route = OMLD_ROUTE_MUTATION, .writes = 1,
     .metric = -1, .handle.apply = omld_apply_rollback},
    {.name = "delete_model", .body = BODY(DELETE_MODEL), .route = OMLD_ROUTE_ADMIN,
     .writes = 1, .metric = -1, .check = omld_check_delete_model,
     .handle.admin = omld_trainer_delete_model},
    {.name = "shard_retrieve", .body = BODY(SHARD_RETRIEVE), .route = OMLD_ROUTE_QUERY,
     .needs_model = 1, .metric = OMLD_Q_SHARD_RETRIEVE, .k = shard_retrieve_k,
     .answer = shard_retrieve_answer, .check = omld_check_shard_retrieve,
     .handle.query = omld_query_shard_retrieve},
    {.name = "promote_replica", .body = BODY(PROMOTE_REPLICA), .route = OMLD_ROUTE_CONTROL,
     .writes = 1, .replica_ok = 1, .metric = -1, .handle.control = omld_promote_start},
};

#define N_OPS ((int)(sizeof OPS / sizeof OPS[0]))

const omld_op *omld_op_find(int body_case)
{
    for (int i = 0; i < N_OPS; i++)
        if (OPS[i].body == body_case)
            return &OPS[i];
    return NULL;
}

const omld_op *omld_ops(int *n)
{
    *n = N_OPS;
    return OPS;
}

uint64_t omld_op_answer_bound(const omld_op *op, const Omld__Request *req,
                              const omld_answer_dims *d, uint64_t cap)
{
    const uint64_t envelope = 1024; /* status, message, request id, version */
    uint64_t b = envelope + (op && op->answer ? op->answer(req, d) : 0);
    return b < cap ? b : cap;
}
