/* index.h - every stored item embedded under one snapshot, per head.
 *
 * Built in one pass (batched GEMM through oml_snapshot_embed) from a snapshot
 * and the live items of a store; afterwards fully immutable: it copies the
 * label ids and label names it serves, so a search on any thread needs only
 * the index (which holds a reference on its snapshot). Its rows are named
 * by store slot and the slot's generation when gathered: a row's id is the
 * store's while the slot holds that item (oml_index_row_current), so the
 * ids are not kept twice (at a million rows 17 bytes a row, 45 for
 * 36-character ids, in each of the two indexes a rebuild holds). Exact
 * search: distances D = ||f(q) - f(x)|| = sqrt(2 - 2 f(q).f(x)) for unit
 * vectors (OAHU Eq. 6). */
#ifndef OML_INDEX_H
#define OML_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codescan.h"
#include "err.h"
#include "hlist.h"
#include "neighbor.h"
#include "projcache.h"
#include "snapshot.h"
#include "store.h"

typedef struct oml_index {
    oml_snapshot *snap;      /* owned reference */
    int32_t n;               /* items */
    int32_t heads, emb;
    float *emb_cols;         /* (heads, emb, n) each head's unit rows as columns: the
                                layout the float scan reads (a row-major (emb, n) sgemv
                                streams twice as fast as an (n, emb) one for emb ~ 50),
                                and the batches' GEMM, the exact re-rank after the codes
                                and the lists' build; kept once (oml_index_emb reads a
                                row's value) */
    uint32_t *slots;         /* (n) store slot of each row */
    int32_t *labels;         /* (n) label id or OML_LABEL_NONE */
    uint32_t *gens;          /* (n) each row's slot generation when it was gathered
                                (oml_store_generation): oml_index_row_current */
    int32_t n_labels;
    const char **label_names;/* (n_labels) copied */
    /* Inverted lists per head (hlist.h), for indexes of at least the
     * indexer's ann_min_items rows (oml_index_add_lists): a query scans the
     * int8 codes of each head's nearest lists and re-ranks the best exactly.
     * Rows stay in ascending slot order. NULL, n_lists 0: every query scans
     * every row. */
    int32_t n_lists;         /* lists per head */
    oml_hlist *hl;           /* (heads) or NULL; owned */
    /* An index without lists: each head's rows as int8 codes, which the
     * exact scan reads first (oml_index_add_codes, codescan.h). NULL: it
     * reads the float columns. */
    oml_codescan *cs;        /* (heads) or NULL; owned */
    void *_arena;
    void *_cols;             /* emb_cols' own mapping (the builder's columns), */
    size_t _cols_len;        /* of this many bytes */
    int coded;               /* its lists were coded as its rows were embedded
                                (oml_index_builder_code_lists): it never had float columns */
    size_t _nonfinite;       /* such a build's count of NaN / infinite values, */
    int32_t _nonfinite_row;  /* and its first row (oml_index_nonfinite) */
} oml_index;

/* Where an index without float columns (oml_index_drop_columns) gets the
 * embeddings of the rows it must re-rank exactly: embed fills E (heads, m,
 * emb) with rows[0..m)'s embeddings under ix->snap, from their features
 * as the caller's store holds them now, and live[j] with 1, or with 0 for
 * a row whose item is gone since the index was built (E's row j is then
 * not read: the row is left out, so until the index is rebuilt, which a
 * delete starts at once in the daemon, a search may find fewer than k).
 * OML_OK or an error code (the search then stops there). */
typedef struct oml_row_source {
    int (*embed)(void *arg, const oml_index *ix, const int32_t *rows, int32_t m, float *E,
                 uint8_t *live);
    void *arg;
} oml_row_source;
/* Rows a search asks a source for at a time (one GEMM a block). */
#define OML_ROW_SOURCE_BLOCK 16

