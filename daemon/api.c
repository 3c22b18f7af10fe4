/* api.c - the HTTP/JSON API on the HTTP port: POST /v1/{operation} for every
 * row of the operation table (ops.h) but Auth, and GET /openapi.json.
 *
 * DESIGN. A request's JSON body is the operation's request message in
 * proto3's JSON mapping (pbjson.h); it is packed into a Request and sent
 * down the connection's gateway link (gateway.h), so it takes the RPC's own
 * path: the same dispatch, validation, limits, rights, queues and handlers.
 * The answer is the Response as JSON:
 *     {"status": {"code": "OK", "message": "", "field": ""},
 *      "model_version": 7, "result": {...the operation's response...}}
 * with "result" absent unless the code is OK, and an HTTP status from the
 * code (below). The bearer token, checked here against the configured
 * tokens, chooses the link's rights; a connection whose token changes gets
 * a new link. GET is accepted for the operations that change nothing (an
 * empty request). A body that is not JSON is MALFORMED; a JSON value that
 * does not fit the message is INVALID_ARGUMENT naming its path, in the
 * RPC's notation ("classify.features[3]"). /openapi.json describes every
 * operation from the same descriptors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "gateway.h"
#include "http_int.h"
#include "local.h"
#include "log.h"
#include "omld.pb-c.h"
#include "ops.h"
#include "pbjson.h"
#include "server.h"

#define API_PREFIX "/v1/"
#define OPENAPI_PATH "/openapi.json"

int omld_api_path(const char *path, size_t plen)
{
    size_t n = strlen(API_PREFIX);
    return (plen > n && memcmp(path, API_PREFIX, n) == 0) ||
           (plen >= strlen(OPENAPI_PATH) && memcmp(path, OPENAPI_PATH, strlen(OPENAPI_PATH)) == 0 &&
            (plen == strlen(OPENAPI_PATH) || path[strlen(OPENAPI_PATH)] == '?'));
}

/* The HTTP status of a Status.Code. */
static int http_status_of(int code)
{
    switch (code) {
    case OMLD__STATUS__CODE__OK: return 200;
    case OMLD__STATUS__CODE__NOT_FOUND: return 404;
    case OMLD__STATUS__CODE__RESOURCE_EXHAUSTED: return 429;
    case OMLD__STATUS__CODE__FRAME_TOO_LARGE: return 413;
    case OMLD__STATUS__CODE__UNAVAILABLE: return 503;
    case OMLD__STATUS__CODE__INTERNAL: return 500;
    case OMLD__STATUS__CODE__UNAUTHENTICATED: return 401;
    case OMLD__STATUS__CODE__PERMISSION_DENIED: return 403;
    case OMLD__STATUS__CODE__CONFLICT: return 409;
    case OMLD__STATUS__CODE__NOT_PRIMARY: return 421; /* Misdirected: send it to the primary */
    default: return 400; /* INVALID_ARGUMENT, WRONG_DIMENSION, NON_FINITE, MALFORMED */
    }
}

static void send_json(http_conn *c, int http, json_t *doc, int keep_alive)
{
    /* jansson allocates with malloc (no json_set_alloc_funcs anywhere), so
     * the writer's free() releases the text. */
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(doc);
    if (text == NULL) {
        omld_http_send_text(c, 500, "500 out of memory\n", 0, keep_alive);
        return;
    }
    omld_http_send_response(c, http, "application/json", text, strlen(text), 0, keep_alive);
}

/* {"status": {"code": NAME, "message": ..., "field": ...}}, answered now. */
static void send_error(http_conn *c, int code, const char *field, const char *message,
                       int keep_alive)
{
    const ProtobufCEnumValue *ev =
        protobuf_c_enum_descriptor_get_value(&omld__status__code__descriptor, code);
    json_t *doc = json_pack("{s:{s:s,s:s,s:s}}", "status", "code", ev ? ev->name : "INTERNAL",
                            "message", message, "field", field ? field : "");
    send_json(c, http_status_of(code), doc, keep_alive);
}

