/* ann_sweep.h - `oml-ann-bench N T --sweep`: the index calibrated for
 * each of several ann_target_recall values in turn, and the recall the
 * benchmark's queries then find, so the calibration's sample can be held
 * against real queries (issue 14). Per target: each head's lists scanned
 * and what the calibration's sample found; the share of each head's exact
 * 10 that the lists' search for 10 finds, and that a fresh view's 32
 * candidates a head hold (their union, as daemon/fresh.c re-ranks it);
 * and retrieve k=10's answer (Eq. 27 over the heads, oml_retrieve) against
 * the exact one (exact_recall.h), as omld-bench's recall@10 counts it. */
#ifndef OML_ANN_SWEEP_H
#define OML_ANN_SWEEP_H

#include "catalogue.h"
#include "index.h"
#include "store.h"

/* snap_new not NULL: also a fresh view of that newer model over ix (its
 * candidates from ix, 32 and 64 a head, their features from st,
 * re-ranked under it) against the exact answers under it: what an index's
 * lag costs.
 * X: nq queries' features (nq, c->dim), Q their embeddings under snap
 * (nq, heads, emb); ix holds c's items in item order. 0, or 1 out of
 * memory. */
int ann_sweep_report(oml_index *ix, oml_snapshot *snap, const catalogue *c, const float *X,
                     const float *Q, int nq, const double *targets, int nt,
                     const oml_store *st, oml_snapshot *snap_new);

#endif