/* Frees an index's float columns once its lists are built and calibrated
 * (at a million rows of three 96-wide heads: 1.15 GB, a third of the raw
 * features). Its rows are then re-ranked from a row source instead
 * (oml_near_ws.src): oml_index_topk_near, oml_index_topk_lists and
 * oml_recommend take one; oml_classify, oml_retrieve, the batches, shard
 * candidates and oml_index_recall refuse such an index (OML_EINVAL, or no
 * sample), and callers re-rank its candidates instead (rerank.h). An
 * index without lists keeps its columns (its scan reads them). */
void oml_index_drop_columns(oml_index *ix);

/* The bytes of an index's float columns (0 once dropped), and of its
 * codes: the lists' (hlist.h) or the exact scan's (codescan.h). Its ids,
 * slots and labels are not counted. */
size_t oml_index_float_bytes(const oml_index *ix);
size_t oml_index_code_bytes(const oml_index *ix);

/* Per-head inverted lists for an index (hlist.h), oml_hlist_lists_for(n)
 * per head; each head's n_probe then covers a quarter of its lists until
 * oml_index_calibrate measures what is needed. No store involved: call it
 * after oml_index_builder_finish without the store's lock. OML_OK,
 * OML_ENOMEM (the index stays without lists); an index of fewer than 64
 * rows, or with heads wider than OML_HLIST_MAX_EMB, stays without. */
int oml_index_add_lists(oml_index *ix);
/* The same with the heads' lists built on up to `threads` threads: the
 * same lists for any count. */
int oml_index_add_lists_threads(oml_index *ix, int threads);

/* The exact scan's first pass for an index without lists (codescan.h):
 * oml_index_topk then scores every row by its int8 code and re-ranks on
 * the floats only the rows the codes cannot rule out, the same answer
 * from about a quarter of the bytes. emb + 14 bytes a row and head.
 * oml_index_build adds them; a builder's caller adds them after
 * oml_index_builder_finish, without the store's lock; oml_index_add_lists
 * drops them (the lists' codes serve instead). OML_OK, OML_ENOMEM (the
 * index stays without: its scan reads the floats); an index with lists,
 * or with heads wider than OML_CODE8_MAX_EMB, stays without. */
int oml_index_add_codes(oml_index *ix);

/* For an index with lists: how many lists each head's query must scan for
 * `target` (in (0, 1]) of the exact 10 nearest rows of that head, measured
 * on OML_IVF_CALIBRATION_QUERIES queries made from the index's own rows
 * (strided, each moved as far as its nearest other row, at most 1, in a
 * fixed direction: a query that is not a row) through the whole search,
 * codes and re-rank included, into hl[h].n_probe; it aims a quarter of
 * the way from target to 1, since even those are not the queries the
 * index will serve. The whitened start's embeddings are nearly isotropic,
 * so this is measured rather than assumed. A head h > 0 whose
 * target is met by rescoring head 0's scan, kept 2, 4, 8 or 16 times as
 * long, with its own codes shares it (hl[h].shared_from = 0): the default
 * model's heads start equal and part slowly; failing that, it shares head
 * 0 scanning more lists if that is fewer than both heads' own. A head
 * short of the target over every list hands its int8 codes twice the
 * rows from its first pass (hl[h].pq_keep, up to 2,048), until it
 * reaches it; short even so, it scans the fewest lists that find within
 * 0.01 of what all of them find (hl[h].recall: what the sample found).
 * Costs those queries' exact scans (one GEMM per head and
 * block of rows). target <= 0: the quarter stays. OML_OK or OML_ENOMEM
 * (the quarter stays). */
#define OML_IVF_TARGET_RECALL 0.95
#define OML_IVF_CALIBRATION_QUERIES 64
int oml_index_calibrate(oml_index *ix, double target);
/* The same with the heads' exact scans and the sample's searches on up to
 * `threads` threads: the same lists scanned for any count. */
int oml_index_calibrate_threads(oml_index *ix, double target, int threads);
/* The same for an index with or without float columns: without, the
 * sample's rows are embedded from src and their exact neighbours are
 * oml_index_topk_lists' (every row's code, the rows it cannot rule out
 * from src); a sample row whose item is gone asks nothing. OML_EINVAL: no
 * columns and no source. */
