/* apply.h - the handlers of the MUTATION rows of the operation table
 * (ops.h): what one state-changing request does to the learner's state.
 *
 * Learner thread only, live and on replay of the write-ahead log. Each
 * fills r and returns 1 if the state changed (even partly, e.g. pairs
 * before a conflicting one), which is what the log must record so that
 * replay reproduces it. req has passed its row's check; unknown ids are
 * refused here, where the store is. omld_apply (engine_int.h) dispatches
 * by the table. */
#ifndef OMLD_APPLY_H
#define OMLD_APPLY_H

#include "omld.pb-c.h"
#include "reply.h"

struct omld_engine;

int omld_apply_put_items(struct omld_engine *e, const Omld__Request *req, omld_reply *r);
int omld_apply_delete_items(struct omld_engine *e, const Omld__Request *req, omld_reply *r);
int omld_apply_add_triplets(struct omld_engine *e, const Omld__Request *req, omld_reply *r);
int omld_apply_add_pairs(struct omld_engine *e, const Omld__Request *req, omld_reply *r);
int omld_apply_promote(struct omld_engine *e, const Omld__Request *req, omld_reply *r);
int omld_apply_rollback(struct omld_engine *e, const Omld__Request *req, omld_reply *r);

#endif
