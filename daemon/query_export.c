/* query_export.c - ExportModel: the serving model as a file (omld.proto,
 * format in src/snapshot.h), so a batch pipeline embeds offline exactly as
 * this view answers. Reads the view only. */
#include <stdlib.h>
#include <string.h>

#include "query_int.h"

static int run_export(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                      omld_reply *r)
{
    (void)q;
    (void)req;
    const oml_snapshot *s = omld_view_model(v);
    uint8_t *file = NULL;
    size_t len = 0;
    if (oml_snapshot_encode(s, &file, &len) != OML_OK)
        return omld__query_oom(r, "export_model");
    Omld__ExportModelResponse *resp = omld_reply_alloc(r, sizeof *resp);
    uint8_t *copy = omld_reply_alloc(r, len);
    if (resp == NULL || copy == NULL) {
        free(file);
        return omld__query_oom(r, "export_model");
    }
    memcpy(copy, file, len);
    free(file);
    omld__export_model_response__init(resp);
    resp->model.data = copy;
    resp->model.len = len;
    resp->version = s->version;
    resp->dim = (uint32_t)s->cfg.dim;
    resp->heads = (uint32_t)oml_snapshot_heads(s);
    resp->emb = (uint32_t)s->cfg.emb;
    r->msg.body_case = OMLD__RESPONSE__BODY_EXPORT_MODEL;
    r->msg.export_model = resp;
    return 0;
}

void omld_query_export_model(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                             omld_reply *r)
{
    const Omld__ExportModelRequest *m = req->export_model;
    omld__query_answer(q, live, m->model_opt_case == OMLD__EXPORT_MODEL_REQUEST__MODEL_OPT_MODEL,
                       m->model, "export_model", run_export, req, r);
}
