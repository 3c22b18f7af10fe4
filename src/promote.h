/* promote.h - a batch model (batch.h) in the live model's layout: served as
 * a snapshot, or promoted into the live learner (omlctl promote).
 *
 * A batch model of depth d (mu, a trunk W(1..d), one head Theta at depth
 * d) fits a live configuration with the same dim, hidden and emb and
 * L >= d. Its blocks land on the live layout's mu, W(1..d) and Theta(d)
 * (the first of them through the live model's input basis, if it has one). */
#ifndef OML_PROMOTE_H
#define OML_PROMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "config.h"
#include "learner.h"
#include "snapshot.h"

/* 0 if a batch model of layout lay can be served and promoted by a live
 * model of configuration live (same dim, hidden, emb; depth <= L); else -1
 * with a sentence in err. */
int oml_promote_compatible(const oml_config *live, const oml_batch_layout *lay, char *err,
                           size_t errlen);

/* The batch model served with the live serving code: a snapshot of the live
 * layout with L = depth whose head `depth` is the batch model's head, every
 * other head zero (it embeds every item to the zero vector) and alpha
 * one-hot on head `depth`. Owned, or NULL on OOM. bm must be compatible. */
oml_snapshot *oml_promote_snapshot(const oml_config *live, const oml_batch_model *bm,
                                   uint64_t version);

/* Promotes bm (compatible with l->cfg) into l: its mu, W(1..d) and head
 * become l's mu, W(1..d) and Theta(d), in the weights and in the proximal
 * pull's start weights (else the `default` preset would drag the promoted
 * blocks back to the old start); the input scale becomes 1 and head d's
 * offset 0 (a batch net has neither); the other heads keep their weights; alpha
 * resets to uniform; the local hedge's reference is re-embedded. The
 * running counters, the RNG and Adam's moments are left as they are.
 * A live model with an input basis (net.h) keeps its basis and scale, and
 * takes the batch net's first layer (W(1), or the head of a depth-0 net)
 * as its least-squares fit on the basis's coordinates: the promoted net is
 * the batch net applied to the input's projection onto the basis's span
 * (promote.c, fold_into_basis). OML_OK; OML_EINVAL when that basis is still
 * zero (no start taken yet), OML_ENOMEM, OML_EIO: then l is unchanged. */
int oml_promote(oml_learner *l, const oml_batch_model *bm);

#endif
