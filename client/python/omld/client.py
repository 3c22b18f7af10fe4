"""omld.client - a blocking Python client for omld (mirrors libomlclient).

One Client is one connection (TCP "HOST:PORT", "[V6ADDR]:PORT", or
"unix:/path"), used by one thread at a time. Every call sends one Request
frame (4-byte big-endian length + serialized message) and reads its
Response, with the client's timeout on connect and on every send and
receive. Request ids are chosen by the client (1, 2, ...) and checked on
the answer.

A non-OK Status raises an OmldError subclass (the connection stays
usable); a transport problem raises OmldConnectionError / OmldTimeout and
closes the connection.
"""
from __future__ import annotations

import collections
import itertools
import socket
import struct
import time
from dataclasses import fields

from . import _pb
from .errors import (OmldConnectionError, OmldProtocolError, OmldTimeout, code_name, error_for)
from .types import (BatchResult, CheckpointResult, Classification, ClassScore, DeleteResult,
                    Embedding, Health, Hit, Item, Pair, PairResult, PutResult, Rejected,
                    Retrieval, Status, Triplet, TripletResult, Verification)

pb = _pb.load()

DEFAULT_SERVER = "127.0.0.1:7600"
_HEADER = struct.Struct(">I")
_STATUS_FIELDS = [f.name for f in fields(Status)]
_FRAME_TOO_LARGE = 6
_MALFORMED = 7


def batched(iterable, size):
    """Yields lists of up to `size` consecutive elements of iterable."""
    if size < 1:
        raise ValueError("batch size must be >= 1")
    it = iter(iterable)
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk


def parse_server(server):
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


# ------------------------------------------------------------ input conversion

def _floats(x, what):
    """A list of Python floats from a list, tuple, array('f'), numpy array,
    or any iterable of numbers. Non-finite values are passed on (the daemon
    answers NON_FINITE)."""
    if isinstance(x, (str, bytes, bytearray)):
        raise TypeError("%s: expected a sequence of floats, got %s" % (what, type(x).__name__))
    ndim = getattr(x, "ndim", None)
    if ndim is not None:  # numpy (optional)
        if ndim != 1:
            raise ValueError("%s: expected a 1-D vector, got %d dimensions" % (what, ndim))
        x = x.tolist()
    try:
        return [float(v) for v in x]
    except TypeError:
        raise TypeError("%s: expected a sequence of floats, got %s" % (what, type(x).__name__))


def _set_ref(msg, x, what):
    """Fills an ItemRef: str -> id, a sequence of floats -> inline vector."""
    if isinstance(x, str):
        msg.id = x
    elif isinstance(x, Item):
        msg.id = x.id
    else:
        msg.vector.values.extend(_floats(x, what))
        if not msg.HasField("vector"):  # an empty vector still selects the oneof
            msg.vector.SetInParent()


def _set_item(msg, x, what):
    if isinstance(x, Item):
        iid, feats, label = x.id, x.features, x.label
    elif isinstance(x, dict):
        iid, feats, label = x.get("id"), x.get("features"), x.get("label")
    elif isinstance(x, (tuple, list)) and len(x) in (2, 3):
        iid, feats, label = x[0], x[1], x[2] if len(x) == 3 else None
    else:
        raise TypeError("%s: expected an Item, a dict or an (id, features[, label]) tuple" % what)
    if not isinstance(iid, str):
        raise TypeError("%s.id: expected str, got %s" % (what, type(iid).__name__))
    msg.id = iid
    msg.features.extend(_floats(feats, what + ".features"))
    if label is not None:
        msg.label = label


def _set_triplet(msg, x, what):
    if isinstance(x, Triplet):
        a, p, n = x.anchor, x.positive, x.negative
    elif isinstance(x, dict):
        a, p, n = x.get("anchor"), x.get("positive"), x.get("negative")
    else:
        try:
            a, p, n = x
        except (TypeError, ValueError):
            raise TypeError("%s: expected a Triplet or an (anchor, positive, negative) tuple"
                            % what)
    _set_ref(msg.anchor, a, what + ".anchor")
    _set_ref(msg.positive, p, what + ".positive")
    _set_ref(msg.negative, n, what + ".negative")


