/* protocol.h - the OAHU paper's classification protocol (Sec. 4.3.2).
 *
 * Shuffle the data set with a seed, split it 1:1 into dev and test, sample
 * seed triplets from dev (anchor, a positive of its class, a negative of
 * another class), and extend the stream with triplets derived by transitive
 * closure, each inserted right after the seed that created it; the tail is
 * topped up with triplets sampled from the whole closure. Labels are used
 * here only to *generate* constraints, as clicks would; the learner never
 * sees them. oml_stream_make_random is the other stream the tools offer:
 * plain random label-consistent triplets, without the closure. */
#ifndef OML_PROTOCOL_H
#define OML_PROTOCOL_H

#include <stdint.h>

#include "closure.h"
#include "err.h"

typedef struct oml_split {
    int32_t n_dev, n_test;
    int32_t *dev;   /* (n_dev) row numbers into the data set */
    int32_t *test;  /* (n_test) */
} oml_split;

/* Shuffles 0..n-1 with seed and splits 1:1 (dev gets the extra row). */
int oml_split_make(oml_split *s, int32_t n, uint64_t seed);
void oml_split_free(oml_split *s);

typedef struct oml_stream {
    int32_t n;             /* triplets */
    int32_t n_seeds;       /* of which seeds */
    oml_triplet *t;        /* (n) members are dev positions 0..n_dev-1 */
} oml_stream;

/* Builds a stream of n_constraints triplets over dev positions: half seeds,
 * half derived by closure. labels are the dev items' labels (n_dev). */
int oml_stream_make(oml_stream *st, const int32_t *labels, int32_t n_dev, int32_t n_constraints,
                    uint64_t seed, oml_diag *diag);
/* Builds a stream of n_constraints random label-consistent triplets over dev
 * positions (issue 11, --stream random): each anchor is uniform over the items
 * whose class has another item, its positive uniform over the other items of
 * that class (never the anchor), its negative uniform over the items of every
 * other class. No closure; n_seeds = n. The same seed gives the same stream.
 * OML_EINVAL (diag) if there are fewer than 2 classes or no class with 2
 * items; OML_ENOMEM. */
int oml_stream_make_random(oml_stream *st, const int32_t *labels, int32_t n_dev,
                           int32_t n_constraints, uint64_t seed, oml_diag *diag);
void oml_stream_free(oml_stream *st);

/* Macro-averaged F1 over classes 0..n_classes-1. */
double oml_macro_f1(const int32_t *truth, const int32_t *pred, int32_t n, int32_t n_classes);

#endif