int oml_index_calibrate_from(oml_index *ix, double target, int threads,
                             const oml_row_source *src);

/* The lists a query scans, smoothed over rebuilds: each calibration
 * measures them on 64 queries, and at a million items a head's count
 * moved 10 -> 24 -> 18 between consecutive rebuilds of the same store at
 * the same sample recall (0.986), the recall of omld-bench's queries
 * with it from 0.92 to 0.975. A caller that rebuilds keeps a history
 * and, after each calibration, has every head scan the mean of its last
 * OML_PROBE_HISTORY calibrated counts (rounded up; a head that shares
 * another's scan takes that head's). It starts afresh when the number of
 * lists changes (the index grew into another size). */
#define OML_PROBE_HISTORY 4
typedef struct oml_probe_history {
    int32_t n_lists;                                   /* of the indexes it holds counts of */
    int32_t n;                                         /* counts held (at most the history) */
    int32_t next;                                      /* where the next goes */
    int32_t n_probe[OML_PROBE_HISTORY][OML_MAX_LAYERS + 1]; /* calibrated, per head */
} oml_probe_history;
void oml_index_smooth_probes(oml_index *ix, oml_probe_history *hist);

/* After the calibration: frees the product codes of every head that
 * shares another's scan (oml_hlist_drop_pq), and returns the bytes freed.
 * A later calibration that parts the heads leaves such a head scanning
 * its lists' int8 codes whole. */
size_t oml_index_drop_shared_pq(oml_index *ix);

/* After the calibration: frees the map between positions and rows that
 * each head's search no longer reads (oml_hlist_keep_maps): a head that
 * shares another's scan rescores that scan's rows by their positions and
 * never reads its rows[]; a head that scans its own lists never reads its
 * pos_of (a built index has none: the calibration makes them for the
 * heads that may share). 4 bytes a row and head, 12 MB at a million rows
 * of three heads. A later calibration makes them again, and
 * oml_index_topk_lists a sharing head's rows for its scan. Returns the
 * bytes freed. */
size_t oml_index_drop_unread_maps(oml_index *ix);

/* Builds an index of all live items of store under snap (takes its own
 * reference on snap), with the exact scan's codes (oml_index_add_codes).
 * OML_ENOMEM; an empty store gives an empty index. The store must not
 * change meanwhile (the builder below lets it). No lists
 * (oml_index_add_lists). */
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
    uint32_t *gens;           /* (n) */
    uint8_t *mine;            /* (n) with shard_n > 1: the row's item is this shard's */
    float *cols;              /* (heads, emb, cap_cols) the embeddings, already in the
                                 index's column layout with a row stride of cap_cols:
                                 finish closes it up to stride n and hands it to the
                                 index, so no second copy of them exists at any time
                                 (at 1M, 96-d heads: 1.15 GB each) */
    size_t cap_cols;          /* rows cols has room for */
    size_t cols_len;          /* bytes of cols' mapping */
    size_t expect;            /* live items when the build began (the first gather) */
    size_t cap_rows, cap_labels, cap_gens, cap_mine;
    uint32_t shard_i, shard_n; /* shard_n > 1: keep only the items of shard shard_i
                                  (shard.h), each embedded beside all the others as a
                                  full build embeds it; set after init */
    /* With the start's input basis (net.h) rows are embedded from h(0):
     * projected here, row by row (oml_net_project), or taken from the
     * cache. Without one, from X as gathered. */
    int32_t in;               /* h(0)'s width with a basis, else 0 */
    oml_projcache *cache;     /* borrowed, or NULL: h(0) kept between builds
                                 (projcache.h); set after init, like the shard */
    int use_cache;            /* this build's cache began (oml_projcache_begin) */
    float *H0;                /* (OML_INDEX_GATHER_ROWS, in) the gathered rows' h(0) */
    float *P;                 /* (OML_INDEX_GATHER_ROWS, in) the new projections */
    int32_t n_new;            /* of the last gather, rows not in the cache: features
                                 at the front of X, in gather order */
    int32_t *new_row;         /* (OML_INDEX_GATHER_ROWS) their rows in the gather */
    uint32_t *new_slot;       /* (OML_INDEX_GATHER_ROWS) their slots */
    uint64_t *new_stamp;      /* (OML_INDEX_GATHER_ROWS) their store stamps */
    int defer;                /* gathers take no inputs: a threaded run reads them from
                                 the store block by block (oml_index_builder_run_threads) */
    /* Lists coded as the rows are embedded (oml_index_builder_code_lists). */
    int code_lists;           /* the rows go into each head's coder, not into columns */
    int sampling;             /* gathers copy the sample's items first */
    size_t sample_want, sample_next, sample_got; /* items of the sample: asked, visited,
                                                    embedded */
    uint32_t sample_slots;    /* the store's slots when the sample began */
    int32_t n_lists;          /* lists a head (from the live items then) */
    float *sample;            /* (heads, sample_want, emb) their embeddings */
    oml_hlist_coder *coders;  /* (heads) */
    uint32_t pq_skip;         /* bit h: head h's lists get no product codes (the caller
                                 expects it to share head 0's scan: oml_hlist_drop_pq);
                                 set after oml_index_builder_code_lists */
    size_t nonfinite;         /* embedded values that were NaN or infinite (coded as 0), */
    int64_t nonfinite_row;    /* the first row with one (-1: none) */
} oml_index_builder;

