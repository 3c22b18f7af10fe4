/* ann_faiss.h - `oml-ann-bench N T --faiss`: the same queries on the
 * same embeddings through faiss (issue 14: "what a user would pick
 * instead"), in the same run. The index's rows and the queries, each
 * head's, go to a temporary directory as float32, with omld's exact 10
 * nearest (oml_index_topk) and its lists' answer (oml_index_topk_near);
 * tests/bench/faiss_compare.py then runs faiss's exact search (flat,
 * inner product: the same order as omld's distance on unit rows) and
 * HNSW, and prints recall@10 against omld's exact answer, build time and
 * time a query, or that the Python faiss is absent (Debian:
 * python3-faiss). */
#ifndef OML_BENCH_ANN_FAISS_H
#define OML_BENCH_ANN_FAISS_H

#include "index.h"

/* Q (n_q, heads, emb): the queries' embeddings under ix's model. Returns
 * 0, or 1 when a file could not be written or the script not run. */
int ann_faiss_report(const oml_index *ix, const float *Q, int32_t n_q);

/* What omld-bench --items shares (its exact recall writes the files the
 * same way, without the lists' answer): whether /usr/bin/python3 has
 * faiss; bytes into dir/name{h} (0, or 1 said on stderr); and
 * faiss_compare.py run on dir, which is then removed (0, or 1). */
int ann_faiss_present(void);
int ann_faiss_write(const char *dir, const char *name, int h, const void *p, size_t bytes);
int ann_faiss_compare(const char *dir, int64_t n, int32_t emb, int heads, int32_t n_q);

#endif
