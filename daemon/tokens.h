/* tokens.h - the daemon's authorisation tokens: parsed from the options
 * `tokens` and `tokens_file` (rw:SECRET or ro:SECRET each), compared in
 * constant time, never logged, wiped at exit. What a token allows is
 * auth.h's. */
#ifndef OMLD_TOKENS_H
#define OMLD_TOKENS_H

#include <stddef.h>

#include "options.h"

#define OMLD_TOKEN_MAX 255  /* bytes of one secret */
#define OMLD_TOKENS_MAX 64

typedef struct omld_token {
    unsigned char secret[OMLD_TOKEN_MAX + 1]; /* zero-padded: compared whole */
    size_t len;
    int read_write;                           /* 1 rw, 0 ro */
} omld_token;

typedef struct omld_tokens {
    int n, n_rw, n_ro;
    omld_token t[OMLD_TOKENS_MAX];
} omld_tokens;

/* Reads c->tokens and c->tokens_file into t (t->n == 0: none configured,
 * authorisation off). 0, or -1 with err naming the option / file:line and
 * the token's position, never its secret. */
int omld_tokens_load(const omld_config *c, omld_tokens *t, char *err, size_t errlen);
/* Which token `token` (len bytes, not NUL-terminated) is, in time that does
 * not depend on the secrets: 1 read-write, 0 read-only, -1 none. With no
 * tokens configured (t NULL or empty) every token is read-write. */
int omld_tokens_check(const omld_tokens *t, const char *token, size_t len);
/* Zeroes t (secrets included) in a way the compiler keeps. */
void omld_tokens_wipe(omld_tokens *t);

/* A comma-separated list of tokens into t (where names the source in
 * errors). 0, or -1 with err. */
int omld_tokens_parse_list(omld_tokens *t, const char *list, const char *where, char *err,
                           size_t errlen);

/* 1 if t holds a token: every connection must then authenticate. */
int omld_tokens_required(const omld_tokens *t);

#endif