_RELATIONS = {"similar": 1, "dissimilar": 2, "SIMILAR": 1, "DISSIMILAR": 2}


def _set_pair(msg, x, what):
    if isinstance(x, Pair):
        a, b, rel = x.a, x.b, x.similar
    elif isinstance(x, dict):
        a, b, rel = x.get("a"), x.get("b"), x.get("similar", x.get("relation"))
    else:
        try:
            a, b, rel = x
        except (TypeError, ValueError):
            raise TypeError("%s: expected a Pair or an (a, b, similar) tuple" % what)
    _set_ref(msg.a, a, what + ".a")
    _set_ref(msg.b, b, what + ".b")
    if isinstance(rel, str):
        if rel not in _RELATIONS:
            raise ValueError("%s: relation must be 'similar' or 'dissimilar'" % what)
        msg.relation = _RELATIONS[rel]
    elif rel is None:
        msg.relation = 0  # RELATION_UNSPECIFIED: the daemon refuses it
    else:
        msg.relation = 1 if rel else 2


def _items_request(items):
    req = pb.Request()
    for i, x in enumerate(items):
        _set_item(req.put_items.items.add(), x, "items[%d]" % i)
    req.put_items.SetInParent()
    return req


def _triplets_request(triplets):
    req = pb.Request()
    for i, x in enumerate(triplets):
        _set_triplet(req.add_triplets.triplets.add(), x, "triplets[%d]" % i)
    req.add_triplets.SetInParent()
    return req


def _pairs_request(pairs):
    req = pb.Request()
    for i, x in enumerate(pairs):
        _set_pair(req.add_pairs.pairs.add(), x, "pairs[%d]" % i)
    req.add_pairs.SetInParent()
    return req


def _write_options(body, idempotency_key, wait_for_view):
    """The IDEMPOTENCY and WAITING FOR THE VIEW fields of a write (omld.proto)."""
    if idempotency_key is not None:
        if not isinstance(idempotency_key, str) or not idempotency_key:
            raise ValueError("idempotency_key must be a non-empty str")
        body.idempotency_key = idempotency_key
    body.wait_for_view = bool(wait_for_view)


def _ids(ids):
    if isinstance(ids, str):
        return [ids]
    return list(ids)


def _refs(queries):
    """The queries of a batch: a list of ids and vectors (a 2-D array is
    its rows; one id or one vector alone is not a batch)."""
    if isinstance(queries, (str, bytes)):
        raise TypeError("queries: a list of ids or vectors, not one id")
    out = list(queries)
    if out and isinstance(out[0], (int, float)):
        raise TypeError("queries: a list of ids or vectors, not one vector")
    return out


def _fill_classify(msg, query, k, model):
    """msg: a ClassifyRequest (alone or in a batch)."""
    _set_ref(msg.query, query, "query")
    if k is not None:
        msg.k = k
    if model is not None:
        msg.model = model


def _classify_request(query, k, model):
    req = pb.Request()
    _fill_classify(req.classify, query, k, model)
    return req


def _classification_of(b, version):
    """b: a ClassifyResponse."""
    return Classification(b.label, [ClassScore(s.label, s.score) for s in b.scores], version)


def _classification(resp):
    return _classification_of(resp.classify, resp.model_version)


def _fill_retrieve(msg, query, k, model, labels, exclude_ids, offset, min_similarity):
    """msg: a RetrieveRequest (alone or in a batch), or a RecommendRequest
    (query None: its examples are set apart)."""
    if query is not None:
        _set_ref(msg.query, query, "query")
    if k is not None:
        msg.k = k
    if model is not None:
        msg.model = model
    msg.labels.extend(_ids(labels or []))
    msg.exclude_ids.extend(_ids(exclude_ids or []))
    msg.offset = offset
    if min_similarity is not None:
        msg.min_similarity = min_similarity


