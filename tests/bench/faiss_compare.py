#!/usr/bin/python3
"""faiss_compare.py DIR N EMB HEADS NQ - omld's embeddings through faiss.

oml-ann-bench --faiss (tests/bench/ann_faiss.c) writes, for each head h,
DIR/base{h} (N x EMB float32 unit rows), DIR/queries{h} (NQ x EMB),
DIR/exact{h} and DIR/lists{h} (NQ x 10 int32: omld's exact 10 nearest and
its lists' answer; omld-bench --items writes no lists{h}: its recall is of
the daemon's retrieve, printed by itself). For each head this prints
recall@10 against omld's exact answer of omld's lists, faiss's exact search (IndexFlatIP: on unit
rows the larger inner product is the smaller distance) and faiss's HNSW
(M 32, efConstruction 40, efSearch 64 and 128; built on every core, on
head 0 only unless OML_FAISS_HNSW_HEADS says more: at 1M a build takes
minutes), with build time and the median time a query on one thread
(Python's call included), then one JSON line. Without the Python faiss
(Debian: python3-faiss) it says so and exits 0.
"""
import json
import os
import sys
import time

try:
    import faiss
    import numpy as np
except ImportError as missing:
    print(f"faiss: absent ({missing}; Debian: apt install python3-faiss)")
    print(json.dumps({"faiss": None}))
    sys.exit(0)

K = 10


def recall(found, exact):
    hits = total = 0
    for f, e in zip(found, exact):
        want = set(int(r) for r in e if r >= 0)
        hits += len(want & set(int(r) for r in f if r >= 0))
        total += len(want)
    return hits / total if total else 1.0


def per_query(index, queries):
    """Median seconds a query, one query a call, one thread."""
    times, rows = [], []
    for q in queries:
        t = time.perf_counter()
        _, found = index.search(q.reshape(1, -1), K)
        times.append(time.perf_counter() - t)
        rows.append(found[0])
    return float(np.median(times)), np.array(rows)


def main():
    d, n, emb, heads, nq = sys.argv[1], *map(int, sys.argv[2:6])
    hnsw_heads = int(os.environ.get("OML_FAISS_HNSW_HEADS", "1"))
    cores = os.cpu_count() or 1
    out = {"faiss": faiss.__version__, "heads": []}
    for h in range(heads):
        base = np.fromfile(f"{d}/base{h}", np.float32).reshape(n, emb)
        queries = np.fromfile(f"{d}/queries{h}", np.float32).reshape(nq, emb)
        exact = np.fromfile(f"{d}/exact{h}", np.int32).reshape(nq, K)
        row = {"head": h}
        line = f"head {h}: "
        if os.path.exists(f"{d}/lists{h}"):  # omld-bench --items has no head's own answer
            lists = np.fromfile(f"{d}/lists{h}", np.int32).reshape(nq, K)
            row["omld_lists_recall"] = recall(lists, exact)
            line += f"omld's lists recall@10 {row['omld_lists_recall']:.4f}; "
        faiss.omp_set_num_threads(1)
        flat = faiss.IndexFlatIP(emb)
        flat.add(base)
        row["flat_us"], found = per_query(flat, queries)
        row["flat_us"] *= 1e6
        row["flat_recall"] = recall(found, exact)
        line += (f"faiss flat {row['flat_us']:.0f} us a query, recall@10 "
                 f"{row['flat_recall']:.4f}")
        if h < hnsw_heads:
            faiss.omp_set_num_threads(cores)
            hnsw = faiss.IndexHNSWFlat(emb, 32, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = 40
            t = time.perf_counter()
            hnsw.add(base)
            row["hnsw_build_s"] = time.perf_counter() - t
            faiss.omp_set_num_threads(1)
            line += f"; faiss HNSW built in {row['hnsw_build_s']:.1f} s on {cores} thread(s)"
            for ef in (64, 128):
                hnsw.hnsw.efSearch = ef
                us, found = per_query(hnsw, queries)
                row[f"hnsw{ef}_us"], row[f"hnsw{ef}_recall"] = us * 1e6, recall(found, exact)
                line += f", efSearch {ef}: {us * 1e6:.0f} us, recall@10 {row[f'hnsw{ef}_recall']:.4f}"
            del hnsw
        print(line, flush=True)
        out["heads"].append(row)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
