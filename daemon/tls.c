/* tls.c - TLS on the daemon's TCP connections (see tls.h).
 *
 * DESIGN
 * Loop thread only. Each session is an SSL object between two memory BIOs:
 * what the socket delivers is written into rbio, what SSL produces (the
 * handshake, records, alerts) is drained from wbio into uv_write. No
 * socket is ever handed to OpenSSL, so libuv keeps every wait and the
 * connection code keeps its backpressure: a write's callback runs when its
 * ciphertext is written, and uv_stream_get_write_queue_size counts
 * ciphertext.
 *
 * Reading: the socket is read while the owner reads (or while a failed
 * session drains its peer). A raw read is decrypted whole, into one
 * buffer, and handed over in one read_cb, exactly like a plain read: when
 * the owner stops reading in that callback, what stays in rbio is at most
 * a partial record, so nothing decryptable is ever stranded and resuming
 * needs no deferred delivery.
 *
 * Failures never reach the owner as plaintext: a first byte that cannot
 * start a TLS record (a plain client) gets the port's refusal in its own
 * protocol, a failed handshake gets OpenSSL's alert; both are logged with
 * the peer and counted, then a FIN is sent, the peer's bytes are dropped
 * until that is done, and read_cb sees UV_EPROTO (the owner closes).
 * TLS 1.2 minimum, no renegotiation, no session tickets (clients are
 * long-lived connections; resumption buys nothing). With tls_client_ca,
 * every handshake on both ports requires a client certificate that
 * chains to one of its CAs (mutual TLS); one without, or from another CA,
 * fails the handshake like any other (alert, log line naming why, count). */
#include "tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hostport.h"
#include "log.h"

#define RAW_READ 65536
#define RECORD_TYPE_HANDSHAKE 0x16 /* the first byte of every ClientHello */

struct omld_tls {
    SSL_CTX *ctx;
    omld_metrics *metrics;
    char raw[RAW_READ];     /* shared: each raw read goes into rbio before the next */
    char *plain;            /* shared: a raw read's plaintext, handed over at once */
    size_t plain_cap;
    int n_client_cas;       /* tls_client_ca: > 0 when clients must present a certificate */
    char about[256];
};

struct omld_tls_session {
    omld_tls *t;
    SSL *ssl;
    BIO *rbio, *wbio;       /* socket -> SSL, SSL -> socket; owned by ssl */
    uv_read_cb read_cb;
    const char *refusal;
    size_t refusal_len;
    uv_shutdown_t fin;      /* after a failure: FIN once the alert is out */
    unsigned user_reading : 1, raw_reading : 1, established : 1, first_seen : 1;
    unsigned failed : 1, fin_sent : 1, raw_eof : 1, told : 1;
    char peer[80];
};

/* A write of ciphertext; user is NULL for what the session writes itself. */
typedef struct tls_write {
    uv_write_t raw;
    uv_write_t *user;
    uv_write_cb cb;
    char *data;
} tls_write;

#define STREAM_OF(st) ((omld_stream *)(void *)(st)) /* the handle is the first member */

/* ------------------------------------------------------------ context */

/* OpenSSL's reason for the last failure (its error queue emptied). */
static const char *ssl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    if (e == 0)
        snprintf(buf, len, "no reason given");
    else
        ERR_error_string_n(e, buf, len);
    ERR_clear_error();
    return buf;
}

