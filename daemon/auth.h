/* auth.h - who may do what: the daemon's tokens and the Auth operation.
 *
 * Tokens come from the options `tokens` and `tokens_file`, each rw:SECRET
 * or ro:SECRET. With any token configured every connection must send Auth
 * before anything else (dispatch.c answers UNAUTHENTICATED), and a
 * read-only connection is refused every operation whose row in the
 * operation table writes (PERMISSION_DENIED). Tokens are compared in
 * constant time and never logged; the token bytes of a decoded Auth are
 * wiped once checked; three wrong tokens close the connection. */
#ifndef OMLD_AUTH_H
#define OMLD_AUTH_H

#include <stddef.h>

#include "local.h"
#include "tokens.h"

#define OMLD_AUTH_MAX_FAILURES 3 /* wrong tokens before the connection is closed */

/* The handler of the Auth row (loop thread): checks the token against
 * c->tokens, wipes it, sets c->session's rights and answers; the third
 * wrong token sets c->session->close. */
void omld_auth_answer(omld_local_ctx *c, const Omld__Request *req, omld_reply *r);

#endif
