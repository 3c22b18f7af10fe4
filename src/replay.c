/* replay.c - the rehearsal ring and the new-plus-rehearsed batch schedule
 * (see replay.h). */
#include "replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DRAW_TRIES 8 /* draws that may land on dropped entries before one is given up */

int oml_replay_init(oml_replay *r, uint32_t cap)
{
    memset(r, 0, sizeof *r);
    r->cap = cap;
    r->_pending_rows = malloc(3 * (size_t)OML_MAX_BATCH * sizeof *r->_pending_rows);
    r->_pending_slots = malloc(3 * (size_t)OML_MAX_BATCH * sizeof *r->_pending_slots);
    r->_pending_weights = malloc((size_t)OML_MAX_BATCH * sizeof *r->_pending_weights);
    if (r->_pending_rows == NULL || r->_pending_slots == NULL || r->_pending_weights == NULL) {
        oml_replay_free(r);
        return OML_ENOMEM;
    }
    if (cap > 0) {
        r->slots = malloc((size_t)cap * 3 * sizeof *r->slots);
        r->weights = malloc((size_t)cap * sizeof *r->weights);
        if (r->slots == NULL || r->weights == NULL) {
            oml_replay_free(r);
            return OML_ENOMEM;
        }
    }
    return OML_OK;
}

void oml_replay_free(oml_replay *r)
{
    free(r->slots);
    free(r->weights);
    free(r->_pending_rows);
    free(r->_pending_slots);
    free(r->_pending_weights);
    memset(r, 0, sizeof *r);
}

/* Moves the kept triplets to the front, oldest first, when most entries
 * are dropped, so that a draw rarely lands on a dropped one. */
static void compact(oml_replay *r)
{
    if (r->n < 64 || r->live >= r->n / 2)
        return;
    uint32_t oldest = r->n == r->cap ? r->next : 0, k = 0;
    uint32_t *tmp = malloc((size_t)r->live * 3 * sizeof *tmp + 1);
    float *wtmp = malloc((size_t)r->live * sizeof *wtmp + 1);
    if (tmp == NULL || wtmp == NULL) {
        free(tmp);
        free(wtmp);
        return; /* the draws only get slower */
    }
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t at = (oldest + i) % r->n;
        const uint32_t *t = r->slots + (size_t)at * 3;
        if (t[0] != OML_REPLAY_NONE) {
            wtmp[k] = r->weights[at];
            memcpy(tmp + (size_t)k++ * 3, t, 3 * sizeof *t);
        }
    }
    memcpy(r->slots, tmp, (size_t)k * 3 * sizeof *tmp);
    memcpy(r->weights, wtmp, (size_t)k * sizeof *wtmp);
    free(tmp);
    free(wtmp);
    r->n = r->live = k;
    r->next = k;
}

void oml_replay_forget_slot(oml_replay *r, uint32_t slot)
{
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t *t = r->slots + (size_t)i * 3;
        if (t[0] != OML_REPLAY_NONE && (t[0] == slot || t[1] == slot || t[2] == slot)) {
            t[0] = OML_REPLAY_NONE;
            r->live--;
        }
    }
    compact(r);
}

static void push(oml_replay *r, const uint32_t *t, float weight)
{
    if (r->cap == 0 || t[0] == OML_REPLAY_NONE || t[1] == OML_REPLAY_NONE ||
        t[2] == OML_REPLAY_NONE)
        return;
    uint32_t *dst = r->slots + (size_t)r->next * 3;
    if (r->n == r->cap) {
        if (dst[0] != OML_REPLAY_NONE)
            r->live--;
    } else {
        r->n++;
    }
    memcpy(dst, t, 3 * sizeof *t);
    r->weights[r->next] = weight;
    r->live++;
    r->next = r->next + 1 == r->cap ? 0 : r->next + 1;
}

/* Writes up to `want` kept triplets, drawn uniformly, as 3 rows each into
 * rows and their weights into weights. Returns how many were drawn. */
static int32_t draw(oml_replay *r, oml_learner *l, const oml_store *s, int32_t want,
                    const float **rows, float *weights)
{
    int32_t got = 0;
    for (int32_t i = 0; i < want && r->live > 0; i++) {
        for (int t = 0; t < DRAW_TRIES; t++) {
            uint64_t at = oml_rng_below(&l->rng, r->n);
            const uint32_t *e = r->slots + at * 3;
            if (e[0] == OML_REPLAY_NONE)
                continue;
            weights[got] = r->weights[at];
            for (int m = 0; m < 3; m++)
                rows[3 * got + m] = oml_store_features(s, e[m]);
            got++;
            break;
        }
    }
    return got;
}

