/* omlctl_meta.h - the --meta KEY=VALUE options (omld.proto METADATA).
 *
 * On put they are every item's metadata; on list, delete, count and
 * retrieve a filter: each key's values are a set (--meta color=red --meta
 * color=blue: color in [red, blue]) and the keys are ANDed. The strings
 * point into argv (the '=' is overwritten with a NUL). */
#ifndef OMLCTL_META_H
#define OMLCTL_META_H

#include <jansson.h>

#include "omlclient.h"

#define CTL_META_MAX 64

typedef struct ctl_meta {
    size_t n;                                   /* pairs given */
    char *key[CTL_META_MAX], *value[CTL_META_MAX];
    /* as an item's metadata (ctl_meta_items) */
    Omld__KeyValue kv[CTL_META_MAX];
    Omld__KeyValue *kvp[CTL_META_MAX];
    /* as a filter (ctl_meta_filter): one condition per distinct key */
    Omld__MetadataCondition cond[CTL_META_MAX];
    Omld__MetadataCondition *condp[CTL_META_MAX];
    char *values[CTL_META_MAX];                 /* the conditions' values, grouped by key */
    size_t n_cond;
} ctl_meta;

/* Takes --meta at argv[*i]: 1 if taken, 0 if argv[*i] is not --meta, -1
 * on a usage error (printed; cmd names the command). */
int ctl_meta_opt(ctl_meta *m, const char *cmd, int argc, char **argv, int *i);

/* The pairs as KeyValues (m->kvp, m->n of them). */
void ctl_meta_items(ctl_meta *m);

/* The pairs as a filter (m->condp, m->n_cond conditions). */
void ctl_meta_filter(ctl_meta *m);

/* The filter as the JSON API's "metadata" array (new reference), or NULL
 * when no --meta was given. */
json_t *ctl_meta_json(ctl_meta *m);

#endif
