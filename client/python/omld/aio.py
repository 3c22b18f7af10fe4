"""omld.aio - an asyncio client for omld: many calls in flight on one connection.

    c = await omld.connect_async("127.0.0.1:7600", timeout=10, token=TOKEN)
    labels = await asyncio.gather(*(c.classify(q, k=5) for q in queries))
    await c.close()

Every call writes its Request frame as soon as its coroutine starts (before
its first suspension), so calls started one after another are sent, and
answered, in that order; any number may be waiting at once. The daemon
answers in request order, so each answer goes to the oldest waiting call
and its echoed request_id is checked against that call's. The requests and
results are those of the blocking Client (omld._messages builds and reads
both), and so are the exceptions:

* a non-OK Status raises the OmldError subclass in its own call only; the
  connection stays usable;
* a transport failure (the daemon closed, an I/O error, an answer that
  makes no sense) closes the connection and raises OmldConnectionError (or
  OmldProtocolError) in every call waiting;
* a call without an answer within its timeout (the client's, or the call's
  own `timeout=`) raises OmldTimeout, and, because the answers behind it
  cannot overtake it, closes the connection: the other waiting calls raise
  OmldConnectionError. Cancelling a call (task.cancel(), asyncio.wait_for)
  does not close anything: its answer is read and dropped.

An AsyncClient belongs to the event loop that connected it; it is not
thread-safe (use one per loop, or the blocking Client / ClientPool for
threads). It does not reconnect by itself.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import math
import ssl
import time
from typing import Any, Iterable, List, Mapping, Optional, TypeVar, Union

from . import _messages as M
from . import _wire
from ._wire import DEFAULT_MAX_FRAME, DEFAULT_SERVER, PbRequest, PbResponse, Server, parse_server
from .errors import OmldConnectionError, OmldError, OmldProtocolError, OmldTimeout
from .types import (CheckpointResult, Classification, CountResult, DeleteResult, Embedding,
                    Health, Item, ItemLike, ItemPage, JobInfo, ModelInfo, PairLike, PairResult,
                    PromoteResult, PutResult, Ref, Retrieval, RollbackResult, Status, TrainParams,
                    TrainStartResult, TripletLike, TripletResult, Verification, Where)

__all__ = ["AsyncClient", "connect_async"]

T = TypeVar("T")
Ids = Union[str, Iterable[str]]


class _Call:
    """One request waiting for its answer."""
    __slots__ = ("id", "expect", "future", "timer")

    def __init__(self, rid, expect, future):
        self.id = rid
        self.expect = expect
        self.future = future
        self.timer = None


class _Protocol(asyncio.Protocol):
    """The transport's callbacks, handed to the client."""

    def __init__(self, client):
        self._client = client

    def data_received(self, data):
        self._client._on_data(data)

    def connection_lost(self, exc):
        self._client._on_lost(exc)

    def pause_writing(self):
        self._client._writable.clear()

    def resume_writing(self):
        self._client._writable.set()


