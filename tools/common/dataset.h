/* dataset.h - a labelled data set for the evaluation tools, and the
 * features one evaluation run sees.
 *
 * oml-eval and omlctl eval load a data set once (Fashion-MNIST, or a CSV
 * file: csv.h), then, per run seed, derive the features the model is shown:
 * first the --noise-dims features of noise are appended (noise.h), then, with
 * --standardize 1, every feature (noise included) is z-scored with the mean
 * and sd of the run's dev half (standardize.h; the dev half of
 * oml_split_make(n, seed), the split both tools use). Both tools call the
 * same function, so a run through the daemon sees exactly the features of
 * the run in process with the same seed. */
#ifndef OML_DATASET_H
#define OML_DATASET_H

#include <stdint.h>

#include "err.h"

typedef struct oml_dataset {
    int32_t n, dim;
    float *x;          /* (n, dim) */
    int32_t *y;        /* (n) class ids 0..n_classes-1 */
    int32_t n_classes;
    char **names;      /* (n_classes) each class's label string (what is stored) */
} oml_dataset;

/* All 70,000 Fashion-MNIST images from dir (idx.h), class names "0".."9".
 * Errors as oml_fmnist_load, OML_ENOMEM. */
int oml_dataset_fmnist(oml_dataset *ds, const char *dir, oml_diag *diag);
void oml_dataset_free(oml_dataset *ds); /* accepts a zeroed struct */

/* The class id of a label string, or -1 (a linear search over the names). */
int32_t oml_dataset_class_of(const oml_dataset *ds, const char *name);

/* What a run does to the features. */
typedef struct oml_features_opts {
    int32_t noise_dims;  /* features of noise appended (0: none) */
    float noise_scale;   /* their sd in units of the pooled sd of the data set */
    int32_t standardize; /* 1: z-score with the dev half's mean and sd */
} oml_features_opts;

/* The features of the run with `seed`: *X (ds->n, *dim) is ds->x itself when
 * nothing is to be done (*owned = 0), else a new buffer the caller frees
 * (*owned = 1). OML_EINVAL (diag: bad option), OML_ENOMEM. */
int oml_dataset_run_features(const oml_dataset *ds, const oml_features_opts *fo, uint64_t seed,
                             float **X, int32_t *dim, int *owned, oml_diag *diag);

#endif
