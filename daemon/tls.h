/* tls.h - TLS on the daemon's TCP connections (options tls_cert, tls_key,
 * tls_client_ca):
 * OpenSSL over a libuv stream through memory BIOs, behind a small stream
 * API that the RPC connections (conn.c) and the HTTP ones (http.c) use
 * instead of uv_read_start / uv_write / uv_shutdown, plain or not.
 *
 * Loop thread only. One omld_tls (the certificate and key) serves both
 * listeners; each accepted connection embeds an omld_stream and, when TLS
 * is on, gets a session from omld_stream_start_tls. The in-process gateway
 * link and the Unix socket stay plain. */
#ifndef OMLD_TLS_H
#define OMLD_TLS_H

#include <stddef.h>
#include <uv.h>

#include "metrics.h"

typedef struct omld_tls omld_tls;
typedef struct omld_tls_session omld_tls_session;

/* Reads cert_file (PEM, the certificate then its chain) and key_file (PEM
 * private key) and checks that they match; with client_ca (a PEM file of
 * CA certificates; NULL or "": none) every client must present a
 * certificate that chains to one of them (mutual TLS). 0, or -1 with err
 * naming the file and OpenSSL's reason. Handshakes are counted in
 * metrics. */
int omld_tls_load(omld_tls **out, const char *cert_file, const char *key_file,
                  const char *client_ca, omld_metrics *metrics, char *err, size_t errlen);
/* After every session is released (the loop has run out). NULL is fine. */
void omld_tls_free(omld_tls *t);
/* "CN=..., expires YYYY-MM-DD" of the certificate, for the startup log. */
const char *omld_tls_describe(const omld_tls *t);

/* A connection's stream: the libuv handle first (the raw callbacks find
 * the stream from it), then its TLS session (NULL: plain). */
typedef struct omld_stream {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    omld_tls_session *tls;
} omld_stream;

/* From now on s speaks TLS (server side), right after uv_accept. A client
 * whose first byte cannot start a TLS handshake is sent `refusal` (plain
 * bytes the port's own protocol understands, borrowed for the session's
 * life) instead, then fails. 0 or a UV_* error. */
int omld_stream_start_tls(omld_stream *s, omld_tls *t, const void *refusal, size_t refusal_len);

/* As uv_read_start / uv_read_stop / uv_write / uv_shutdown /
 * uv_stream_get_write_queue_size on s->h.stream, with TLS: read_cb gets
 * plaintext (every record a raw read completed, in one call; the alloc
 * callback is not used), a write's callback runs once its ciphertext is
 * written, shutdown sends close_notify first. A failed handshake (logged
 * and counted here) reaches read_cb as UV_EPROTO, even while reading is
 * stopped, once its alert (or the refusal) and a FIN are written; what
 * the peer sends meanwhile is read and dropped, so closing then does not
 * reset what it was sent. */
int omld_stream_read_start(omld_stream *s, uv_alloc_cb alloc_cb, uv_read_cb read_cb);
void omld_stream_read_stop(omld_stream *s);
int omld_stream_write(omld_stream *s, uv_write_t *req, const uv_buf_t bufs[], unsigned nbufs,
                      uv_write_cb cb);
int omld_stream_shutdown(omld_stream *s, uv_shutdown_t *req, uv_shutdown_cb cb);
size_t omld_stream_write_queue(const omld_stream *s);
/* 1 while s is TLS and its handshake is not complete (the owner's
 * timeouts bound it), else 0. */
int omld_stream_handshaking(const omld_stream *s);

/* Frees the session once the handle's close callback has run (pending
 * writes were cancelled before it). */
void omld_stream_release(omld_stream *s);

#endif