/* The file must exist and be readable, so the error names it plainly. */
static int check_file(const char *what, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

static void describe(omld_tls *t)
{
    X509 *cert = SSL_CTX_get0_certificate(t->ctx);
    char cn[128] = "?", until[64] = "?";
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    BIO *b = BIO_new(BIO_s_mem());
    if (b && ASN1_TIME_print(b, X509_get0_notAfter(cert)) == 1) {
        int n = BIO_read(b, until, sizeof until - 1);
        until[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
    int n = snprintf(t->about, sizeof t->about, "CN=%s, valid until %s", cn, until);
    if (t->n_client_cas > 0 && n > 0 && (size_t)n < sizeof t->about)
        snprintf(t->about + n, sizeof t->about - (size_t)n,
                 "; client certificates required (%d CA(s) in tls_client_ca)", t->n_client_cas);
}

/* An encrypted key's passphrase: never asked (no terminal to ask on);
 * noted, so the error can say why. */
static int no_passphrase(char *buf, int size, int rwflag, void *asked)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    *(int *)asked = 1;
    return 0;
}

/* Client certificates (tls_client_ca): every client must present one that
 * chains to a CA of client_ca, on both ports; the handshake fails
 * otherwise. The CAs' names are sent in the CertificateRequest, so a
 * client holding several certificates can pick. 0 or -1 with err. */
static int require_client_certs(omld_tls *t, const char *client_ca, char *err, size_t errlen)
{
    char why[256];
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
    if (names == NULL || sk_X509_NAME_num(names) == 0 ||
        SSL_CTX_load_verify_locations(t->ctx, client_ca, NULL) != 1) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        snprintf(err, errlen, "tls_client_ca %s holds no PEM CA certificate: %s", client_ca,
                 ssl_reason(why, sizeof why));
        return -1;
    }
    t->n_client_cas = sk_X509_NAME_num(names);
    SSL_CTX_set_client_CA_list(t->ctx, names); /* takes names */
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return 0;
}

int omld_tls_load(omld_tls **out, const char *cert_file, const char *key_file,
                  const char *client_ca, omld_metrics *metrics, char *err, size_t errlen)
{
    char why[256];
    if (check_file("tls_cert", cert_file, err, errlen) != 0 ||
        check_file("tls_key", key_file, err, errlen) != 0 ||
        (client_ca && client_ca[0] && check_file("tls_client_ca", client_ca, err, errlen) != 0))
        return -1;
    omld_tls *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(err, errlen, "tls: out of memory");
        return -1;
    }
    t->metrics = metrics;
    ERR_clear_error();
    t->ctx = SSL_CTX_new(TLS_server_method());
    if (t->ctx == NULL) {
        snprintf(err, errlen, "tls: %s", ssl_reason(why, sizeof why));
        goto fail;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(t->ctx, 0);
    if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_file) != 1) {
        snprintf(err, errlen, "tls_cert %s is not a PEM certificate (chain): %s", cert_file,
                 ssl_reason(why, sizeof why));
        goto fail;
    }
    /* A key that is not the certificate's fails here already (or below). */
    int asked = 0;
    SSL_CTX_set_default_passwd_cb(t->ctx, no_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(t->ctx, &asked);
    int loaded = SSL_CTX_use_PrivateKey_file(t->ctx, key_file, SSL_FILETYPE_PEM) == 1;
    SSL_CTX_set_default_passwd_cb_userdata(t->ctx, NULL);
    if (!loaded && asked) {
        ERR_clear_error();
        snprintf(err, errlen, "tls_key %s is encrypted: omld cannot ask for its passphrase; "
                 "store it decrypted, mode 0600 (openssl pkey -in %s -out FILE)", key_file,
                 key_file);
        goto fail;
    }
    if (!loaded && ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
        snprintf(err, errlen, "tls_key %s is not a PEM private key: %s", key_file,
                 ssl_reason(why, sizeof why));
        goto fail;
    }
    if (!loaded || SSL_CTX_check_private_key(t->ctx) != 1) {
        snprintf(err, errlen, "tls_key %s is not the key of the certificate in tls_cert %s: %s",
                 key_file, cert_file, ssl_reason(why, sizeof why));
        goto fail;
    }
    if (client_ca && client_ca[0] && require_client_certs(t, client_ca, err, errlen) != 0)
        goto fail;
    X509 *cert = SSL_CTX_get0_certificate(t->ctx);
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
        LOG_WARN("tls", "the certificate in tls_cert %s has expired: clients will refuse it",
                 cert_file);
    struct stat st;
    if (stat(key_file, &st) == 0 && (st.st_mode & 077) != 0)
        LOG_WARN("tls", "tls_key %s is readable by group or others (mode %04o); chmod 600 it",
                 key_file, (unsigned)(st.st_mode & 07777));
    describe(t);
    *out = t;
    return 0;
fail:
    omld_tls_free(t);
    return -1;
}

void omld_tls_free(omld_tls *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    free(t->plain);
    free(t);
}

const char *omld_tls_describe(const omld_tls *t)
{
    return t->about;
}

/* ------------------------------------------------------------ writing */

static void on_tls_write(uv_write_t *req, int status)
{
    tls_write *w = (tls_write *)req;
    free(w->data);
    if (w->cb)
        w->cb(w->user, status);
    free(w);
}

