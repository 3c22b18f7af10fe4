/* serve_hand.c - the hand-worked serving model (see serve_hand.h). */
#include "serve_hand.h"

#include <string.h>

#include "store.h"
#include "testutil.h"

oml_snapshot *oml_test_hand_snap(float alpha0, float alpha1)
{
    /* mu (2) | W(1) (2x2) | Theta(0) (2x2) | Theta(1) (2x2) */
    static const float p[14] = {0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0};
    const float alpha[2] = {alpha0, alpha1};
    return oml_test_snapshot(1, 2, 2, 2, p, alpha, 0);
}

oml_index *oml_test_hand_index(oml_snapshot *s)
{
    static const struct {
        const char *id;
        float x[2];
        const char *label;
    } items[4] = {{"a", {1, 0}, "red"}, {"b", {0, 1}, "blue"}, {"c", {1, 1}, "blue"},
                  {"e", {2, 0}, NULL}};
    oml_store *st = NULL;
    oml_index *ix = NULL;
    if (oml_store_create(&st, 2, 16) != OML_OK)
        return NULL;
    int rc = OML_OK;
    for (int i = 0; i < 4 && rc == OML_OK; i++)
        rc = oml_store_put(st, items[i].id, strlen(items[i].id), items[i].x, items[i].label,
                           items[i].label ? strlen(items[i].label) : 0, NULL, NULL);
    if (rc == OML_OK && oml_index_build(&ix, s, st) != OML_OK)
        ix = NULL;
    oml_store_destroy(st); /* the index is independent of the store */
    return ix;
}
