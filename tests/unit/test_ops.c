/* test_ops.c - the operation table (daemon/ops.c) and dispatch
 * (daemon/dispatch.c).
 *
 * The table against the proto: every field of Request.body has exactly one
 * row of the same name and number (this fails the day an operation is added
 * to omld.proto without a row), every row a handler for its route, and the
 * write set is what the operators' guide says a read-only token cannot do.
 * Dispatch: each refusal in its order (malformed, NUL, unauthenticated,
 * read-only write, invalid with the limit it broke, draining) and each
 * route, on payloads packed here. Answer bounds by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "local.h"
#include "metrics.h"
#include "ops.h"

static const omld_limits LIM = {
    .dim = 2, .max_batch = 4, .max_k = 16, .default_k = 5, .default_threshold = 0.5f};

/* ------------------------------------------------------------ the table */

static void test_every_proto_operation_has_one_row(void **state)
{
    (void)state;
    const ProtobufCMessageDescriptor *d = &omld__request__descriptor;
    int in_body = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            continue;
        in_body++;
        const omld_op *op = omld_op_find((int)f->id);
        if (op == NULL)
            fail_msg("Request.body field %s (%u) has no row in daemon/ops.c", f->name, f->id);
        assert_string_equal(op->name, f->name);
    }
    int n;
    const omld_op *ops = omld_ops(&n);
    assert_int_equal(n, in_body); /* and no row without a field */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            assert_int_not_equal(ops[i].body, ops[j].body);
    assert_null(omld_op_find(OMLD__REQUEST__BODY__NOT_SET));
    assert_null(omld_op_find(999));
}

static void test_rows_are_consistent(void **state)
{
    (void)state;
    int n, metrics_seen = 0;
    const omld_op *ops = omld_ops(&n);
    for (int i = 0; i < n; i++) {
        const omld_op *op = &ops[i];
        switch (op->route) {
        case OMLD_ROUTE_MUTATION:
            assert_true(op->writes); /* everything the learner applies is logged */
            if (op->body != OMLD__REQUEST__BODY_CHECKPOINT)
                assert_non_null(op->handle.apply);
            break;
        case OMLD_ROUTE_QUERY:
            assert_false(op->writes);
            assert_non_null(op->handle.query);
            assert_true(op->metric >= 0 && op->metric < OMLD_Q_KINDS);
            /* the metric label is the row's name */
            assert_string_equal(omld_query_kind_name(op->metric), op->name);
            metrics_seen |= 1 << op->metric;
            break;
        case OMLD_ROUTE_INLINE:
            assert_false(op->writes);
            assert_non_null(op->handle.local);
            break;
        case OMLD_ROUTE_ADMIN:
            assert_non_null(op->handle.admin);
            break;
        case OMLD_ROUTE_CONTROL: /* a replica's own steps: only promote_replica so far */
            assert_true(op->writes && op->replica_ok);
            assert_non_null(op->handle.control);
            break;
        default:
            fail_msg("row %s: unknown route %d", op->name, (int)op->route);
        }
        if (op->route != OMLD_ROUTE_QUERY)
            assert_int_equal(op->metric, -1);
        assert_int_equal(op->before_auth, op->body == OMLD__REQUEST__BODY_AUTH);
    }
    assert_int_equal(metrics_seen, (1 << OMLD_Q_KINDS) - 1);
}

/* The operators' guide lists what a read-only token may not do; it must be
 * the table's write set, exactly. */
static void test_guide_lists_the_write_set(void **state)
{
    (void)state;
    const char *path = OML_SOURCE_DIR "/deploy/README.md";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    for (char *p = text; *p; p++)
        if (*p == '\n')
            *p = ' ';
    const char *start = strstr(text, "operations that change state (");
    assert_non_null(start);
    const char *end = strstr(start, "get `PERMISSION_DENIED`");
    assert_non_null(end);
    int n, listed = 0, writes = 0;
    const omld_op *ops = omld_ops(&n);
    for (const char *p = start; p < end; p++) {
        if (*p != '`')
            continue;
        const char *q = strchr(p + 1, '`');
        assert_non_null(q);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(q - p - 1), p + 1);
        const omld_op *op = NULL;
        for (int i = 0; i < n; i++)
            if (strcmp(ops[i].name, name) == 0)
                op = &ops[i];
        if (op == NULL || !op->writes)
            fail_msg("deploy/README.md lists %s as a write; the table does not", name);
        listed++;
        p = q;
    }
    for (int i = 0; i < n; i++)
        writes += ops[i].writes;
    assert_int_equal(listed, writes);
}

