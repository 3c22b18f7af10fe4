/* dataset.c - the tools' data set and a run's features (dataset.h). */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"
#include "noise.h"
#include "protocol.h"
#include "standardize.h"

int oml_dataset_fmnist(oml_dataset *ds, const char *dir, oml_diag *diag)
{
    memset(ds, 0, sizeof *ds);
    int rc = oml_fmnist_load(dir, &ds->x, &ds->y, &ds->n, &ds->dim, diag);
    if (rc != OML_OK)
        return rc;
    for (int32_t i = 0; i < ds->n; i++)
        if (ds->y[i] + 1 > ds->n_classes)
            ds->n_classes = ds->y[i] + 1;
    ds->names = calloc((size_t)ds->n_classes, sizeof *ds->names);
    for (int32_t c = 0; ds->names && c < ds->n_classes; c++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", c);
        if ((ds->names[c] = strdup(buf)) == NULL)
            break;
    }
    if (ds->names == NULL || (ds->n_classes > 0 && ds->names[ds->n_classes - 1] == NULL)) {
        oml_dataset_free(ds);
        return OML_ENOMEM;
    }
    return OML_OK;
}

void oml_dataset_free(oml_dataset *ds)
{
    for (int32_t c = 0; ds->names && c < ds->n_classes; c++)
        free(ds->names[c]);
    free(ds->names);
    free(ds->x);
    free(ds->y);
    memset(ds, 0, sizeof *ds);
}

int32_t oml_dataset_class_of(const oml_dataset *ds, const char *name)
{
    for (int32_t c = 0; c < ds->n_classes; c++)
        if (strcmp(ds->names[c], name) == 0)
            return c;
    return -1;
}

int oml_dataset_run_features(const oml_dataset *ds, const oml_features_opts *fo, uint64_t seed,
                             float **X, int32_t *dim, int *owned, oml_diag *diag)
{
    *X = ds->x;
    *dim = ds->dim;
    *owned = 0;
    if (fo->noise_dims == 0 && !fo->standardize)
        return OML_OK;
    if (fo->noise_dims < 0 || !(fo->noise_scale >= 0.0f))
        return oml_diag_set(diag, OML_EINVAL, "noise", "--noise-dims %d --noise-scale %g",
                            fo->noise_dims, (double)fo->noise_scale);
    float *Y = NULL;
    int rc = oml_noise_append(ds->x, ds->n, ds->dim, fo->noise_dims, fo->noise_scale, seed, &Y);
    if (rc != OML_OK)
        return oml_diag_set(diag, rc, "noise", "cannot append %d noise features", fo->noise_dims);
    int32_t d = ds->dim + fo->noise_dims;
    if (fo->standardize) {
        oml_split split;
        float *mean = malloc((size_t)d * sizeof *mean), *sd = malloc((size_t)d * sizeof *sd);
        rc = mean && sd ? oml_split_make(&split, ds->n, seed) : OML_ENOMEM;
        if (rc == OML_OK) {
            rc = oml_standardize_fit(Y, d, split.dev, split.n_dev, mean, sd) == 0 ? OML_OK
                                                                                 : OML_ENOMEM;
            oml_split_free(&split);
        }
        if (rc == OML_OK)
            oml_standardize_apply(Y, ds->n, d, mean, sd);
        free(mean);
        free(sd);
        if (rc != OML_OK) {
            free(Y);
            return oml_diag_set(diag, rc, "standardize", "cannot standardise %d features", d);
        }
    }
    *X = Y;
    *dim = d;
    *owned = 1;
    return OML_OK;
}
