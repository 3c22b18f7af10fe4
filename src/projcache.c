/* projcache.c - inputs on the basis kept between index builds (projcache.h). */
#include "projcache.h"

#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "err.h"

void oml_projcache_init(oml_projcache *c, uint32_t max_slots)
{
    memset(c, 0, sizeof *c);
    c->max_slots = max_slots;
}

void oml_projcache_free(oml_projcache *c)
{
    uint32_t max = c->max_slots;
    free(c->key);
    free(c->stamp);
    free(c->rows);
    oml_projcache_init(c, max);
}

/* Whether the rows were computed under snap's input: the floats before the
 * trained ones (net.h: mean, scale, basis) and the width. */
static int same_input(const oml_projcache *c, const oml_snapshot *snap)
{
    return c->key != NULL && c->key_n == snap->lay.trained && c->in == snap->lay.in &&
           memcmp(c->key, snap->params, c->key_n * sizeof *c->key) == 0;
}

int oml_projcache_begin(oml_projcache *c, const oml_snapshot *snap, uint32_t slots)
{
    if (!same_input(c, snap)) {
        oml_projcache_free(c);
        c->key_n = snap->lay.trained;
        c->in = snap->lay.in;
        if ((c->key = malloc(c->key_n * sizeof *c->key)) == NULL) {
            oml_projcache_free(c);
            return OML_ENOMEM;
        }
        memcpy(c->key, snap->params, c->key_n * sizeof *c->key);
    }
    uint32_t want = slots < c->max_slots ? slots : c->max_slots;
    if (want <= c->cap)
        return OML_OK;
    uint32_t cap = c->cap ? c->cap : 1024;
    while (cap < want)
        cap = cap > UINT32_MAX / 2 ? want : cap * 2;
    cap = cap < c->max_slots ? cap : c->max_slots;
    uint64_t *st = realloc(c->stamp, (size_t)cap * sizeof *st);
    if (st != NULL)
        c->stamp = st;
    float *rows = st ? realloc(c->rows, (size_t)cap * (size_t)c->in * sizeof *rows) : NULL;
    if (rows == NULL) {
        oml_projcache_free(c);
        return OML_ENOMEM;
    }
    oml_bigmem_advise(rows, (size_t)cap * (size_t)c->in * sizeof *rows);
    c->rows = rows;
    memset(c->stamp + c->cap, 0, (size_t)(cap - c->cap) * sizeof *c->stamp);
    c->cap = cap;
    return OML_OK;
}

void oml_projcache_put(oml_projcache *c, uint32_t slot, uint64_t stamp, const float *row)
{
    if (slot >= c->cap)
        return;
    memcpy(c->rows + (size_t)slot * (size_t)c->in, row, (size_t)c->in * sizeof *row);
    c->stamp[slot] = stamp;
}

size_t oml_projcache_bytes(const oml_projcache *c)
{
    return c->key_n * sizeof *c->key +
           (size_t)c->cap * (sizeof *c->stamp + (size_t)c->in * sizeof *c->rows);
}