def _retrieval_of(b, version):
    """b: a RetrieveResponse."""
    return Retrieval([Hit(h.id, h.score, h.label if h.HasField("label") else None, h.similarity)
                      for h in b.hits], version)


# ------------------------------------------------------------ the client

class Client:
    """A connection to omld.

    server   "HOST:PORT" (default 127.0.0.1:7600), "[V6ADDR]:PORT",
             "unix:/path/to/socket", or a (host, port) tuple
    timeout  seconds allowed for connect and for each send / receive to make
             progress (None: wait forever)
    max_frame  largest answer accepted (bytes)
    token    for a daemon configured with tokens: sent in an Auth request
             right after connecting (a wrong one raises Unauthenticated and
             closes the client); read_write then tells whether it may write

    Use as a context manager, or call close().
    """

    def __init__(self, server=DEFAULT_SERVER, timeout=30.0, max_frame=64 << 20, token=None):
        self.server = server
        self.max_frame = max_frame
        self._timeout = timeout
        self._sock = None
        self._rbuf = bytearray()
        self._ids = itertools.count(1)
        self._pending = collections.deque()  # request ids sent, not yet answered
        self.last_model_version = 0
        self.read_write = None  # set by auth()
        self._connect()
        if token is not None:
            try:
                self.auth(token)
            except BaseException:
                self.close()
                raise

    # ---- connection

    def _connect(self):
        kind, addr = parse_server(self.server)
        try:
            if kind == "unix":
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(self._timeout)
                try:
                    s.connect(addr)
                except BaseException:
                    s.close()
                    raise
            else:
                s = socket.create_connection(addr, timeout=self._timeout)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except socket.timeout:
            raise OmldTimeout("connect to %s: timed out after %ss" % (self.server, self._timeout))
        except OSError as e:
            raise OmldConnectionError("connect to %s: %s" % (self.server, e.strerror or e))
        self._sock = s

    @property
    def timeout(self):
        return self._timeout

    @timeout.setter
    def timeout(self, seconds):
        self._timeout = seconds
        if self._sock is not None:
            self._sock.settimeout(seconds)

    @property
    def closed(self):
        return self._sock is None

    def close(self):
        """Closes the connection (idempotent)."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._pending.clear()
                self._rbuf.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<omld.Client %s%s>" % (self.server, " closed" if self.closed else "")

    def _fail(self, cls, msg):
        self.close()
        raise cls("%s: %s" % (self.server, msg))

    def _check_open(self):
        if self._sock is None:
            raise OmldConnectionError("%s: the connection is closed" % self.server)

    # ---- the generic layer: any Request, the raw Response

    def send_raw(self, data):
        """Writes raw bytes (tests of malformed input). The answer, if any,
        is not matched to a request id."""
        self._check_open()
        try:
            self._sock.sendall(data)
        except socket.timeout:
            self._fail(OmldTimeout, "send timed out after %ss" % self._timeout)
        except OSError as e:
            self._fail(OmldConnectionError, "send failed: %s" % (e.strerror or e))
        self._pending.append(None)

    def send(self, request):
        """Sets request.request_id, sends one frame, returns the id."""
        self._check_open()
        rid = next(self._ids)
        request.request_id = rid
        payload = request.SerializeToString()
        if len(payload) > 0xFFFFFFFF:
            raise ValueError("request of %d bytes does not fit a frame" % len(payload))
        try:
            self._sock.sendall(_HEADER.pack(len(payload)) + payload)
        except socket.timeout:
            self._fail(OmldTimeout, "send timed out after %ss" % self._timeout)
        except OSError as e:
            self._fail(OmldConnectionError, "send failed: %s" % (e.strerror or e))
        self._pending.append(rid)
        return rid

    def _read_exact(self, n):
        buf = self._rbuf
        while len(buf) < n:
            try:
                chunk = self._sock.recv(max(65536, n - len(buf)))
            except socket.timeout:
                self._fail(OmldTimeout, "no answer within %ss" % self._timeout)
            except OSError as e:
                self._fail(OmldConnectionError, "receive failed: %s" % (e.strerror or e))
            if not chunk:
                self._fail(OmldConnectionError, "the daemon closed the connection")
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def recv(self):
        """Receives the next Response (an omld_pb2.Response, whatever its
        status; see check()). Checks it answers the oldest request sent."""
        self._check_open()
        (n,) = _HEADER.unpack(self._read_exact(4))
        if n > self.max_frame:
            self._fail(OmldProtocolError, "answer of %d bytes exceeds max_frame %d"
                       % (n, self.max_frame))
        data = self._read_exact(n)
        resp = pb.Response()
        try:
            resp.ParseFromString(data)
        except Exception as e:  # google.protobuf.message.DecodeError
            self._fail(OmldProtocolError, "answer is not a Response: %s" % e)
        want = self._pending.popleft() if self._pending else None
        code = resp.status.code
        if want is not None and resp.request_id != want and not (
                resp.request_id == 0 and code in (_FRAME_TOO_LARGE, _MALFORMED)):
            self._fail(OmldProtocolError, "answer has request id %d, expected %d"
                       % (resp.request_id, want))
        self.last_model_version = resp.model_version
        if code == _FRAME_TOO_LARGE:
            self.close()  # the daemon closes: the stream cannot be resynchronised
        return resp

    @staticmethod
    def check(resp):
        """Raises the OmldError subclass for resp's status unless it is OK;
        returns resp."""
        st = resp.status
        if st.code != 0:
            raise error_for(st.code, st.message, st.field, resp.request_id, resp.model_version)
        return resp

    def call(self, request, expect=None):
        """send + recv + check. expect: the Response body name an OK answer
        must carry (e.g. "classify"); a different one is a protocol error."""
        self.send(request)
        resp = self.check(self.recv())
        if expect is not None and resp.WhichOneof("body") != expect:
            self._fail(OmldProtocolError, "OK answer with body %r, expected %r"
                       % (resp.WhichOneof("body"), expect))
        return resp

    # ---- items

    def put_items(self, items, idempotency_key=None, wait_for_view=False):
        """Stores (or replaces, by id) a batch of items, all-or-nothing.
        items: Item, dict or (id, features[, label]) elements.
        idempotency_key: a retry with the same key is applied once (the
        result then has duplicate=True and the first answer's counts).
        wait_for_view: answered once a serving view includes the items."""
        req = _items_request(items)
        _write_options(req.put_items, idempotency_key, wait_for_view)
        r = self.call(req, "put_items")
        return PutResult(r.put_items.created, r.put_items.replaced, r.model_version,
                         r.put_items.duplicate)

    def delete_items(self, ids, missing_ok=False):
        req = pb.Request()
        req.delete_items.ids.extend(_ids(ids))
        req.delete_items.missing_ok = bool(missing_ok)
        r = self.call(req, "delete_items")
        return DeleteResult(r.delete_items.deleted, r.model_version)

    def get_items(self, ids):
        """The items, in the order of ids (NotFound names an unknown one)."""
        req = pb.Request()
        req.get_items.ids.extend(_ids(ids))
        req.get_items.SetInParent()
        r = self.call(req, "get_items")
        return [Item(it.id, list(it.features), it.label if it.HasField("label") else None)
                for it in r.get_items.items]

    # ---- constraints

    def add_triplets(self, triplets, partial=False, idempotency_key=None, wait_for_view=False):
        """Queues (anchor, positive, negative) triplets for the learner,
        all-or-nothing; with partial=True the good ones are learned and
        each bad one is listed in the result's rejected (index, code,
        field, message) instead. Members: str -> stored id, sequence of
        floats -> inline vector. idempotency_key and wait_for_view as for
        put_items."""
        req = _triplets_request(triplets)
        req.add_triplets.partial = partial
        _write_options(req.add_triplets, idempotency_key, wait_for_view)
        r = self.call(req, "add_triplets")
        a = r.add_triplets
        return TripletResult(a.accepted, a.queue_depth, r.model_version,
                             [Rejected(e.index, code_name(e.code), e.field, e.message)
                              for e in a.rejected], a.duplicate)

    def add_pairs(self, pairs, idempotency_key=None, wait_for_view=False):
        """Adds (a, b, similar) pairs of stored ids (idempotency_key and
        wait_for_view as for put_items)."""
        req = _pairs_request(pairs)
        _write_options(req.add_pairs, idempotency_key, wait_for_view)
        r = self.call(req, "add_pairs")
        return PairResult(r.add_pairs.accepted, r.add_pairs.derived_triplets, r.model_version,
                          r.add_pairs.duplicate)

    # ---- queries (k / threshold / model None: the daemon's default / live model)

    def classify(self, query, k=None, model=None):
        r = self.call(_classify_request(query, k, model), "classify")
        return _classification(r)

    def verify(self, a, b, threshold=None, model=None):
        req = pb.Request()
        _set_ref(req.verify.a, a, "a")
        _set_ref(req.verify.b, b, "b")
        if threshold is not None:
            req.verify.threshold = threshold
        if model is not None:
            req.verify.model = model
        r = self.call(req, "verify")
        v = r.verify
        return Verification(v.similar, v.score, list(v.distances), r.model_version)

    def retrieve(self, query, k=None, model=None, labels=None, exclude_ids=None, offset=0,
                 min_similarity=None):
        """The k stored items most like query, best first (a query by id
        never returns that id). labels: only items with one of these
        labels; exclude_ids: never these; offset: skip the best offset
        (paging, offset + k <= the daemon's max_k); min_similarity: only
        hits whose similarity (in [-1, 1], not k-dependent) is at least
        this."""
        req = pb.Request()
        _fill_retrieve(req.retrieve, query, k, model, labels, exclude_ids, offset,
                       min_similarity)
        r = self.call(req, "retrieve")
        return _retrieval_of(r.retrieve, r.model_version)

    def recommend(self, positive, negative=(), k=None, model=None, labels=None, exclude_ids=None,
                  offset=0, min_similarity=None):
        """Items like the positive examples and unlike the negative ones
        (ids or vectors; 1..64 and 0..64): on every head the query is the
        unit vector along 2 mean(positive) - mean(negative), then the
        search, filters and paging are retrieve()'s; an example named by id
        is never returned."""
        req = pb.Request()
        m = req.recommend
        positive, negative = list(positive), list(negative)
        if not positive:
            raise ValueError("recommend needs at least one positive example")
        for i, x in enumerate(positive):
            _set_ref(m.positive.add(), x, "positive[%d]" % i)
        for i, x in enumerate(negative):
            _set_ref(m.negative.add(), x, "negative[%d]" % i)
        _fill_retrieve(m, None, k, model, labels, exclude_ids, offset, min_similarity)
        r = self.call(req, "recommend")
        return _retrieval_of(r.recommend, r.model_version)

    # ---- query batches: many queries in one request, answered together (one
    # matrix product per head for up to 128 queries at a time), faster per
    # query than one request each; each answer is the one its query gets
    # alone. 1..max_batch queries (10,000 by default) whose answers fit in
    # one frame; all-or-nothing: an error names the query's path, e.g.
    # "classify_batch.queries[3].query.id".

    def classify_batch(self, queries, k=None, model=None):
        """Classifies every query (ids and/or vectors) in one ClassifyBatch
        request; k and model apply to each. Returns the Classifications in
        order."""
        req = pb.Request()
        for q in _refs(queries):
            _fill_classify(req.classify_batch.queries.add(), q, k, model)
        req.classify_batch.SetInParent()
        r = self.call(req, "classify_batch")
        return [_classification_of(a, r.model_version) for a in r.classify_batch.answers]

    def retrieve_batch(self, queries, k=None, model=None, labels=None, exclude_ids=None, offset=0,
                       min_similarity=None):
        """retrieve() for every query in one RetrieveBatch request; k, model
        and the filters apply to each. Returns the Retrievals in order."""
        req = pb.Request()
        for q in _refs(queries):
            _fill_retrieve(req.retrieve_batch.queries.add(), q, k, model, labels, exclude_ids,
                           offset, min_similarity)
        req.retrieve_batch.SetInParent()
        r = self.call(req, "retrieve_batch")
        return [_retrieval_of(a, r.model_version) for a in r.retrieve_batch.answers]

    def embed(self, item, model=None):
        req = pb.Request()
        _set_ref(req.embed.item, item, "item")
        if model is not None:
            req.embed.model = model
        r = self.call(req, "embed")
        return Embedding([list(h.values) for h in r.embed.heads], list(r.embed.alpha),
                         r.model_version)

    # ---- operations

    def status(self):
        req = pb.Request()
        req.status.SetInParent()
        r = self.call(req, "status_info")
        s = r.status_info
        out = Status(**{name: getattr(s, name) for name in _STATUS_FIELDS})
        out.alpha = list(s.alpha)
        return out

    def health(self):
        req = pb.Request()
        req.health.SetInParent()
        r = self.call(req, "health")
        return Health(r.health.live, r.health.ready, r.health.draining, r.model_version)

    def auth(self, token):
        """Authenticates this connection with token (see omld.proto,
        AUTHENTICATION); returns True for a read-write token (or a daemon
        without tokens), False for a read-only one. A wrong token raises
        Unauthenticated; the daemon closes the connection after three."""
        if not isinstance(token, str):
            raise TypeError("token: expected str, got %s" % type(token).__name__)
        req = pb.Request()
        req.auth.token = token
        req.auth.SetInParent()
        r = self.call(req, "auth")
        self.read_write = bool(r.auth.read_write)
        return self.read_write

    def checkpoint(self):
        """Writes a checkpoint now; answers when it is durable."""
        req = pb.Request()
        req.checkpoint.SetInParent()
        r = self.call(req, "checkpoint")
        c = r.checkpoint
        return CheckpointResult(c.path, c.bytes, c.triplets_applied, r.model_version)

    def wait_learned(self, applied=None, timeout=30.0, poll=0.02):
        """Polls status until the learner queue is empty, at least `applied`
        triplets are applied (if given) and the serving view includes them;
        returns that Status. Raises OmldTimeout after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.status()
            if (s.queue_depth == 0 and (applied is None or s.triplets_applied >= applied)
                    and s.view_triplets >= s.triplets_applied):
                return s
            if time.monotonic() > deadline:
                raise OmldTimeout("%s: learner not caught up within %ss (applied %d, view %d, "
                                  "queue %d)" % (self.server, timeout, s.triplets_applied,
                                                 s.view_triplets, s.queue_depth))
            time.sleep(poll)

    # ---- batch helpers

    def _pipeline(self, requests, window, want, on_ok, total, progress):
        """Sends the (request, units, offset) of `requests` keeping up to
        `window` in flight; reads the answers in order. On the first error
        stops sending, reads and drops the answers still in flight (so the
        connection stays in step), then raises it with batch_index, offset
        and totals set. Transport errors raise at once."""
        window = max(1, int(window))
        totals = BatchResult()
        inflight = collections.deque()
        it = iter(requests)
        first = None
        local = None  # an error building a request (bad input)
        exhausted = False
        index = 0
        while True:
            while first is None and local is None and not exhausted and len(inflight) < window:
                try:
                    req, units, offset = next(it)
                except StopIteration:
                    exhausted = True
                    break
                except (TypeError, ValueError) as e:
                    local = e
                    break
                self.send(req)
                inflight.append((index, units, offset))
                index += 1
            if not inflight:
                break
            idx, units, offset = inflight.popleft()
            resp = self.recv()
            if resp.status.code != 0:
                if first is None:
                    try:
                        self.check(resp)
                    except Exception as e:
                        e.batch_index, e.offset, e.applied_after = idx, offset, []
                        first = e
                continue
            if first is not None or local is not None:
                if first is not None:  # in flight after the failed one: applied anyway
                    first.applied_after.append((offset, units))
                continue
            if resp.WhichOneof("body") != want:
                self._fail(OmldProtocolError, "OK answer with body %r, expected %r"
                           % (resp.WhichOneof("body"), want))
            on_ok(resp, totals)
            totals.requests += 1
            totals.done += units
            totals.model_version = resp.model_version
            if progress is not None:
                progress(totals.done, total)
        if first is not None:
            first.totals = totals
            raise first
        if local is not None:
            raise local
        return totals

    @staticmethod
    def _chunks(elements, batch, build):
        offset = 0
        for chunk in batched(elements, batch):
            try:
                req = build(chunk)
            except (TypeError, ValueError) as e:
                raise type(e)("input element %d..%d: %s" % (offset, offset + len(chunk) - 1, e))
            yield req, len(chunk), offset
            offset += len(chunk)

    def put_items_pipelined(self, items, batch=1000, window=8, progress=None):
        """put_items over any iterable (consumed lazily) in requests of
        `batch` items, `window` of them in flight (window=1: plain batching,
        one request at a time). progress(done, total) is called after each
        answer (total None when items has no len()). Returns a BatchResult.

        At the first error no more requests are sent; the answers still in
        flight are read (the connection stays in step) and the error is
        raised with err.batch_index (which request failed), err.offset (the
        input index of its first element; err.field is relative to that
        batch), err.totals (a BatchResult of the batches before it: input
        [:offset] is done) and err.applied_after, a list of (offset, count)
        of later batches that were already in flight and were applied
        anyway (always empty with window=1). A bad input element raises
        TypeError / ValueError the same way, without those attributes."""
        def on_ok(r, t):
            t.created += r.put_items.created
            t.replaced += r.put_items.replaced
        total = len(items) if hasattr(items, "__len__") else None
        return self._pipeline(self._chunks(items, batch, _items_request), window, "put_items",
                              on_ok, total, progress)

    def add_triplets_pipelined(self, triplets, batch=1000, window=8, progress=None):
        """add_triplets over any iterable; see put_items_pipelined."""
        def on_ok(r, t):
            t.accepted += r.add_triplets.accepted
            t.queue_depth = r.add_triplets.queue_depth
        total = len(triplets) if hasattr(triplets, "__len__") else None
        return self._pipeline(self._chunks(triplets, batch, _triplets_request), window,
                              "add_triplets", on_ok, total, progress)

    def add_pairs_pipelined(self, pairs, batch=1000, window=8, progress=None):
        """add_pairs over any iterable; see put_items_pipelined."""
        def on_ok(r, t):
            t.accepted += r.add_pairs.accepted
            t.derived_triplets += r.add_pairs.derived_triplets
        total = len(pairs) if hasattr(pairs, "__len__") else None
        return self._pipeline(self._chunks(pairs, batch, _pairs_request), window, "add_pairs",
                              on_ok, total, progress)

    def classify_many(self, queries, k=None, model=None, window=32, progress=None):
        """Classifies every query (one request each, `window` in flight);
        returns the Classifications in order."""
        out = []
        total = len(queries) if hasattr(queries, "__len__") else None

        def gen():
            for i, q in enumerate(queries):
                yield _classify_request(q, k, model), 1, i

        self._pipeline(gen(), window, "classify", lambda r, t: out.append(_classification(r)),
                       total, progress)
        return out

    # plain batching: the same with one request in flight
    def put_items_batched(self, items, batch=1000, progress=None):
        return self.put_items_pipelined(items, batch, 1, progress)

    def add_triplets_batched(self, triplets, batch=1000, progress=None):
        return self.add_triplets_pipelined(triplets, batch, 1, progress)


def connect(server=DEFAULT_SERVER, timeout=30.0, **kw):
    """Client(server, timeout, **kw), e.g. connect("10.0.0.5:7600", token="...")."""
    return Client(server, timeout, **kw)
