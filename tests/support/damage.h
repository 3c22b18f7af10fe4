/* damage.h - the damage loop of the codec tests: a decoder must refuse
 * every damaged encoding cleanly, or accept it as a state it can use. */
#ifndef OML_TEST_DAMAGE_H
#define OML_TEST_DAMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

/* Decodes one damaged copy (len bytes) and checks what came of it; k is
 * the bit flipped, or the round. Returns 1 if the decoder accepted it. */
typedef int (*oml_test_damage_check)(const uint8_t *copy, size_t len, void *arg, uint64_t k);

/* The value a damaged byte gets (NULL: any byte, oml_rng_next's low 8 bits). */
typedef uint8_t (*oml_test_damage_byte)(oml_rng *r, void *arg);

/* Hands check every single-bit flip of buf, then `rounds` copies with 1 to
 * 4 bytes at random places replaced (an oml_rng from seed). Returns how
 * many of the bit flips check accepted. */
int oml_test_damage(const uint8_t *buf, size_t len, uint64_t seed, int rounds,
                    oml_test_damage_byte byte, oml_test_damage_check check, void *arg);

#endif