static void test_answer_bounds_by_hand(void **state)
{
    (void)state;
    const omld_answer_dims d = {.dim = 784, .heads = 3, .emb = 64, .default_k = 5};
    const uint64_t name = 255 + 8, env = 1024, cap = 1u << 30;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    const omld_op *op = omld_op_of(&req);
    /* default k: 5 neighbours x 3 heads, a score each, and the label */
    assert_int_equal(omld_op_answer_bound(op, &req, &d, cap), env + 5 * 3 * (name + 8) + name);
    c.k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
    c.k = 7;
    assert_int_equal(omld_op_answer_bound(op, &req, &d, cap), env + 7 * 3 * (name + 8) + name);
    assert_int_equal(omld_op_answer_bound(op, &req, &d, 2000), 2000); /* never above a frame */

    Omld__EmbedRequest e = OMLD__EMBED_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_EMBED;
    req.embed = &e;
    assert_int_equal(omld_op_answer_bound(omld_op_of(&req), &req, &d, cap),
                     env + 3 * (64 * 4 + 8) + 3 * 4);

    char *ids[2] = {"a", "b"};
    Omld__GetItemsRequest g = OMLD__GET_ITEMS_REQUEST__INIT;
    g.n_ids = 2;
    g.ids = ids;
    req.body_case = OMLD__REQUEST__BODY_GET_ITEMS;
    req.get_items = &g;
    assert_int_equal(omld_op_answer_bound(omld_op_of(&req), &req, &d, cap),
                     env + 2 * (784 * 4 + 2 * name + 16));

    /* A batch: every query's bound (its own k or the default) and 6 bytes
     * of field framing each. */
    Omld__ClassifyRequest cq[3], *cp[3];
    Omld__RetrieveRequest rq[3], *rp[3];
    for (int i = 0; i < 3; i++) {
        omld__classify_request__init(&cq[i]);
        omld__retrieve_request__init(&rq[i]);
        cp[i] = &cq[i];
        rp[i] = &rq[i];
    }
    cq[1].k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
    rq[1].k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
    cq[1].k = rq[1].k = 9;
    Omld__ClassifyBatchRequest cb = OMLD__CLASSIFY_BATCH_REQUEST__INIT;
    cb.queries = cp;
    cb.n_queries = 3;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY_BATCH;
    req.classify_batch = &cb;
    assert_int_equal(omld_op_answer_bound(omld_op_of(&req), &req, &d, cap),
                     env + 2 * (5 * 3 * (name + 8) + name + 6) + 9 * 3 * (name + 8) + name + 6);
    Omld__RetrieveBatchRequest rb = OMLD__RETRIEVE_BATCH_REQUEST__INIT;
    rb.queries = rp;
    rb.n_queries = 3;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE_BATCH;
    req.retrieve_batch = &rb;
    assert_int_equal(omld_op_answer_bound(omld_op_of(&req), &req, &d, cap),
                     env + (5 + 9 + 5) * (2 * name + 16) + 3 * 6);
    assert_int_equal(omld_op_answer_bound(omld_op_of(&req), &req, &d, 5000), 5000);

    req.body_case = OMLD__REQUEST__BODY_STATUS; /* small: the envelope */
    assert_int_equal(omld_op_answer_bound(omld_op_of(&req), &req, &d, cap), env);
}

/* ------------------------------------------------------------ dispatch */

typedef struct packed {
    uint8_t buf[4096];
    size_t len;
} packed;

static void pack(const Omld__Request *req, packed *p)
{
    p->len = omld__request__get_packed_size(req);
    assert_true(p->len <= sizeof p->buf);
    omld__request__pack(req, p->buf);
}

/* Dispatches p with the given connection state; checks the refusal and,
 * when refused, the answer's code (and field, if given). */
