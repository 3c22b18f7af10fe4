/* noise.h - features of pure noise appended to a data set (issue 11).
 *
 * The Fashion-MNIST noise variant of the evaluation tools: every item gets
 * n_noise more features drawn from N(0, (scale * sd)^2), where sd is the
 * pooled standard deviation of the original features (one number for the
 * whole data set). Whether a metric learner can learn to ignore them is
 * what the variant measures. */
#ifndef OML_NOISE_H
#define OML_NOISE_H

#include <stdint.h>

/* The pooled standard deviation of X (n, dim): every value of every feature
 * taken as one sample, sqrt(mean((x - mean)^2)) over all n dim values with
 * their overall mean (numpy's X.std()), in double; 0 for n < 1 or dim < 1.
 * 0.3529 on Fashion-MNIST (pixels in [0, 1]); with it, 200 features at
 * scale 3 give the untrained default start the 0.378 (0.3788, seed
 * 1), where the mean of the per-feature variances (0.2949) gives 0.328. */
double oml_pooled_sd(const float *X, int32_t n, int32_t dim);

/* out (n, dim + n_noise), owned by the caller (free()): row i is X's row i
 * followed by n_noise draws of N(0, (scale * oml_pooled_sd(X))^2), drawn
 * row by row from one generator seeded with seed, so the noise of an item
 * depends only on the seed and its row. OML_EINVAL (n_noise < 0, scale < 0
 * or not finite), OML_ENOMEM. */
int oml_noise_append(const float *X, int32_t n, int32_t dim, int32_t n_noise, float scale,
                     uint64_t seed, float **out);

#endif
