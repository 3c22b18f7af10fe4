/* bigmem.h - the large arrays of the store and the index on transparent
 * huge pages.
 *
 * A background checkpoint forks the process (daemon/persist.c), and fork
 * copies one page-table entry per 4 KB page while the learner waits: at
 * 1,000,000 items of 784 features (5 GB) that held acknowledgements for
 * 136-583 ms. On 2 MB pages the same memory has 512x fewer entries to copy
 * (oml-fork-bench). Linux gives them to regions marked MADV_HUGEPAGE when
 * its transparent_hugepage setting is "madvise" (Debian's) or "always",
 * but only as pages are first touched: memory a realloc moved keeps its
 * 4 KB pages. So the store's features are one mapping of address space
 * for the most items the store may hold, reserved once and never moved,
 * whose pages are taken as they are written. */
#ifndef OML_BIGMEM_H
#define OML_BIGMEM_H

#include <stddef.h>

/* Huge pages on (1, the default) or off (0: the mappings are advised
 * MADV_NOHUGEPAGE, so that not even "always" gives them huge pages, and
 * malloc'd blocks are left alone). The trade: a fork copies 512x fewer
 * page-table entries, but after it the first write to a huge page the
 * child still shares copies 2 MB instead of 4 KB (0.33 ms against 4.5 us
 * here), so scattered writes during a background checkpoint (updates of
 * stored items) cost more time and memory. Set it before any mapping. */
void oml_bigmem_set_huge(int on);

/* Regions under this many bytes are left to malloc, unadvised. */
#define OML_BIGMEM_MIN ((size_t)8 << 20)

/* Reserves `bytes` (>= OML_BIGMEM_MIN) of zeroed, 2 MB-aligned address
 * space, advised for huge pages, without committing memory (pages are
 * taken when first written). NULL when that is not possible (the caller
 * falls back to malloc): no address space, or an overcommit policy that
 * counts reservations. Free with oml_bigmem_unmap(p, bytes). */
void *oml_bigmem_map(size_t bytes);
void oml_bigmem_unmap(void *p, size_t bytes); /* accepts NULL */

/* Asks for huge pages on the whole 2 MB pages inside [p, p + bytes) of a
 * malloc'd block, for the pages not yet touched; regions under
 * OML_BIGMEM_MIN are left alone. Only advice: errors change nothing. */
void oml_bigmem_advise(void *p, size_t bytes);

/* The caller has read [p, p + bytes) for the last time: the whole pages
 * inside it may leave this process's resident memory where that loses
 * nothing (MADV_PAGEOUT: a file mapping's clean pages go back to the file;
 * anonymous memory without swap stays, and with swap is only swapped).
 * For a decoder reading a mapped file into memory of its own, so the two
 * do not both count at once (a checkpoint's 3.1 GB of features at a
 * million items). Only advice: errors change nothing. */
void oml_bigmem_read_done(const void *p, size_t bytes);

#endif
