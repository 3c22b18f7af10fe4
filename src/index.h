/* index.h - every stored item embedded under one snapshot, per head.
 *
 * Built in one pass (batched GEMM through oml_snapshot_embed) from a snapshot
 * and the live items of a store; afterwards fully immutable and independent
 * of the store: it copies the ids, label ids and label names it serves, so
 * queries on any thread need only the index (which holds a reference on its
 * snapshot). Exact search: distances D = ||f(q) - f(x)|| = sqrt(2 - 2 f(q).f(x))
 * for unit vectors (OAHU Eq. 6). */
#ifndef OML_INDEX_H
#define OML_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "snapshot.h"
#include "store.h"

typedef struct oml_neighbor {
    int32_t row; /* index row, 0..n-1 */
    float dist;  /* D in [0, 2] */
} oml_neighbor;

typedef struct oml_index {
    oml_snapshot *snap;      /* owned reference */
    int32_t n;               /* items */
    int32_t heads, emb;
    float *emb_cols;         /* (heads, emb, n) each head's unit rows as columns: the
                                layout one query scans (a row-major (emb, n) sgemv
                                streams twice as fast as an (n, emb) one for emb ~ 50),
                                kept once (oml_index_emb reads a row's value) */
    uint32_t *slots;         /* (n) store slot of each row */
    int32_t *labels;         /* (n) label id or OML_LABEL_NONE */
    const char **ids;        /* (n) NUL-terminated ids (copied) */
    size_t *id_lens;         /* (n) */
    int32_t n_labels;
    const char **label_names;/* (n_labels) copied */
    /* Inverted lists (ivf.h), for indexes of at least the builder's
     * ivf_min_rows rows: rows are grouped by list (ascending slot within a
     * list) and a query scans the lists nearest to it. n_lists = 0: rows
     * in ascending slot order, every query scans all of them. */
    int32_t n_lists;
    float *centroids;        /* (n_lists, heads * emb) unit rows */
    int32_t *list_start;     /* (n_lists + 1) first row of each list */
    int64_t probe_rows;      /* rows a query's lists must cover, measured when the index
                                was built (oml_index_calibrate); 0: n / OML_IVF_PROBE_DIV */
    void *_arena;
} oml_index;

/* A query of an index with lists scans the nearest lists until it has
 * covered n / OML_IVF_PROBE_DIV rows (and at least 64 k). On Fashion-MNIST
 * under the default model's start (210,000 items: three noisy copies of
 * each image; 300 queries) that finds 0.935 of the exact 10 nearest per
 * head with an eighth of the rows, 0.84 with a sixteenth, 0.65 with a
 * thirty-second, with sqrt(n)/8 lists; sqrt(n)/4 lists gave 0.87 / 0.70 /
 * 0.49, 4x and 16x as many no better, and far fewer lists are too coarse
 * to stop near an eighth. The standardised projections spread over their
 * 63 dimensions, the hard case for lists. */
#define OML_IVF_PROBE_DIV 8

/* For an index with lists: how many rows a query's lists must cover for
 * `target` (in (0, 1]) of the exact 10 nearest rows per head, measured on
 * OML_IVF_CALIBRATION_QUERIES of its own rows (strided) as queries, into
 * ix->probe_rows (never below 64 x 10 rows). The lists split embeddings
 * unevenly: under the standardised start an eighth of the rows found 0.93-
 * 0.97 of them, under the whitened one (isotropic) 0.71-0.75. Costs that
 * many exact scans. target <= 0 or OML_ENOMEM: the default rule stays. */
#define OML_IVF_TARGET_RECALL 0.95
#define OML_IVF_CALIBRATION_QUERIES 64
int oml_index_calibrate(oml_index *ix, double target);

/* Builds an index of all live items of store under snap (takes its own
 * reference on snap). OML_ENOMEM; an empty store gives an empty index.
 * The store must not change meanwhile (the builder below lets it). */
int oml_index_build(oml_index **out, oml_snapshot *snap, const oml_store *store);

/* Building in steps, for a store that changes meanwhile (index_build.c):
 *
 *   oml_index_builder_init(&b, snap, dim);
 *   do {
 *       lock the store for reading;
 *       more = oml_index_builder_gather(&b, store);  // < 0: error
 *       unlock;
 *       oml_index_builder_embed(&b);                  // no lock
 *   } while (more > 0);
 *   lock; oml_index_builder_finish(&b, store, &ix); unlock;
 *   oml_index_builder_free(&b);
 *
 * Each gather visits the next slots in ascending order and copies up to
 * OML_INDEX_GATHER_ROWS live items out; an item is indexed as its slot was
 * when visited. Everything in the store when the build began is in the
 * index (unless changed before its slot was visited: then as changed). */
#define OML_INDEX_GATHER_ROWS 4096

typedef struct oml_index_builder {
    oml_snapshot *snap;       /* owned reference */
    int32_t dim, heads, emb;
    uint32_t next_slot;       /* the first slot not yet visited */
    size_t n;                 /* rows gathered */
    int32_t pending;          /* of them, gathered by the last gather, not yet embedded */
    float *X;                 /* (OML_INDEX_GATHER_ROWS, dim) their features */
    float *out;               /* (heads, OML_INDEX_GATHER_ROWS, emb) embedding scratch */
    uint32_t *slots;          /* (n) */
    int32_t *labels;          /* (n) */
    size_t *id_off;           /* (n) offset of each id in chars */
    char *chars;              /* NUL-terminated ids */
    size_t n_chars;
    float *rows_emb;          /* (n, heads, emb) */
    size_t cap_rows, cap_labels, cap_off, cap_chars, cap_emb;
    size_t ivf_min_rows;      /* lists when at least this many rows (0: never); set
                                 before finish */
} oml_index_builder;