/* One step on m new triplets, each kept in the ring unless refused. */
static int learn_batch(oml_replay *r, oml_learner *l, const float *const *rows,
                       const uint32_t *slots, const float *weights, int32_t m)
{
    uint64_t before = l->stats.skipped;
    if (l->_bwork == NULL) /* Alg. 1 as published: one step per triplet */
        for (int32_t t = 0; t < m; t++)
            oml_learner_step_weighted(l, rows[3 * t], rows[3 * t + 1], rows[3 * t + 2],
                                      weights ? weights[t] : 1.0f, NULL);
    else
        oml_learner_train_weighted(l, rows, weights, m, m, NULL);
    /* A refused step is not kept: rehearsing it would be refused again,
     * and take the good triplets drawn with it down too. */
    if (slots && l->stats.skipped == before)
        for (int32_t t = 0; t < m; t++)
            push(r, slots + 3 * t, weights ? weights[t] : 1.0f);
    r->credit += (double)m * l->cfg.rehearse;
    if (r->credit > OML_REPLAY_MAX_OWED * (double)l->cfg.batch)
        r->credit = OML_REPLAY_MAX_OWED * (double)l->cfg.batch;
    return (int)(l->stats.skipped - before);
}

int oml_replay_add(oml_replay *r, oml_learner *l, const float *const *rows,
                   const uint32_t *slots, const float *weights, int32_t n)
{
    int refused = 0;
    int32_t batch = l->_bwork == NULL ? 1 : l->cfg.batch;
    if (r->_pending_rows == NULL) { /* no waiting room: every part batch at once */
        for (int32_t i = 0; i < n; i += batch) {
            int32_t m = n - i < batch ? n - i : batch;
            refused += learn_batch(r, l, rows + 3 * i, slots ? slots + 3 * i : NULL,
                                   weights ? weights + i : NULL, m);
        }
        return refused;
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t p = r->n_pending++;
        memcpy(r->_pending_rows + 3 * p, rows + 3 * i, 3 * sizeof *rows);
        r->_pending_weights[p] = weights ? weights[i] : 1.0f;
        for (int k = 0; k < 3; k++)
            r->_pending_slots[3 * p + k] = slots ? slots[3 * i + k] : OML_REPLAY_NONE;
        if (r->n_pending == batch)
            refused += oml_replay_flush(r, l);
    }
    return refused;
}

int oml_replay_flush(oml_replay *r, oml_learner *l)
{
    int32_t m = r->n_pending;
    r->n_pending = 0;
    return m > 0 ? learn_batch(r, l, r->_pending_rows, r->_pending_slots, r->_pending_weights, m)
                 : 0;
}

int oml_replay_learn(oml_replay *r, oml_learner *l, const float *const *rows,
                     const uint32_t *slots, const float *weights, int32_t n)
{
    int refused = oml_replay_add(r, l, rows, slots, weights, n);
    return refused + oml_replay_flush(r, l);
}

int32_t oml_replay_owed(const oml_replay *r, const oml_learner *l)
{
    if (r->live == 0 || l->_bwork == NULL)
        return 0;
    return (int32_t)floor(r->credit / (double)l->cfg.batch);
}

int oml_replay_rehearse(oml_replay *r, oml_learner *l, const oml_store *s, int32_t steps)
{
    const float *batch[3 * OML_MAX_BATCH];
    float weights[OML_MAX_BATCH];
    int taken = 0;
    oml_replay_flush(r, l);
    if (l->_bwork == NULL)
        return 0;
    for (int32_t i = 0; i < steps && r->live > 0; i++) {
        int32_t got = draw(r, l, s, l->cfg.batch, batch, weights);
        if (got == 0)
            break;
        oml_learner_train_weighted(l, batch, weights, got, 0, NULL);
        taken++;
    }
    r->credit -= (double)taken * l->cfg.batch;
    if (r->credit < 0)
        r->credit = 0;
    return taken;
}

int oml_replay_check(const oml_replay *r, const oml_store *s)
{
    uint32_t slots = oml_store_slots(s);
    for (uint32_t i = 0; i < r->n; i++) {
        const uint32_t *t = r->slots + (size_t)i * 3;
        if (t[0] != OML_REPLAY_NONE && (t[0] >= slots || t[1] >= slots || t[2] >= slots))
            return OML_EFORMAT;
    }
    return OML_OK;
}

