/* blobs.h - the clustered items of the daemon tests: easy classes, so a
 * test can tell a working model from a broken one. */
#ifndef OML_TEST_BLOBS_H
#define OML_TEST_BLOBS_H

/* Fills x (n, dim), row-major: item i is of class i % classes, feature j
 * is 1 where j % classes is its class, else 0, plus (u - centre) * scale
 * with u uniform in [0, 1) from a linear congruential generator started
 * at seed (drawn row by row, so the same arguments give the same items). */
void oml_test_blobs(float *x, int n, int dim, int classes, unsigned seed, float centre,
                    float scale);

#endif
