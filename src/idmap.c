/* idmap.c - byte-string -> uint32 hash map (linear probing, backward shift).
 *
 * DESIGN
 * Owns only its bucket array; keys are borrowed (see idmap.h). Invariants:
 * _cap is 0 or a power of two; _count <= 3/4 _cap; every live entry is
 * reachable from its home bucket (hash & mask) without crossing an empty
 * bucket. Deletion shifts later entries of the same run back into the hole,
 * which keeps that invariant without tombstones. The full 32-bit hash is kept
 * in each entry so rehashing and most failed comparisons skip memcmp.
 * Thread: one owner. */
#include "idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define IDMAP_MIN_CAP 16u
#define IDMAP_MAX_CAP (1u << 31)

/* ---- SipHash-2-4 (Aumasson and Bernstein, 2012), from the paper's
 * description: 2 compression rounds per 8-byte word, 4 finalisation rounds,
 * little-endian words, the length in the last word's top byte. ---- */

#define ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                    \
    do {                                                            \
        v0 += v1; v1 = ROTL64(v1, 13); v1 ^= v0; v0 = ROTL64(v0, 32); \
        v2 += v3; v3 = ROTL64(v3, 16); v3 ^= v2;                     \
        v0 += v3; v3 = ROTL64(v3, 21); v3 ^= v0;                     \
        v2 += v1; v1 = ROTL64(v1, 17); v1 ^= v2; v2 = ROTL64(v2, 32); \
    } while (0)

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint64_t oml_siphash24(const uint8_t key[16], const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t m = le64(p + i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t j = 0; i + j < len; j++)
        b |= (uint64_t)p[i + j] << (8 * j);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- the process key ---- */

static uint8_t g_key[16];
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

/* 16 random bytes from the kernel (getrandom, else /dev/urandom); if both
 * fail (no entropy source at all), a mix of clocks, pid and addresses:
 * weaker, but still not known to a remote client in advance. */
static void key_init(void)
{
    size_t got = 0;
    while (got < sizeof g_key) {
        ssize_t n = getrandom(g_key + got, sizeof g_key - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got == sizeof g_key)
        return;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        got = 0;
        while (got < sizeof g_key) {
            ssize_t n = read(fd, g_key + got, sizeof g_key - got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        close(fd);
        if (got == sizeof g_key)
            return;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_REALTIME, &a);
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t seed[4] = {(uint64_t)a.tv_sec ^ (uint64_t)a.tv_nsec << 20,
                        (uint64_t)b.tv_nsec ^ (uint64_t)getpid() << 32,
                        (uint64_t)(uintptr_t)&a, (uint64_t)(uintptr_t)key_init};
    uint64_t k0 = oml_siphash24(g_key, seed, sizeof seed);
    uint64_t k1 = oml_siphash24(g_key, &k0, sizeof k0) ^ seed[1];
    memcpy(g_key, &k0, 8);
    memcpy(g_key + 8, &k1, 8);
}

void oml_idmap_set_key(const uint8_t key[16])
{
    pthread_once(&g_key_once, key_init);
    memcpy(g_key, key, sizeof g_key);
}

/* SipHash-2-4 of the bytes under the process key: ids come from clients,
 * so with an unkeyed hash they could be chosen to collide and turn every
 * lookup into a scan of one long run (hash flooding). The low 32 bits
 * index the buckets. */
static uint32_t idmap_hash(const char *key, size_t len)
{
    pthread_once(&g_key_once, key_init);
    return (uint32_t)oml_siphash24(g_key, key, len);
}

void oml_idmap_init(oml_idmap *m)
{
    m->_tab = NULL;
    m->_cap = 0;
    m->_count = 0;
}

void oml_idmap_free(oml_idmap *m)
{
    if (m == NULL)
        return;
    free(m->_tab);
    oml_idmap_init(m);
}

uint32_t oml_idmap_count(const oml_idmap *m)
{
    return m->_count;
}

/* Returns the bucket holding key, or the empty bucket where it would go. */
static uint32_t idmap_probe(const oml_idmap *m, const char *key, uint32_t len, uint32_t h)
{
    uint32_t mask = m->_cap - 1, i = h & mask;
    for (;;) {
        const oml_idmap_entry *e = &m->_tab[i];
        if (e->key == NULL)
            return i;
        if (e->len == len && memcmp(e->key, key, len) == 0)
            return i;
        i = (i + 1) & mask;
    }
}

static int idmap_rehash(oml_idmap *m, uint32_t cap)
{
    oml_idmap_entry *tab = calloc(cap, sizeof *tab);
    if (tab == NULL)
        return OML_ENOMEM;
    uint32_t mask = cap - 1;
    for (uint32_t j = 0; j < m->_cap; j++) {
        const oml_idmap_entry *e = &m->_tab[j];
        if (e->key == NULL)
            continue;
        uint32_t i = idmap_hash(e->key, e->len) & mask;
        while (tab[i].key != NULL)
            i = (i + 1) & mask;
        tab[i] = *e;
    }
    free(m->_tab);
    m->_tab = tab;
    m->_cap = cap;
    return OML_OK;
}

int oml_idmap_reserve(oml_idmap *m, uint32_t extra)
{
    uint64_t need = (uint64_t)m->_count + extra;
    uint64_t cap = m->_cap ? m->_cap : IDMAP_MIN_CAP;
    while (need > cap / 4 * 3) {
        cap *= 2;
        if (cap > IDMAP_MAX_CAP)
            return OML_EFULL;
    }
    if (cap == m->_cap)
        return OML_OK;
    return idmap_rehash(m, (uint32_t)cap);
}

int oml_idmap_get(const oml_idmap *m, const char *key, size_t len, uint32_t *value)
{
    const char *stored;
    return oml_idmap_get_key(m, key, len, &stored, value);
}

int oml_idmap_get_key(const oml_idmap *m, const char *key, size_t len, const char **stored,
                      uint32_t *value)
{
    if (m->_count == 0 || len > UINT32_MAX)
        return OML_ENOTFOUND;
    uint32_t i = idmap_probe(m, key, (uint32_t)len, idmap_hash(key, len));
    if (m->_tab[i].key == NULL)
        return OML_ENOTFOUND;
    *stored = m->_tab[i].key;
    *value = m->_tab[i].value;
    return OML_OK;
}

int oml_idmap_put(oml_idmap *m, const char *key, size_t len, uint32_t value)
{
    if (len > UINT32_MAX)
        return OML_EINVAL;
    uint32_t h = idmap_hash(key, len);
    if (m->_cap > 0) {
        uint32_t i = idmap_probe(m, key, (uint32_t)len, h);
        if (m->_tab[i].key != NULL) {
            m->_tab[i].value = value;
            return OML_OK;
        }
    }
    int rc = oml_idmap_reserve(m, 1);
    if (rc != OML_OK)
        return rc;
    uint32_t i = idmap_probe(m, key, (uint32_t)len, h);
    m->_tab[i] = (oml_idmap_entry){key, (uint32_t)len, value};
    m->_count++;
    return OML_OK;
}

int oml_idmap_del(oml_idmap *m, const char *key, size_t len)
{
    if (m->_count == 0 || len > UINT32_MAX)
        return OML_ENOTFOUND;
    uint32_t mask = m->_cap - 1;
    uint32_t hole = idmap_probe(m, key, (uint32_t)len, idmap_hash(key, len));
    if (m->_tab[hole].key == NULL)
        return OML_ENOTFOUND;
    /* Backward shift: walk the rest of the run and move back every entry whose
     * home bucket does not lie cyclically in (hole, j]. */
    uint32_t j = hole;
    for (;;) {
        j = (j + 1) & mask;
        oml_idmap_entry *e = &m->_tab[j];
        if (e->key == NULL)
            break;
        uint32_t home = idmap_hash(e->key, e->len) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->_tab[hole] = *e;
            hole = j;
        }
    }
    m->_tab[hole].key = NULL;
    m->_count--;
    return OML_OK;
}