/* OML_OK, OML_EDIM (dim is not the snapshot's), OML_ENOMEM. Takes its own
 * reference on snap. */
int oml_index_builder_init(oml_index_builder *b, oml_snapshot *snap, int32_t dim);
/* Copies the next live items out of store (held still by the caller):
 * 1 if slots remain, 0 once every slot was visited, OML_ENOMEM. */
int oml_index_builder_gather(oml_index_builder *b, const oml_store *store);
/* Embeds what the last gather copied; touches no store. */
int oml_index_builder_embed(oml_index_builder *b);
/* The index of every gathered row, with the store's label names (held
 * still by the caller). The builder stays to be freed. */
int oml_index_builder_finish(oml_index_builder *b, const oml_store *store, oml_index **out);
/* (then, without the store: oml_index_calibrate(*out) for an index with lists) */
void oml_index_builder_free(oml_index_builder *b); /* accepts a zeroed builder */
void oml_index_destroy(oml_index *ix); /* accepts NULL; releases the snapshot ref */

/* Exact k nearest rows of a unit query q (emb) in one head, ascending by
 * distance (ties by row), skipping row `exclude` (-1 for none) and, when
 * allow (n) is given, every row r with allow[r] == 0. scratch holds n
 * floats. Returns how many were written (min(k, available)). Scans every
 * row, lists or not. */
int32_t oml_index_topk(const oml_index *ix, int head, const float *q, int32_t k,
                       int32_t exclude, const uint8_t *allow, oml_neighbor *out, float *scratch);

/* For an index with lists: the lists a query whose head embeddings are
 * q_all (heads * emb) scans for k neighbours, nearest first, into lists
 * (n_lists); scratch holds n_lists floats. Returns how many. */
int32_t oml_index_probe(const oml_index *ix, const float *q_all, int32_t k, int32_t *lists,
                        float *scratch);

/* oml_index_topk over the rows of the given lists only: the exact k
 * nearest among them. scratch holds n floats, rowmap n int32. */
int32_t oml_index_topk_lists(const oml_index *ix, int head, const float *q, const int32_t *lists,
                             int32_t n_probe, int32_t k, int32_t exclude, const uint8_t *allow,
                             oml_neighbor *out, float *scratch, int32_t *rowmap);

/* The selection step of oml_index_topk, for callers that computed the dot
 * products themselves (e.g. one GEMM for many queries): dots (n) holds any
 * BLAS-accurate E_head . q and is destroyed (used as scratch). The result is
 * exact and bit-identical whatever routine produced dots, because final
 * distances are recomputed in a fixed order. out (k); returns the count. */
int32_t oml_index_select(const oml_index *ix, int head, const float *q, float *dots,
                         int32_t k, int32_t exclude, const uint8_t *allow, oml_neighbor *out);

/* oml_index_select in steps, for dot products computed a block of rows at
 * a time (serve_batch.c: one GEMM per block of rows for many queries, so
 * the scratch stays bounded whatever n is). Feeding every row once, in
 * blocks of any size and order, gives exactly oml_index_select's result:
 * the threshold of the k largest dot products carries across blocks, and
 * each block's candidates get their canonical distances at once.
 *
 *   oml_index_sel_init(&s, k, approx, best);       // approx, best: k each
 *   for each block: oml_index_sel_feed(ix, h, q, dots, row0, m, exclude, allow, &s);
 *   cnt = oml_index_sel_finish(&s);                // best[0..cnt) ascending
 */
typedef struct oml_index_sel {
    oml_neighbor *approx;   /* (k) borrowed: the k largest dot products so far (min-heap) */
    oml_neighbor *best;     /* (k) borrowed: the exact k nearest so far (max-heap) */
    int32_t k, filled, cnt;
    float thr;              /* rows whose dot product is below it cannot be among the k */
} oml_index_sel;
void oml_index_sel_init(oml_index_sel *s, int32_t k, oml_neighbor *approx, oml_neighbor *best);
/* Rows row0 .. row0 + m - 1 of head `head`, whose dot products with the
 * unit query q (emb) are dots (m; destroyed: used as scratch). */
void oml_index_sel_feed(const oml_index *ix, int head, const float *q, float *dots, int32_t row0,
                        int32_t m, int32_t exclude, const uint8_t *allow, oml_index_sel *s);
/* Sorts best ascending by (distance, row) and returns how many it holds. */
int32_t oml_index_sel_finish(oml_index_sel *s);

/* The distance every function here reports: D = sqrt(2 - 2 cos(a, b)) of two
 * embedding rows (emb), the cosine taken in double with the rows' actual norms
 * (0 for a zero row), so D(a, a) = 0 and D is in [0, 2]. Pure. */
float oml_index_dist(const float *a, const float *b, int32_t emb);

/* Value j of row `row`'s embedding in head `head`. */
static inline float oml_index_emb(const oml_index *ix, int head, int32_t row, int32_t j)
{
    return ix->emb_cols[((size_t)head * (size_t)ix->emb + (size_t)j) * (size_t)ix->n +
                        (size_t)row];
}

/* Row of a store slot, or -1 if the slot is not in this index (a binary
 * search, or a scan when the rows are grouped by list). */
int32_t oml_index_row_of_slot(const oml_index *ix, uint32_t slot);

#endif
