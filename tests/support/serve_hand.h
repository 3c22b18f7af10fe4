/* serve_hand.h - the hand-worked serving model of test_serve.c and
 * test_serve_batch.c (the values worked out from it are in test_serve.c).
 *
 * layers = 1, dim = hidden = emb = 2, mu = 0, W(1) = I, Theta(0) = I,
 * Theta(1) = [[1, 0], [0, 0]]:
 *   head 0: f0(x) = x / ||x||
 *   head 1: f1(x) = (1, 0) if x1 > 0, else the zero vector (D = sqrt(2) to all)
 * Items (row = slot order): 0 a (1,0) red   1 b (0,1) blue   2 c (1,1) blue
 *                           3 e (2,0) unlabelled
 * Label ids: red 0, blue 1. */
#ifndef OML_TEST_SERVE_HAND_H
#define OML_TEST_SERVE_HAND_H

#include "index.h"
#include "snapshot.h"

/* The model with hedge weights (alpha0, alpha1); owned, or NULL. */
oml_snapshot *oml_test_hand_snap(float alpha0, float alpha1);

/* The index of items a, b, c, e under s (independent of any store); owned,
 * or NULL. */
oml_index *oml_test_hand_index(oml_snapshot *s);

#endif
