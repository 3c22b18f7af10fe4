/* exact_recall.h - omld-bench's recall@10 (issue 14): the daemon's
 * retrieve answers against the exact ones under the same model, worked
 * out here from the model it exports and the catalogue's items, so the
 * figure does not rest on the daemon's own sample (a few queries a run).
 *
 * Every item is embedded anew (oml_snapshot_embed, a block at a time, no
 * copy of the store) and each query's k nearest are kept per head. The
 * exact answer is then oml_retrieve's on an index of only those rows, the
 * union of the heads' k nearest: each head's k nearest among them are its
 * k nearest of all, so their Eq. 27 ranking is a full scan's. */
#ifndef OMLD_BENCH_EXACT_RECALL_H
#define OMLD_BENCH_EXACT_RECALL_H

#include <stdint.h>

#include "catalogue.h"
#include "snapshot.h"

/* The exact retrieve answers, k item numbers each (best first), of the nq
 * queries Q (nq, c->dim) over the catalogue's c->n items under snap, into
 * out (nq, k; -1 past the items). faiss_dir not NULL: the same embeddings
 * go there for faiss_compare.py (ann_faiss.h), each head's items in item
 * order (base{h}), queries (queries{h}) and exact k nearest item numbers
 * (exact{h}). 0, or -1 out of memory, on an engine error or a file not
 * written (said on stderr). */
int exact_retrieve(oml_snapshot *snap, const catalogue *c, const float *Q, int nq, int k,
                   const char *faiss_dir, int64_t *out);

#endif