/* Writes len bytes of data (owned, taken) as one uv_write; cb (may be
 * NULL) gets user when it is done. 0 or a UV_* error (data freed, cb will
 * not run). */
static int write_raw(omld_stream *s, char *data, size_t len, uv_write_t *user, uv_write_cb cb)
{
    tls_write *w = malloc(sizeof *w);
    if (w == NULL) {
        free(data);
        return UV_ENOMEM;
    }
    w->user = user;
    w->cb = cb;
    w->data = data;
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    int rc = uv_write(&w->raw, &s->h.stream, &b, 1, on_tls_write);
    if (rc != 0) {
        free(data);
        free(w);
    }
    return rc;
}

/* Appends what SSL wrote into wbio to *buf (grown as needed). 0 or -1. */
static int drain_wbio(omld_tls_session *se, char **buf, size_t *len, size_t *cap)
{
    size_t pending = BIO_ctrl_pending(se->wbio);
    if (pending == 0)
        return 0;
    if (*len + pending > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + pending)
            c *= 2;
        char *b = realloc(*buf, c);
        if (b == NULL)
            return -1;
        *buf = b;
        *cap = c;
    }
    int n = BIO_read(se->wbio, *buf + *len, (int)pending);
    if (n > 0)
        *len += (size_t)n;
    return 0;
}

/* Sends whatever SSL produced on its own (handshake, alerts). 0 or UV_*. */
static int flush(omld_stream *s)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (drain_wbio(s->tls, &buf, &len, &cap) != 0) {
        free(buf);
        return UV_ENOMEM;
    }
    return len ? write_raw(s, buf, len, NULL, NULL) : 0;
}

int omld_stream_write(omld_stream *s, uv_write_t *req, const uv_buf_t bufs[], unsigned nbufs,
                      uv_write_cb cb)
{
    omld_tls_session *se = s->tls;
    if (se == NULL)
        return uv_write(req, &s->h.stream, bufs, nbufs, cb);
    if (!se->established || se->failed)
        return UV_EPROTO;
    char *out = NULL;
    size_t len = 0, cap = 0;
    ERR_clear_error();
    /* A record at a time, drained as it goes, so wbio never holds a copy
     * of a large answer. */
    for (unsigned i = 0; i < nbufs; i++) {
        for (size_t off = 0; off < bufs[i].len;) {
            size_t chunk = bufs[i].len - off < 16384 ? bufs[i].len - off : 16384;
            if (SSL_write(se->ssl, bufs[i].base + off, (int)chunk) != (int)chunk ||
                drain_wbio(se, &out, &len, &cap) != 0) {
                char why[160];
                LOG_DEBUG("tls", "%s: write failed: %s", se->peer, ssl_reason(why, sizeof why));
                free(out);
                return UV_EPROTO;
            }
            off += chunk;
        }
    }
    if (len == 0) { /* nothing to write: complete it on the same path */
        free(out);
        out = malloc(1);
        if (out == NULL)
            return UV_ENOMEM;
    }
    return write_raw(s, out, len, req, cb);
}

int omld_stream_shutdown(omld_stream *s, uv_shutdown_t *req, uv_shutdown_cb cb)
{
    omld_tls_session *se = s->tls;
    if (se && se->established && !se->failed) {
        ERR_clear_error();
        SSL_shutdown(se->ssl); /* close_notify, written before the FIN */
        int rc = flush(s);
        if (rc != 0)
            return rc;
    }
    return uv_shutdown(req, &s->h.stream, cb);
}

size_t omld_stream_write_queue(const omld_stream *s)
{
    return uv_stream_get_write_queue_size(&s->h.stream);
}

int omld_stream_handshaking(const omld_stream *s)
{
    return s->tls != NULL && !s->tls->established && !s->tls->failed;
}

/* ------------------------------------------------------------ reading */

static void raw_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    omld_tls *t = STREAM_OF(h)->tls->t;
    *buf = uv_buf_init(t->raw, sizeof t->raw);
}

static void raw_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/* The socket is read while the owner reads, or while a failed session
 * waits for its FIN to go out. */
