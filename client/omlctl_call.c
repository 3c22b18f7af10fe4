/* omlctl_call.c - `call`: any operation by its name with a JSON body, the
 * answer printed as JSON (the HTTP/JSON API's mapping, proto/pbjson.h),
 * and `get` / `delete`, stored items by id, built on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omlctl.h"
#include "omlctl_meta.h"
#include "pbjson.h"

#define BODY_MAX (64u << 20)

/* The text of FILE ('-': stdin), or NULL. */
static char *read_all(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap && cap < BODY_MAX) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (f != stdin)
        fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* Sends operation op with the JSON body text; prints the Response as JSON
 * ({"status":..., "model_version":..., "result":...}, as over HTTP). */
static int call_json(ctl *g, const char *op, const char *text)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(&omld__request__descriptor, op);
    if (f == NULL || f->type != PROTOBUF_C_TYPE_MESSAGE || strcmp(op, "auth") == 0)
        return ctl_usage_error("call", "no operation '%s' (see proto/omld.proto, or GET "
                               "/openapi.json)", op);
    json_error_t je;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL)
        return ctl_usage_error("call", "the body is not JSON: %s (line %d, column %d)", je.text,
                               je.line, je.column);
    omld_pbjson_error perr;
    ProtobufCMessage *m = omld_pbjson_read(f->descriptor, j, op, &perr);
    json_decref(j);
    if (m == NULL)
        return ctl_usage_error("call", "%s: %s", perr.field, perr.message);
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = (Omld__Request__BodyCase)f->id;
    *(ProtobufCMessage **)((char *)&req + f->offset) = m;
    omlc *c = NULL;
    int rc = ctl_connect(g, &c);
    Omld__Response *resp = NULL;
    omlc_error err;
    int e = rc == 0 ? omlc_call(c, &req, &resp, &err) : 0;
    protobuf_c_message_free_unpacked(m, NULL);
    if (rc == 0 && e != 0)
        rc = ctl_fail(op, e, &err);
    if (rc == 0) {
        json_t *out = json_object();
        json_object_set_new(out, "status", omld_pbjson_write(&resp->status->base));
        json_object_set_new(out, "model_version", json_integer((json_int_t)resp->model_version));
        const ProtobufCFieldDescriptor *rf =
            protobuf_c_message_descriptor_get_field(&omld__response__descriptor, f->id);
        const ProtobufCMessage *body =
            rf && resp->body_case == (Omld__Response__BodyCase)f->id
                ? *(ProtobufCMessage *const *)((const char *)resp + rf->offset)
                : NULL;
        if (body)
            json_object_set_new(out, "result", omld_pbjson_write(body));
        char *s = json_dumps(out, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
        puts(s ? s : "{}");
        free(s);
        json_decref(out);
        if (resp->status->code != OMLD__STATUS__CODE__OK)
            rc = CTL_EXIT_DAEMON;
    }
    omld__response__free_unpacked(resp, NULL);
    omlc_close(c);
    return rc;
}

static void call_usage(FILE *f)
{
    fprintf(f, "usage: omlctl call OPERATION [JSON | @FILE | -]\n"
               "Sends any operation of proto/omld.proto by its name with its request as JSON\n"
               "(the mapping of the HTTP/JSON API: POST /v1/OPERATION takes the same body), and\n"
               "prints the answer as JSON: {\"status\": ..., \"model_version\": ..., \"result\": ...}.\n"
               "No JSON: {}. Exit 2 when the daemon answered an error (the JSON says which).\n"
               "examples:\n"
               "  omlctl call classify '{\"query\": \"item-17\", \"k\": 5}'\n"
               "  omlctl call add_triplets @clicks.json\n");
}

int ctl_call(ctl *g, int argc, char **argv)
{
    const char *op = NULL, *body = NULL;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            call_usage(stdout);
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if (op == NULL) {
            op = argv[i];
        } else if (body == NULL) {
            body = argv[i];
        } else {
            return ctl_usage_error("call", "one OPERATION and one body ('%s')", argv[i]);
        }
    }
    if (op == NULL)
        return ctl_usage_error("call", "no OPERATION");
    char *text = NULL;
    if (body && (body[0] == '@' || strcmp(body, "-") == 0)) {
        text = read_all(body[0] == '@' ? body + 1 : body);
        if (text == NULL) {
            fprintf(stderr, "omlctl call: cannot read %s\n", body);
            return CTL_EXIT_USAGE;
        }
    }
    int rc = call_json(g, op, text ? text : body ? body : "{}");
    free(text);
    return rc;
}

/* get / delete / list / count: the command line as a JSON body (ids, and
 * for delete --missing-ok, --label and --meta, for list --cursor, --limit,
 * --label, --meta and --features, for count --label and --meta). */