/* Codes this build's rows into inverted lists a head (hlist.h, oml_hlist_coder)
 * as they are embedded, so the index never has float columns (as after
 * oml_index_drop_columns; at 1M items of three 96-wide heads the columns
 * are 1.15 GB that a rebuild held beside the serving index). The same
 * gather and embed calls first take a strided sample of the store's live
 * items (OML_HLIST_SAMPLE_PER_LIST a list, as oml_hlist_build samples),
 * whose embeddings set each head's centroids and codebooks; then the rows,
 * each coded as embedded.
 * As many lists as oml_index_add_lists gives the live items then. Call
 * after restart; not with a shard, a projection cache or run_threads (the
 * gathers feed it). Calibrate with a row source
 * (oml_index_calibrate_from). OML_OK, OML_EINVAL (a shard; or, from a
 * gather, fewer live items than OML_INDEX_CODE_LISTS_MIN). A row with a
 * value that embeds to NaN or infinity is coded as zeros and counted. */
#define OML_INDEX_CODE_LISTS_MIN 256
int oml_index_builder_code_lists(oml_index_builder *b);

/* Lists a head for an index of n rows (oml_index_add_lists, and a build
 * that codes them); 0 below 64 rows (an exact scan). */
int32_t oml_index_lists_for(size_t n);

/* The embedded values of ix that are NaN or infinite, and *row the first
 * row with one (-1: none): counted on its float columns, or as its build
 * coded them. */
size_t oml_index_nonfinite(const oml_index *ix, int32_t *row);

/* OML_OK, OML_EDIM (dim is not the snapshot's), OML_ENOMEM. Takes its own
 * reference on snap. */
int oml_index_builder_init(oml_index_builder *b, oml_snapshot *snap, int32_t dim);
/* A new build in a builder used before (finished or not): its buffers
 * stay, so a build of about the same size as the last allocates and
 * faults in nothing (the daemon's indexer rebuilds 35,000 items every
 * publish: realloc copies and fresh pages were about a quarter of a
 * build). Releases the old
 * snapshot; other sizes: freed and initialised anew. Set shard_i / shard_n
 * again after it. OML_OK, OML_EDIM, OML_ENOMEM. */
int oml_index_builder_restart(oml_index_builder *b, oml_snapshot *snap, int32_t dim);
/* Every step at once, the store held still by the caller throughout:
 * restart (a zeroed builder is initialised), gathers and embeds, finish.
 * What oml_index_build does with a builder of its own; a caller that keeps
 * the builder (and its cache) between builds calls this. */