static void sync_reading(omld_stream *s)
{
    omld_tls_session *se = s->tls;
    int want = (se->user_reading || se->failed) && !se->raw_eof && !uv_is_closing(&s->h.handle);
    if (want && !se->raw_reading) {
        if (uv_read_start(&s->h.stream, raw_alloc, raw_read) == 0)
            se->raw_reading = 1;
    } else if (!want && se->raw_reading) {
        uv_read_stop(&s->h.stream);
        se->raw_reading = 0;
    }
}

/* The failure reaches the owner once (it closes the connection). */
static void tell_failure(omld_stream *s)
{
    omld_tls_session *se = s->tls;
    if (se->told || uv_is_closing(&s->h.handle))
        return;
    se->told = 1;
    uv_buf_t none = uv_buf_init(NULL, 0);
    se->read_cb(&s->h.stream, UV_EPROTO, &none);
}

static void on_fin(uv_shutdown_t *req, int status)
{
    (void)status;
    tell_failure(STREAM_OF(req->handle));
}

/* The session failed: what is queued (the alert or the refusal) goes out,
 * then a FIN, then the owner is told. The peer's bytes are dropped. */
static void fail(omld_stream *s)
{
    omld_tls_session *se = s->tls;
    se->failed = 1;
    sync_reading(s);
    if (!se->fin_sent) {
        se->fin_sent = 1;
        if (uv_shutdown(&se->fin, &s->h.stream, on_fin) == 0)
            return;
    }
    tell_failure(s);
}

/* A first byte no ClientHello starts with: a plain client. It gets the
 * port's refusal in its own protocol. */
static void refuse_plain(omld_stream *s, unsigned char first)
{
    omld_tls_session *se = s->tls;
    omld_count(&se->t->metrics->tls_plaintext, 1);
    LOG_INFO("tls", "%s: not a TLS client (first byte 0x%02x); refused: this port speaks TLS",
             se->peer, first);
    char *copy = se->refusal_len ? malloc(se->refusal_len) : NULL;
    if (copy) {
        memcpy(copy, se->refusal, se->refusal_len);
        write_raw(s, copy, se->refusal_len, NULL, NULL);
    }
    fail(s);
}

/* The handshake moves on with what rbio holds. 1 when established, 0 when
 * it needs more, -1 when it failed (alert queued, logged, counted). */
static int handshake(omld_stream *s)
{
    omld_tls_session *se = s->tls;
    ERR_clear_error();
    int rc = SSL_do_handshake(se->ssl);
    int e = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(se->ssl, rc);
    flush(s);
    if (rc == 1) {
        se->established = 1;
        omld_count(&se->t->metrics->tls_handshakes, 1);
        LOG_DEBUG("tls", "%s: %s, %s", se->peer, SSL_get_version(se->ssl),
                  SSL_get_cipher_name(se->ssl));
        return 1;
    }
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    char why[200];
    omld_count(&se->t->metrics->tls_failed, 1);
    long v = SSL_get_verify_result(se->ssl);
    if (se->t->n_client_cas > 0 && v != X509_V_OK)
        LOG_INFO("tls", "%s: TLS handshake failed: the client's certificate is not trusted: %s "
                 "(tls_client_ca)", se->peer, X509_verify_cert_error_string(v));
    else if (se->t->n_client_cas > 0 && SSL_get0_peer_certificate(se->ssl) == NULL)
        LOG_INFO("tls", "%s: TLS handshake failed: no client certificate (tls_client_ca "
                 "requires one): %s", se->peer, ssl_reason(why, sizeof why));
    else
        LOG_INFO("tls", "%s: TLS handshake failed: %s", se->peer, ssl_reason(why, sizeof why));
    ERR_clear_error();
    return -1;
}

/* Decrypts every complete record in rbio into t->plain. Returns the
 * bytes, with *end set to UV_EOF (close_notify), UV_EPROTO (a bad record)
 * or 0. */
static size_t decrypt(omld_stream *s, int *end)
{
    omld_tls_session *se = s->tls;
    omld_tls *t = se->t;
    size_t len = 0;
    *end = 0;
    ERR_clear_error();
    for (;;) {
        if (t->plain_cap - len < 16384) {
            size_t cap = t->plain_cap ? t->plain_cap * 2 : 2 * RAW_READ;
            char *p = realloc(t->plain, cap);
            if (p == NULL) {
                *end = UV_ENOMEM;
                return len;
            }
            t->plain = p;
            t->plain_cap = cap;
        }
        int n = SSL_read(se->ssl, t->plain + len, (int)(t->plain_cap - len));
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        int e = SSL_get_error(se->ssl, n);
        if (e == SSL_ERROR_ZERO_RETURN) {
            *end = UV_EOF;
        } else if (e != SSL_ERROR_WANT_READ) {
            char why[200];
            LOG_INFO("tls", "%s: TLS error: %s", se->peer, ssl_reason(why, sizeof why));
            *end = UV_EPROTO;
        }
        return len;
    }
}

