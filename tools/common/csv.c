/* csv.c - the CSV data set reader (csv.h).
 *
 * One pass with getline: each line is split in place, its label looked up in
 * (or added to) a hash table of the class names, its features parsed into a
 * growing (rows, dim) buffer. The first error stops the read. */
#include "csv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Label string -> class id: open addressing (FNV-1a), kept under half full. */
typedef struct label_map {
    int32_t *slot; /* (cap) class id + 1, 0 = empty */
    uint32_t cap;
} label_map;

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The class id of name, adding it (strdup into ds->names) if new; -1 on ENOMEM. */
static int32_t class_id(label_map *m, oml_dataset *ds, const char *name)
{
    if (2u * ((uint32_t)ds->n_classes + 1) > m->cap) {
        uint32_t cap = m->cap ? 2 * m->cap : 64;
        int32_t *slot = calloc(cap, sizeof *slot);
        char **names = realloc(ds->names, (size_t)cap / 2 * sizeof *names);
        if (slot == NULL || names == NULL) {
            free(slot);
            if (names)
                ds->names = names;
            return -1;
        }
        ds->names = names;
        for (int32_t c = 0; c < ds->n_classes; c++) {
            uint32_t i = fnv1a(ds->names[c]) & (cap - 1);
            while (slot[i])
                i = (i + 1) & (cap - 1);
            slot[i] = c + 1;
        }
        free(m->slot);
        m->slot = slot;
        m->cap = cap;
    }
    uint32_t i = fnv1a(name) & (m->cap - 1);
    for (; m->slot[i]; i = (i + 1) & (m->cap - 1))
        if (strcmp(ds->names[m->slot[i] - 1], name) == 0)
            return m->slot[i] - 1;
    if ((ds->names[ds->n_classes] = strdup(name)) == NULL)
        return -1;
    m->slot[i] = ++ds->n_classes;
    return ds->n_classes - 1;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    return s;
}

/* Splits line in place at commas into fields (cap grows); returns the count or -1. */
static int split(char *line, char ***fields, int *cap)
{
    int n = 0;
    for (char *p = line;; n++) {
        if (n == *cap) {
            int c = *cap ? 2 * *cap : 64;
            char **f = realloc(*fields, (size_t)c * sizeof *f);
            if (f == NULL)
                return -1;
            *fields = f;
            *cap = c;
        }
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        (*fields)[n] = trim(p);
        if (comma == NULL)
            return n + 1;
        p = comma + 1;
    }
}

/* 0 if s is a whole number (strtod syntax); *v gets it as a float and
 * *finite is 1, 0 for NaN or an infinity, -1 beyond float's range. */
static int parse_number(const char *s, float *v, int *finite)
{
    char *end;
    double d = strtod(s, &end);
    if (*s == '\0' || end == s || *end != '\0')
        return -1;
    *v = (float)d;
    *finite = !isfinite(d) ? 0 : isfinite(*v) ? 1 : -1;
    return 0;
}

/* A field for a message: quoted, cut to 24 bytes. */
static const char *quoted(const char *s, char *buf, size_t cap)
{
    size_t n = strlen(s);
    if (n > 24)
        snprintf(buf, cap, "\"%.24s...\"", s);
    else
        snprintf(buf, cap, "\"%s\"", s);
    return buf;
}

/* The path for a message, its tail if it is long. */
static const char *short_path(const char *path)
{
    size_t n = strlen(path);
    return n > 60 ? path + n - 60 : path;
}

