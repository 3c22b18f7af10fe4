/* omlclient_tls.c - libomlclient's transport: the socket as is, or TLS
 * over it (omlc_connect_tls), behind recv/send-like calls that
 * omlclient.c's poll loops use unchanged.
 *
 * DESIGN
 * OpenSSL drives the non-blocking socket itself (SSL_set_fd): a call that
 * would block comes back as EAGAIN, and the caller polls as it does for a
 * plain socket. Partial writes and a moving write buffer are allowed, so
 * SSL_write behaves like send(). The daemon is verified against cafile
 * (or the system's store) and the host of "HOST:PORT" (or server_name): a
 * DNS name is checked against the certificate's names and sent as SNI, an
 * IP address against its IP addresses. A failure says why (OpenSSL's
 * verify result), and whether the daemon spoke plain. A client certificate
 * (certfile, keyfile) is presented when given, for a daemon with
 * tls_client_ca; its alerts refusing one are explained (client_cert_hint).
 * OpenSSL writes with
 * write(), not send(MSG_NOSIGNAL): each TLS call runs with SIGPIPE blocked
 * in the calling thread and a SIGPIPE it raised is taken back, so a daemon
 * that went away is an error, never a killed process (libpq does the same). */
#include "omlclient_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* What the daemon's alert means for a client certificate (tls_client_ca),
 * or "" for an alert about something else. */
static const char *client_cert_hint(const omlc *c, const char *why)
{
    if (strstr(why, "certificate required") ||
        (!c->tls_client_cert && strstr(why, "alert handshake failure")))
        return " (the daemon requires a client certificate: its tls_client_ca is set; give "
               "one with certfile/keyfile, omlctl --client-cert FILE --client-key FILE)";
    if (c->tls_client_cert &&
        (strstr(why, "alert unknown ca") || strstr(why, "alert bad certificate") ||
         strstr(why, "alert certificate unknown") || strstr(why, "alert certificate expired") ||
         strstr(why, "alert unsupported certificate") || strstr(why, "alert decrypt error") ||
         strstr(why, "alert handshake failure") || strstr(why, "alert certificate revoked")))
        return " (the daemon refused the client certificate: is it signed by a CA in the "
               "daemon's tls_client_ca, and valid now?)";
    return "";
}

/* OpenSSL's reason for the last failure (its queue emptied), in c->tls_why,
 * with what it means when it is the daemon refusing a client certificate. */
static const char *remember_reason(omlc *c)
{
    unsigned long e = ERR_peek_last_error();
    char why[256];
    if (e)
        ERR_error_string_n(e, why, sizeof why);
    else
        snprintf(why, sizeof why, "%s", errno ? strerror(errno) : "connection closed");
    ERR_clear_error();
    snprintf(c->tls_why, sizeof c->tls_why, "%s%s", why, client_cert_hint(c, why));
    return c->tls_why;
}

/* The client's certificate and key (omlc_tls.certfile, keyfile), checked
 * to belong together. */
static int use_client_cert(omlc *c, const omlc_tls *opt, omlc_error *err)
{
    const char *key = opt->keyfile && opt->keyfile[0] ? opt->keyfile : opt->certfile;
    if (SSL_CTX_use_certificate_chain_file(c->ssl_ctx, opt->certfile) != 1)
        return omlc__err_set(err, OMLC_EARG, NULL,
                             "TLS: cannot read the client certificate %s: %s", opt->certfile,
                             remember_reason(c));
    int loaded = SSL_CTX_use_PrivateKey_file(c->ssl_ctx, key, SSL_FILETYPE_PEM) == 1;
    if (!loaded && ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH)
        return omlc__err_set(err, OMLC_EARG, NULL, "TLS: cannot read the client key %s: %s",
                             key, remember_reason(c));
    ERR_clear_error();
    if (!loaded || SSL_CTX_check_private_key(c->ssl_ctx) != 1)
        return omlc__err_set(err, OMLC_EARG, NULL,
                             "TLS: the key %s is not the key of the client certificate %s", key,
                             opt->certfile);
    c->tls_client_cert = 1;
    return 0;
}

/* SIGPIPE blocked in this thread around one TLS call (see DESIGN). */
typedef struct quiet_pipe {
    sigset_t old;
    int was_pending;
} quiet_pipe;

static void pipe_quiet(quiet_pipe *q)
{
    sigset_t block, pending;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    sigpending(&pending);
    q->was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &q->old);
}

/* Takes back a SIGPIPE the call raised (not one pending before it), then
 * restores the mask; errno is kept. */
static void pipe_restore(quiet_pipe *q)
{
    int e = errno;
    sigset_t pending, pipe;
    sigpending(&pending);
    if (!q->was_pending && sigismember(&pending, SIGPIPE)) {
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &q->old, NULL);
    errno = e;
}

/* What SSL_read / SSL_write returned (n), as recv / send would. */
static ssize_t as_syscall(omlc *c, int n)
{
    if (n > 0)
        return n;
    switch (SSL_get_error(c->ssl, n)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN: /* close_notify, or the socket closed (reads only) */
        return 0;
    default:
        remember_reason(c);
        errno = EPROTO;
        return -1;
    }
}

ssize_t omlc__io_recv(omlc *c, void *buf, size_t len)
{
    if (c->ssl == NULL)
        return recv(c->fd, buf, len, 0);
    ERR_clear_error();
    quiet_pipe q;
    pipe_quiet(&q); /* a read may write (a key update's answer) */
    ssize_t n = as_syscall(c, SSL_read(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len));
    pipe_restore(&q);
    return n;
}

