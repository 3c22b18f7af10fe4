/* hnswlib_check.cpp - src/hgraph.c against hnswlib (Debian libhnswlib-dev
 * 0.6.2, header-only C++) on the same rows: is the graph's poor recall on
 * the catalogue's embeddings the geometry's or our code's? Not built by
 * CMake (hnswlib is not a dependency); by hand:
 *   OML_GRAPH_DUMP=/tmp/d.bin OML_GRAPH_HEADS=1 ./build/oml-ann-bench 50000 5000 --graph
 *   gcc -O3 -Isrc -c src/hgraph.c -o /tmp/hgraph.o
 *   g++ -O3 -march=native -Isrc tests/bench/hnswlib_check.cpp /tmp/hgraph.o -o /tmp/hnswlib_check
 *   /tmp/hnswlib_check /tmp/d.bin [M [ef_construction]]
 * The dump: n, emb, queries (int32), head 0's rows (n, emb), the queries
 * (queries, emb), each query's exact 10 (int32). Times are this thread's
 * CPU clock. */
#include <hnswlib/hnswlib.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

extern "C" {
#include "hgraph.h"
}

static double cpu()
{
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : nullptr;
    int hdr[3];
    if (f == nullptr || fread(hdr, sizeof hdr, 1, f) != 1) {
        fprintf(stderr, "usage: hnswlib_check DUMP [M [EF_CONSTRUCTION]]\n");
        return 2;
    }
    int n = hdr[0], e = hdr[1], nq = hdr[2];
    std::vector<float> V((size_t)n * e), Q((size_t)nq * e);
    std::vector<int> T((size_t)nq * 10);
    if (fread(V.data(), 4, V.size(), f) != V.size() || fread(Q.data(), 4, Q.size(), f) != Q.size() ||
        fread(T.data(), 4, T.size(), f) != T.size())
        return 1;
    int M = argc > 2 ? atoi(argv[2]) : 16, efc = argc > 3 ? atoi(argv[3]) : 100;
    hnswlib::InnerProductSpace sp(e);
    hnswlib::HierarchicalNSW<float> h(&sp, n, M, efc, 1);
    double a = cpu();
    for (int i = 0; i < n; i++)
        h.addPoint(V.data() + (size_t)i * e, i);
    double b = cpu();
    oml_hgraph g;
    oml_hgraph_init(&g, e, M, efc, 1);
    double c = cpu();
    for (int i = 0; i < n; i++)
        oml_hgraph_add(&g, V.data() + (size_t)i * e);
    printf("build, CPU: hnswlib %.1f s, hgraph %.1f s\n", b - a, cpu() - c);
    oml_hgraph_ws w;
    oml_hgraph_ws_init(&w, n, 2048);
    for (int ef : {16, 64, 256, 1024, 2048}) {
        h.setEf(ef);
        long hit = 0, hit2 = 0;
        double t1 = 0, t2 = 0;
        for (int i = 0; i < nq; i++) {
            a = cpu();
            auto r = h.searchKnn(Q.data() + (size_t)i * e, 10);
            t1 += cpu() - a;
            for (; !r.empty(); r.pop())
                for (int j = 0; j < 10; j++)
                    hit += (int)r.top().second == T[(size_t)i * 10 + j];
            oml_neighbor out[10];
            a = cpu();
            int m = oml_hgraph_search(&g, nullptr, Q.data() + (size_t)i * e, 10, ef, -1, nullptr,
                                      out, &w);
            t2 += cpu() - a;
            for (int u = 0; u < m; u++)
                for (int j = 0; j < 10; j++)
                    hit2 += out[u].row == T[(size_t)i * 10 + j];
        }
        printf("ef %4d: hnswlib recall@10 %.4f, %.0f us | hgraph %.4f, %.0f us\n", ef,
               hit / (10.0 * nq), t1 / nq * 1e6, hit2 / (10.0 * nq), t2 / nq * 1e6);
    }
    oml_hgraph_ws_free(&w);
    oml_hgraph_free(&g);
    return 0;
}