class AsyncClient:
    """A connection to omld for asyncio (see the module's docstring).

    server, timeout, max_frame, token, tls, cafile, ssl_context,
    server_hostname, certfile, keyfile: as for omld.Client; timeout also
    bounds connect() and is each call's unless the call gives its own
    `timeout=` (seconds; math.inf: none). Connect with
    `await omld.connect_async(...)`, `await AsyncClient(...).connect()` or
    `async with AsyncClient(...) as c:`; close with `await c.close()`.
    """

    def __init__(self, server: Server = DEFAULT_SERVER, timeout: Optional[float] = 30.0,
                 max_frame: int = DEFAULT_MAX_FRAME, token: Optional[str] = None, *,
                 tls: bool = False, cafile: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 server_hostname: Optional[str] = None, certfile: Optional[str] = None,
                 keyfile: Optional[str] = None) -> None:
        self.server = server
        self._address = parse_server(server)  # a bad one: ValueError now, as Client's
        self._tls = _wire.tls_context(tls, cafile, ssl_context, certfile, keyfile)
        self._server_hostname = server_hostname
        self.timeout = timeout
        self.last_model_version = 0
        self.read_write: Optional[bool] = None  # set by auth()
        self._token = token
        self._reader = _wire.FrameReader(max_frame)
        self._ids = itertools.count(1)
        self._pending: collections.deque = collections.deque()  # _Calls, oldest first
        self._transport: Optional[asyncio.Transport] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._writable: Optional[asyncio.Event] = None
        self._lost: Optional[asyncio.Future] = None
        self._gone: Optional[str] = None  # why the connection is closed, once it is

    # ---- connection

    async def connect(self) -> "AsyncClient":
        """Opens the connection (and sends Auth when a token was given);
        returns self. OmldConnectionError / OmldTimeout if it cannot."""
        if self._loop is not None:
            raise RuntimeError("omld.AsyncClient.connect() called twice")
        kind, addr = self._address
        self._loop = loop = asyncio.get_running_loop()
        self._writable = asyncio.Event()
        self._writable.set()
        self._lost = loop.create_future()
        if kind == "unix":
            opening = loop.create_unix_connection(lambda: _Protocol(self), addr)
        else:
            name = None if self._tls is None else self._server_hostname or addr[0]
            opening = loop.create_connection(lambda: _Protocol(self), addr[0], addr[1],
                                             ssl=self._tls, server_hostname=name)
        try:
            self._transport, _ = await asyncio.wait_for(opening, self.timeout)
        except asyncio.TimeoutError:
            self._gone = "connect timed out"
            raise OmldTimeout("connect to %s: timed out after %ss" % (self.server, self.timeout))
        except ssl.SSLError as e:
            self._gone = "connect failed"
            raise OmldConnectionError(_wire.tls_failure(self.server, e))
        except OSError as e:
            self._gone = "connect failed"
            raise OmldConnectionError("connect to %s: %s" % (self.server, e.strerror or e))
        if self._token is not None:
            try:
                await self.auth(self._token)
            except BaseException:
                await self.close()
                raise
        return self

    @property
    def closed(self) -> bool:
        return self._transport is None or self._gone is not None

    @property
    def in_flight(self) -> int:
        """Calls sent and not yet answered."""
        return len(self._pending)

    @property
    def max_frame(self) -> int:
        return self._reader.max_frame

    async def close(self) -> None:
        """Closes the connection (idempotent); calls still waiting raise
        OmldConnectionError. Returns once the socket is closed."""
        if self._transport is None:
            return
        self._shut(OmldConnectionError, "closed by the client", graceful=True)
        assert self._lost is not None  # made by connect() with the transport
        await asyncio.shield(self._lost)

    async def __aenter__(self) -> "AsyncClient":
        if self._loop is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return "<omld.AsyncClient %s%s>" % (self.server, " closed" if self.closed else "")

    def _shut(self, cls, reason, first=None, first_exc=None, graceful=False):
        """Closes the connection once: every waiting call gets a new
        cls("server: reason"), but `first` (a _Call) gets first_exc."""
        if self._gone is not None:
            return
        self._gone = reason
        calls, self._pending = self._pending, collections.deque()
        for c in calls:
            if c.timer is not None:
                c.timer.cancel()
            if not c.future.done():
                c.future.set_exception(first_exc if c is first
                                       else cls("%s: %s" % (self.server, reason)))
        self._reader.clear()
        self._writable.set()
        if graceful:
            self._transport.close()
        else:
            self._transport.abort()

    # ---- the transport's side

    def _on_data(self, data):
        self._reader.feed(data)
        while self._gone is None:
            try:
                payload = self._reader.next()
                if payload is None:
                    return
                resp = _wire.decode(payload)
            except (_wire.FrameTooLong, ValueError) as e:
                return self._shut(OmldProtocolError, str(e))
            self._answer(resp)

    def _answer(self, resp):
        if not self._pending:
            return self._shut(OmldProtocolError,
                              "an answer (request id %d) to no request" % resp.request_id)
        call = self._pending[0]
        problem = _wire.mismatch(resp, call.id)
        if problem:
            return self._shut(OmldProtocolError, problem)
        self._pending.popleft()
        if call.timer is not None:
            call.timer.cancel()
        self.last_model_version = resp.model_version
        try:
            _wire.check(resp)
        except OmldError as e:
            if not call.future.done():
                call.future.set_exception(e)
            if resp.status.code == _wire.FRAME_TOO_LARGE:  # the daemon closes the connection
                self._shut(OmldConnectionError, "closed after FRAME_TOO_LARGE")
            return
        problem = _wire.wrong_body(resp, call.expect)
        if problem:
            if not call.future.done():
                call.future.set_exception(OmldProtocolError("%s: %s" % (self.server, problem)))
            return self._shut(OmldProtocolError, problem)
        if not call.future.done():
            call.future.set_result(resp)

    def _on_lost(self, exc):
        self._shut(OmldConnectionError, "the daemon closed the connection" if exc is None
                   else "connection lost: %s%s" % (exc, _wire.client_cert_hint(exc)))
        if not self._lost.done():
            self._lost.set_result(None)

    def _on_timeout(self, call, seconds):
        if call.future.done():  # its caller gave up (cancelled): the others have their timers
            return
        self._shut(OmldConnectionError, "closed: request %d timed out" % call.id, call,
                   OmldTimeout("%s: no answer within %ss" % (self.server, seconds)))

    # ---- the generic layer

    def _send(self, request, expect, timeout):
        if self._transport is None:
            raise OmldConnectionError("%s: not connected (await connect() first)" % self.server)
        if self._gone is not None:
            raise OmldConnectionError("%s: the connection is closed (%s)"
                                      % (self.server, self._gone))
        rid = next(self._ids)
        frame = _wire.encode(request, rid)
        call = _Call(rid, expect, self._loop.create_future())
        seconds = self.timeout if timeout is None else timeout
        if seconds is not None and seconds != math.inf:
            call.timer = self._loop.call_later(seconds, self._on_timeout, call, seconds)
        self._pending.append(call)
        self._transport.write(frame)
        return call

    async def call(self, request: PbRequest, expect: Optional[str] = None, *,
                   timeout: Optional[float] = None) -> PbResponse:
        """Sends any Request (its request_id is set) and returns the OK
        Response; raises as the typed calls do. expect: the body name an OK
        answer must carry. timeout: this call's (None: the client's)."""
        call = self._send(request, expect, timeout)
        writable = self._writable
        assert writable is not None  # made by connect() with the transport
        try:
            if not writable.is_set():  # the transport's buffer is full: wait
                await writable.wait()
            return await call.future
        except asyncio.CancelledError:
            call.future.cancel()  # its answer will be read and dropped
            raise

    async def _run(self, op: "M.Op[T]", timeout: Optional[float]) -> T:
        return op.parse(await self.call(op.request, op.expect, timeout=timeout))

    # ---- items, constraints, queries: as omld.Client's, plus a per-call timeout

    async def put_items(self, items: Iterable[ItemLike], idempotency_key: Optional[str] = None,
                        wait_for_view: bool = False, *,
                        timeout: Optional[float] = None) -> PutResult:
        """As Client.put_items."""
        return await self._run(M.put_items(items, idempotency_key, wait_for_view), timeout)

    async def delete_items(self, ids: Optional[Ids] = None, missing_ok: bool = False,
                           labels: Optional[Ids] = None, where: Optional[Where] = None, *,
                           timeout: Optional[float] = None) -> DeleteResult:
        """As Client.delete_items (by ids, or by labels and metadata)."""
        return await self._run(M.delete_items(ids, missing_ok, labels, where), timeout)

    async def count_items(self, labels: Optional[Ids] = None, where: Optional[Where] = None, *,
                          timeout: Optional[float] = None) -> CountResult:
        return await self._run(M.count_items(labels, where), timeout)

    async def list_items(self, cursor: int = 0, limit: Optional[int] = None,
                         labels: Optional[Ids] = None, where: Optional[Where] = None,
                         with_features: bool = False, *,
                         timeout: Optional[float] = None) -> ItemPage:
        return await self._run(M.list_items(cursor, limit, labels, where, with_features), timeout)

    async def get_items(self, ids: Ids, *, timeout: Optional[float] = None) -> List[Item]:
        return await self._run(M.get_items(ids), timeout)

    async def add_triplets(self, triplets: Iterable[TripletLike], partial: bool = False,
                           idempotency_key: Optional[str] = None, wait_for_view: bool = False, *,
                           timeout: Optional[float] = None) -> TripletResult:
        """As Client.add_triplets."""
        return await self._run(M.add_triplets(triplets, partial, idempotency_key, wait_for_view),
                               timeout)

    async def add_pairs(self, pairs: Iterable[PairLike], idempotency_key: Optional[str] = None,
                        wait_for_view: bool = False, *,
                        timeout: Optional[float] = None) -> PairResult:
        return await self._run(M.add_pairs(pairs, idempotency_key, wait_for_view), timeout)

    async def classify(self, query: Ref, k: Optional[int] = None, model: Optional[str] = None,
                       where: Optional[Where] = None, *,
                       timeout: Optional[float] = None) -> Classification:
        return await self._run(M.classify(query, k, model, where), timeout)

    async def verify(self, a: Ref, b: Ref, threshold: Optional[float] = None,
                     model: Optional[str] = None, *,
                     timeout: Optional[float] = None) -> Verification:
        return await self._run(M.verify(a, b, threshold, model), timeout)

    async def retrieve(self, query: Ref, k: Optional[int] = None, model: Optional[str] = None,
                       labels: Optional[Ids] = None, exclude_ids: Optional[Ids] = None,
                       offset: int = 0, min_similarity: Optional[float] = None,
                       where: Optional[Where] = None, with_metadata: bool = False, *,
                       timeout: Optional[float] = None) -> Retrieval:
        """As Client.retrieve (filters, paging, min_similarity)."""
        return await self._run(M.retrieve(query, k, model, labels, exclude_ids, offset,
                                          min_similarity, where, with_metadata), timeout)

    async def recommend(self, positive: Iterable[Ref], negative: Iterable[Ref] = (),
                        k: Optional[int] = None, model: Optional[str] = None,
                        labels: Optional[Ids] = None, exclude_ids: Optional[Ids] = None,
                        offset: int = 0, min_similarity: Optional[float] = None,
                        where: Optional[Where] = None, with_metadata: bool = False, *,
                        timeout: Optional[float] = None) -> Retrieval:
        """As Client.recommend."""
        return await self._run(M.recommend(positive, negative, k, model, labels, exclude_ids,
                                           offset, min_similarity, where, with_metadata),
                               timeout)

    async def classify_batch(self, queries: Iterable[Ref], k: Optional[int] = None,
                             model: Optional[str] = None, *,
                             timeout: Optional[float] = None) -> List[Classification]:
        """As Client.classify_batch: one request for many queries."""
        return await self._run(M.classify_batch(queries, k, model), timeout)

    async def retrieve_batch(self, queries: Iterable[Ref], k: Optional[int] = None,
                             model: Optional[str] = None, labels: Optional[Ids] = None,
                             exclude_ids: Optional[Ids] = None, offset: int = 0,
                             min_similarity: Optional[float] = None,
                             where: Optional[Where] = None, with_metadata: bool = False, *,
                             timeout: Optional[float] = None) -> List[Retrieval]:
        return await self._run(M.retrieve_batch(queries, k, model, labels, exclude_ids, offset,
                                                min_similarity, where, with_metadata), timeout)

    async def embed(self, item: Ref, model: Optional[str] = None, *,
                    timeout: Optional[float] = None) -> Embedding:
        return await self._run(M.embed(item, model), timeout)

    async def export_model(self, model: Optional[str] = None, *,
                           timeout: Optional[float] = None) -> bytes:
        return await self._run(M.export_model(model), timeout)

    # ---- operations

    async def status(self, *, timeout: Optional[float] = None) -> Status:
        return await self._run(M.status(), timeout)

    async def health(self, *, timeout: Optional[float] = None) -> Health:
        return await self._run(M.health(), timeout)

    async def checkpoint(self, *, timeout: Optional[float] = None) -> CheckpointResult:
        return await self._run(M.checkpoint(), timeout)

    async def auth(self, token: str, *, timeout: Optional[float] = None) -> bool:
        """As Client.auth: True for a read-write token."""
        rw = await self._run(M.auth(token), timeout)
        self.read_write = rw
        return rw

    async def wait_learned(self, applied: Optional[int] = None, timeout: float = 30.0,
                           poll: float = 0.02) -> Status:
        """As Client.wait_learned (OmldTimeout after `timeout` seconds; the
        connection stays open)."""
        deadline = time.monotonic() + timeout
        while True:
            s = await self.status()
            if M.learned(s, applied):
                return s
            if time.monotonic() > deadline:
                raise OmldTimeout(M.not_learned(self.server, timeout, s))
            await asyncio.sleep(poll)

    # ---- trainer

    async def train_start(self, method: str, variant: Optional[str] = None,
                          params: Union[TrainParams, Mapping[str, Any], None] = None,
                          labels: Optional[Ids] = None, name: Optional[str] = None, *,
                          timeout: Optional[float] = None) -> TrainStartResult:
        """As Client.train_start."""
        return await self._run(M.train_start(method, variant, params, labels, name), timeout)

    async def train_status(self, job_id: int, *, timeout: Optional[float] = None) -> JobInfo:
        return await self._run(M.train_status(job_id), timeout)

    async def train_cancel(self, job_id: int, *, timeout: Optional[float] = None) -> JobInfo:
        return await self._run(M.train_cancel(job_id), timeout)

    async def wait_job(self, job_id: int, timeout: float = 60.0, poll: float = 0.05) -> JobInfo:
        """As Client.wait_job: the JobInfo once DONE, FAILED or CANCELLED."""
        deadline = time.monotonic() + timeout
        while True:
            job = await self.train_status(job_id)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise OmldTimeout(M.job_not_finished(self.server, timeout, job))
            await asyncio.sleep(poll)

    async def list_models(self, *, timeout: Optional[float] = None) -> List[ModelInfo]:
        return await self._run(M.list_models(), timeout)

    async def promote(self, name: str, *, timeout: Optional[float] = None) -> PromoteResult:
        return await self._run(M.promote(name), timeout)

    async def rollback(self, *, timeout: Optional[float] = None) -> RollbackResult:
        return await self._run(M.rollback(), timeout)

    async def delete_model(self, name: str, *, timeout: Optional[float] = None) -> None:
        await self._run(M.delete_model(name), timeout)


async def connect_async(server: Server = DEFAULT_SERVER, timeout: Optional[float] = 30.0,
                        token: Optional[str] = None,
                        max_frame: int = DEFAULT_MAX_FRAME, **tls: Any) -> AsyncClient:
    """A connected AsyncClient (Auth sent first when token is given: a wrong
    one raises Unauthenticated and closes it); tls: tls=, cafile=,
    ssl_context=, server_hostname=, certfile=, keyfile= as for AsyncClient."""
    return await AsyncClient(server, timeout, max_frame, token, **tls).connect()
