/* rng.c - xoshiro256** seeded through splitmix64. */
#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void oml_rng_seed(oml_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

uint64_t oml_rng_next(oml_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t oml_rng_below(oml_rng *r, uint64_t n)
{
    /* Reject the top partial bucket so every value is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = oml_rng_next(r);
    } while (x >= limit);
    return x % n;
}

float oml_rng_uniform(oml_rng *r)
{
    return (float)(oml_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float oml_rng_normal(oml_rng *r)
{
    double u1 = ((double)(oml_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(oml_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