static const omld_op *expect(const packed *p, int auth_required, int rights, int draining,
                             int refusal, int code, const char *field, omld_dispatch *out)
{
    omld_dispatch_in in = {.lim = &LIM, .auth_required = auth_required, .rights = rights,
                           .draining = draining};
    int rc = omld_dispatch_payload(p->buf, p->len, &in, out);
    assert_int_equal(rc, refusal);
    assert_int_equal(out->refused, refusal);
    const omld_op *op = out->op;
    if (refusal != OMLD_ROUTED) {
        assert_null(op);
        assert_int_equal(out->reply.status.code, code);
        if (field)
            assert_string_equal(out->reply.status.field, field);
    } else {
        assert_non_null(op);
        assert_true(out->cost >= 1);
    }
    return op;
}

static void release(omld_dispatch *d)
{
    omld_reply_free(&d->reply);
    if (d->req)
        omld__request__free_unpacked(d->req, NULL);
}

static void test_dispatch_refusals_in_order(void **state)
{
    (void)state;
    omld_dispatch d;
    packed p;
    /* Not a Request: a field 1 (request_id) with wire type 7. */
    p.buf[0] = 0x0f;
    p.len = 1;
    expect(&p, 0, 0, 0, OMLD_REFUSED_MALFORMED, OMLD__STATUS__CODE__MALFORMED, NULL, &d);
    assert_null(d.req);
    assert_int_equal(d.reply.msg.request_id, 0);
    release(&d);

    /* A put of 5 items (max_batch 4), one id with a NUL inside. */
    float x[2] = {1, 2};
    Omld__Item items[5], *ip[5];
    char id0[] = "a\0b";
    for (int i = 0; i < 5; i++) {
        omld__item__init(&items[i]);
        items[i].id = i == 0 ? id0 : "x";
        items[i].n_features = 2;
        items[i].features = x;
        ip[i] = &items[i];
    }
    Omld__PutItemsRequest put = OMLD__PUT_ITEMS_REQUEST__INIT;
    put.n_items = 5;
    put.items = ip;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.request_id = 42;
    req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    req.put_items = &put;
    /* protobuf-c packs a C string up to its NUL: splice the 3 bytes in by
     * packing "a?b" and patching the '?'. */
    id0[1] = '?';
    pack(&req, &p);
    uint8_t *q = memmem(p.buf, p.len, "a?b", 3);
    assert_non_null(q);
    q[1] = 0;
    /* The NUL is refused first, even before authentication. */
    expect(&p, 1, OMLD_RIGHTS_NONE, 0, OMLD_REFUSED_NUL, OMLD__STATUS__CODE__INVALID_ARGUMENT,
           "put_items.items.id", &d);
    assert_int_equal(d.reply.msg.request_id, 42);
    release(&d);

    items[0].id = "a";
    pack(&req, &p);
    expect(&p, 1, OMLD_RIGHTS_NONE, 0, OMLD_REFUSED_UNAUTHENTICATED,
           OMLD__STATUS__CODE__UNAUTHENTICATED, NULL, &d);
    release(&d);
    expect(&p, 1, OMLD_RIGHTS_READ_ONLY, 0, OMLD_REFUSED_PERMISSION,
           OMLD__STATUS__CODE__PERMISSION_DENIED, "put_items", &d);
    release(&d);
    /* Read-write, or no tokens: the batch is too large. */
    expect(&p, 1, OMLD_RIGHTS_READ_WRITE, 0, OMLD_REFUSED_INVALID,
           OMLD__STATUS__CODE__INVALID_ARGUMENT, "put_items.items", &d);
    assert_true(d.over_batch);
    assert_false(d.over_k);
    release(&d);
    put.n_items = 4;
    items[1].id = "b", items[2].id = "c", items[3].id = "d";
    pack(&req, &p);
    const omld_op *op = expect(&p, 0, 0, 0, OMLD_ROUTED, 0, NULL, &d);
    assert_string_equal(op->name, "put_items");
    assert_int_equal(op->route, OMLD_ROUTE_MUTATION);
    assert_int_equal(d.cost, 4);
    release(&d);
    /* Draining: refused, whatever it is... */
    expect(&p, 0, 0, 1, OMLD_REFUSED_DRAINING, OMLD__STATUS__CODE__UNAVAILABLE, NULL, &d);
    release(&d);
}