static void raw_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    omld_stream *s = STREAM_OF(stream);
    omld_tls_session *se = s->tls;
    if (nread == 0)
        return;
    if (nread < 0) { /* EOF or a socket error: the owner sees it as is */
        se->raw_eof = 1;
        sync_reading(s);
        if (se->failed) {
            tell_failure(s);
        } else {
            uv_buf_t none = uv_buf_init(NULL, 0);
            se->read_cb(stream, nread, &none);
        }
        return;
    }
    if (se->failed)
        return; /* dropped while the alert and the FIN go out */
    if (!se->first_seen) {
        se->first_seen = 1;
        if ((unsigned char)buf->base[0] != RECORD_TYPE_HANDSHAKE) {
            refuse_plain(s, (unsigned char)buf->base[0]);
            return;
        }
    }
    if (BIO_write(se->rbio, buf->base, (int)nread) != (int)nread) {
        fail(s);
        return;
    }
    if (!se->established) {
        int hs = handshake(s);
        if (hs < 0)
            fail(s);
        if (hs <= 0)
            return;
    }
    int end;
    size_t n = decrypt(s, &end);
    flush(s); /* anything SSL answers on its own (a key update) */
    if (n > 0) {
        uv_buf_t plain = uv_buf_init(se->t->plain, (unsigned)n);
        se->read_cb(stream, (ssize_t)n, &plain);
    }
    if (end == 0 || uv_is_closing(&s->h.handle))
        return;
    if (end == UV_EOF) {
        uv_buf_t none = uv_buf_init(NULL, 0);
        se->read_cb(stream, UV_EOF, &none);
    } else {
        fail(s);
    }
}

int omld_stream_read_start(omld_stream *s, uv_alloc_cb alloc_cb, uv_read_cb read_cb)
{
    omld_tls_session *se = s->tls;
    if (se == NULL)
        return uv_read_start(&s->h.stream, alloc_cb, read_cb);
    se->read_cb = read_cb;
    se->user_reading = 1;
    sync_reading(s);
    return se->raw_reading || se->raw_eof || se->failed ? 0 : UV_EINVAL;
}

void omld_stream_read_stop(omld_stream *s)
{
    if (s->tls == NULL) {
        uv_read_stop(&s->h.stream);
        return;
    }
    s->tls->user_reading = 0;
    sync_reading(s);
}

/* ------------------------------------------------------------ sessions */

int omld_stream_start_tls(omld_stream *s, omld_tls *t, const void *refusal, size_t refusal_len)
{
    omld_tls_session *se = calloc(1, sizeof *se);
    if (se == NULL)
        return UV_ENOMEM;
    se->t = t;
    se->refusal = refusal;
    se->refusal_len = refusal_len;
    struct sockaddr_storage a;
    int alen = (int)sizeof a;
    if (uv_tcp_getpeername(&s->h.tcp, (struct sockaddr *)&a, &alen) == 0)
        omld_addr_format(&a, se->peer, sizeof se->peer);
    else
        snprintf(se->peer, sizeof se->peer, "tcp:?");
    ERR_clear_error();
    se->ssl = SSL_new(t->ctx);
    se->rbio = BIO_new(BIO_s_mem());
    se->wbio = BIO_new(BIO_s_mem());
    if (se->ssl == NULL || se->rbio == NULL || se->wbio == NULL) {
        BIO_free(se->rbio);
        BIO_free(se->wbio);
        SSL_free(se->ssl);
        free(se);
        ERR_clear_error();
        return UV_ENOMEM;
    }
    SSL_set_bio(se->ssl, se->rbio, se->wbio); /* ssl owns both */
    SSL_set_accept_state(se->ssl);
    s->tls = se;
    return 0;
}

void omld_stream_release(omld_stream *s)
{
    if (s->tls == NULL)
        return;
    SSL_free(s->tls->ssl);
    free(s->tls);
    s->tls = NULL;
}
