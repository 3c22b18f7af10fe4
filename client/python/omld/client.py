"""omld.client - a blocking Python client for omld (mirrors libomlclient).

One Client is one connection (TCP "HOST:PORT", "[V6ADDR]:PORT", or
"unix:/path"). Every call sends one Request frame (4-byte big-endian
length + serialized message) and reads its Response, with the client's
timeout on connect and on every send and receive. Request ids are chosen
by the client (1, 2, ...) and checked on the answer.

Threads: a Client may be shared. Each call holds the client's lock from
its send to its answer (a batch helper: for its whole run), so frames of
different threads never interleave and every answer goes to the call that
asked; the threads' calls take turns on the one connection. For calls in
parallel use a ClientPool (omld.pool) or one Client per thread.

A non-OK Status raises an OmldError subclass (the connection stays
usable); a transport problem raises OmldConnectionError / OmldTimeout and
closes the connection. The requests and results are built and read by
omld._messages, which the AsyncClient (omld.aio) shares.
"""
from __future__ import annotations

import collections
import itertools
import socket
import ssl
import threading
import time
from typing import (Any, Callable, Iterable, Iterator, List, Mapping, Optional, Sized, TypeVar,
                    Union)

from . import _messages as M
from . import _wire
from ._wire import (DEFAULT_MAX_FRAME, DEFAULT_SERVER, PbRequest, PbResponse, Server,
                    parse_server, pb)
from .errors import OmldConnectionError, OmldProtocolError, OmldTimeout
from .types import (BatchResult, CheckpointResult, Classification, CountResult, DeleteResult,
                    Embedding, Health, Item, ItemLike, ItemPage, JobInfo, ModelInfo, PairLike, PairResult,
                    PromoteResult, PutResult, Ref, Retrieval, RollbackResult, Status, TrainParams,
                    TrainStartResult, TripletLike, TripletResult, Verification, Where)

__all__ = ["Client", "connect", "batched", "parse_server", "DEFAULT_SERVER", "pb"]

T = TypeVar("T")
Ids = Union[str, Iterable[str]]
Progress = Optional[Callable[[int, Optional[int]], Any]]