static void test_dispatch_routes_reads_and_auth(void **state)
{
    (void)state;
    omld_dispatch d;
    packed p;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ItemRef ref = OMLD__ITEM_REF__INIT;
    ref.ref_case = OMLD__ITEM_REF__REF_ID;
    ref.id = "a";
    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    c.query = &ref;
    c.k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
    c.k = 17; /* max_k 16 */
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    pack(&req, &p);
    expect(&p, 0, 0, 0, OMLD_REFUSED_INVALID, OMLD__STATUS__CODE__INVALID_ARGUMENT, "classify.k",
           &d);
    assert_true(d.over_k);
    release(&d);
    c.k = 16;
    pack(&req, &p);
    /* A read-only token may query. */
    const omld_op *op = expect(&p, 1, OMLD_RIGHTS_READ_ONLY, 0, OMLD_ROUTED, 0, NULL, &d);
    assert_int_equal(op->route, OMLD_ROUTE_QUERY);
    assert_int_equal(op->metric, OMLD_Q_CLASSIFY);
    release(&d);

    /* A batch of queries: max_batch applies to the queries, max_k to
     * each (the largest is the one noted), and a read-only token may send
     * it. */
    Omld__ClassifyRequest cq[5], *cp[5];
    for (int i = 0; i < 5; i++) {
        omld__classify_request__init(&cq[i]);
        cq[i].query = &ref;
        cp[i] = &cq[i];
    }
    Omld__ClassifyBatchRequest cb = OMLD__CLASSIFY_BATCH_REQUEST__INIT;
    cb.queries = cp;
    cb.n_queries = 5; /* max_batch 4 */
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY_BATCH;
    req.classify_batch = &cb;
    pack(&req, &p);
    expect(&p, 0, 0, 0, OMLD_REFUSED_INVALID, OMLD__STATUS__CODE__INVALID_ARGUMENT,
           "classify_batch.queries", &d);
    assert_true(d.over_batch);
    assert_false(d.over_k);
    release(&d);
    cb.n_queries = 4;
    cq[2].k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
    cq[2].k = 17;
    pack(&req, &p);
    expect(&p, 0, 0, 0, OMLD_REFUSED_INVALID, OMLD__STATUS__CODE__INVALID_ARGUMENT,
           "classify_batch.queries[2].k", &d);
    assert_true(d.over_k);
    assert_false(d.over_batch);
    release(&d);
    cq[2].k = 16;
    pack(&req, &p);
    op = expect(&p, 1, OMLD_RIGHTS_READ_ONLY, 0, OMLD_ROUTED, 0, NULL, &d);
    assert_string_equal(op->name, "classify_batch");
    assert_int_equal(op->route, OMLD_ROUTE_QUERY);
    assert_int_equal(op->metric, OMLD_Q_CLASSIFY_BATCH);
    assert_int_equal(d.cost, 4);
    release(&d);

    /* Auth is the one operation allowed before authenticating. */
    Omld__AuthRequest a = OMLD__AUTH_REQUEST__INIT;
    a.token = "secret";
    req.body_case = OMLD__REQUEST__BODY_AUTH;
    req.auth = &a;
    pack(&req, &p);
    op = expect(&p, 1, OMLD_RIGHTS_NONE, 0, OMLD_ROUTED, 0, NULL, &d);
    assert_int_equal(op->route, OMLD_ROUTE_INLINE);
    release(&d);

    /* Status and Health still answer while draining. */
    Omld__StatusRequest st = OMLD__STATUS_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_STATUS;
    req.status = &st;
    pack(&req, &p);
    op = expect(&p, 0, 0, 1, OMLD_ROUTED, 0, NULL, &d);
    assert_string_equal(op->name, "status");
    release(&d);

    /* An operation this daemon does not know (field 99, an empty message). */
    p.buf[0] = (uint8_t)(((99 << 3 | 2) & 0x7f) | 0x80);
    p.buf[1] = (99 << 3 | 2) >> 7;
    p.buf[2] = 0;
    p.len = 3;
    expect(&p, 0, 0, 0, OMLD_REFUSED_INVALID, OMLD__STATUS__CODE__INVALID_ARGUMENT, "body", &d);
    release(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_proto_operation_has_one_row),
        cmocka_unit_test(test_rows_are_consistent),
        cmocka_unit_test(test_guide_lists_the_write_set),
        cmocka_unit_test(test_answer_bounds_by_hand),
        cmocka_unit_test(test_dispatch_refusals_in_order),
        cmocka_unit_test(test_dispatch_routes_reads_and_auth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