ssize_t omlc__io_send(omlc *c, const void *buf, size_t len)
{
    if (c->ssl == NULL)
        return send(c->fd, buf, len, MSG_NOSIGNAL);
    ERR_clear_error();
    quiet_pipe q;
    pipe_quiet(&q);
    ssize_t n = as_syscall(c, SSL_write(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len));
    pipe_restore(&q);
    if (n == 0) { /* the daemon closed its side: as send() on a closed socket */
        errno = EPIPE;
        return -1;
    }
    return n;
}

int omlc__io_pending(const omlc *c)
{
    return c->ssl != NULL && SSL_pending(c->ssl) > 0;
}

const char *omlc__io_strerror(const omlc *c, int e)
{
    return e == EPROTO && c->tls_why[0] ? c->tls_why : strerror(e);
}

void omlc__tls_free(omlc *c)
{
    if (c->ssl) {
        quiet_pipe q;
        pipe_quiet(&q);
        SSL_shutdown(c->ssl); /* close_notify, best effort: the socket is non-blocking */
        pipe_restore(&q);
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    SSL_CTX_free(c->ssl_ctx);
    c->ssl_ctx = NULL;
    ERR_clear_error();
}

/* The context: TLS 1.2+, the daemon verified unless insecure. */
static int make_ctx(omlc *c, const omlc_tls *opt, omlc_error *err)
{
    c->ssl_ctx = SSL_CTX_new(TLS_client_method());
    if (c->ssl_ctx == NULL)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "TLS: %s", remember_reason(c));
    SSL_CTX_set_min_proto_version(c->ssl_ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(c->ssl_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                     SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* The daemon closes a connection without close_notify (a limit, a
     * frame too large): that is the end of the stream, as with plain TCP;
     * answers carry their length, so nothing can be cut unnoticed. */
    SSL_CTX_set_options(c->ssl_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (opt->keyfile && opt->keyfile[0] && !(opt->certfile && opt->certfile[0]))
        return omlc__err_set(err, OMLC_EARG, NULL,
                             "TLS: a client key (%s) without its certificate (certfile)",
                             opt->keyfile);
    int rc = opt->certfile && opt->certfile[0] ? use_client_cert(c, opt, err) : 0;
    if (rc != 0)
        return rc;
    if (opt->insecure) {
        SSL_CTX_set_verify(c->ssl_ctx, SSL_VERIFY_NONE, NULL);
        return 0;
    }
    SSL_CTX_set_verify(c->ssl_ctx, SSL_VERIFY_PEER, NULL);
    int ok = opt->cafile ? SSL_CTX_load_verify_locations(c->ssl_ctx, opt->cafile, NULL)
                         : SSL_CTX_set_default_verify_paths(c->ssl_ctx);
    if (ok != 1)
        return omlc__err_set(err, OMLC_EARG, NULL, "TLS: cannot read the CA file %s: %s",
                             opt->cafile ? opt->cafile : "(system default)", remember_reason(c));
    return 0;
}

/* The session: the name to verify (DNS name + SNI, or IP address). */
static int make_ssl(omlc *c, const char *host, const omlc_tls *opt, omlc_error *err)
{
    c->ssl = SSL_new(c->ssl_ctx);
    if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "TLS: %s", remember_reason(c));
    const char *name = opt->server_name && opt->server_name[0] ? opt->server_name : host;
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    if (!is_ip)
        SSL_set_tlsext_host_name(c->ssl, name);
    if (!opt->insecure) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
        int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name) : SSL_set1_host(c->ssl, name);
        if (ok != 1)
            return omlc__err_set(err, OMLC_EARG, NULL, "TLS: cannot verify the name '%s'", name);
    }
    SSL_set_connect_state(c->ssl);
    return 0;
}

/* Why the handshake failed, in words a user can act on. */
static int handshake_failed(omlc *c, const char *server, omlc_error *err)
{
    long v = SSL_get_verify_result(c->ssl);
    if (v != X509_V_OK) {
        ERR_clear_error();
        return omlc__err_set(err, OMLC_ECONNECT, NULL,
                             "TLS handshake with %s failed: the daemon's certificate is not "
                             "trusted: %s (give its CA with --cacert FILE)",
                             server, X509_verify_cert_error_string(v));
    }
    const char *why = remember_reason(c);
    const char *hint = strstr(why, "wrong version number") || strstr(why, "packet length")
                           ? " (the daemon does not speak TLS there: is tls_cert set?)"
                           : "";
    return omlc__err_set(err, OMLC_ECONNECT, NULL, "TLS handshake with %s failed: %s%s", server,
                         why, hint);
}

int omlc__tls_start(omlc *c, const char *server, const char *host, const omlc_tls *opt,
                    omlc_error *err)
{
    int rc = make_ctx(c, opt, err);
    if (rc == 0)
        rc = make_ssl(c, host, opt, err);
    if (rc != 0)
        return rc;
    for (;;) {
        ERR_clear_error();
        errno = 0;
        quiet_pipe q;
        pipe_quiet(&q);
        int r = SSL_connect(c->ssl);
        pipe_restore(&q);
        if (r == 1)
            return 0;
        int e = SSL_get_error(c->ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return handshake_failed(c, server, err);
        int ev = omlc__wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, c->timeout_ms);
        if (ev == 0)
            return omlc__err_set(err, OMLC_ETIMEOUT, NULL,
                                 "TLS handshake with %s: no progress in %d ms", server,
                                 c->timeout_ms);
        if (ev < 0)
            return omlc__err_set(err, OMLC_ECONNECT, NULL, "poll: %s", strerror(errno));
    }
}
