"""omld.pool - a bounded pool of blocking Clients for many threads.

A web service with N worker threads shares one ClientPool: each request
borrows a Client (one connection), makes its calls and gives it back, so
at most `size` connections are open and calls of different threads run in
parallel (a single shared Client would make them take turns).

Broken connections are replaced: a Client that comes back closed (every
transport error closes it: OmldConnectionError, OmldTimeout,
OmldProtocolError, FrameTooLarge) or with requests still unanswered (its
stream is out of step) is thrown away, and the next borrower gets a new
connection in its place. An idle connection the daemon has closed since
(a restart, an idle timeout) is noticed when it is borrowed, by a look at
its socket, and replaced before it is handed out. A call that failed is
not retried: whether that is safe is the caller's to say (writes with an
idempotency_key are).

    pool = omld.ClientPool("127.0.0.1:7600", size=8, timeout=10, token=TOKEN)
    with pool.client() as c:
        c.add_triplets(batch)
    label = pool.call(lambda c: c.classify(item_id, k=5).label)
    pool.close()
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, TypeVar

from ._wire import DEFAULT_SERVER, Server
from .client import Client
from .errors import OmldConnectionError, OmldTimeout

T = TypeVar("T")


class ClientPool:
    """Up to `size` Clients of server, made when first needed; kw goes to
    each Client (timeout, token, max_frame). acquire_timeout: how long
    client() / call() wait for a free one (None: as long as it takes),
    then OmldTimeout. Thread-safe; a context manager (close() on exit)."""

    def __init__(self, server: Server = DEFAULT_SERVER, size: int = 8,
                 acquire_timeout: Optional[float] = None, **kw: Any) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.server = server
        self.size = size
        self.acquire_timeout = acquire_timeout
        self._kw = kw
        self._cond = threading.Condition()
        self._idle: List[Client] = []  # newest last: the warmest connection goes out first
        self._open = 0                 # clients made and not thrown away (idle + in use)
        self._closed = False
        self.reconnects = 0            # connections thrown away as broken

    @property
    def open(self) -> int:
        """Connections open now (idle or in use), at most size."""
        return self._open

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def closed(self) -> bool:
        return self._closed

    def acquire(self, timeout: Optional[float] = None) -> Client:
        """A Client for this thread's exclusive use until release(). Prefer
        client() or call(), which give it back whatever happens."""
        wait = self.acquire_timeout if timeout is None else timeout
        deadline = None if wait is None else time.monotonic() + wait
        c: Optional[Client] = None
        with self._cond:
            while True:
                if self._closed:
                    raise OmldConnectionError("%s: the pool is closed" % (self.server,))
                if self._idle:
                    c = self._idle.pop()
                    break
                if self._open < self.size:
                    self._open += 1  # this slot is ours; connect outside the lock
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise OmldTimeout("%s: no pooled client free within %ss (size %d)"
                                      % (self.server, wait, self.size))
                self._cond.wait(left)
        if c is not None:
            if c._peer_alive():
                return c
            c.close()  # closed by the daemon while idle: a new one in its slot
            with self._cond:
                self.reconnects += 1
        try:
            return Client(self.server, **self._kw)
        except BaseException:
            self._drop_slot()
            raise

    def release(self, c: Client) -> None:
        """Gives c back: kept for the next borrower, or thrown away (its slot
        freed) when its connection is closed or out of step."""
        broken = c.closed or c.in_flight > 0
        if broken:
            c.close()
        with self._cond:
            if broken or self._closed:
                self._open -= 1
                self.reconnects += broken
            else:
                self._idle.append(c)
            self._cond.notify()
        if self._closed:
            c.close()

    def _drop_slot(self):
        with self._cond:
            self._open -= 1
            self._cond.notify()

    @contextlib.contextmanager
    def client(self, timeout: Optional[float] = None) -> Iterator[Client]:
        """with pool.client() as c: ... - a Client for the block, given
        back at its end (thrown away if the block broke its connection)."""
        c = self.acquire(timeout)
        try:
            yield c
        finally:
            self.release(c)

    def call(self, fn: Callable[[Client], T]) -> T:
        """fn(client) with a borrowed client; its result (e.g.
        pool.call(lambda c: c.classify(item, k=5)))."""
        with self.client() as c:
            return fn(c)

    def close(self) -> None:
        """Closes the idle connections now and the borrowed ones as they come
        back; acquire() then raises OmldConnectionError. Idempotent."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for c in idle:
            c.close()

    def __enter__(self) -> "ClientPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<omld.ClientPool %s %d/%d open%s>" % (self.server, self._open, self.size,
                                                       " closed" if self._closed else "")
