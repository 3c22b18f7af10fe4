/* omlclient_int.h - what omlclient.c (connection, framing, the generic
 * layer) shares with omlclient_ops.c (typed operations, pipelining) and
 * omlclient_batch.c (query batches). Internal to libomlclient. */
#ifndef OMLCLIENT_INT_H
#define OMLCLIENT_INT_H

#include <sys/types.h>

#include "frame.h"
#include "omlclient.h"

struct omlc {
    int fd;
    struct ssl_st *ssl;    /* NULL: plain (omlclient_tls.c) */
    struct ssl_ctx_st *ssl_ctx;
    char tls_why[512];     /* OpenSSL's reason for the last TLS failure, with a hint */
    int tls_client_cert;   /* a client certificate is presented (omlc_tls.certfile) */
    int timeout_ms;
    int broken;            /* a transport/protocol error happened */
    int raw_outstanding;   /* raw bytes were sent and not yet passed */
    int peer_closed;       /* read() returned 0 */
    int max_pending;       /* max_frame changed; apply when the reader is empty */
    uint64_t next_id;      /* id of the next request (starts at 1) */
    uint64_t *fifo;        /* ids sent and not answered, ring buffer */
    size_t fifo_cap, fifo_head, fifo_len;
    uint32_t max_frame;
    oml_frame_reader rd;
    uint8_t *wbuf;
    size_t wcap;
    uint64_t last_version;
    omlc_totals totals;
    Omld__KeyValue *const *item_metadata; /* borrowed: every put item's (omlc_set_item_metadata) */
    size_t n_item_metadata;
};

/* omlclient.c: poll() one fd for events until timeout_ms passes. Returns
 * the revents (> 0), 0 on timeout, -1 on error. */
int omlc__wait_fd(int fd, short events, int timeout_ms);

/* omlclient_tls.c: the transport, plain or TLS. recv/send alike: > 0
 * bytes, 0 closed (recv), -1 with errno (EAGAIN: poll and retry; EPROTO:
 * a TLS failure, see omlc__io_strerror). */
ssize_t omlc__io_recv(omlc *c, void *buf, size_t len);
ssize_t omlc__io_send(omlc *c, const void *buf, size_t len);
/* 1 if decrypted bytes wait in the TLS layer (a poll would not see them). */
int omlc__io_pending(const omlc *c);
const char *omlc__io_strerror(const omlc *c, int e);
/* TLS over c->fd, verified as opt says (host: of server, for the name
 * check). 0 or OMLC_E* with err filled. */
int omlc__tls_start(omlc *c, const char *server, const char *host, const omlc_tls *opt,
                    omlc_error *err);
void omlc__tls_free(omlc *c);

/* Storage for one ItemRef (the message and its vector). */
typedef struct omlc__ref_box {
    Omld__ItemRef ref;
    Omld__Vector vec;
} omlc__ref_box;

/* b's message naming src (borrowed: its id or vector); what names it in
 * the error. 0, or OMLC_EARG with err filled. */
int omlc__ref_fill(omlc__ref_box *b, const omlc_ref *src, omlc_error *err, const char *what);
/* snprintf's "%s" of src ("" for NULL), cut to cap. */
void omlc__copy_str(char *dst, size_t cap, const char *src);

/* One query's message, borrowing ref's data and q's storage (k 0: the
 * daemon's default; model NULL: the live one; f NULL: no filter). 0, or
 * OMLC_EARG with err filled. */
int omlc__classify_body(Omld__ClassifyRequest *body, omlc__ref_box *q, const omlc_ref *ref,
                        uint32_t k, const char *model, omlc_error *err);
int omlc__retrieve_body(Omld__RetrieveRequest *body, omlc__ref_box *q, const omlc_ref *ref,
                        uint32_t k, const char *model, const omlc_retrieve_filter *f,
                        omlc_error *err);
/* One answer copied out: a classification, and up to max_hits hits (the
 * count copied is returned). */
void omlc__classify_copy(const Omld__ClassifyResponse *b, uint64_t model_version,
                         omlc_classification *out);
size_t omlc__hits_copy(const Omld__RetrieveResponse *b, omlc_hit *out, size_t max_hits);

/* Clears err (may be NULL). */
void omlc__err_clear(omlc_error *err);
/* Fills err (may be NULL) and returns code; the connection is unaffected. */
int omlc__err_set(omlc_error *err, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A transport failure: marks c broken, fills err, returns code. */
int omlc__fail(omlc *c, omlc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 0 if c can be used, else OMLC_EARG / OMLC_EIO with err filled. */
int omlc__check_usable(omlc *c, omlc_error *err);
/* A call whose OK answer must carry body `want`: *out owns it on OK, is
 * NULL on any error. */
int omlc__call_expect(omlc *c, Omld__Request *req, Omld__Response__BodyCase want,
                      Omld__Response **out, omlc_error *err);

#endif