static int ids_call(ctl *g, int argc, char **argv, const char *cmd, const char *op,
                    void (*usage)(FILE *))
{
    json_t *ids = json_array(), *labels = json_array(), *doc = json_object();
    int del = strcmp(op, "delete_items") == 0, cnt = strcmp(op, "count_items") == 0;
    int list = cnt || strcmp(op, "list_items") == 0; /* no ids */
    int page = list && !cnt;
    ctl_meta meta = {0};
    const char *v;
    int got;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            usage(stdout);
            json_decref(ids);
            json_decref(labels);
            json_decref(doc);
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if (del && strcmp(argv[i], "--missing-ok") == 0) {
            json_object_set_new(doc, "missing_ok", json_true());
        } else if ((del || list) && (v = ctl_opt(argc, argv, &i, "--label"))) {
            json_array_append_new(labels, json_string(v));
        } else if ((del || list) && (got = ctl_meta_opt(&meta, cmd, argc, argv, &i)) != 0) {
            if (got < 0) {
                json_decref(ids);
                json_decref(labels);
                json_decref(doc);
                return CTL_EXIT_USAGE;
            }
        } else if (page && (v = ctl_opt(argc, argv, &i, "--cursor"))) {
            json_object_set_new(doc, "cursor", json_integer(ctl_int("--cursor", v, 0, 1LL << 40)));
        } else if (page && (v = ctl_opt(argc, argv, &i, "--limit"))) {
            json_object_set_new(doc, "limit", json_integer(ctl_int("--limit", v, 1, 1 << 20)));
        } else if (page && strcmp(argv[i], "--features") == 0) {
            json_object_set_new(doc, "with_features", json_true());
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            json_decref(ids);
            json_decref(labels);
            json_decref(doc);
            return ctl_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (!list) {
            json_array_append_new(ids, json_string(argv[i]));
        }
    }
    if (!list && json_array_size(ids) == 0 && json_array_size(labels) == 0 && meta.n == 0) {
        json_decref(ids);
        json_decref(labels);
        json_decref(doc);
        return ctl_usage_error(cmd, del ? "no ID, no --label and no --meta" : "no ID");
    }
    json_t *filter = ctl_meta_json(&meta);
    if (filter != NULL)
        json_object_set_new(doc, "metadata", filter);
    if (!list)
        json_object_set_new(doc, "ids", ids);
    else
        json_decref(ids);
    if (json_array_size(labels) > 0)
        json_object_set_new(doc, "labels", labels);
    else
        json_decref(labels);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    int rc = call_json(g, op, text);
    free(text);
    return rc;
}

static void get_usage(FILE *f)
{
    fprintf(f, "usage: omlctl get ID...\n"
               "Prints the stored items (id, features, label) as JSON, in the order given.\n"
               "example:\n  omlctl get item-17 item-42\n");
}

static void delete_usage(FILE *f)
{
    fprintf(f, "usage: omlctl delete [--missing-ok] [--label L]... [--meta K=V]... [ID...]\n"
               "Deletes stored items by id, and every item with one of the --label labels\n"
               "whose metadata matches every --meta key (one of its values: --meta color=red\n"
               "--meta color=blue is color red or blue); an unknown id refuses the whole\n"
               "request (NOT_FOUND) unless --missing-ok. Prints the answer as JSON.\n"
               "examples:\n  omlctl delete item-17\n  omlctl delete --label discontinued\n"
               "  omlctl delete --meta season=2023\n");
}

static void list_usage(FILE *f)
{
    fprintf(f, "usage: omlctl list [--cursor C] [--limit N] [--label L]... [--meta K=V]...\n"
               "                   [--features]\n"
               "One page of the stored items (ids, labels and metadata; --features: their\n"
               "features too) as JSON, with next_cursor (0: the last page) and the store's\n"
               "total; --label and --meta filter as for delete.\n"
               "example:\n  omlctl list --limit 1000 --label boots --meta color=red\n");
}

static void count_usage(FILE *f)
{
    fprintf(f, "usage: omlctl count [--label L]... [--meta K=V]...\n"
               "How many stored items match the filter (as for list; none: all), as JSON:\n"
               "{\"count\": N, \"total\": ALL}.\n"
               "example:\n  omlctl count --meta color=red --meta color=blue\n");
}

int ctl_count(ctl *g, int argc, char **argv)
{
    return ids_call(g, argc, argv, "count", "count_items", count_usage);
}

int ctl_list(ctl *g, int argc, char **argv)
{
    return ids_call(g, argc, argv, "list", "list_items", list_usage);
}

int ctl_get(ctl *g, int argc, char **argv)
{
    return ids_call(g, argc, argv, "get", "get_items", get_usage);
}

int ctl_delete(ctl *g, int argc, char **argv)
{
    return ids_call(g, argc, argv, "delete", "delete_items", delete_usage);
}
