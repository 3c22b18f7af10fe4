/* bigmem.c - address space on transparent huge pages (bigmem.h). */
#include "bigmem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

static atomic_int huge_on = 1;

void oml_bigmem_set_huge(int on)
{
    atomic_store(&huge_on, on != 0);
}

static size_t round_up(size_t n)
{
    return (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

/* advice: where it fails, the kernel's default pages */
static void advise(void *p, size_t bytes, int huge)
{
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    (void)madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
    (void)p;
    (void)bytes;
    (void)huge;
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
    advise(p, len, atomic_load(&huge_on));
    return p;
}

void oml_bigmem_unmap(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, round_up(bytes));
}

void oml_bigmem_advise(void *p, size_t bytes)
{
    if (p == NULL || bytes < OML_BIGMEM_MIN || !atomic_load(&huge_on))
        return;
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (end > start)
        advise((void *)start, end - start, 1);
}

void oml_bigmem_read_done(const void *p, size_t bytes)
{
#ifdef MADV_PAGEOUT
    size_t page = 4096;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t b = ((uintptr_t)p + bytes) & ~(uintptr_t)(page - 1);
    if (p != NULL && b > a)
        (void)madvise((void *)a, b - a, MADV_PAGEOUT);
#else
    (void)p;
    (void)bytes;
#endif
}
