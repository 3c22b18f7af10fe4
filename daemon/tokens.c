/* tokens.c - parsing, loading and checking tokens (see tokens.h). */
#include "tokens.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void omld_tokens_wipe(omld_tokens *t)
{
    volatile unsigned char *p = (volatile unsigned char *)t;
    for (size_t i = 0; i < sizeof *t; i++)
        p[i] = 0;
}

/* One "rw:SECRET" / "ro:SECRET" (len bytes at s) into t. where names the
 * source for errors; the secret itself never appears in a message. */
static int tokens_add(omld_tokens *t, const char *s, size_t len, const char *where, int idx,
                      char *err, size_t errlen)
{
    while (len > 0 && (*s == ' ' || *s == '\t'))
        s++, len--;
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r' ||
                       s[len - 1] == '\n'))
        len--;
    if (len == 0)
        return omld_config_fail(err, errlen, NULL, "%s: token %d is empty", where, idx);
    int rw;
    if (len > 3 && strncmp(s, "rw:", 3) == 0)
        rw = 1;
    else if (len > 3 && strncmp(s, "ro:", 3) == 0)
        rw = 0;
    else
        return omld_config_fail(err, errlen, NULL, "%s: token %d does not start with rw: or ro: (followed by "
                    "the secret)", where, idx);
    s += 3;
    len -= 3;
    if (len > OMLD_TOKEN_MAX)
        return omld_config_fail(err, errlen, NULL, "%s: token %d is longer than %d bytes", where, idx,
                    OMLD_TOKEN_MAX);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == ',')
            return omld_config_fail(err, errlen, NULL, "%s: token %d has a character that is not printable "
                        "ASCII (or is a comma or a blank)", where, idx);
    if (t->n >= OMLD_TOKENS_MAX)
        return omld_config_fail(err, errlen, NULL, "%s: more than %d tokens", where, OMLD_TOKENS_MAX);
    omld_token *k = &t->t[t->n++];
    memset(k->secret, 0, sizeof k->secret);
    memcpy(k->secret, s, len);
    k->len = len;
    k->read_write = rw;
    if (rw)
        t->n_rw++;
    else
        t->n_ro++;
    return 0;
}

int omld_tokens_parse_list(omld_tokens *t, const char *list, const char *where, char *err,
                             size_t errlen)
{
    int idx = 1;
    for (const char *p = list;; idx++) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (tokens_add(t, p, n, where, idx, err, errlen) != 0)
            return -1;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

int omld_tokens_load(const omld_config *c, omld_tokens *t, char *err, size_t errlen)
{
    omld_tokens_wipe(t);
    if (c->tokens[0] && omld_tokens_parse_list(t, c->tokens, "option 'tokens'", err, errlen) != 0)
        goto fail;
    if (c->tokens_file[0]) {
        FILE *f = fopen(c->tokens_file, "r");
        if (f == NULL) {
            omld_config_fail(err, errlen, NULL, "option 'tokens_file': cannot open %s: %s", c->tokens_file,
                 strerror(errno));
            goto fail;
        }
        char line[OMLD_TOKEN_MAX + 64], where[OMLD_STR_MAX + 32];
        int lineno = 0, rc = 0;
        while (rc == 0 && fgets(line, sizeof line, f)) {
            lineno++;
            snprintf(where, sizeof where, "%s:%d", c->tokens_file, lineno);
            if (strchr(line, '\n') == NULL && !feof(f)) {
                rc = omld_config_fail(err, errlen, NULL, "%s: line longer than %d bytes", where,
                          (int)sizeof line - 2);
                break;
            }
            const char *s = line;
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s == '#' || *s == '\n' || *s == '\r' || *s == '\0')
                continue;
            rc = omld_tokens_parse_list(t, s, where, err, errlen);
        }
        volatile char *vl = line;
        for (size_t i = 0; i < sizeof line; i++)
            vl[i] = 0;
        fclose(f);
        if (rc != 0)
            goto fail;
        if (t->n == 0) {
            omld_config_fail(err, errlen, NULL, "option 'tokens_file': %s holds no token", c->tokens_file);
            goto fail;
        }
    }
    return 0;
fail:
    omld_tokens_wipe(t);
    return -1;
}

int omld_tokens_check(const omld_tokens *t, const char *token, size_t len)
{
    if (t == NULL || t->n == 0)
        return 1;
    if (token == NULL || len == 0 || len > OMLD_TOKEN_MAX)
        return -1; /* depends on the length only, never on a secret */
    unsigned char cand[OMLD_TOKEN_MAX + 1];
    memset(cand, 0, sizeof cand);
    memcpy(cand, token, len);
    /* Every byte of every token is compared, whatever matches: the time
     * depends on the number of tokens only. */
    unsigned match_rw = 0, match_ro = 0;
    for (int i = 0; i < t->n; i++) {
        const omld_token *k = &t->t[i];
        unsigned diff = (unsigned)(k->len ^ len);
        for (size_t j = 0; j < sizeof cand; j++)
            diff |= (unsigned)(k->secret[j] ^ cand[j]);
        unsigned eq = (unsigned)(((uint64_t)diff - 1u) >> 63); /* 1 iff diff == 0 */
        match_rw |= eq & (unsigned)k->read_write;
        match_ro |= eq & (unsigned)!k->read_write;
    }
    volatile unsigned char *vc = cand;
    for (size_t j = 0; j < sizeof cand; j++)
        vc[j] = 0;
    return match_rw ? 1 : match_ro ? 0 : -1;
}

int omld_tokens_required(const omld_tokens *t)
{
    return t != NULL && t->n > 0;
}
