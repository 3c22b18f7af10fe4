/* mem.h - advice to the kernel about large allocations. */
#ifndef OML_MEM_H
#define OML_MEM_H

#include <stddef.h>

/* Asks for transparent huge pages on the 2 MiB-aligned part of [p, p + n)
 * (Linux MADV_HUGEPAGE; Debian's THP mode is "madvise", so without it the
 * item store and the index are 4 KiB pages). A 2 MiB page takes one page
 * table entry where 512 small ones take 512: fork() (the background
 * checkpoint) copies that many fewer, and scans over the rows miss the TLB
 * less. Advice only: ignored where huge pages are off, never an error. */
void oml_advise_huge(void *p, size_t n);

#endif