int oml_index_builder_run(oml_index_builder *b, oml_snapshot *snap, const oml_store *store,
                          oml_index **out);
/* The same with the embedding's blocks on up to `threads` threads (a
 * builder without a projection cache; threads <= 1 or a cache: as
 * oml_index_builder_run). The same index, bit for bit, for any count: for
 * a store nothing else uses meanwhile, as at a restart's first view. */
int oml_index_builder_run_threads(oml_index_builder *b, oml_snapshot *snap,
                                  const oml_store *store, int threads, oml_index **out);
/* A build that codes its lists (oml_index_builder_code_lists), every step
 * at once for a store nothing changes meanwhile: the sample on this
 * thread, then the blocks embedded on up to `threads` threads and coded in
 * order as each is done. The same index, bit for bit, for any count (and
 * as the gathers give). */
int oml_index_builder_run_coded_threads(oml_index_builder *b, oml_snapshot *snap,
                                        const oml_store *store, int threads, oml_index **out);
/* Lets go of the snapshot and keeps the buffers, until restart or free. */
void oml_index_builder_release_snapshot(oml_index_builder *b);
/* The bytes its buffers hold (what restart keeps). */
size_t oml_index_builder_bytes(const oml_index_builder *b);
/* Copies the next live items out of store (held still by the caller):
 * 1 if slots remain, 0 once every slot was visited, OML_ENOMEM. */
int oml_index_builder_gather(oml_index_builder *b, const oml_store *store);
/* Embeds what the last gather copied; touches no store. */
int oml_index_builder_embed(oml_index_builder *b);
/* The index of every gathered row, with the store's label names (held
 * still by the caller). The builder stays to be freed; a coded build's
 * (oml_index_builder_code_lists) gives the index its rows' buffers and
 * frees its gather buffers first, so the lists are finished without them
 * (a restart allocates them again). */
int oml_index_builder_finish(oml_index_builder *b, const oml_store *store, oml_index **out);
/* (then, without the store, for lists: oml_index_add_lists, oml_index_calibrate;
 * without lists: oml_index_add_codes) */
void oml_index_builder_free(oml_index_builder *b); /* accepts a zeroed builder */
void oml_index_destroy(oml_index *ix); /* accepts NULL; releases the snapshot ref */

/* Exact k nearest rows of a unit query q (emb) in one head, ascending by
 * distance (ties by row), skipping row `exclude` (-1 for none) and, when
 * allow (n) is given, every row r with allow[r] == 0. scratch holds n
 * floats. Returns how many were written (min(k, available)). Scans every
 * row, lists or not: by the codes first where the index has them
 * (oml_index_add_codes), else (or when more rows than an eighth tie within
 * the codes' error) on the floats; the answer is the same. An index
 * without float columns: 0 (oml_index_topk_lists answers from a source). */
int32_t oml_index_topk(const oml_index *ix, int head, const float *q, int32_t k,
                       int32_t exclude, const uint8_t *allow, oml_neighbor *out, float *scratch);

/* An index with lists re-ranks exactly every row its codes cannot rule
 * out (hlist_keep.h), at most OML_SHARE_MAX x oml_index_rerank_rows(k) of
 * them; a scan other heads take (hlist.h, donor) also keeps its best
 * oml_index_rerank_rows(k) x donor by the codes for them. */
#define OML_SHARE_MAX 16
static inline int32_t oml_index_rerank_rows(int32_t k)
{
    return 2 * k + 8;
}

/* Workspace of oml_index_topk_near, for k neighbours; it carries a donor
 * head's scan to the heads that share it (hlist.h shared_from), so one
 * query calls oml_index_topk_near for its heads in ascending order. */
