/* test_bigmem.c - the store's address space on huge pages (bigmem.h): the
 * kernel really backs an advised mapping with 2 MB pages, and not once the
 * huge_pages option turns them off; the mapping is zeroed, aligned and
 * usable either way. Where the kernel has no transparent huge pages
 * ("never"), only the last part is checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bigmem.h"

#define BYTES ((size_t)32 << 20)

/* 1 when the kernel gives huge pages to advised regions. */
static int thp_available(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = {0};
    int ok = f && fgets(line, sizeof line, f) && strstr(line, "[never]") == NULL;
    if (f)
        fclose(f);
    return ok;
}

/* A field (kB) of the mapping that holds p, from /proc/self/smaps. */
static long smaps_kb_at(const void *p, const char *field)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    unsigned long lo = 0, hi = 0;
    int in = 0;
    long kb = -1, v;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && strncmp(line, field, strlen(field)) == 0 &&
                 sscanf(line + strlen(field), ": %ld kB", &v) == 1)
            kb = v;
    }
    if (f)
        fclose(f);
    return kb;
}

static long huge_kb_at(const void *p)
{
    return smaps_kb_at(p, "AnonHugePages");
}

/* /proc/vmstat's thp_fault_fallback: huge page faults the kernel served
 * with 4 KB pages (no 2 MB page free), -1 when not known. */
static long thp_fallbacks(void)
{
    FILE *f = fopen("/proc/vmstat", "r");
    char line[128];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "thp_fault_fallback %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

static void check_mapping(int huge)
{
    oml_bigmem_set_huge(huge);
    unsigned char *p = oml_bigmem_map(BYTES);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % ((uintptr_t)2 << 20), 0);
    for (size_t i = 0; i < BYTES; i += 4096)
        assert_int_equal(p[i], 0);
    long fallbacks = thp_fallbacks();
    memset(p, 0x5a, BYTES);
    long kb = huge_kb_at(p);
    if (thp_available()) {
        assert_true(kb >= 0);
        if (huge) /* at least one of the 16, unless the kernel had none free */
            assert_true(kb >= 2048 || thp_fallbacks() > fallbacks);
        else
            assert_int_equal(kb, 0);
    }
    assert_int_equal(p[BYTES - 1], 0x5a);
    oml_bigmem_unmap(p, BYTES);
    oml_bigmem_set_huge(1);
}

static void test_huge_pages_on(void **state)
{
    (void)state;
    check_mapping(1);
}

static void test_huge_pages_off(void **state)
{
    (void)state;
    check_mapping(0);
}

/* Below OML_BIGMEM_MIN there is no mapping: the store uses malloc. */
static void test_small_is_refused(void **state)
{
    (void)state;
    assert_null(oml_bigmem_map(OML_BIGMEM_MIN - 1));
    assert_null(oml_bigmem_map(0));
    oml_bigmem_unmap(NULL, BYTES); /* accepted */
}

/* oml_bigmem_read_done: a file mapping's pages read for the last time
 * leave the process (the mapping's Rss falls) and read back the same from
 * the file; a partial page at either end stays; anonymous memory keeps its
 * bytes. */
static void test_read_done(void **state)
{
    (void)state;
    enum { N = 8 << 20 };
    char path[] = "/tmp/omld-test-bigmem-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    unsigned char *buf = malloc(N);
    assert_non_null(buf);
    for (size_t i = 0; i < N; i++)
        buf[i] = (unsigned char)(i * 7 + i / 4096);
    assert_int_equal(write(fd, buf, N), N);
    assert_int_equal(fsync(fd), 0); /* clean pages, as a checkpoint's are (dirty ones wait for writeback) */
    unsigned char *m = mmap(NULL, N, PROT_READ, MAP_PRIVATE, fd, 0);
    assert_true(m != MAP_FAILED);
    assert_memory_equal(m, buf, N); /* every page read in */
    long before = smaps_kb_at(m, "Rss");
    assert_true(before >= N / 1024 / 2);
    oml_bigmem_read_done(m + 100, N - 200); /* the first and last pages are partial */
    long after = smaps_kb_at(m, "Rss");
    print_message("Rss of the mapping %ld kB, after read_done %ld kB\n", before, after);
#ifdef MADV_PAGEOUT
    if (madvise(m, 4096, MADV_PAGEOUT) == 0) /* the kernel has it */
        assert_true(after <= 8 && after < before);
#endif
    assert_memory_equal(m, buf, N);
    munmap(m, N);
    close(fd);

    unsigned char *anon = malloc(N);
    assert_non_null(anon);
    memcpy(anon, buf, N);
    oml_bigmem_read_done(anon, N);
    assert_memory_equal(anon, buf, N);
    free(anon);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_pages_on),
        cmocka_unit_test(test_huge_pages_off),
        cmocka_unit_test(test_small_is_refused),
        cmocka_unit_test(test_read_done),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
