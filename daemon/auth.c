/* auth.c - tokens and the Auth operation (see auth.h). */
#include "auth.h"

#include <string.h>

#include "log.h"

void omld_auth_answer(omld_local_ctx *c, const Omld__Request *req, omld_reply *r)
{
    omld_session *s = c->session;
    char *tok = req->auth ? req->auth->token : NULL;
    size_t len = tok ? strlen(tok) : 0;
    int rights = omld_tokens_check(c->tokens, tok, len);
    if (tok) {
        volatile char *v = tok;
        for (size_t i = 0; i < len; i++)
            v[i] = 0;
    }
    if (!omld_tokens_required(c->tokens)) {
        s->rights = OMLD_RIGHTS_READ_WRITE;
    } else if (rights < 0) {
        s->rights = OMLD_RIGHTS_NONE;
        s->failures++;
        omld_count(&c->metrics->auth_failed, 1);
        LOG_INFO("server", "%s: authentication failed (wrong token, %d of %d)", s->peer,
                 s->failures, OMLD_AUTH_MAX_FAILURES);
        if (s->failures >= OMLD_AUTH_MAX_FAILURES) {
            LOG_INFO("server", "%s: closing the connection after %d wrong tokens", s->peer,
                     s->failures);
            s->close = 1;
        }
        omld_reply_error(r, OMLD__STATUS__CODE__UNAUTHENTICATED, "auth.token",
                         "the token is not valid");
        return;
    } else {
        s->rights = rights ? OMLD_RIGHTS_READ_WRITE : OMLD_RIGHTS_READ_ONLY;
        omld_count(&c->metrics->auth_ok, 1);
        LOG_DEBUG("server", "%s: authenticated (%s)", s->peer, rights ? "read-write" : "read-only");
    }
    Omld__AuthResponse *a = omld_reply_alloc(r, sizeof *a);
    if (a == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    omld__auth_response__init(a);
    a->read_write = s->rights == OMLD_RIGHTS_READ_WRITE;
    r->msg.body_case = OMLD__RESPONSE__BODY_AUTH;
    r->msg.auth = a;
}