const omld_op *omld_api_op(const char *name, size_t len)
{
    int n = 0;
    const omld_op *ops = omld_ops(&n);
    for (int i = 0; i < n; i++)
        if (strlen(ops[i].name) == len && memcmp(ops[i].name, name, len) == 0 &&
            ops[i].body != OMLD__REQUEST__BODY_AUTH)
            return &ops[i];
    return NULL;
}

/* ------------------------------------------------------------ answering */

static void on_answer(void *arg, const uint8_t *payload, size_t n)
{
    http_conn *c = arg;
    int keep_alive = c->keep_alive;
    Omld__Response *resp = payload ? omld__response__unpack(NULL, n, payload) : NULL;
    if (resp == NULL || resp->status == NULL) {
        send_error(c, OMLD__STATUS__CODE__UNAVAILABLE, NULL,
                   payload ? "the daemon's answer could not be read"
                           : "the daemon closed the request's connection (draining?); retry",
                   keep_alive);
        omld__response__free_unpacked(resp, NULL);
        omld_http_request_done(c);
        return;
    }
    json_t *doc = json_object();
    json_object_set_new(doc, "status", omld_pbjson_write(&resp->status->base));
    json_object_set_new(doc, "model_version", json_integer((json_int_t)resp->model_version));
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&omld__response__descriptor, (unsigned)c->api_op);
    if (f && resp->body_case == (Omld__Response__BodyCase)c->api_op) {
        const ProtobufCMessage *body = *(ProtobufCMessage *const *)((const char *)resp + f->offset);
        if (body)
            json_object_set_new(doc, "result", omld_pbjson_write(body));
    }
    int http = http_status_of(resp->status->code);
    omld__response__free_unpacked(resp, NULL);
    send_json(c, http, doc, keep_alive);
    omld_http_request_done(c);
}

/* The rights the request's bearer token gives (enum omld_rights): with no
 * tokens configured every request may write. */
static int request_rights(const http_conn *c)
{
    const omld_tokens *t = c->srv->tokens;
    if (t == NULL || t->n == 0)
        return OMLD_RIGHTS_READ_WRITE;
    size_t n = 0;
    const char *v = omld_http_bearer(c, &n);
    int which = v ? omld_tokens_check(t, v, n) : -1;
    return which < 0 ? OMLD_RIGHTS_NONE : which ? OMLD_RIGHTS_READ_WRITE : OMLD_RIGHTS_READ_ONLY;
}

/* The body as JSON; with lift, its long arrays of numbers read by
 * jsonlift.c first and jansson parsing the rest (*lift then holds them;
 * when the rest does not parse, the original text is parsed again so that
 * the error is jansson's own). NULL with *jerr if the body is not JSON. */
static json_t *load_body(const char *body, size_t n, int lift, omld_jsonlift *l,
                         json_error_t *jerr)
{
    memset(l, 0, sizeof *l);
    if (n == 0)
        return json_object();
    if (lift && omld_jsonlift_init(l, body, n) == 1) {
        /* A placeholder is "\u0000..." and the body holds no \u0000 of its
         * own (else nothing is lifted), so allowing NUL admits only ours. */
        json_t *j = json_loadb(l->text, l->text_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, jerr);
        if (j != NULL)
            return j;
        omld_jsonlift_free(l);
    }
    return json_loadb(body, n, JSON_REJECT_DUPLICATES, jerr);
}

