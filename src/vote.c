/* vote.c - OAHU Eq. 23-25: the neighbours' vote (vote.h). Pure: no BLAS,
 * no allocation, so that the shard merge (proto/shard_merge.c, linked by
 * libomlclient) votes with the very code one node runs. */
#include "vote.h"

#include <math.h>
#include <string.h>

/* OAHU Eq. 23 (= Eq. 27) for neighbour j of one head whose k neighbours lie
 * in [d_min, d_max]; if d_max = d_min the exponent is 0/0 and we take its
 * limit for a shared distance, exp(0) = 1, i.e. S = alpha(l). */
double oml__eq23_score(float d, float d_min, float d_max, float alpha)
{
    if (!(d_max > d_min))
        return (double)alpha;
    return exp(-((double)d - (double)d_min) / ((double)d_max - (double)d_min)) * (double)alpha;
}

int oml__vote(const oml__voter *vt, const oml_neighbor *nb, const int32_t *cnt, int32_t k,
              vote_ws *ws, int32_t *label, oml_classification *out)
{
    int32_t nt = 0;
    for (int h = 0; h < vt->heads; h++) {
        const oml_neighbor *nh = nb + (size_t)h * (size_t)k;
        if (cnt[h] == 0)
            continue;
        float d_min = nh[0].dist, d_max = nh[cnt[h] - 1].dist; /* ascending */
        for (int32_t j = 0; j < cnt[h]; j++) {
            int32_t lab = vt->labels[nh[j].row];
            if (lab < 0)
                continue; /* an unlabelled neighbour votes for nothing */
            if (!ws->seen[lab]) {
                ws->seen[lab] = 1;
                ws->touched[nt++] = lab;
            }
            ws->cls[lab] += oml__eq23_score(nh[j].dist, d_min, d_max, vt->alpha[h]); /* Eq. 24 */
        }
    }
    if (nt == 0)
        return OML_EEMPTY;

    /* Eq. 25: argmax, ties to the smaller label id. */
    int32_t best = ws->touched[0];
    for (int32_t i = 1; i < nt; i++) {
        int32_t c = ws->touched[i];
        if (ws->cls[c] > ws->cls[best] || (ws->cls[c] == ws->cls[best] && c < best))
            best = c;
    }
    *label = best;
    if (out != NULL) {
        memset(out, 0, sizeof *out);
        out->label = best;
        out->score = (float)ws->cls[best];
        /* Up to 16 best non-zero classes by (score desc, label asc), by
         * repeated selection: nt <= heads * k, so this is cheap. */
        int32_t cap = (int32_t)(sizeof out->classes / sizeof out->classes[0]);
        while (out->n_classes < cap) {
            int32_t pick = -1;
            for (int32_t i = 0; i < nt; i++) {
                int32_t c = ws->touched[i];
                if (ws->seen[c] != 1 || !(ws->cls[c] > 0.0))
                    continue;
                if (pick < 0 || ws->cls[c] > ws->cls[pick]
                    || (ws->cls[c] == ws->cls[pick] && c < pick))
                    pick = c;
            }
            if (pick < 0)
                break;
            ws->seen[pick] = 2; /* taken */
            out->classes[out->n_classes].label = pick;
            out->classes[out->n_classes].score = (float)ws->cls[pick];
            out->n_classes++;
        }
    }
    for (int32_t i = 0; i < nt; i++) {
        ws->cls[ws->touched[i]] = 0.0;
        ws->seen[ws->touched[i]] = 0;
    }
    return OML_OK;
}

size_t oml__vote_ws_bytes(size_t n_labels, size_t votes)
{
    size_t touched = votes < n_labels ? votes : n_labels;
    size_t bytes = n_labels * sizeof(double) + n_labels + touched * sizeof(int32_t);
    return (bytes + 7) & ~(size_t)7;
}

void oml__vote_ws_init(vote_ws *ws, void *mem, size_t n_labels, size_t votes)
{
    ws->cls = mem;
    ws->touched = (int32_t *)(void *)(ws->cls + n_labels);
    ws->seen = (unsigned char *)(ws->touched + (votes < n_labels ? votes : n_labels));
    memset(ws->cls, 0, n_labels * sizeof(double));
    memset(ws->seen, 0, n_labels);
}
