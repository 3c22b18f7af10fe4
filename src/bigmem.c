/* bigmem.c - address space on transparent huge pages (bigmem.h). */
#include "bigmem.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

static size_t round_up(size_t n)
{
    return (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

static void advise(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: without it, 4 KB pages */
#else
    (void)p;
    (void)bytes;
#endif
}

void *oml_bigmem_map(size_t bytes)
{
    if (bytes < OML_BIGMEM_MIN || bytes > SIZE_MAX - 2 * HUGE_PAGE)
        return NULL;
    size_t len = round_up(bytes);
    /* One huge page more, to cut a 2 MB-aligned start out of it. */
    uint8_t *raw = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    size_t head = (size_t)(p - raw), tail = HUGE_PAGE - head;
    if (head > 0)
        munmap(raw, head);
    if (tail > 0)
        munmap(p + len, tail);
    advise(p, len);
    return p;
}

void oml_bigmem_unmap(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, round_up(bytes));
}

void oml_bigmem_advise(void *p, size_t bytes)
{
    if (p == NULL || bytes < OML_BIGMEM_MIN)
        return;
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (end > start)
        advise((void *)start, end - start);
}