static int api_request(const omld_op *op, const char *body, size_t n, uint32_t max_frame,
                       int lift, uint8_t **out, size_t *out_len, omld_api_refusal *why)
{
    json_error_t jerr;
    omld_jsonlift l;
    json_t *j = load_body(body, n, lift, &l, &jerr);
    if (j == NULL) {
        why->code = OMLD__STATUS__CODE__MALFORMED;
        why->field[0] = '\0';
        snprintf(why->message, sizeof why->message,
                 "the body is not JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                 jerr.column);
        return -1;
    }
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&omld__request__descriptor, (unsigned)op->body);
    omld_pbjson_error err;
    ProtobufCMessage *m = omld_pbjson_read_lifted(f->descriptor, j, &l, op->name, &err);
    json_decref(j);
    omld_jsonlift_free(&l);
    if (m == NULL) {
        why->code = OMLD__STATUS__CODE__INVALID_ARGUMENT;
        snprintf(why->field, sizeof why->field, "%s", err.field);
        snprintf(why->message, sizeof why->message, "%s", err.message);
        return -1;
    }
    Omld__Request req;
    omld__request__init(&req);
    req.body_case = (Omld__Request__BodyCase)op->body;
    *(ProtobufCMessage **)((char *)&req + f->offset) = m;
    size_t size = omld__request__get_packed_size(&req);
    if (size > max_frame) {
        protobuf_c_message_free_unpacked(m, NULL);
        why->code = OMLD__STATUS__CODE__FRAME_TOO_LARGE;
        snprintf(why->field, sizeof why->field, "%s", op->name);
        snprintf(why->message, sizeof why->message,
                 "the request is %zu bytes as protobuf, above max_frame_bytes (%u): send it in "
                 "smaller batches", size, max_frame);
        return -1;
    }
    *out = malloc(size ? size : 1);
    if (*out)
        omld__request__pack(&req, *out);
    protobuf_c_message_free_unpacked(m, NULL);
    if (*out == NULL) {
        why->code = OMLD__STATUS__CODE__INTERNAL;
        why->field[0] = '\0';
        snprintf(why->message, sizeof why->message, "out of memory");
        return -1;
    }
    *out_len = size;
    return 0;
}

int omld_api_request(const omld_op *op, const char *body, size_t n, uint32_t max_frame,
                     uint8_t **out, size_t *out_len, omld_api_refusal *why)
{
    return api_request(op, body, n, max_frame, 1, out, out_len, why);
}

int omld_api_request_plain(const omld_op *op, const char *body, size_t n, uint32_t max_frame,
                           uint8_t **out, size_t *out_len, omld_api_refusal *why)
{
    return api_request(op, body, n, max_frame, 0, out, out_len, why);
}

/* The connection's link with these rights, opened (again) if needed. */
static omld_gateway_link *link_for(http_conn *c, int rights)
{
    if (c->link && (!omld_gateway_usable(c->link) || omld_gateway_rights(c->link) != rights)) {
        omld_gateway_close(c->link);
        c->link = NULL;
    }
    if (c->link == NULL &&
        omld_gateway_open(&c->link, c->srv->loop, c->srv->rpc, rights, c->srv->max_frame) != 0)
        c->link = NULL;
    return c->link;
}

static void answer_openapi(http_conn *c, int keep_alive);

