/* shard.h - which shard an item belongs to: its id's 64-bit FNV-1a hash
 * modulo the number of shards. A function of the id's bytes only, the same
 * on every machine and in every release (a shard map depends on it). */
#ifndef OML_SHARD_H
#define OML_SHARD_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t oml_shard_of(const char *id, size_t len, uint32_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)id[i];
        h *= 1099511628211ull;
    }
    return n > 1 ? (uint32_t)(h % n) : 0;
}

#endif
