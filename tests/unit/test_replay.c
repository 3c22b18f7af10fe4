/* test_replay.c - the rehearsal ring (replay.h): its bound, forgetting,
 * what rehearsal draws, what is owed, and its bit-exact serialisation.
 *
 * Draws are observed through the store: a row set to NaN refuses (and
 * counts in stats.skipped) every step whose batch names it, so a
 * rehearsal that never counts a refused step never drew a poisoned row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learner.h"
#include "modelfile.h"
#include "replay.h"
#include "store.h"

#define DIM 4
#define HEAD 32 /* "OMLR", version, cap, n, next, live, credit */

/* A tiny learner of the default preset (mini-batches of `batch`, Adam,
 * `rehearse` per new triplet) with the random start, so it needs no data. */
static oml_learner *tiny(int32_t batch, float rehearse)
{
    oml_config c;
    assert_int_equal(oml_config_preset(&c, "default", DIM), OML_OK);
    c.layers = 1;
    c.hidden = 8;
    c.emb = 3;
    c.init = OML_INIT_RANDOM;
    c.basis = 0; /* a random start has no map to keep */
    c.center = 0;
    c.hedge_signal = OML_HEDGE_VIOLATION; /* the local one needs data */
    c.batch = batch;
    c.rehearse = rehearse;
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    return l;
}

/* A store of n items "i0".. with random features; item k is slot k. */
static oml_store *items(int n)
{
    oml_store *s = NULL;
    assert_int_equal(oml_store_create(&s, DIM, (uint32_t)n), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 77);
    for (int k = 0; k < n; k++) {
        float x[DIM];
        for (int j = 0; j < DIM; j++)
            x[j] = oml_rng_normal(&r);
        char id[16];
        int il = snprintf(id, sizeof id, "i%d", k);
        uint32_t slot;
        assert_int_equal(oml_store_put(s, id, (size_t)il, x, NULL, 0, &slot, NULL), OML_OK);
        assert_int_equal(slot, (uint32_t)k);
    }
    return s;
}

/* Sets slot's stored features to NaN (the store refuses them on put; this
 * reaches into its matrix to make every step that draws the slot fail). */
static void poison(oml_store *s, uint32_t slot)
{
    float *x = (float *)oml_store_features(s, slot);
    for (int j = 0; j < DIM; j++)
        x[j] = NAN;
}

/* Triplet k of the tests: slots (k, k + 1, k + 2) mod m. */
static void triplet(int k, int m, uint32_t *t)
{
    for (int i = 0; i < 3; i++)
        t[i] = (uint32_t)((k + i) % m);
}

/* Learns triplets [from, to) of triplet(., m) in one call. */
static void learn(oml_replay *r, oml_learner *l, const oml_store *s, int from, int to, int m)
{
    enum { MAXN = 256 };
    assert_true(to - from <= MAXN);
    const float *rows[3 * MAXN];
    uint32_t slots[3 * MAXN];
    for (int k = from; k < to; k++) {
        triplet(k, m, slots + 3 * (k - from));
        for (int i = 0; i < 3; i++)
            rows[3 * (k - from) + i] = oml_store_features(s, slots[3 * (k - from) + i]);
    }
    assert_int_equal(oml_replay_learn(r, l, rows, slots, NULL, to - from), 0);
}

/* The ring's entries, oldest first (dropped ones included): out (n, 3). */
static uint32_t ring_entries(const oml_replay *r, uint32_t *out)
{
    uint32_t oldest = r->n == r->cap ? r->next : 0;
    for (uint32_t i = 0; i < r->n; i++)
        memcpy(out + 3 * i, r->slots + 3 * (size_t)((oldest + i) % r->cap), 3 * sizeof *out);
    return r->n;
}

static uint32_t count_live(const oml_replay *r)
{
    uint32_t live = 0;
    for (uint32_t i = 0; i < r->n; i++)
        live += r->slots[3 * (size_t)i] != OML_REPLAY_NONE;
    return live;
}

/* New triplets that come one by one still make full batches: add() keeps
 * a part batch waiting (nothing learned, nothing kept) until it fills or
 * is flushed, and one-by-one adds plus a flush give the very model that
 * one call with all of them gives. */
