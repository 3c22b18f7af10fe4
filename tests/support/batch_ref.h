/* batch_ref.h - the batch trainers' network in plain double precision, the
 * independent reference the gradient checks of test_batch, test_daml and
 * test_damlrrm compare against (no BLAS, no shared code with src/batch*.c). */
#ifndef OML_TEST_BATCH_REF_H
#define OML_TEST_BATCH_REF_H

#include "batch.h"

#define OML_TEST_BATCH_MAXW 64 /* widest input or hidden layer the reference takes */

/* One row x (dim) through the trunk and head with parameters p (the batch
 * layout, in double) into f (emb), normalised if the layout says so (a zero
 * row stays 0, as batch.c does). signs (depth * hidden, may be NULL) gets
 * the ReLU pattern: +1 active, -1 not. */
void oml_test_batch_ref_forward(const oml_batch_layout *lay, const double *p, const double *x,
                                double *f, signed char *signs);

#endif
