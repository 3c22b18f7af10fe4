/* pq4.h - 4-bit product codes of residuals and their "fast scan" (issue 14).
 *
 * A residual r (emb floats, emb a multiple of 4) is cut into m = emb / 2
 * subspaces of 2 values; each is coded as the nearest of 16 centroids
 * (4 bits), so a row costs emb / 4 bytes (24 at emb 96, against the int8
 * codes' 96). A query q's dot product with a coded row is a sum of m table
 * entries, q's part . centroid, one table of 16 per subspace; the tables
 * are quantised to uint8 with one scale and one offset per subspace, so a
 * row's score is an integer sum of m bytes, q . r ~ bias + delta * sum.
 * The codes of 32 rows are stored together, interleaved so that one AVX2
 * byte shuffle (vpshufb) looks up 32 rows' entries for two subspaces at
 * once: the layout of André, Kermarrec and Le Scouarnec, "Cache locality
 * is not enough: high-performance nearest neighbor search with product
 * quantization fast scan" (VLDB 2015), as faiss's IVFPQFastScan uses it.
 *
 * The sums are integers, exact in any order: the portable path and the
 * AVX2 kernel give the same sums and the same hits bit for bit (replicas
 * compare answers), and the float steps (tables, their quantisation) are
 * one piece of code for both. The scores only choose which rows the int8
 * codes (code8.h) rescore with their proven bound (hlist.c): they carry
 * no bound of their own. Pure apart from oml_pq4_train's allocation; no
 * random seed (samples are strided). */
#ifndef OML_PQ4_H
#define OML_PQ4_H

#include <stddef.h>
#include <stdint.h>

#define OML_PQ4_DSUB 2   /* values a subspace */
#define OML_PQ4_K 16     /* centroids a subspace: 4 bits */
#define OML_PQ4_BLOCK 32 /* rows stored together */
/* The widest residual coded: a row's sum, up to m x 255, stays an int16. */
#define OML_PQ4_MAX_EMB 256

typedef struct oml_pq4 {
    int32_t emb, m; /* m = emb / OML_PQ4_DSUB subspaces; m 0: no codes */
    float *cent;    /* (m, OML_PQ4_K, OML_PQ4_DSUB) */
} oml_pq4;

/* A query's tables: q . r ~ bias + delta * (sum of t[j * 16 + code_j]). */
typedef struct oml_pq4_lut {
    uint8_t t[OML_PQ4_MAX_EMB / OML_PQ4_DSUB * OML_PQ4_K];
    float delta, bias;
} oml_pq4_lut;

/* Can residuals of emb values be coded? (emb a multiple of 4, at most
 * OML_PQ4_MAX_EMB) */
int oml_pq4_fits(int32_t emb);

/* Codebooks from s residuals (s, emb) (k-means in each subspace, started
 * from strided rows). OML_OK, OML_EINVAL (!oml_pq4_fits), OML_ENOMEM (pq
 * is then empty). */
int oml_pq4_train(oml_pq4 *pq, const float *sample, size_t s, int32_t emb);
void oml_pq4_free(oml_pq4 *pq); /* accepts a zeroed one */

/* Bytes of one block of OML_PQ4_BLOCK rows' codes. */
static inline size_t oml_pq4_block_bytes(const oml_pq4 *pq)
{
    return (size_t)pq->m * OML_PQ4_BLOCK / 2;
}

/* v's (emb) codes, one a subspace, into codes (m). */
void oml_pq4_codes(const oml_pq4 *pq, const float *v, uint8_t *codes);

/* Stores codes (m) as row r (< OML_PQ4_BLOCK) of block (zeroed before its
 * first row). A row's codes are spread over the whole block: a build
 * that codes rows in another order than the blocks' keeps them apart
 * first, so it does not miss the cache once a register. */
void oml_pq4_put(const oml_pq4 *pq, const uint8_t *codes, uint8_t *block, int32_t r);

/* Both: v's codes as row r of block. */
void oml_pq4_encode(const oml_pq4 *pq, const float *v, uint8_t *block, int32_t r);

/* Row r's code of subspace j in block (what oml_pq4_encode stored). */
static inline int oml_pq4_code(const uint8_t *block, int32_t j, int32_t r)
{
    uint8_t b = block[(j / 2) * 32 + (j % 2) * 16 + r % 16];
    return r < 16 ? b & 15 : b >> 4;
}

/* q's tables (q: emb). */
void oml_pq4_lut_init(const oml_pq4 *pq, const float *q, oml_pq4_lut *lut);

/* The sums of nb consecutive blocks (m subspaces) into sums (nb * 32),
 * and a bit per row (bit r of hit[b]) set where the sum is above thr
 * (-1: every row). The same in every path: AVX2 where the machine has it,
 * else portable. */
void oml_pq4_scan(const uint8_t *blocks, int32_t nb, int32_t m, const oml_pq4_lut *lut,
                  int32_t thr, uint16_t *sums, uint32_t *hit);

/* The portable path itself (tests compare it with oml_pq4_scan). */
void oml_pq4_scan_c(const uint8_t *blocks, int32_t nb, int32_t m, const oml_pq4_lut *lut,
                    int32_t thr, uint16_t *sums, uint32_t *hit);

#endif
