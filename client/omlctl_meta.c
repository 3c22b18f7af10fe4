/* omlctl_meta.c - --meta KEY=VALUE as item metadata or as a filter
 * (omlctl_meta.h). */
#include "omlctl_meta.h"

#include <string.h>

#include "omlctl.h"

int ctl_meta_opt(ctl_meta *m, const char *cmd, int argc, char **argv, int *i)
{
    const char *v = ctl_opt(argc, argv, i, "--meta");
    if (v == NULL)
        return 0;
    char *kv = (char *)v; /* argv's own bytes */
    char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv) {
        ctl_usage_error(cmd, "--meta takes KEY=VALUE (got '%s')", v);
        return -1;
    }
    if (m->n == CTL_META_MAX) {
        ctl_usage_error(cmd, "at most %d --meta", CTL_META_MAX);
        return -1;
    }
    *eq = '\0';
    m->key[m->n] = kv;
    m->value[m->n++] = eq + 1;
    return 1;
}

void ctl_meta_items(ctl_meta *m)
{
    for (size_t i = 0; i < m->n; i++) {
        omld__key_value__init(&m->kv[i]);
        m->kv[i].key = m->key[i];
        m->kv[i].value = m->value[i];
        m->kvp[i] = &m->kv[i];
    }
}

void ctl_meta_filter(ctl_meta *m)
{
    size_t used = 0;
    m->n_cond = 0;
    for (size_t i = 0; i < m->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(m->key[j], m->key[i]) == 0;
        if (seen)
            continue;
        Omld__MetadataCondition *c = &m->cond[m->n_cond];
        omld__metadata_condition__init(c);
        c->key = m->key[i];
        c->values = &m->values[used];
        for (size_t j = i; j < m->n; j++)
            if (strcmp(m->key[j], m->key[i]) == 0)
                m->values[used++] = m->value[j];
        c->n_values = (size_t)(&m->values[used] - c->values);
        m->condp[m->n_cond++] = c;
    }
}

json_t *ctl_meta_json(ctl_meta *m)
{
    if (m->n == 0)
        return NULL;
    ctl_meta_filter(m);
    json_t *a = json_array();
    for (size_t i = 0; i < m->n_cond; i++) {
        json_t *vals = json_array();
        for (size_t j = 0; j < m->cond[i].n_values; j++)
            json_array_append_new(vals, json_string(m->cond[i].values[j]));
        json_array_append_new(a, json_pack("{s:s,s:o}", "key", m->cond[i].key, "values", vals));
    }
    return a;
}