void omld_api_answer(http_conn *c, const char *path, size_t plen, int keep_alive)
{
    int method = c->parser.method;
    if (!memcmp(path, OPENAPI_PATH, strlen(OPENAPI_PATH)) && plen >= strlen(OPENAPI_PATH) &&
        (plen == strlen(OPENAPI_PATH) || path[strlen(OPENAPI_PATH)] == '?')) {
        if (method != HTTP_GET) {
            omld_http_send_text(c, 405, "405 Method Not Allowed\n", 0, keep_alive);
            return;
        }
        answer_openapi(c, keep_alive);
        return;
    }
    const char *name = path + strlen(API_PREFIX);
    size_t len = plen - strlen(API_PREFIX);
    const char *q = memchr(name, '?', len);
    if (q)
        len = (size_t)(q - name);
    const omld_op *op = omld_api_op(name, len);
    if (op == NULL) {
        char msg[160];
        snprintf(msg, sizeof msg, "no operation \"%.*s\": /openapi.json lists them", (int)(len > 60 ? 60 : len), name);
        send_error(c, OMLD__STATUS__CODE__NOT_FOUND, "", msg, keep_alive);
        return;
    }
    if (method != HTTP_POST && (method != HTTP_GET || op->writes)) {
        omld_http_send_text(c, 405, op->writes ? "405 Method Not Allowed: POST\n"
                                               : "405 Method Not Allowed: POST or GET\n",
                            0, keep_alive);
        return;
    }
    int rights = request_rights(c);
    if (rights == OMLD_RIGHTS_NONE) {
        if (c->srv->unauthorized)
            atomic_fetch_add_explicit(c->srv->unauthorized, 1, memory_order_relaxed);
        send_error(c, OMLD__STATUS__CODE__UNAUTHENTICATED, "",
                   "send Authorization: Bearer TOKEN with a configured token", keep_alive);
        return;
    }
    uint8_t *payload = NULL;
    size_t n = 0;
    omld_api_refusal why;
    if (omld_api_request(op, c->body, c->body_len, c->srv->max_frame, &payload, &n, &why) != 0) {
        send_error(c, why.code, why.field, why.message, keep_alive);
        return;
    }
    omld_gateway_link *g = link_for(c, rights);
    c->api_op = op->body;
    c->keep_alive = keep_alive;
    if (g == NULL || omld_gateway_call(g, payload, n, on_answer, c) != 0) {
        free(payload);
        send_error(c, OMLD__STATUS__CODE__UNAVAILABLE, "",
                   "the RPC server takes no connection now (draining or out of resources)",
                   keep_alive);
        return;
    }
    free(payload);
    c->awaiting = 1;
}

void omld_api_conn_closed(http_conn *c)
{
    omld_gateway_close(c->link);
    c->link = NULL;
}

/* ------------------------------------------------------------- OpenAPI */

static const char *schema_name(const ProtobufCMessageDescriptor *d)
{
    return strncmp(d->name, "omld.", 5) == 0 ? d->name + 5 : d->name;
}

static json_t *schema_ref(const ProtobufCMessageDescriptor *d)
{
    char ref[200];
    snprintf(ref, sizeof ref, "#/components/schemas/%s", schema_name(d));
    return json_pack("{s:s}", "$ref", ref);
}

static void add_schema(json_t *schemas, const ProtobufCMessageDescriptor *d);

static json_t *field_schema(json_t *schemas, const ProtobufCFieldDescriptor *f)
{
    json_t *s;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        s = json_pack("{s:s,s:s}", "type", "integer", "format", "int32");
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        s = json_pack("{s:s,s:i}", "type", "integer", "minimum", 0);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        s = json_pack("{s:s,s:s}", "type", "integer", "format", "int64");
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        s = json_pack("{s:s,s:s,s:i}", "type", "integer", "format", "int64", "minimum", 0);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        s = json_pack("{s:s,s:s}", "type", "number", "format", "float");
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        s = json_pack("{s:s,s:s}", "type", "number", "format", "double");
        break;
    case PROTOBUF_C_TYPE_BOOL:
        s = json_pack("{s:s}", "type", "boolean");
        break;
    case PROTOBUF_C_TYPE_STRING:
        s = json_pack("{s:s}", "type", "string");
        break;
    case PROTOBUF_C_TYPE_BYTES:
        s = json_pack("{s:s,s:s}", "type", "string", "format", "byte");
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        json_t *names = json_array();
        for (unsigned i = 0; i < ed->n_values; i++)
            json_array_append_new(names, json_string(ed->values[i].name));
        s = json_pack("{s:s,s:o}", "type", "string", "enum", names);
        break;
    }
    default:
        add_schema(schemas, f->descriptor);
        s = schema_ref(f->descriptor);
        break;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        s = json_pack("{s:s,s:o}", "type", "array", "items", s);
    return s;
}

