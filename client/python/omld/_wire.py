"""omld._wire - what both clients do with bytes, without doing I/O.

Owns the framing (4-byte big-endian length + one serialized message, see
proto/omld.proto), the server address syntax and the checks an answer must
pass before it is handed to its call: the blocking Client (client.py) and
the AsyncClient (aio.py) feed this module what their sockets read and
write what it encodes, so the two cannot disagree about the wire (hiredis's
read.c, shared by its sync and async contexts, is the model).
"""
from __future__ import annotations

import ssl
import struct
from typing import Any, Optional, Tuple, Union

from . import _pb
from .errors import error_for

pb = _pb.load()

DEFAULT_SERVER = "127.0.0.1:7600"
DEFAULT_MAX_FRAME = 64 << 20
HEADER = struct.Struct(">I")
FRAME_TOO_LARGE = 6
MALFORMED = 7
UNAVAILABLE = 8

Server = Union[str, Tuple[str, int]]
Address = Tuple[str, Any]  # ("unix", path) or ("tcp", (host, port))
# The protoc-generated message classes (omld_pb2.Request / Response) are
# made at build time, so static checkers see them as Any.
PbRequest = Any
PbResponse = Any


def parse_server(server: Server) -> Address:
    """("unix", path) or ("tcp", (host, port)) for "unix:/p", "HOST:PORT",
    "[V6]:PORT" or a (host, port) tuple."""
    if isinstance(server, tuple):
        return "tcp", (server[0], int(server[1]))
    if not isinstance(server, str) or not server:
        raise ValueError("server must be 'HOST:PORT' or 'unix:/path', got %r" % (server,))
    if server.startswith("unix:"):
        path = server[5:]
        if not path:
            raise ValueError("unix: needs a socket path")
        return "unix", path
    if server.startswith("["):
        host, sep, port = server[1:].partition("]:")
    else:
        host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("server must be 'HOST:PORT' or 'unix:/path', got %r" % (server,))
    return "tcp", (host, int(port))


def tls_context(tls: bool, cafile: Optional[str],
                ssl_context: Optional[ssl.SSLContext], certfile: Optional[str] = None,
                keyfile: Optional[str] = None) -> Optional[ssl.SSLContext]:
    """The TLS context both clients connect with, or None (plain): the
    given one, else one that verifies the daemon against cafile (PEM; its
    own certificate if self-signed) or the system's CAs, and its name, and
    presents the client certificate certfile (its key in keyfile, or in
    certfile) to a daemon with tls_client_ca."""
    if ssl_context is not None:
        if certfile is not None:
            raise ValueError("certfile: load it into your ssl_context instead")
        return ssl_context
    if not tls and cafile is None and certfile is None:
        return None
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if certfile is not None:
        try:
            ctx.load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as e:
            raise ValueError("TLS: cannot use the client certificate %s (key %s): %s"
                             % (certfile, keyfile or certfile, e)) from e
    elif keyfile is not None:
        raise ValueError("keyfile without certfile")
    return ctx


def client_cert_hint(e: BaseException) -> str:
    """What the daemon's TLS alert means when it refuses a client
    certificate (tls_client_ca), or ""."""
    text = str(e).lower()
    if "certificate required" in text or "certificate_required" in text:
        return (" (the daemon requires a client certificate: its tls_client_ca is set; give "
                "one with certfile=, keyfile=)")
    if any(a in text for a in ("unknown ca", "unknown_ca", "bad certificate", "bad_certificate",
                               "certificate unknown", "certificate_unknown")):
        return (" (the daemon refused the client certificate: is it signed by a CA in the "
                "daemon's tls_client_ca, and valid now?)")
    return ""


def os_error_text(e: OSError) -> str:
    """An OSError's words, with client_cert_hint for a TLS alert."""
    return "%s%s" % (e.strerror or e, client_cert_hint(e) if isinstance(e, ssl.SSLError) else "")


def tls_failure(server: Server, e: ssl.SSLError) -> str:
    """What a failed TLS connect says, in words a user can act on."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return ("connect to %s: TLS: the daemon's certificate is not trusted: %s (give its CA "
                "with cafile=)" % (server, e.verify_message))
    hint = client_cert_hint(e)
    if hint:
        return "connect to %s: TLS handshake failed: %s%s" % (server, e.reason or e, hint)
    return ("connect to %s: TLS handshake failed: %s (does the daemon speak TLS there? "
            "tls_cert)" % (server, e.reason or e))


def encode(request: PbRequest, request_id: int) -> bytes:
    """One frame: request with request_id set, behind its length."""
    request.request_id = request_id
    payload = request.SerializeToString()
    if len(payload) > 0xFFFFFFFF:
        raise ValueError("request of %d bytes does not fit a frame" % len(payload))
    return HEADER.pack(len(payload)) + payload


class FrameTooLong(Exception):
    """A header announced more than the reader's max_frame (the stream
    cannot be resynchronised)."""


class FrameReader:
    """Incremental frame parser: feed() what was read, in any pieces; next()
    returns each whole payload once, or None until one is complete. The
    length is checked against max_frame before the payload is waited for;
    the consumed prefix is dropped once per feed, not once per frame."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data

    def missing(self) -> int:
        """Bytes still needed to complete the next frame (at least 1 when
        next() would return None)."""
        have = len(self._buf) - self._pos
        if have < 4:
            return 4 - have
        (n,) = HEADER.unpack_from(self._buf, self._pos)
        return max(0, 4 + n - have)

    def next(self) -> Optional[bytes]:
        have = len(self._buf) - self._pos
        if have < 4:
            return None
        (n,) = HEADER.unpack_from(self._buf, self._pos)
        if n > self.max_frame:
            raise FrameTooLong("answer of %d bytes exceeds max_frame %d" % (n, self.max_frame))
        if have < 4 + n:
            return None
        start = self._pos + 4
        self._pos = start + n
        return bytes(self._buf[start:self._pos])

    def clear(self) -> None:
        self._buf.clear()
        self._pos = 0


def decode(payload: bytes) -> PbResponse:
    """The Response in payload; ValueError when it is not one."""
    resp = pb.Response()
    try:
        resp.ParseFromString(payload)
    except Exception as e:  # google.protobuf.message.DecodeError
        raise ValueError("answer is not a Response: %s" % e)
    return resp


def mismatch(resp: PbResponse, want: Optional[int]) -> Optional[str]:
    """Why resp cannot be the answer to request id want (None: it can).
    FRAME_TOO_LARGE and MALFORMED come with id 0: the daemon could not read
    the id, and the answer still takes the oldest request's turn; so does
    UNAVAILABLE "this port speaks TLS" to a plain client of a TLS port."""
    if want is None or resp.request_id == want:
        return None
    if resp.request_id == 0 and resp.status.code in (FRAME_TOO_LARGE, MALFORMED, UNAVAILABLE):
        return None
    return "answer has request id %d, expected %d" % (resp.request_id, want)


def check(resp: PbResponse) -> PbResponse:
    """Raises the OmldError subclass for resp's status unless it is OK;
    returns resp."""
    st = resp.status
    if st.code != 0:
        raise error_for(st.code, st.message, st.field, resp.request_id, resp.model_version)
    return resp


def wrong_body(resp: PbResponse, expect: Optional[str]) -> Optional[str]:
    """Why an OK resp does not answer an `expect` request (None: it does)."""
    got = resp.WhichOneof("body")
    if expect is None or got == expect:
        return None
    return "OK answer with body %r, expected %r" % (got, expect)
