/* depth.h - how many candidates a fresh view re-ranks (issue 14).
 *
 * A fresh view answers under a newer model than its index's, among each
 * head's rerank_candidates nearest rows by the index's model (fresh.c).
 * The further the model has moved since the index was built, the further
 * down the index's order the newer model's neighbours lie: at 1M items,
 * with the lists calibrated for 0.98, a model 90 versions past its index's
 * found 0.967 of the exact retrieve answers with 32 candidates a head and
 * 0.981 with 64, where its own index found 0.989 (oml-ann-bench --sweep
 * --newer). How far a model moves in a version depends on the data and
 * the learning, so the depth is measured, not guessed: a sample of fresh
 * queries (recall.c) also takes OMLD_DEPTH_DEEP times the candidates,
 * re-ranks them under the serving model, and counts how many of its k
 * nearest each step's candidates hold. Each index (its base view) keeps
 * those counts, decayed so that they follow the lag as it grows, and its
 * fresh views take the smallest step whose share reaches
 * ann_target_recall. A new index starts again at the first step. */
#ifndef OMLD_DEPTH_H
#define OMLD_DEPTH_H

#include <stdatomic.h>
#include <stdint.h>

#define OMLD_DEPTH_STEPS 4 /* rerank_candidates x 1, 1.5, 2, 3 */
#define OMLD_DEPTH_DEEP 8  /* the sample's own depth, in halves: x 4 */

typedef struct omld_depth {
    /* The sample's decayed counts: one sample job at a time writes them. */
    double hits[OMLD_DEPTH_STEPS], total;
    atomic_int step;            /* what queries take; read anywhere */
    atomic_uint_fast64_t share; /* the step's share of the sample, in millionths */
    atomic_uint_fast64_t samples;
} omld_depth;

/* Step s's depth for k_c candidates a head (at least k_c). */
int32_t omld_depth_at(int step, int32_t k_c);

/* The depth the sample itself re-ranks for k_c. */
int32_t omld_depth_deep(int32_t k_c);

/* One sample: hits[s] of the total of the serving model's neighbours
 * among the deep candidates were among step s's. Moves d's step to the
 * smallest whose decayed share reaches target. One caller at a time. */
void omld_depth_observe(omld_depth *d, const int64_t *hits, int64_t total, double target);

#endif