def batched(iterable: Iterable[T], size: int) -> Iterator[List[T]]:
    """Yields lists of up to `size` consecutive elements of iterable."""
    if size < 1:
        raise ValueError("batch size must be >= 1")
    it = iter(iterable)
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk


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
    tls      connect with TLS (a daemon with tls_cert) and verify it against
             the system's CAs and the host of server
    cafile   ... against the CA(s) in this PEM file instead (the daemon's own
             certificate if self-signed); implies tls
    ssl_context  an ssl.SSLContext of your own (client certificates, pinning);
             implies tls
    server_hostname  the name the certificate must carry (default: the host)
    certfile the client certificate (PEM, then its chain) for a daemon with
             tls_client_ca; implies tls
    keyfile  its private key (PEM; default: in certfile). A daemon that
             refuses the certificate (none, or one its CA did not sign)
             fails the connect (TLS 1.2) or, as TLS 1.3 finishes the
             client's side first, the first call, with OmldConnectionError
             saying so

    Use as a context manager, or call close(). Safe to share between
    threads (see the module's docstring); `lock` is the re-entrant lock
    each call holds: hold it yourself around send() ... recv() of the
    generic layer when other threads use the client too.
    """

    def __init__(self, server: Server = DEFAULT_SERVER, timeout: Optional[float] = 30.0,
                 max_frame: int = DEFAULT_MAX_FRAME, token: Optional[str] = None, *,
                 tls: bool = False, cafile: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 server_hostname: Optional[str] = None, certfile: Optional[str] = None,
                 keyfile: Optional[str] = None) -> None:
        self.server = server
        self._tls = _wire.tls_context(tls, cafile, ssl_context, certfile, keyfile)
        self._server_hostname = server_hostname
        self.lock = threading.RLock()
        self._timeout = timeout
        self._sock: Optional[socket.socket] = None
        self._closing = False
        self._reader = _wire.FrameReader(max_frame)
        self._ids = itertools.count(1)
        self._pending: collections.deque = collections.deque()  # ids sent, not yet answered
        self.last_model_version = 0
        self.read_write: Optional[bool] = None  # set by auth()
        self._connect()
        if token is not None:
            try:
                self.auth(token)
            except BaseException:
                self.close()
                raise

    # ---- connection

    def _connect(self) -> None:
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
                if self._tls is not None:
                    try:
                        s = self._tls.wrap_socket(
                            s, server_hostname=self._server_hostname or addr[0])
                    except BaseException:
                        s.close()
                        raise
        except ssl.SSLError as e:
            raise OmldConnectionError(_wire.tls_failure(self.server, e))
        except socket.timeout:
            raise OmldTimeout("connect to %s: timed out after %ss" % (self.server, self._timeout))
        except OSError as e:
            raise OmldConnectionError("connect to %s: %s" % (self.server, e.strerror or e))
        self._sock = s

    @property
    def timeout(self) -> Optional[float]:
        return self._timeout

    @timeout.setter
    def timeout(self, seconds: Optional[float]) -> None:
        self._timeout = seconds
        if self._sock is not None:
            self._sock.settimeout(seconds)

    @property
    def max_frame(self) -> int:
        return self._reader.max_frame

    @max_frame.setter
    def max_frame(self, n: int) -> None:
        self._reader.max_frame = n

    @property
    def closed(self) -> bool:
        return self._sock is None

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered (0 between calls)."""
        return len(self._pending)

    def close(self) -> None:
        """Closes the connection (idempotent). From another thread while a
        call is waiting for its answer: that call is woken and raises
        OmldConnectionError."""
        if not self.lock.acquire(blocking=False):
            sock = self._sock
            self._closing = True
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.lock.acquire()
        try:
            if self._sock is not None:
                try:
                    self._sock.close()
                finally:
                    self._sock = None
                    self._pending.clear()
                    self._reader.clear()
        finally:
            self.lock.release()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<omld.Client %s%s>" % (self.server, " closed" if self.closed else "")

    def _fail(self, cls, msg):
        self.close()
        raise cls("%s: %s" % (self.server, msg))

    def _check_open(self):
        if self._sock is None:
            raise OmldConnectionError("%s: the connection is closed" % self.server)

    def _peer_alive(self) -> bool:
        """False when the daemon has closed this idle connection (or sent
        something no call asked for): a look at the socket, no request."""
        with self.lock:
            sock = self._sock
            if sock is None or self._pending:
                return False
            sock.settimeout(0)  # with a timeout, recv would wait for data first
            try:
                # The socket's own recv: TLS records are peeked, not decrypted.
                socket.socket.recv(sock, 1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return True  # nothing to read: as it should be
            except OSError:
                return False
            finally:
                sock.settimeout(self._timeout)
            return False  # end of stream, or bytes no call asked for

    # ---- the generic layer: any Request, the raw Response

    def _sendall(self, data):
        try:
            self._sock.sendall(data)
        except socket.timeout:
            self._fail(OmldTimeout, "send timed out after %ss" % self._timeout)
        except OSError as e:
            self._fail(OmldConnectionError, "send failed: %s" % _wire.os_error_text(e))

    def send_raw(self, data: bytes) -> None:
        """Writes raw bytes (tests of malformed input). The answer, if any,
        is not matched to a request id."""
        with self.lock:
            self._check_open()
            self._sendall(data)
            self._pending.append(None)

    def send(self, request: PbRequest) -> int:
        """Sets request.request_id, sends one frame, returns the id."""
        with self.lock:
            self._check_open()
            rid = next(self._ids)
            self._sendall(_wire.encode(request, rid))
            self._pending.append(rid)
            return rid

    def _read_frame(self):
        reader = self._reader
        while True:
            try:
                payload = reader.next()
            except _wire.FrameTooLong as e:
                self._fail(OmldProtocolError, str(e))
            if payload is not None:
                return payload
            try:
                chunk = self._sock.recv(max(65536, reader.missing()))
            except socket.timeout:
                self._fail(OmldTimeout, "no answer within %ss" % self._timeout)
            except OSError as e:
                self._fail(OmldConnectionError, "receive failed: %s" % _wire.os_error_text(e))
            if not chunk:
                self._fail(OmldConnectionError, "the connection was closed by close()"
                           if self._closing else "the daemon closed the connection")
            reader.feed(chunk)

    def recv(self) -> PbResponse:
        """Receives the next Response (an omld_pb2.Response, whatever its
        status; see check()). Checks it answers the oldest request sent."""
        with self.lock:
            self._check_open()
            try:
                resp = _wire.decode(self._read_frame())
            except ValueError as e:
                self._fail(OmldProtocolError, str(e))
            want = self._pending.popleft() if self._pending else None
            problem = _wire.mismatch(resp, want)
            if problem:
                self._fail(OmldProtocolError, problem)
            self.last_model_version = resp.model_version
            if resp.status.code == _wire.FRAME_TOO_LARGE:
                self.close()  # the daemon closes: the stream cannot be resynchronised
            return resp

    check = staticmethod(_wire.check)

    def call(self, request: PbRequest, expect: Optional[str] = None) -> PbResponse:
        """send + recv + check, holding the lock. expect: the Response body
        name an OK answer must carry (e.g. "classify"); a different one is
        a protocol error."""
        with self.lock:
            self.send(request)
            resp = self.check(self.recv())
            problem = _wire.wrong_body(resp, expect)
            if problem:
                self._fail(OmldProtocolError, problem)
            return resp

    def _run(self, op: "M.Op[T]") -> T:
        return op.parse(self.call(op.request, op.expect))

    # ---- items

    def put_items(self, items: Iterable[ItemLike], idempotency_key: Optional[str] = None,
                  wait_for_view: bool = False) -> PutResult:
        """Stores (or replaces, by id) a batch of items, all-or-nothing.
        items: Item, dict or (id, features[, label]) elements.
        idempotency_key: a retry with the same key is applied once (the
        result then has duplicate=True and the first answer's counts).
        wait_for_view: answered once a serving view includes the items."""
        return self._run(M.put_items(items, idempotency_key, wait_for_view))

    def delete_items(self, ids: Optional[Ids] = None, missing_ok: bool = False,
                     labels: Optional[Ids] = None, where: Optional[Where] = None) -> DeleteResult:
        """Deletes items by id, all-or-nothing (missing_ok: skip unknown
        ids), and every item of one of labels whose metadata matches where
        (delete by filter: ids may then be None)."""
        return self._run(M.delete_items(ids, missing_ok, labels, where))

    def count_items(self, labels: Optional[Ids] = None,
                    where: Optional[Where] = None) -> CountResult:
        """How many stored items have one of labels (None: any) and
        metadata matching where (None: any); total: every live item."""
        return self._run(M.count_items(labels, where))

    def list_items(self, cursor: int = 0, limit: Optional[int] = None,
                   labels: Optional[Ids] = None, where: Optional[Where] = None,
                   with_features: bool = False) -> ItemPage:
        """A page of the stored items from cursor (0: the start), of at most
        limit (the daemon's 100 when None), with one of labels and metadata
        matching where; pass next_cursor back for the next page (0: done).
        Every item stored before the first page and not deleted is listed
        exactly once."""
        return self._run(M.list_items(cursor, limit, labels, where, with_features))

    def get_items(self, ids: Ids) -> List[Item]:
        """The items, in the order of ids (NotFound names an unknown one)."""
        return self._run(M.get_items(ids))

    # ---- constraints

    def add_triplets(self, triplets: Iterable[TripletLike], partial: bool = False,
                     idempotency_key: Optional[str] = None,
                     wait_for_view: bool = False) -> TripletResult:
        """Queues (anchor, positive, negative) triplets for the learner,
        all-or-nothing; with partial=True the good ones are learned and
        each bad one is listed in the result's rejected (index, code,
        field, message) instead. Members: str -> stored id, sequence of
        floats -> inline vector. idempotency_key and wait_for_view as for
        put_items."""
        return self._run(M.add_triplets(triplets, partial, idempotency_key, wait_for_view))

    def add_pairs(self, pairs: Iterable[PairLike], idempotency_key: Optional[str] = None,
                  wait_for_view: bool = False) -> PairResult:
        """Adds (a, b, similar) pairs of stored ids (idempotency_key and
        wait_for_view as for put_items)."""
        return self._run(M.add_pairs(pairs, idempotency_key, wait_for_view))

    # ---- queries (k / threshold / model None: the daemon's default / live model)

    def classify(self, query: Ref, k: Optional[int] = None,
                 model: Optional[str] = None, where: Optional[Where] = None) -> Classification:
        """k-nearest-neighbour classification of an id or a vector (where:
        only items whose metadata matches vote)."""
        return self._run(M.classify(query, k, model, where))

    def verify(self, a: Ref, b: Ref, threshold: Optional[float] = None,
               model: Optional[str] = None) -> Verification:
        """Are a and b similar (OAHU Eq. 26)?"""
        return self._run(M.verify(a, b, threshold, model))

    def retrieve(self, query: Ref, k: Optional[int] = None, model: Optional[str] = None,
                 labels: Optional[Ids] = None, exclude_ids: Optional[Ids] = None,
                 offset: int = 0, min_similarity: Optional[float] = None,
                 where: Optional[Where] = None, with_metadata: bool = False) -> Retrieval:
        """The k stored items most like query, best first (a query by id
        never returns that id). labels: only items with one of these
        labels; exclude_ids: never these; offset: skip the best offset
        (paging, offset + k <= the daemon's max_k); min_similarity: only
        hits whose similarity (in [-1, 1], not k-dependent) is at least
        this; where: only items whose metadata matches ({"color": "red"},
        {"color": ["red", "blue"]}; several keys: all)."""
        return self._run(M.retrieve(query, k, model, labels, exclude_ids, offset,
                                    min_similarity, where, with_metadata))

    def recommend(self, positive: Iterable[Ref], negative: Iterable[Ref] = (),
                  k: Optional[int] = None, model: Optional[str] = None,
                  labels: Optional[Ids] = None, exclude_ids: Optional[Ids] = None,
                  offset: int = 0, min_similarity: Optional[float] = None,
                  where: Optional[Where] = None, with_metadata: bool = False) -> Retrieval:
        """Items like the positive examples and unlike the negative ones
        (ids or vectors; 1..64 and 0..64): on every head the query is the
        unit vector along 2 mean(positive) - mean(negative), then the
        search, filters and paging are retrieve()'s; an example named by id
        is never returned."""
        return self._run(M.recommend(positive, negative, k, model, labels, exclude_ids, offset,
                                     min_similarity, where, with_metadata))

    # ---- query batches: many queries in one request, answered together (one
    # matrix product per head for up to 128 queries at a time), faster per
    # query than one request each; each answer is the one its query gets
    # alone. 1..max_batch queries (10,000 by default) whose answers fit in
    # one frame; all-or-nothing: an error names the query's path, e.g.
    # "classify_batch.queries[3].query.id".

    def classify_batch(self, queries: Iterable[Ref], k: Optional[int] = None,
                       model: Optional[str] = None) -> List[Classification]:
        """Classifies every query (ids and/or vectors) in one ClassifyBatch
        request; k and model apply to each. Returns the Classifications in
        order."""
        return self._run(M.classify_batch(queries, k, model))

    def retrieve_batch(self, queries: Iterable[Ref], k: Optional[int] = None,
                       model: Optional[str] = None, labels: Optional[Ids] = None,
                       exclude_ids: Optional[Ids] = None, offset: int = 0,
                       min_similarity: Optional[float] = None,
                       where: Optional[Where] = None,
                       with_metadata: bool = False) -> List[Retrieval]:
        """retrieve() for every query in one RetrieveBatch request; k, model
        and the filters apply to each. Returns the Retrievals in order."""
        return self._run(M.retrieve_batch(queries, k, model, labels, exclude_ids, offset,
                                          min_similarity, where, with_metadata))

    def embed(self, item: Ref, model: Optional[str] = None) -> Embedding:
        """The L+1 head embeddings of an id or a vector, and alpha."""
        return self._run(M.embed(item, model))

    def export_model(self, model: Optional[str] = None) -> bytes:
        """The serving model (the live one, or the batch model `model`) as
        an OMLSNAP file: omld.model.load(...).embed(rows) embeds offline
        exactly as this daemon does at that model version."""
        return self._run(M.export_model(model))

    # ---- operations

    def status(self) -> Status:
        return self._run(M.status())

    def health(self) -> Health:
        return self._run(M.health())

    def auth(self, token: str) -> bool:
        """Authenticates this connection with token (see omld.proto,
        AUTHENTICATION); returns True for a read-write token (or a daemon
        without tokens), False for a read-only one. A wrong token raises
        Unauthenticated; the daemon closes the connection after three."""
        rw = self._run(M.auth(token))
        self.read_write = rw
        return rw

    def checkpoint(self) -> CheckpointResult:
        """Writes a checkpoint now; answers when it is durable."""
        return self._run(M.checkpoint())

    def wait_learned(self, applied: Optional[int] = None, timeout: float = 30.0,
                     poll: float = 0.02) -> Status:
        """Polls status until the learner queue is empty, at least `applied`
        triplets are applied (if given) and the serving view includes them;
        returns that Status. Raises OmldTimeout after `timeout` seconds
        (the connection stays open)."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.status()
            if M.learned(s, applied):
                return s
            if time.monotonic() > deadline:
                raise OmldTimeout(M.not_learned(self.server, timeout, s))
            time.sleep(poll)

    # ---- trainer: batch models (see TRAINER in omld.proto)

    def train_start(self, method: str, variant: Optional[str] = None,
                    params: Union[TrainParams, Mapping[str, Any], None] = None,
                    labels: Optional[Ids] = None, name: Optional[str] = None) -> TrainStartResult:
        """Queues a training job: method "triplet", "lanml", "danml",
        "contrastive", "lifted", "npair", "daml-contrastive", "daml-triplet",
        "daml-lifted", "daml-npair" or "damlrrm"; variant refines it (e.g.
        triplet "semihard" | "random"); params a TrainParams or a dict of its
        fields; labels: train on these labels' items only (None: every
        labelled item); name: the model's (None: "<method>-<job id>")."""
        return self._run(M.train_start(method, variant, params, labels, name))

    def train_status(self, job_id: int) -> JobInfo:
        return self._run(M.train_status(job_id))

    def train_cancel(self, job_id: int) -> JobInfo:
        """Cancels a queued job at once, a running one at its next step
        (cancel_requested; poll train_status). A finished job: Conflict."""
        return self._run(M.train_cancel(job_id))

    def wait_job(self, job_id: int, timeout: float = 60.0, poll: float = 0.05) -> JobInfo:
        """Polls train_status until the job is DONE, FAILED or CANCELLED;
        returns its JobInfo. Raises OmldTimeout after `timeout` seconds
        (the connection stays open, the job goes on)."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.train_status(job_id)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise OmldTimeout(M.job_not_finished(self.server, timeout, job))
            time.sleep(poll)

    def list_models(self) -> List[ModelInfo]:
        """The named batch models, by name."""
        return self._run(M.list_models())

    def promote(self, name: str) -> PromoteResult:
        """Makes the batch model the live model's trunk and head at its
        depth; answered once the new live view is serving."""
        return self._run(M.promote(name))

    def rollback(self) -> RollbackResult:
        """Undoes the last promote (one level); nothing to undo: Conflict."""
        return self._run(M.rollback())

    def delete_model(self, name: str) -> None:
        """Removes a batch model and its file (NotFound if unknown)."""
        self._run(M.delete_model(name))

    # ---- batch helpers

    def _pipeline(self, requests, window, want, on_ok, total, progress):
        with self.lock:  # the whole run: other threads' frames must not come between
            return self._pipeline_locked(requests, window, want, on_ok, total, progress)

    def _pipeline_locked(self, requests, window, want, on_ok, total, progress):
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
            problem = _wire.wrong_body(resp, want)
            if problem:
                self._fail(OmldProtocolError, problem)
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

    def put_items_pipelined(self, items: Iterable[ItemLike], batch: int = 1000, window: int = 8,
                            progress: Progress = None) -> BatchResult:
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
        total = len(items) if isinstance(items, Sized) else None
        return self._pipeline(self._chunks(items, batch, M.items_request), window, "put_items",
                              on_ok, total, progress)

    def add_triplets_pipelined(self, triplets: Iterable[TripletLike], batch: int = 1000,
                               window: int = 8, progress: Progress = None) -> BatchResult:
        """add_triplets over any iterable; see put_items_pipelined."""
        def on_ok(r, t):
            t.accepted += r.add_triplets.accepted
            t.queue_depth = r.add_triplets.queue_depth
        total = len(triplets) if isinstance(triplets, Sized) else None
        return self._pipeline(self._chunks(triplets, batch, M.triplets_request), window,
                              "add_triplets", on_ok, total, progress)

    def add_pairs_pipelined(self, pairs: Iterable[PairLike], batch: int = 1000, window: int = 8,
                            progress: Progress = None) -> BatchResult:
        """add_pairs over any iterable; see put_items_pipelined."""
        def on_ok(r, t):
            t.accepted += r.add_pairs.accepted
            t.derived_triplets += r.add_pairs.derived_triplets
        total = len(pairs) if isinstance(pairs, Sized) else None
        return self._pipeline(self._chunks(pairs, batch, M.pairs_request), window, "add_pairs",
                              on_ok, total, progress)

    def classify_many(self, queries: Iterable[Ref], k: Optional[int] = None,
                      model: Optional[str] = None, window: int = 32,
                      progress: Progress = None) -> List[Classification]:
        """Classifies every query (one request each, `window` in flight);
        returns the Classifications in order."""
        out = []
        total = len(queries) if isinstance(queries, Sized) else None

        def gen():
            for i, q in enumerate(queries):
                yield M.classify(q, k, model).request, 1, i

        self._pipeline(gen(), window, "classify", lambda r, t: out.append(M.classification(r)),
                       total, progress)
        return out

    # plain batching: the same with one request in flight
    def put_items_batched(self, items: Iterable[ItemLike], batch: int = 1000,
                          progress: Progress = None) -> BatchResult:
        return self.put_items_pipelined(items, batch, 1, progress)

    def add_triplets_batched(self, triplets: Iterable[TripletLike], batch: int = 1000,
                             progress: Progress = None) -> BatchResult:
        return self.add_triplets_pipelined(triplets, batch, 1, progress)


def connect(server: Server = DEFAULT_SERVER, timeout: Optional[float] = 30.0,
            **kw: Any) -> Client:
    """Client(server, timeout, **kw), e.g. connect("10.0.0.5:7600", token="...")."""
    return Client(server, timeout, **kw)