int oml_csv_read(const char *path, oml_dataset *ds, oml_diag *diag)
{
    memset(ds, 0, sizeof *ds);
    const char *P = short_path(path);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return oml_diag_set(diag, OML_EIO, "csv", "cannot open %s: %s", P, strerror(errno));
    label_map map = {0};
    char *line = NULL, **fields = NULL, q[40];
    size_t lcap = 0;
    int fcap = 0, nf0 = 0, rc = OML_OK;
    long lineno = 0, first = 0; /* first: the line that fixed the field count */
    size_t rows_cap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (strlen(line) != (size_t)len) {
            rc = oml_diag_set(diag, OML_EFORMAT, "csv", "%s:%ld: a NUL byte in the line", P, lineno);
            break;
        }
        char *t = trim(line);
        if (*t == '\0' || *t == '#')
            continue;
        int nf = split(line, &fields, &fcap);
        if (nf < 0) {
            rc = OML_ENOMEM;
            break;
        }
        float v;
        int finite;
        if (nf0 == 0) {
            if (nf < 2) {
                rc = oml_diag_set(diag, OML_EFORMAT, "csv", "%s:%ld: field 2: missing (a row is "
                                  "label,f1,...,fd)", P, lineno);
                break;
            }
            nf0 = nf;
            first = lineno;
            ds->dim = nf - 1;
            int numbers = 0;
            for (int j = 1; j < nf; j++)
                numbers += parse_number(fields[j], &v, &finite) == 0;
            if (numbers == 0)
                continue; /* the header */
        }
        if (nf != nf0) {
            int j = nf < nf0 ? nf + 1 : nf0 + 1;
            rc = oml_diag_set(diag, OML_EFORMAT, "csv", "%s:%ld: field %d: %s (%d fields where "
                              "line %ld has %d)", P, lineno, j, nf < nf0 ? "missing" : "unexpected",
                              nf, first, nf0);
            break;
        }
        size_t lab = strlen(fields[0]);
        if (lab == 0 || lab > OML_CSV_LABEL_MAX) {
            rc = oml_diag_set(diag, OML_EFORMAT, "csv", "%s:%ld: field 1: %s", P, lineno,
                              lab ? "a label longer than 255 bytes" : "an empty label");
            break;
        }
        if ((size_t)ds->n == rows_cap) {
            size_t cap = rows_cap ? 2 * rows_cap : 1024;
            float *x = realloc(ds->x, cap * (size_t)ds->dim * sizeof *x);
            int32_t *y = realloc(ds->y, cap * sizeof *y);
            if (x)
                ds->x = x;
            if (y)
                ds->y = y;
            if (x == NULL || y == NULL || ds->n == INT32_MAX) {
                rc = OML_ENOMEM;
                break;
            }
            rows_cap = cap;
        }
        float *row = ds->x + (size_t)ds->n * ds->dim;
        for (int j = 1; j < nf && rc == OML_OK; j++) {
            if (fields[j][0] == '\0')
                rc = oml_diag_set(diag, OML_EFORMAT, "csv", "%s:%ld: field %d: empty, not a number",
                                  P, lineno, j + 1);
            else if (parse_number(fields[j], &row[j - 1], &finite) != 0)
                rc = oml_diag_set(diag, OML_EFORMAT, "csv", "%s:%ld: field %d: %s is not a number",
                                  P, lineno, j + 1, quoted(fields[j], q, sizeof q));
            else if (finite != 1)
                rc = oml_diag_set(diag, OML_EFORMAT, "csv", "%s:%ld: field %d: %s is %s", P,
                                  lineno, j + 1, quoted(fields[j], q, sizeof q),
                                  finite ? "beyond the range of a float" : "not finite");
        }
        if (rc != OML_OK)
            break;
        int32_t c = class_id(&map, ds, fields[0]);
        if (c < 0) {
            rc = OML_ENOMEM;
            break;
        }
        ds->y[ds->n++] = c;
    }
    if (rc == OML_OK && ferror(f))
        rc = oml_diag_set(diag, OML_EIO, "csv", "%s: read error", P);
    if (rc == OML_OK && ds->n == 0)
        rc = oml_diag_set(diag, OML_EFORMAT, "csv", "%s: no data rows%s", P,
                          nf0 ? " (only a header)" : " (empty file)");
    if (rc == OML_ENOMEM)
        oml_diag_set(diag, rc, "csv", "%s:%ld: out of memory", P, lineno);
    fclose(f);
    free(line);
    free(fields);
    free(map.slot);
    if (rc != OML_OK)
        oml_dataset_free(ds);
    return rc;
}