static void test_add_waits_for_full_batch(void **state)
{
    (void)state;
    enum { M = 30 };
    oml_store *s = items(M);
    oml_learner *a = tiny(4, 0.0f), *b = tiny(4, 0.0f);
    oml_replay ra, rb;
    assert_int_equal(oml_replay_init(&ra, 100), OML_OK);
    assert_int_equal(oml_replay_init(&rb, 100), OML_OK);
    for (int k = 0; k < 7; k++) {
        uint32_t t[3];
        triplet(k, M, t);
        const float *rows[3];
        for (int i = 0; i < 3; i++)
            rows[i] = oml_store_features(s, t[i]);
        assert_int_equal(oml_replay_add(&ra, a, rows, t, NULL, 1), 0);
        int waiting = (k + 1) % 4;
        assert_int_equal(ra.n_pending, waiting);
        assert_int_equal(a->stats.updates, (uint64_t)(k + 1 - waiting));
        assert_int_equal(ra.live, (uint32_t)(k + 1 - waiting));
    }
    assert_int_equal(a->stats.steps, 1);
    assert_int_equal(oml_replay_flush(&ra, a), 0);
    assert_int_equal(ra.n_pending, 0);
    assert_int_equal(a->stats.updates, 7);
    assert_int_equal(a->stats.steps, 2);
    assert_int_equal(oml_replay_flush(&ra, a), 0); /* nothing waits: no step */
    assert_int_equal(a->stats.steps, 2);
    learn(&rb, b, s, 0, 7, M);
    uint8_t *ea, *eb;
    size_t na, nb;
    assert_int_equal(oml_model_encode(a, &ea, &na), OML_OK);
    assert_int_equal(oml_model_encode(b, &eb, &nb), OML_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(ea, eb, na);
    free(ea);
    free(eb);
    oml_replay_free(&ra);
    oml_replay_free(&rb);
    oml_learner_destroy(a);
    oml_learner_destroy(b);
    oml_store_destroy(s);
}

/* The ring holds exactly the newest cap triplets, never more: after every
 * request (of 1..7 triplets) its entries, oldest first, are the last
 * min(learned, cap) triplets, and its encoding (its memory: 16 bytes a
 * triplet) never grows past cap. Triplets with an inline member, or
 * learned without slots, are learned but not kept. */
static void test_ring_keeps_newest(void **state)
{
    (void)state;
    enum { CAP = 10, M = 50 };
    oml_store *s = items(M);
    oml_learner *l = tiny(4, 1.0f);
    oml_replay r;
    assert_int_equal(oml_replay_init(&r, CAP), OML_OK);
    assert_int_equal(oml_replay_owed(&r, l), 0);
    int learned = 0;
    for (int req = 0; req < 20; req++) {
        int m = 1 + req % 7;
        learn(&r, l, s, learned, learned + m, M);
        learned += m;
        int want = learned < CAP ? learned : CAP;
        assert_true(r.n <= r.cap);
        assert_int_equal(r.n, want);
        assert_int_equal(r.live, want);
        assert_int_equal(r.next, learned % CAP);
        uint32_t e[3 * CAP];
        assert_int_equal(ring_entries(&r, e), want);
        for (int i = 0; i < want; i++) {
            uint32_t t[3];
            triplet(learned - want + i, M, t);
            assert_memory_equal(e + 3 * i, t, sizeof t);
        }
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(oml_replay_encode(&r, &buf, &len), OML_OK);
        assert_int_equal(len, HEAD + (size_t)want * OML_REPLAY_BYTES);
        free(buf);
    }
    assert_int_equal(l->stats.updates, learned);

    /* An inline member (OML_REPLAY_NONE), or no slots at all: not kept. */
    uint32_t before[3 * CAP];
    memcpy(before, r.slots, sizeof before);
    const float *rows[6] = {oml_store_features(s, 1), oml_store_features(s, 2),
                            oml_store_features(s, 3), oml_store_features(s, 4),
                            oml_store_features(s, 5), oml_store_features(s, 6)};
    uint32_t slots[6] = {1, OML_REPLAY_NONE, 3, 4, 5, OML_REPLAY_NONE};
    assert_int_equal(oml_replay_learn(&r, l, rows, slots, NULL, 2), 0);
    assert_int_equal(oml_replay_learn(&r, l, rows, NULL, NULL, 2), 0);
    assert_memory_equal(before, r.slots, sizeof before);
    assert_int_equal(r.next, learned % CAP);
    assert_int_equal(l->stats.updates, learned + 4);

    /* cap 0: nothing is kept, nothing is owed. */
    oml_replay none;
    assert_int_equal(oml_replay_init(&none, 0), OML_OK);
    learn(&none, l, s, 0, 9, M);
    assert_int_equal(none.n, 0);
    assert_int_equal(none.live, 0);
    assert_int_equal(oml_replay_owed(&none, l), 0);
    assert_int_equal(oml_replay_rehearse(&none, l, s, 5), 0);
    oml_replay_free(&none);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    oml_store_destroy(s);
}

/* forget_slot drops every kept triplet that names the slot (as anchor,
 * positive or negative) and nothing else; a dropped triplet is never
 * rehearsed again, and new triplets still come in (over dropped entries
 * too) with the live count right. */
static void test_forget_slot(void **state)
{
    (void)state;
    enum { CAP = 32, M = 20, B = 4 };
    oml_store *s = items(M);
    oml_learner *l = tiny(B, 0.0f);
    oml_replay r;
    assert_int_equal(oml_replay_init(&r, CAP), OML_OK);
    learn(&r, l, s, 0, 40, M); /* wrapped: triplets 8..39 kept */
    assert_int_equal(r.n, CAP);
    uint32_t e0[3 * CAP];
    memcpy(e0, r.slots, sizeof e0);

    /* The poison is seen: rehearsal draws triplets naming slot 5. */
    float x5[DIM];
    memcpy(x5, oml_store_features(s, 5), sizeof x5);
    poison(s, 5);
    assert_true(oml_replay_rehearse(&r, l, s, 30) == 30);
    uint64_t skipped = l->stats.skipped;
    assert_true(skipped > 0);

    oml_replay_forget_slot(&r, 5);
    uint32_t dropped = 0;
    for (uint32_t i = 0; i < CAP; i++) {
        const uint32_t *t = e0 + 3 * i, *now = r.slots + 3 * i;
        int names = t[0] == 5 || t[1] == 5 || t[2] == 5;
        if (names) {
            assert_int_equal(now[0], OML_REPLAY_NONE);
            dropped++;
        } else {
            assert_memory_equal(now, t, 3 * sizeof *t);
        }
    }
    assert_int_equal(dropped, 3); /* of triplets 8..39, only 23, 24 and 25 name slot 5 */
    assert_int_equal(r.live, CAP - dropped);
    assert_int_equal(count_live(&r), r.live);
    oml_replay_forget_slot(&r, 5); /* again: nothing more */
    oml_replay_forget_slot(&r, 999); /* a slot it never held */
    assert_int_equal(r.live, CAP - dropped);

    uint64_t rehearsed = l->stats.rehearsed;
    assert_int_equal(oml_replay_rehearse(&r, l, s, 200), 200);
    assert_int_equal(l->stats.skipped, skipped); /* slot 5 was never drawn */
    assert_true(l->stats.rehearsed - rehearsed > 200 * B * 9 / 10);

    /* New triplets over dropped entries (slot 5 learned healthy, then
     * forgotten and poisoned again): live stays exact. */
    for (int k = 40; k < 100; k += 5) {
        memcpy((float *)oml_store_features(s, 5), x5, sizeof x5);
        learn(&r, l, s, k, k + 5, M);
        poison(s, 5);
        oml_replay_forget_slot(&r, 5);
        assert_int_equal(count_live(&r), r.live);
        assert_true(r.n <= r.cap);
    }
    assert_int_equal(oml_replay_rehearse(&r, l, s, 100), 100);
    assert_int_equal(l->stats.skipped, skipped);

    /* Forgetting every slot leaves nothing to rehearse or owe. */
    for (uint32_t k = 0; k < M; k++)
        oml_replay_forget_slot(&r, k);
    assert_int_equal(r.live, 0);
    assert_int_equal(count_live(&r), 0);
    assert_int_equal(oml_replay_rehearse(&r, l, s, 3), 0);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    oml_store_destroy(s);
}

/* Rehearsal draws only kept triplets: once the ring has let the old ones
 * go, poisoning every item they name (and no kept one) refuses nothing;
 * poisoning one kept item does. */
static void test_rehearsal_draws_only_kept(void **state)
{
    (void)state;
    enum { CAP = 8, M = 40, B = 4 };
    oml_store *s = items(M);
    oml_learner *l = tiny(B, 2.0f);
    oml_replay r;
    assert_int_equal(oml_replay_init(&r, CAP), OML_OK);
    learn(&r, l, s, 0, 13, M);
    learn(&r, l, s, 13, 30, M); /* kept: triplets 22..29, slots 22..31 */
    uint32_t kept[M] = {0};
    for (uint32_t i = 0; i < r.n; i++)
        for (int m = 0; m < 3; m++)
            kept[r.slots[3 * i + m]] = 1;
    for (uint32_t k = 0; k < M; k++) {
        assert_int_equal(kept[k], k >= 22 && k <= 31);
        if (!kept[k])
            poison(s, k);
    }
    uint64_t steps = l->stats.steps, rehearsed = l->stats.rehearsed;
    int owed = oml_replay_owed(&r, l);
    assert_true(owed > 0);
    assert_int_equal(oml_replay_rehearse(&r, l, s, owed + 100), owed + 100);
    assert_int_equal(l->stats.skipped, 0);
    assert_int_equal(l->stats.steps - steps, (uint64_t)owed + 100);
    assert_int_equal(l->stats.rehearsed - rehearsed, ((uint64_t)owed + 100) * B);
    assert_int_equal(l->stats.updates, 30); /* rehearsal learns nothing new */

    poison(s, 22); /* of the kept, only triplet 22 names it (20 and 21 are gone) */
    assert_int_equal(oml_replay_rehearse(&r, l, s, 100), 100);
    assert_true(l->stats.skipped > 0);
    for (size_t i = 0; i < l->lay.count; i++)
        assert_true(isfinite(l->params[i]));

    /* Entries past n, left from before a decode replaced the ring's
     * contents with a shorter one, are not kept either. */
    oml_store *s2 = items(M);
    oml_replay shorter;
    assert_int_equal(oml_replay_init(&shorter, CAP), OML_OK);
    learn(&shorter, l, s2, 30, 33, M); /* slots 30..34 */
    oml_replay_free(&r);
    assert_int_equal(oml_replay_init(&r, CAP), OML_OK);
    learn(&r, l, s2, 0, CAP, M); /* slots 0..9, soon stale */
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(oml_replay_encode(&shorter, &buf, &len), OML_OK);
    oml_diag diag = {0};
    assert_int_equal(oml_replay_decode(&r, buf, len, &diag), OML_OK);
    assert_int_equal(r.n, 3);
    for (uint32_t k = 0; k < 10; k++)
        poison(s2, k);
    uint64_t skipped = l->stats.skipped;
    assert_int_equal(oml_replay_rehearse(&r, l, s2, 100), 100);
    assert_int_equal(l->stats.skipped, skipped);
    free(buf);
    oml_replay_free(&shorter);
    oml_store_destroy(s2);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    oml_store_destroy(s);
}

/* owed = floor(credit / batch), credit = rehearse per new triplet learned
 * less batch per rehearsal step taken (not below 0), capped at
 * OML_REPLAY_MAX_OWED batches; nothing is owed while the ring is empty
 * or without mini-batches (the paper's step). */
static void test_owed(void **state)
{
    (void)state;
    enum { M = 30, B = 8 };
    oml_store *s = items(M);
    oml_learner *l = tiny(B, 3.0f);
    oml_replay r;
    assert_int_equal(oml_replay_init(&r, 100), OML_OK);

    const float *rows[3] = {oml_store_features(s, 0), oml_store_features(s, 1),
                            oml_store_features(s, 2)};
    assert_int_equal(oml_replay_learn(&r, l, rows, NULL, NULL, 1), 0); /* kept nowhere */
    assert_true(r.credit == 3.0);
    assert_int_equal(oml_replay_owed(&r, l), 0); /* the ring is empty */

    learn(&r, l, s, 0, 4, M); /* credit 3 + 12 = 15 */
    assert_true(r.credit == 15.0);
    assert_int_equal(oml_replay_owed(&r, l), 1);
    learn(&r, l, s, 4, 5, M); /* 18 */
    assert_int_equal(oml_replay_owed(&r, l), 2);
    uint64_t steps = l->stats.steps;
    assert_int_equal(oml_replay_rehearse(&r, l, s, 1), 1); /* 10 */
    assert_true(r.credit == 10.0);
    assert_int_equal(oml_replay_owed(&r, l), 1);
    assert_int_equal(l->stats.steps, steps + 1);
    assert_int_equal(oml_replay_rehearse(&r, l, s, 4), 4); /* beyond: idle rehearsal */
    assert_true(r.credit == 0.0);
    assert_int_equal(oml_replay_owed(&r, l), 0);
    assert_int_equal(l->stats.rehearsed, 5 * B);
    learn(&r, l, s, 5, 7, M); /* 6 */
    assert_int_equal(oml_replay_owed(&r, l), 0);
    learn(&r, l, s, 7, 8, M); /* 9 */
    assert_int_equal(oml_replay_owed(&r, l), 1);
    assert_int_equal(oml_replay_rehearse(&r, l, s, 0), 0);
    assert_int_equal(oml_replay_owed(&r, l), 1);
    oml_replay_free(&r);
    oml_learner_destroy(l);

    /* A fractional ratio, and the cap on what is owed. */
    l = tiny(B, 0.75f);
    assert_int_equal(oml_replay_init(&r, 100), OML_OK);
    learn(&r, l, s, 0, 10, M); /* 7.5 */
    assert_int_equal(oml_replay_owed(&r, l), 0);
    learn(&r, l, s, 10, 11, M); /* 8.25 */
    assert_int_equal(oml_replay_owed(&r, l), 1);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    l = tiny(B, 64.0f);
    assert_int_equal(oml_replay_init(&r, 100), OML_OK);
    for (int k = 0; k < 600; k += 200)
        learn(&r, l, s, k, k + 200, M); /* 38,400 triplets owed, 4,800 batches */
    assert_int_equal(oml_replay_owed(&r, l), OML_REPLAY_MAX_OWED);
    oml_replay_free(&r);
    oml_learner_destroy(l);

    /* The paper's one-triplet step: no rehearsal. */
    oml_config c;
    assert_int_equal(oml_config_preset(&c, "paper", DIM), OML_OK);
    c.layers = 1;
    c.hidden = 8;
    c.emb = 3;
    c.rehearse = 2.0f;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    assert_int_equal(oml_replay_init(&r, 100), OML_OK);
    learn(&r, l, s, 0, 20, M);
    assert_int_equal(l->stats.steps, 20);
    assert_int_equal(oml_replay_owed(&r, l), 0);
    assert_int_equal(oml_replay_rehearse(&r, l, s, 3), 0);
    assert_int_equal(l->stats.steps, 20);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    oml_store_destroy(s);
}

/* A wrapped ring with dropped entries and a fractional credit. */
static void sample_ring(oml_replay *r, oml_learner **l, oml_store **s)
{
    *s = items(20);
    *l = tiny(4, 0.75f);
    assert_int_equal(oml_replay_init(r, 16), OML_OK);
    learn(r, *l, *s, 0, 26, 20); /* kept: triplets 10..25 */
    oml_replay_forget_slot(r, 15); /* drops 13, 14 and 15 */
    assert_int_equal(r->n, 16);
    assert_int_equal(r->live, 13);
    assert_true(r->credit != floor(r->credit));
}

/* encode(decode(encode(x))) == encode(x) byte for byte, and the decoded
 * ring is the same ring; decoded with another cap it keeps the newest
 * live triplets, oldest first, and goes on like a ring that had that cap. */
static void test_codec_round_trip(void **state)
{
    (void)state;
    oml_replay r;
    oml_learner *l;
    oml_store *s;
    sample_ring(&r, &l, &s);
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    assert_int_equal(oml_replay_encode(&r, &a, &alen), OML_OK);
    assert_int_equal(alen, HEAD + (size_t)r.n * 16);
    assert_memory_equal(a, "OMLR", 4);

    oml_replay d;
    oml_diag diag = {0};
    assert_int_equal(oml_replay_init(&d, 16), OML_OK);
    assert_int_equal(oml_replay_decode(&d, a, alen, &diag), OML_OK);
    assert_int_equal(d.n, r.n);
    assert_int_equal(d.next, r.next);
    assert_int_equal(d.live, r.live);
    assert_memory_equal(&d.credit, &r.credit, sizeof r.credit);
    assert_memory_equal(d.slots, r.slots, (size_t)r.n * 3 * sizeof *r.slots);
    assert_memory_equal(d.weights, r.weights, (size_t)r.n * sizeof *r.weights);
    assert_int_equal(oml_replay_encode(&d, &b, &blen), OML_OK);
    assert_int_equal(blen, alen);
    assert_memory_equal(a, b, alen);
    free(b);
    oml_replay_free(&d);

    /* The live entries, oldest first. */
    uint32_t all[3 * 16], live[3 * 16];
    uint32_t n = ring_entries(&r, all), nl = 0;
    for (uint32_t i = 0; i < n; i++)
        if (all[3 * i] != OML_REPLAY_NONE)
            memcpy(live + 3 * nl++, all + 3 * i, 3 * sizeof *all);
    assert_int_equal(nl, r.live);

    const uint32_t caps[] = {0, 1, 5, 9, 40};
    for (int c = 0; c < 5; c++) {
        uint32_t cap = caps[c], keep = nl < cap ? nl : cap;
        assert_int_equal(oml_replay_init(&d, cap), OML_OK);
        assert_int_equal(oml_replay_decode(&d, a, alen, &diag), OML_OK);
        assert_int_equal(d.n, keep);
        assert_int_equal(d.live, keep);
        assert_true(d.n <= d.cap);
        assert_memory_equal(&d.credit, &r.credit, sizeof r.credit);
        uint32_t e[3 * 40];
        if (cap > 0) {
            assert_int_equal(ring_entries(&d, e), keep);
            assert_memory_equal(e, live + 3 * (nl - keep), (size_t)keep * 3 * sizeof *e);
            /* ... and goes on keeping the newest. */
            learn(&d, l, s, 100, 100 + (int)cap + 2, 20);
            assert_int_equal(d.n, cap);
            assert_int_equal(ring_entries(&d, e), cap);
            for (uint32_t i = 0; i < cap; i++) {
                uint32_t t[3];
                triplet(100 + 2 + (int)i, 20, t);
                assert_memory_equal(e + 3 * i, t, sizeof t);
            }
        }
        /* A refitted ring encodes canonically too. */
        assert_int_equal(oml_replay_encode(&d, &b, &blen), OML_OK);
        oml_replay d2;
        assert_int_equal(oml_replay_init(&d2, cap), OML_OK);
        assert_int_equal(oml_replay_decode(&d2, b, blen, &diag), OML_OK);
        uint8_t *b2 = NULL;
        size_t b2len = 0;
        assert_int_equal(oml_replay_encode(&d2, &b2, &b2len), OML_OK);
        assert_int_equal(b2len, blen);
        assert_memory_equal(b, b2, blen);
        free(b);
        free(b2);
        oml_replay_free(&d2);
        oml_replay_free(&d);
    }
    free(a);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    oml_store_destroy(s);
}

/* oml_replay_check: every kept slot must be below the store's slot count;
 * dropped entries do not count. */
static void test_check_against_store(void **state)
{
    (void)state;
    oml_store *s19 = items(19), *s20 = items(20);
    oml_learner *l = tiny(4, 0.0f);
    oml_replay r;
    assert_int_equal(oml_replay_init(&r, 50), OML_OK);
    learn(&r, l, s20, 0, 18, 20); /* triplet 17 names slots 17, 18, 19 */
    assert_int_equal(oml_replay_check(&r, s20), OML_OK);
    assert_int_equal(oml_replay_check(&r, s19), OML_EFORMAT);
    oml_replay_forget_slot(&r, 19); /* drops 17 (and 18, 19: not learned) */
    assert_int_equal(oml_replay_check(&r, s19), OML_OK);
    const float *rows[3] = {oml_store_features(s20, 0), oml_store_features(s20, 1),
                            oml_store_features(s20, 2)};
    uint32_t far[3] = {0, 1000, 2}; /* a slot past any store, from a damaged ring */
    assert_int_equal(oml_replay_learn(&r, l, rows, far, NULL, 1), 0);
    assert_int_equal(oml_replay_check(&r, s20), OML_EFORMAT);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    oml_store_destroy(s19);
    oml_store_destroy(s20);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Decodes buf (len) into a ring of cap 16: the return code, the diag's
 * field checked. */
static int decode16(const uint8_t *buf, size_t len)
{
    oml_replay d;
    assert_int_equal(oml_replay_init(&d, 16), OML_OK);
    oml_diag diag = {0};
    int rc = oml_replay_decode(&d, buf, len, &diag);
    if (rc != OML_OK)
        assert_string_equal(diag.field, "replay");
    oml_replay_free(&d);
    return rc;
}

/* A damaged ring is refused, never trusted: bad magic, another version,
 * n > cap, next out of range or inconsistent with a ring that has not
 * wrapped, live > n, a non-finite credit, a length that does not match n
 * (every truncation, a trailing byte). */
static void test_corrupt_header_refused(void **state)
{
    (void)state;
    oml_replay r;
    oml_learner *l;
    oml_store *s;
    sample_ring(&r, &l, &s);
    uint8_t *a = NULL;
    size_t len = 0;
    assert_int_equal(oml_replay_encode(&r, &a, &len), OML_OK);
    uint8_t *b = malloc(len + 1);
    assert_int_equal(decode16(a, len), OML_OK);
    for (size_t n = 0; n < len; n++)
        assert_int_equal(decode16(a, n), OML_EFORMAT);
    memcpy(b, a, len);
    b[len] = 0;
    assert_int_equal(decode16(b, len + 1), OML_EFORMAT);

    struct {
        size_t at;
        uint32_t value;
        int rc;
    } bad[] = {
        {0, 0x524c4d4f ^ 1, OML_EFORMAT}, /* magic */
        {4, 3, OML_EVERSION},             /* version */
        {4, 0, OML_EVERSION},
        {4, 1, OML_EFORMAT},              /* read as version 1: the weights do not fit */
        {8, 15, OML_EFORMAT},             /* cap below n */
        {12, 17, OML_EFORMAT},            /* n above cap */
        {16, 16, OML_EFORMAT},            /* next == cap */
        {16, 0xffffffffu, OML_EFORMAT},
        {20, 17, OML_EFORMAT},            /* live above n */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memcpy(b, a, len);
        put32(b + bad[i].at, bad[i].value);
        if (decode16(b, len) != bad[i].rc)
            fail_msg("header word at %zu = %u: not refused as %d", bad[i].at, bad[i].value,
                     bad[i].rc);
    }
    const double credits[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        memcpy(b, a, len);
        memcpy(b + 24, &credits[i], sizeof credits[i]);
        assert_int_equal(decode16(b, len), OML_EFORMAT);
    }
    /* A ring that has not wrapped has next == n. */
    oml_replay small;
    assert_int_equal(oml_replay_init(&small, 16), OML_OK);
    learn(&small, l, s, 0, 5, 20);
    uint8_t *c = NULL;
    size_t clen = 0;
    assert_int_equal(oml_replay_encode(&small, &c, &clen), OML_OK);
    assert_int_equal(decode16(c, clen), OML_OK);
    put32(c + 16, 4);
    assert_int_equal(decode16(c, clen), OML_EFORMAT);
    free(c);
    oml_replay_free(&small);
    free(a);
    free(b);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    oml_store_destroy(s);
}

/* The header's live count is redundant with the entries (those whose
 * anchor is not OML_REPLAY_NONE): a ring whose live disagrees is damaged.
 * Trusted, a live of 0 over kept entries stops rehearsal for good (owed
 * and rehearse see an empty ring), and a live below the truth wraps to
 * 2^32 - 1 in forget_slot. */
/* Triplets [0, n) of triplet(., m) with weights w (n of them) into r. */
static void learn_weighted(oml_replay *r, oml_learner *l, const oml_store *s, int n, int m,
                           const float *w)
{
    const float *rows[3 * 16];
    uint32_t slots[3 * 16];
    assert_true(n <= 16);
    for (int k = 0; k < n; k++) {
        triplet(k, m, slots + 3 * k);
        for (int i = 0; i < 3; i++)
            rows[3 * k + i] = oml_store_features(s, slots[3 * k + i]);
    }
    assert_int_equal(oml_replay_learn(r, l, rows, slots, w, n), 0);
}

/* A triplet's weight is kept with it and scales its rehearsed steps: under
 * plain SGD, a rehearsal step on the same draws at weight 2 moves every
 * weight twice as far as at weight 1. Its codec keeps the weights; a version 1
 * ring (no weights) reads as weight 1; a weight not > 0 is refused. */
static void test_weights_kept_and_rehearsed(void **state)
{
    (void)state;
    oml_store *s = items(12);
    float ones[8], twos[8];
    for (int i = 0; i < 8; i++)
        ones[i] = 1.0f, twos[i] = 2.0f;
    oml_learner *fill = tiny(4, 1.0f), *la = NULL, *lb = NULL;
    oml_replay ra, rb;
    assert_int_equal(oml_replay_init(&ra, 16), OML_OK);
    assert_int_equal(oml_replay_init(&rb, 16), OML_OK);
    learn_weighted(&ra, fill, s, 8, 12, ones);
    learn_weighted(&rb, fill, s, 8, 12, twos);
    for (uint32_t i = 0; i < rb.n; i++)
        assert_true(ra.weights[i] == 1.0f && rb.weights[i] == 2.0f);

    oml_config c = fill->cfg;
    c.optim = OML_OPTIM_SGD;
    c.prox = 0.0f;
    assert_int_equal(oml_learner_create(&la, &c, NULL), OML_OK);
    assert_int_equal(oml_learner_create(&lb, &c, NULL), OML_OK);
    size_t count = la->lay.count;
    float *p0 = malloc(count * sizeof *p0);
    memcpy(p0, la->params, count * sizeof *p0);
    assert_int_equal(oml_replay_rehearse(&ra, la, s, 1), 1); /* one step: the same draws */
    assert_int_equal(oml_replay_rehearse(&rb, lb, s, 1), 1);
    double moved = 0;
    for (size_t i = 0; i < count; i++) {
        double da = (double)la->params[i] - p0[i], db = (double)lb->params[i] - p0[i];
        assert_true(fabs(db - 2 * da) <= 1e-6 * (1 + fabs(db)));
        moved += fabs(da);
    }
    assert_true(moved > 0); /* the rehearsal did step */

    /* The codec keeps them; version 1 reads as weight 1. */
    uint8_t *a = NULL;
    size_t len = 0;
    assert_int_equal(oml_replay_encode(&rb, &a, &len), OML_OK);
    oml_replay d;
    oml_diag diag = {0};
    assert_int_equal(oml_replay_init(&d, 16), OML_OK);
    assert_int_equal(oml_replay_decode(&d, a, len, &diag), OML_OK);
    assert_memory_equal(d.weights, rb.weights, rb.n * sizeof *rb.weights);
    put32(a + 4, 1);
    assert_int_equal(oml_replay_decode(&d, a, len - 4 * rb.n, &diag), OML_OK);
    for (uint32_t i = 0; i < d.n; i++)
        assert_true(d.weights[i] == 1.0f);
    assert_memory_equal(d.slots, rb.slots, rb.n * 3 * sizeof *rb.slots);
    put32(a + 4, 2);
    const float bad[] = {0.0f, -1.0f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        memcpy(a + HEAD + (size_t)rb.n * 12, &bad[i], 4);
        assert_int_equal(oml_replay_decode(&d, a, len, &diag), OML_EFORMAT);
        assert_non_null(strstr(diag.msg, "weight"));
    }
    free(a);
    free(p0);
    oml_replay_free(&d);
    oml_replay_free(&ra);
    oml_replay_free(&rb);
    oml_learner_destroy(fill);
    oml_learner_destroy(la);
    oml_learner_destroy(lb);
    oml_store_destroy(s);
}

static void test_decode_refuses_wrong_live(void **state)
{
    (void)state;
    oml_replay r;
    oml_learner *l;
    oml_store *s;
    sample_ring(&r, &l, &s);
    uint8_t *a = NULL;
    size_t len = 0;
    assert_int_equal(oml_replay_encode(&r, &a, &len), OML_OK);
    assert_true(r.live >= 2);
    const uint32_t wrong[] = {0, r.live - 1, r.live + 1};
    int accepted = -1;
    for (int i = 0; i < 3 && accepted < 0; i++) {
        put32(a + 20, wrong[i]);
        if (decode16(a, len) != OML_EFORMAT)
            accepted = i;
    }
    uint32_t truth = r.live;
    free(a);
    oml_replay_free(&r);
    oml_learner_destroy(l);
    oml_store_destroy(s);
    if (accepted >= 0)
        fail_msg("a ring of %u live entries decoded with live %u", truth, wrong[accepted]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_keeps_newest),
        cmocka_unit_test(test_add_waits_for_full_batch),
        cmocka_unit_test(test_forget_slot),
        cmocka_unit_test(test_rehearsal_draws_only_kept),
        cmocka_unit_test(test_owed),
        cmocka_unit_test(test_codec_round_trip),
        cmocka_unit_test(test_check_against_store),
        cmocka_unit_test(test_corrupt_header_refused),
        cmocka_unit_test(test_decode_refuses_wrong_live),
        cmocka_unit_test(test_weights_kept_and_rehearsed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
