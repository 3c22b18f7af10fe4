/* protocol.c - data split and constraint stream of the OAHU protocol. */
#include "protocol.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h"

int oml_split_make(oml_split *s, int32_t n, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    int32_t *perm = malloc((size_t)n * sizeof *perm);
    if (perm == NULL)
        return OML_ENOMEM;
    oml_rng rng;
    oml_rng_seed(&rng, seed);
    for (int32_t i = 0; i < n; i++)
        perm[i] = i;
    for (int32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int32_t j = (int32_t)oml_rng_below(&rng, (uint64_t)i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    s->n_dev = n - n / 2;
    s->n_test = n / 2;
    s->dev = perm;
    s->test = perm + s->n_dev;
    return OML_OK;
}

void oml_split_free(oml_split *s)
{
    free(s->dev);
    memset(s, 0, sizeof *s);
}

/* Members of each class, for sampling positives and negatives. */
typedef struct by_class {
    int32_t n_classes;
    int32_t *start; /* (n_classes + 1) offsets into rows */
    int32_t *rows;
} by_class;

static int by_class_make(by_class *b, const int32_t *labels, int32_t n)
{
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if (labels[i] + 1 > k)
            k = labels[i] + 1;
    b->n_classes = k;
    b->start = calloc((size_t)k + 1, sizeof(int32_t));
    b->rows = malloc((size_t)n * sizeof(int32_t));
    int32_t *fill = calloc((size_t)k, sizeof(int32_t));
    if (!b->start || !b->rows || !fill) {
        free(b->start);
        free(b->rows);
        free(fill);
        return OML_ENOMEM;
    }
    for (int32_t i = 0; i < n; i++)
        b->start[labels[i] + 1]++;
    for (int32_t c = 0; c < k; c++)
        b->start[c + 1] += b->start[c];
    for (int32_t i = 0; i < n; i++)
        b->rows[b->start[labels[i]] + fill[labels[i]]++] = i;
    free(fill);
    return OML_OK;
}

static int32_t pick_in_class(const by_class *b, oml_rng *r, int32_t c)
{
    int32_t n = b->start[c + 1] - b->start[c];
    return b->rows[b->start[c] + (int32_t)oml_rng_below(r, (uint64_t)n)];
}

int oml_stream_make(oml_stream *st, const int32_t *labels, int32_t n_dev, int32_t n_constraints,
                    uint64_t seed, oml_diag *diag)
{
    memset(st, 0, sizeof *st);
    by_class bc;
    if (by_class_make(&bc, labels, n_dev) != OML_OK)
        return OML_ENOMEM;
    for (int32_t c = 0; c < bc.n_classes; c++)
        if (bc.start[c + 1] - bc.start[c] < 2) {
            free(bc.start);
            free(bc.rows);
            return oml_diag_set(diag, OML_EINVAL, "labels", "class %d has fewer than 2 items", c);
        }
    oml_closure *cl = NULL;
    int rc = oml_closure_create(&cl, (uint32_t)n_dev, 8u * (uint32_t)n_constraints + 1024u, seed ^ 0x5eed);
    st->t = malloc((size_t)n_constraints * sizeof(oml_triplet));
    if (rc != OML_OK || st->t == NULL) {
        rc = OML_ENOMEM;
        goto done;
    }
    oml_rng rng;
    oml_rng_seed(&rng, seed ^ 0x7217e75ULL);
    int32_t seeds = n_constraints - n_constraints / 2, derived = 0, budget = n_constraints / 2;
    int32_t n = 0;
    while (st->n_seeds < seeds) {
        int32_t a = (int32_t)oml_rng_below(&rng, (uint64_t)n_dev);
        int32_t p;
        do {
            p = pick_in_class(&bc, &rng, labels[a]);
        } while (p == a);
        int32_t cn = (int32_t)oml_rng_below(&rng, (uint64_t)bc.n_classes - 1);
        if (cn >= labels[a])
            cn++;
        oml_triplet t = {(uint32_t)a, (uint32_t)p, (uint32_t)pick_in_class(&bc, &rng, cn)};
        oml_triplet more[1];
        int got = 0;
        /* Labels make every seed consistent, so the closure never refuses one. */
        rc = oml_closure_add_triplet(cl, t, more, derived < budget ? 1 : 0, &got);
        if (rc != OML_OK)
            goto done;
        st->t[n++] = t;
        st->n_seeds++;
        for (int i = 0; i < got; i++, derived++)
            st->t[n++] = more[i];
    }
    while (n < n_constraints) {
        rc = oml_closure_sample(cl, &st->t[n]);
        if (rc != OML_OK)
            goto done;
        n++;
    }
    st->n = n;
done:
    oml_closure_destroy(cl);
    free(bc.start);
    free(bc.rows);
    if (rc != OML_OK) {
        free(st->t);
        memset(st, 0, sizeof *st);
    }
    return rc;
}

int oml_stream_make_random(oml_stream *st, const int32_t *labels, int32_t n_dev,
                           int32_t n_constraints, uint64_t seed, oml_diag *diag)
{
    memset(st, 0, sizeof *st);
    by_class bc;
    if (n_constraints < 0 || n_dev < 2)
        return oml_diag_set(diag, OML_EINVAL, n_dev < 2 ? "labels" : "constraints",
                            "%d triplets over %d items", n_constraints, n_dev);
    if (by_class_make(&bc, labels, n_dev) != OML_OK)
        return OML_ENOMEM;
    int32_t present = 0, paired = 0;
    for (int32_t c = 0; c < bc.n_classes; c++) {
        int32_t size = bc.start[c + 1] - bc.start[c];
        present += size > 0;
        paired += size > 1;
    }
    int rc = OML_OK;
    if (present < 2 || paired < 1) {
        rc = oml_diag_set(diag, OML_EINVAL, "labels",
                          "random triplets need 2 classes and a class with 2 items "
                          "(%d classes, %d with 2 items)", present, paired);
        goto done;
    }
    st->t = malloc((size_t)(n_constraints > 0 ? n_constraints : 1) * sizeof(oml_triplet));
    if (st->t == NULL) {
        rc = OML_ENOMEM;
        goto done;
    }
    oml_rng rng;
    oml_rng_seed(&rng, seed ^ 0x7a11d0ULL);
    for (int32_t i = 0; i < n_constraints; i++) {
        int32_t a, ca, size;
        do { /* uniform over the anchors that have a positive */
            a = (int32_t)oml_rng_below(&rng, (uint64_t)n_dev);
            ca = labels[a];
            size = bc.start[ca + 1] - bc.start[ca];
        } while (size < 2);
        int32_t p;
        do {
            p = pick_in_class(&bc, &rng, ca);
        } while (p == a);
        /* rows is grouped by class: skip the anchor's class block. */
        int32_t r = (int32_t)oml_rng_below(&rng, (uint64_t)(n_dev - size));
        int32_t neg = bc.rows[r < bc.start[ca] ? r : r + size];
        st->t[i] = (oml_triplet){(uint32_t)a, (uint32_t)p, (uint32_t)neg};
    }
    st->n = st->n_seeds = n_constraints;
done:
    free(bc.start);
    free(bc.rows);
    if (rc != OML_OK) {
        free(st->t);
        memset(st, 0, sizeof *st);
    }
    return rc;
}

void oml_stream_free(oml_stream *st)
{
    free(st->t);
    memset(st, 0, sizeof *st);
}

double oml_macro_f1(const int32_t *truth, const int32_t *pred, int32_t n, int32_t n_classes)
{
    double sum = 0.0;
    int32_t present = 0;
    for (int32_t c = 0; c < n_classes; c++) {
        int64_t tp = 0, fp = 0, fn = 0;
        for (int32_t i = 0; i < n; i++) {
            tp += truth[i] == c && pred[i] == c;
            fp += truth[i] != c && pred[i] == c;
            fn += truth[i] == c && pred[i] != c;
        }
        if (tp + fp + fn == 0)
            continue;
        present++;
        sum += 2.0 * (double)tp / (double)(2 * tp + fp + fn);
    }
    return present ? sum / present : 0.0;
}