typedef struct oml_near_ws {
    int32_t *order;      /* (n_lists) */
    float *dots;         /* (n_lists) */
    oml_hlist_hit *cand; /* (cap) the last own scan's rows (a donor's stay for its sharers) */
    int32_t n_cand;
    oml_hlist_hit *best; /* (cap) a sharing head's pick of them; the rows re-ranked */
    oml_neighbor *pick;  /* (k) oml_index_near_candidates' heap */
    oml_neighbor *lows;  /* (k) hlist_keep.h */
    int32_t cap;         /* OML_SHARE_MAX oml_index_rerank_rows(k) */
    int overflow;        /* the last search dropped a row its codes could not rule out
                            (more than cap of them): its answer may not be exact */
    const oml_row_source *src; /* the exact re-rank's embeddings on an index without
                                  float columns (NULL after init: set by the caller) */
} oml_near_ws;
/* Its bytes (8-aligned), and the workspace laid out in mem. */
size_t oml_near_ws_bytes(const oml_index *ix, int32_t k);
void oml_near_ws_init(oml_near_ws *w, const oml_index *ix, int32_t k, void *mem);

/* oml_index_topk on an index with lists: the exact k nearest (ascending by
 * distance, ties by row) among the rows of the head's nearest
 * hl[head].n_probe lists (n_probe: that many lists; < 0: the calibrated
 * number): every row whose code could still be among them is re-ranked on
 * the float embeddings (without them: from w->src), so scanning every list gives oml_index_topk's
 * answer (unless w->overflow). For a head that shares another's scan:
 * among that scan's rows, by this head's codes and then exactly (w must
 * hold the scan: the same query's call for that head came before, with
 * the same k, exclude and allow). */
int32_t oml_index_topk_near(const oml_index *ix, int head, const float *q, int32_t k,
                            int32_t n_probe, int32_t exclude, const uint8_t *allow,
                            oml_neighbor *out, oml_near_ws *w);

/* oml_index_topk's answer on an index with lists, also one without float
 * columns (from w->src; without a source, 0 rows): every row of every
 * list scored by this head's own int8 codes (no first pass; also for a
 * head that shares another's scan, whose rows it makes from pos_of for
 * the scan: 4 bytes a row while it runs), and every row they cannot rule
 * out re-ranked exactly (unless w->overflow; 0 rows out of memory).
 * Leaves no scan in w for sharing heads. */
int32_t oml_index_topk_lists(const oml_index *ix, int head, const float *q, int32_t k,
                             int32_t exclude, const uint8_t *allow, oml_neighbor *out,
                             oml_near_ws *w);

/* The rows oml_index_topk_near would re-rank for k neighbours, cut to the
 * k of them with the largest approximate dot products (the codes'), into
 * rows (k), unordered; returns how many. No exact distance is taken: for
 * callers that re-rank the rows themselves under another model (rerank.h),
 * where the index's own exact order would be thrown away. Same workspace
 * rules as oml_index_topk_near (heads in ascending order, one k). */
int32_t oml_index_near_candidates(const oml_index *ix, int head, const float *q, int32_t k,
                                  int32_t exclude, const uint8_t *allow, int32_t *rows,
                                  oml_near_ws *w);

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

/* Whether row `row` still names the item it was built from: its slot in
 * store live at the generation the row saw (deleted since, or the slot
 * reused: no). Its id is then oml_store_id(store, ix->slots[row]). The
 * caller holds what keeps store from changing meanwhile. */
static inline int oml_index_row_current(const oml_index *ix, const oml_store *store, int32_t row)
{
    return oml_store_slot_is(store, ix->slots[row], ix->gens[row]);
}

/* Row `row`'s id as store holds it (NUL-terminated; its length in *len,
 * may be NULL), or NULL when the row no longer names its item. */
static inline const char *oml_index_row_id(const oml_index *ix, const oml_store *store,
                                           int32_t row, size_t *len)
{
    return oml_index_row_current(ix, store, row) ? oml_store_id(store, ix->slots[row], len) : NULL;
}

/* Row of a store slot, or -1 if the slot is not in this index (a binary
 * search: rows are in ascending slot order). */
int32_t oml_index_row_of_slot(const oml_index *ix, uint32_t slot);

#endif