/* components.schemas[name of d], and of every message d refers to. */
static void add_schema(json_t *schemas, const ProtobufCMessageDescriptor *d)
{
    if (json_object_get(schemas, schema_name(d)))
        return;
    json_t *props = json_object();
    json_t *obj = json_pack("{s:s,s:o,s:b}", "type", "object", "properties", props,
                            "additionalProperties", 0);
    json_object_set_new(schemas, schema_name(d), obj); /* first: cycles stop here */
    for (unsigned i = 0; i < d->n_fields; i++)
        json_object_set_new(props, d->fields[i].name, field_schema(schemas, &d->fields[i]));
}

static json_t *answer_schema(json_t *schemas, const ProtobufCFieldDescriptor *resp)
{
    add_schema(schemas, &omld__status__descriptor);
    json_t *props = json_pack("{s:o,s:{s:s,s:s}}", "status", schema_ref(&omld__status__descriptor),
                              "model_version", "type", "integer", "format", "int64");
    if (resp) {
        add_schema(schemas, resp->descriptor);
        json_object_set_new(props, "result", schema_ref(resp->descriptor));
    }
    return json_pack("{s:s,s:o,s:[s]}", "type", "object", "properties", props, "required",
                     "status");
}

static json_t *operation(json_t *schemas, const omld_op *op, int with_body)
{
    const ProtobufCFieldDescriptor *req =
        protobuf_c_message_descriptor_get_field(&omld__request__descriptor, (unsigned)op->body);
    const ProtobufCFieldDescriptor *resp =
        protobuf_c_message_descriptor_get_field(&omld__response__descriptor, (unsigned)op->body);
    const ProtobufCMessageDescriptor *rd = req->descriptor;
    add_schema(schemas, rd);
    char summary[200];
    snprintf(summary, sizeof summary, "%s: %s (proto/omld.proto, %s)", op->name,
             op->writes ? "changes state" : "reads state", rd->short_name);
    json_t *o = json_pack(
        "{s:s,s:s,s:{s:{s:s,s:{s:{s:o}}},s:{s:s,s:{s:{s:o}}}}}", "operationId",
        with_body ? op->name : "", "summary", summary, "responses", "200", "description",
        "OK: result holds the answer", "content", "application/json", "schema",
        answer_schema(schemas, resp), "default", "description",
        "an error: status holds the code, the message and the field path", "content",
        "application/json", "schema", answer_schema(schemas, NULL));
    if (with_body) {
        json_object_set_new(o, "requestBody",
                            json_pack("{s:b,s:{s:{s:o}}}", "required", 0, "content",
                                      "application/json", "schema", schema_ref(req->descriptor)));
    } else {
        char id[80];
        snprintf(id, sizeof id, "%s_get", op->name);
        json_object_set_new(o, "operationId", json_string(id));
    }
    return o;
}

static json_t *openapi_document(void)
{
    json_t *schemas = json_object(), *paths = json_object();
    int n = 0;
    const omld_op *ops = omld_ops(&n);
    for (int i = 0; i < n; i++) {
        if (ops[i].body == OMLD__REQUEST__BODY_AUTH)
            continue;
        char path[96];
        snprintf(path, sizeof path, API_PREFIX "%s", ops[i].name);
        json_t *item = json_pack("{s:o}", "post", operation(schemas, &ops[i], 1));
        if (!ops[i].writes)
            json_object_set_new(item, "get", operation(schemas, &ops[i], 0));
        json_object_set_new(paths, path, item);
    }
    return json_pack("{s:s,s:{s:s,s:s,s:s},s:o,s:{s:o,s:{s:{s:s,s:s}}},s:[{s:[]},{}]}",
                     "openapi", "3.0.3", "info", "title", "omld", "version", OMLD_VERSION,
                     "description",
                     "omld's operations over HTTP/JSON: each is the RPC operation of the same "
                     "name (proto/omld.proto), its request and response in proto3's JSON "
                     "mapping with the .proto's field names",
                     "paths", paths, "components", "schemas", schemas, "securitySchemes",
                     "bearer", "type", "http", "scheme", "bearer", "security", "bearer");
}

static void answer_openapi(http_conn *c, int keep_alive)
{
    send_json(c, 200, openapi_document(), keep_alive);
}
