/* json_check.c - see json_check.h. */
#include "json_check.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* ---- a strict JSON validator (RFC 8259), recursive descent ---- */

typedef struct jv {
    const char *p, *end;
    int depth;
} jv;

static void jv_ws(jv *v)
{
    while (v->p < v->end && (*v->p == ' ' || *v->p == '\t' || *v->p == '\n' || *v->p == '\r'))
        v->p++;
}

static int jv_value(jv *v);

static int jv_lit(jv *v, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(v->end - v->p) < n || memcmp(v->p, lit, n) != 0)
        return 0;
    v->p += n;
    return 1;
}

/* A string; the bytes inside must be valid UTF-8 with no raw control bytes. */
static int jv_string(jv *v)
{
    if (v->p >= v->end || *v->p != '"')
        return 0;
    v->p++;
    while (v->p < v->end) {
        unsigned char c = (unsigned char)*v->p;
        if (c == '"') {
            v->p++;
            return 1;
        }
        if (c < 0x20)
            return 0;
        if (c == '\\') {
            v->p++;
            if (v->p >= v->end)
                return 0;
            char e = *v->p++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++, v->p++)
                    if (v->p >= v->end || !isxdigit((unsigned char)*v->p))
                        return 0;
            } else if (!strchr("\"\\/bfnrt", e) || e == '\0')
                return 0;
            continue;
        }
        if (c < 0x80) {
            v->p++;
            continue;
        }
        int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (len == 0 || c > 0xF4 || v->end - v->p < len)
            return 0;
        for (int i = 1; i < len; i++)
            if (((unsigned char)v->p[i] & 0xC0) != 0x80)
                return 0;
        v->p += len;
    }
    return 0;
}

static int jv_number(jv *v)
{
    const char *s = v->p;
    if (s < v->end && *s == '-')
        s++;
    if (s >= v->end || !isdigit((unsigned char)*s))
        return 0;
    if (*s == '0')
        s++;
    else
        while (s < v->end && isdigit((unsigned char)*s))
            s++;
    if (s < v->end && *s == '.') {
        s++;
        if (s >= v->end || !isdigit((unsigned char)*s))
            return 0;
        while (s < v->end && isdigit((unsigned char)*s))
            s++;
    }
    if (s < v->end && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < v->end && (*s == '+' || *s == '-'))
            s++;
        if (s >= v->end || !isdigit((unsigned char)*s))
            return 0;
        while (s < v->end && isdigit((unsigned char)*s))
            s++;
    }
    v->p = s;
    return 1;
}

static int jv_container(jv *v, char open, char close)
{
    if (++v->depth > 64)
        return 0;
    v->p++; /* open */
    (void)open;
    jv_ws(v);
    if (v->p < v->end && *v->p == close) {
        v->p++;
        v->depth--;
        return 1;
    }
    for (;;) {
        jv_ws(v);
        if (close == '}') {
            if (!jv_string(v))
                return 0;
            jv_ws(v);
            if (v->p >= v->end || *v->p++ != ':')
                return 0;
        }
        if (!jv_value(v))
            return 0;
        jv_ws(v);
        if (v->p >= v->end)
            return 0;
        char c = *v->p++;
        if (c == close)
            break;
        if (c != ',')
            return 0;
    }
    v->depth--;
    return 1;
}

static int jv_value(jv *v)
{
    jv_ws(v);
    if (v->p >= v->end)
        return 0;
    switch (*v->p) {
    case '{': return jv_container(v, '{', '}');
    case '[': return jv_container(v, '[', ']');
    case '"': return jv_string(v);
    case 't': return jv_lit(v, "true");
    case 'f': return jv_lit(v, "false");
    case 'n': return jv_lit(v, "null");
    default: return jv_number(v);
    }
}

int oml_test_json_valid(const char *s, size_t n)
{
    jv v = {s, s + n, 0};
    if (!jv_value(&v))
        return 0;
    jv_ws(&v);
    return v.p == v.end;
}

/* Second opinion from Python's json module when python3 exists; the
 * script's exit status says whether it parsed and the checks held.
 * Returns 1 pass, 0 fail, -1 no python. */
int oml_test_python_check(const char *text, const char *script)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0)
        return -1;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 -c '%s'", script);
    FILE *f = popen(cmd, "w");
    if (!f)
        return -1;
    fputs(text, f);
    int st = pclose(f);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
