/* idx.h - reading IDX files (MNIST / Fashion-MNIST format), gzipped or not.
 *
 * An IDX file is a big-endian header (magic 0x0000 0x08 ndim, then ndim
 * uint32 sizes) followed by unsigned bytes. Images are returned as floats
 * scaled to [0, 1], labels as int32. Used by oml-eval, oml-bench and the
 * client tools; not part of the daemon. */
#ifndef OML_IDX_H
#define OML_IDX_H

#include <stdint.h>

#include "err.h"

/* Reads an idx3 image file: *out (n, rows*cols) owned by the caller (free()).
 * Errors: OML_EIO (cannot open/read), OML_EFORMAT (bad magic or size). */
int oml_idx_read_images(const char *path, float **out, int32_t *n, int32_t *dim, oml_diag *diag);
/* Reads an idx1 label file: *out (n). */
int oml_idx_read_labels(const char *path, int32_t **out, int32_t *n, oml_diag *diag);

#define OML_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* All 70,000 Fashion-MNIST images (train then t10k) with labels from dir. */
int oml_fmnist_load(const char *dir, float **images, int32_t **labels, int32_t *n,
                    int32_t *dim, oml_diag *diag);

#endif