/* ------------------------------------------------------------ codec */

static void put32(uint8_t **p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        *(*p)++ = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t **p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | (*p)[i];
    *p += 4;
    return v;
}

#define HEAD_BYTES (4 + 5 * 4 + 8)

int oml_replay_encode(const oml_replay *r, uint8_t **buf, size_t *len)
{
    size_t n = HEAD_BYTES + (size_t)r->n * 4 * 4;
    uint8_t *b = malloc(n), *p = b;
    if (b == NULL)
        return OML_ENOMEM;
    memcpy(p, "OMLR", 4);
    p += 4;
    put32(&p, 2);
    put32(&p, r->cap);
    put32(&p, r->n);
    put32(&p, r->next);
    put32(&p, r->live);
    uint64_t bits;
    memcpy(&bits, &r->credit, sizeof bits);
    put32(&p, (uint32_t)bits);
    put32(&p, (uint32_t)(bits >> 32));
    for (size_t i = 0; i < (size_t)r->n * 3; i++)
        put32(&p, r->slots[i]);
    for (size_t i = 0; i < r->n; i++) {
        uint32_t w;
        memcpy(&w, &r->weights[i], sizeof w);
        put32(&p, w);
    }
    *buf = b;
    *len = n;
    return OML_OK;
}

/* Entry i's weight in a decoded body (version 1 has none: 1). */
static float weight_at(const uint8_t *weights, uint32_t i)
{
    if (weights == NULL)
        return 1.0f;
    const uint8_t *q = weights + (size_t)i * 4;
    uint32_t bits = get32(&q);
    float w;
    memcpy(&w, &bits, sizeof w);
    return w;
}

int oml_replay_decode(oml_replay *r, const uint8_t *buf, size_t len, oml_diag *diag)
{
    if (len < HEAD_BYTES || memcmp(buf, "OMLR", 4) != 0)
        return oml_diag_set(diag, OML_EFORMAT, "replay", "not a rehearsal ring (bad magic)");
    const uint8_t *p = buf + 4;
    uint32_t version = get32(&p), cap = get32(&p), n = get32(&p), next = get32(&p);
    uint32_t live = get32(&p);
    uint64_t lo = get32(&p), hi = get32(&p), bits = lo | hi << 32;
    double credit;
    memcpy(&credit, &bits, sizeof credit);
    if (version != 1 && version != 2)
        return oml_diag_set(diag, OML_EVERSION, "replay", "rehearsal ring version %u", version);
    size_t per = version == 1 ? 12 : 16;
    if (n > cap || (cap > 0 && next >= cap) || (n < cap && next != n % (cap ? cap : 1)) ||
        live > n || !isfinite(credit) || len != HEAD_BYTES + (size_t)n * per)
        return oml_diag_set(diag, OML_EFORMAT, "replay", "rehearsal ring header is inconsistent");
    const uint8_t *body = p, *weights = version == 1 ? NULL : body + (size_t)n * 12;
    uint32_t counted = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *q = body + (size_t)i * 12;
        counted += get32(&q) != OML_REPLAY_NONE;
        float w = weight_at(weights, i);
        if (!(w > 0.0f) || !isfinite(w))
            return oml_diag_set(diag, OML_EFORMAT, "replay",
                                "rehearsal ring entry %u has weight %g (not > 0 and finite)", i,
                                (double)w);
    }
    if (counted != live)
        return oml_diag_set(diag, OML_EFORMAT, "replay",
                            "rehearsal ring says %u triplets are kept but holds %u", live, counted);
    if (cap == r->cap) { /* the same bound: exactly as saved */
        for (size_t i = 0; i < (size_t)n * 3; i++)
            r->slots[i] = get32(&p);
        for (uint32_t i = 0; i < n; i++)
            r->weights[i] = weight_at(weights, i);
        r->n = n;
        r->next = next;
        r->live = live;
        r->credit = credit;
        return OML_OK;
    }
    /* Another bound: keep the newest, oldest first. */
    r->n = r->next = r->live = 0;
    r->credit = credit;
    uint32_t oldest = n == cap ? next : 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t at = (oldest + i) % n;
        const uint8_t *q = body + (size_t)at * 12;
        uint32_t t[3] = {get32(&q), get32(&q), get32(&q)};
        if (t[0] != OML_REPLAY_NONE)
            push(r, t, weight_at(weights, at));
    }
    return OML_OK;
}
