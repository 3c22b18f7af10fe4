/* damage.c - the codec tests' damage loop (see damage.h). */
#include "damage.h"

#include <stdlib.h>
#include <string.h>

int oml_test_damage(const uint8_t *buf, size_t len, uint64_t seed, int rounds,
                    oml_test_damage_byte byte, oml_test_damage_check check, void *arg)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL)
        abort();
    int accepted = 0;
    for (size_t bit = 0; bit < len * 8; bit++) {
        memcpy(copy, buf, len);
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        accepted += check(copy, len, arg, bit);
    }
    oml_rng r;
    oml_rng_seed(&r, seed);
    for (int k = 0; k < rounds; k++) {
        memcpy(copy, buf, len);
        int n = 1 + (int)oml_rng_below(&r, 4);
        for (int j = 0; j < n; j++) {
            size_t at = (size_t)oml_rng_below(&r, len);
            copy[at] = byte ? byte(&r, arg) : (uint8_t)oml_rng_next(&r);
        }
        check(copy, len, arg, (uint64_t)k);
    }
    free(copy);
    return accepted;
}
