#!/usr/bin/python3
"""Tests of omld.AsyncClient (asyncio) against a real omld (ctest python_aio).

The daemon, its data and its arguments are test_client.py's (Daemon,
MODEL_ARGS, 4 classes of items in 8 dimensions). Checked here: hundreds of
concurrent calls on one connection with asyncio.gather, each answer its
call's own; daemon errors (code and field) rejecting only their own call;
per-call and client timeouts; a cancelled call; a daemon that closes; the
trainer operations; tokens; the same answers as the blocking Client.

Environment as test_client.py (OMLD_BIN, OMLD_PB2_DIR). Exit 77 (a ctest
skip) when this Python has no google.protobuf.
"""
import asyncio
import math
import os
import signal
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_client import (CLASSES, ID, LABEL, MAX_K, MODEL_ARGS, N_ITEMS, RO_TOKEN,  # noqa: E402
                         RW_TOKEN, X, Daemon, f32, omld, triplet)

D = None


def setUpModule():
    global D
    D = Daemon(MODEL_ARGS)
    with omld.Client(D.rpc, timeout=20) as c:
        c.put_items([(ID[i], X[i], LABEL[i]) for i in range(N_ITEMS)])
        c.add_triplets([triplet(i) for i in range(400)])
        c.wait_learned()


def tearDownModule():
    if D is not None:
        rc = D.stop(signal.SIGTERM)
        D.cleanup()
        assert rc == 0, rc


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Silent:
    """A TCP peer that accepts and never answers (or closes at once)."""

    def __init__(self, close_at_once=False):
        self.close_at_once = close_at_once
        self.conns = []

    async def __aenter__(self):
        async def on_conn(reader, writer):
            self.conns.append(writer)
            if self.close_at_once:
                await reader.read(1)
                writer.close()
        self.server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
        self.addr = "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        for w in self.conns:
            w.close()
        self.server.close()
        await self.server.wait_closed()


class TestAsyncClient(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.c = await omld.connect_async(D.rpc, timeout=20)

    async def asyncTearDown(self):
        await self.c.close()

    async def expect(self, cls, field, coro):
        with self.assertRaises(cls) as cm:
            await coro
        e = cm.exception
        self.assertIsInstance(e, omld.OmldError)
        self.assertEqual((e.code, e.code_name), (cls.code, omld.code_name(cls.code)))
        if field is not None:
            self.assertEqual(e.field, field, str(e))
        return e

    async def test_01_operations(self):
        c = self.c
        self.assertFalse(c.closed)
        r = await c.put_items([("aio-1", X[1], LABEL[1]), {"id": "aio-2", "features": X[2]}],
                              idempotency_key="aio-put-1")
        self.assertEqual((r.created, r.replaced, r.duplicate), (2, 0, False))
        again = await c.put_items([("aio-1", X[1], LABEL[1])], idempotency_key="aio-put-1")
        self.assertEqual((again.created, again.duplicate), (2, True))
        a, b = await c.get_items(["aio-1", "aio-2"])
        self.assertEqual((a.id, a.label, a.features, b.label), ("aio-1", LABEL[1], f32(X[1]), None))
        t = await c.add_triplets([triplet(1), ("aio-1", ID[1 + CLASSES], "ghost")], partial=True,
                                 wait_for_view=True)
        self.assertEqual((t.accepted, [(x.index, x.code) for x in t.rejected]),
                         (1, [(1, "NOT_FOUND")]))
        p = await c.add_pairs([(ID[0], ID[CLASSES], True)])
        self.assertEqual(p.accepted, 1)
        self.assertEqual((await c.delete_items(["aio-1", "aio-2"])).deleted, 2)
        self.assertEqual((await c.classify(ID[2], k=5)).label, LABEL[2])
        v = await c.verify(ID[0], ID[0], threshold=0.5)
        self.assertTrue(v.similar)
        other = LABEL[1]
        hits = await c.retrieve(ID[0], k=4, labels=[other], exclude_ids=[ID[1]], offset=1,
                                min_similarity=-1.0)
        self.assertEqual(len(hits), 4)
        self.assertTrue(all(h.label == other and h.id != ID[1] for h in hits), hits)
        rec = await c.recommend([ID[0], ID[CLASSES]], negative=[ID[1]], k=5)
        self.assertEqual(len(rec), 5)
        cb = await c.classify_batch([ID[0], ID[1], X[2]], k=5)
        self.assertEqual([x.label for x in cb], [LABEL[0], LABEL[1], LABEL[2]])
        rb = await c.retrieve_batch([ID[0], ID[1]], k=3)
        self.assertEqual([len(x) for x in rb], [3, 3])
        e = await c.embed(ID[0])
        self.assertEqual((len(e.heads), len(e.alpha)), (3, 3))
        s = await c.wait_learned()
        self.assertEqual((s.dim, s.depth, s.queue_depth), (8, 2, 0))
        self.assertGreaterEqual(s.duplicates, 1)
        self.assertEqual(await c.health(), omld.Health(True, True, False, c.last_model_version))
        self.assertTrue(await c.auth("anything"))  # no tokens configured: read-write
        self.assertTrue(c.read_write)
        cp = await c.checkpoint()
        self.assertTrue(os.path.isfile(cp.path), cp)
        self.assertEqual(c.in_flight, 0)

    async def test_02_same_answers_as_the_blocking_client(self):
        queries = [ID[i] for i in range(20)] + [X[3]]
        with omld.Client(D.rpc, timeout=20) as sync:
            for _ in range(50):
                want = sync.classify_batch(queries, k=5)
                got = await asyncio.gather(*(self.c.classify(q, k=5) for q in queries))
                if all(g.model_version == want[0].model_version for g in got):
                    break
            self.assertEqual(list(got), want)
            self.assertEqual(await self.c.get_items(ID[:5]), sync.get_items(ID[:5]))
            self.assertEqual(await self.c.list_models(), sync.list_models())

    async def test_03_gather_hundreds_on_one_connection(self):
        """600 calls of seven kinds in flight at once on one connection;
        every answer is checked against its own call."""
        c = self.c
        calls, checks = [], []
        for n in range(600):
            i = (n * 13) % N_ITEMS
            kind = n % 6
            if kind == 0:
                calls.append(c.get_items([ID[i]]))
                checks.append(lambda r, i=i: [x.id for x in r] == [ID[i]] and
                              r[0].features == f32(X[i]))
            elif kind == 1:
                k = 1 + n % 7
                calls.append(c.retrieve(ID[i], k=k))
                checks.append(lambda r, i=i, k=k: len(r) == k and ID[i] not in r.ids)
            elif kind == 2:
                calls.append(c.verify(ID[i], X[i]))
                checks.append(lambda r: len(r.distances) == 3)
            elif kind == 3:
                calls.append(c.classify(ID[i], k=5))
                checks.append(lambda r, i=i: r.label == LABEL[i])
            elif kind == 4:
                calls.append(c.classify_batch([ID[i], ID[(i + 1) % N_ITEMS]], k=5))
                checks.append(lambda r, i=i: [x.label for x in r] ==
                              [LABEL[i], LABEL[(i + 1) % N_ITEMS]])
            else:
                calls.append(c.status())
                checks.append(lambda r: r.items == N_ITEMS)
        t0 = time.monotonic()
        results = await asyncio.gather(*calls)
        elapsed = time.monotonic() - t0
        bad = [(n, r) for n, (r, ok) in enumerate(zip(results, checks)) if not ok(r)]
        self.assertEqual(bad[:3], [])
        self.assertEqual(c.in_flight, 0)
        self.assertLess(elapsed, 60)

    async def test_04_errors_reject_only_their_call(self):
        c = self.c
        calls = []
        for n in range(200):
            if n % 10 == 3:
                calls.append(c.classify("ghost-%d" % n))
            elif n % 10 == 7:
                calls.append(c.retrieve(ID[0], k=MAX_K + 1))
            else:
                calls.append(c.get_items([ID[n % N_ITEMS]]))
        results = await asyncio.gather(*calls, return_exceptions=True)
        for n, r in enumerate(results):
            if n % 10 == 3:
                self.assertIsInstance(r, omld.NotFound)
                self.assertEqual((r.code, r.code_name, r.field), (2, "NOT_FOUND", "classify.query.id"))
            elif n % 10 == 7:
                self.assertIsInstance(r, omld.InvalidArgument)
                self.assertEqual(r.field, "retrieve.k")
            else:
                self.assertEqual(r[0].id, ID[n % N_ITEMS])
        await self.expect(omld.WrongDimension, "put_items.items[0].features",
                          c.put_items([("aio-bad", X[0][:3])]))
        await self.expect(omld.NonFinite, None, c.verify(ID[0], [math.nan] * 8))
        await self.expect(omld.InvalidArgument, "body", c.call(omld.pb.Request()))
        await self.expect(omld.NotFound, "classify.model", c.classify(ID[0], model="nope"))
        # Bad arguments: raised before anything is sent.
        with self.assertRaises(TypeError):
            await c.classify(42)
        with self.assertRaises(ValueError):
            await c.recommend([])
        self.assertFalse(c.closed)
        self.assertTrue((await c.health()).live)

    async def test_05_cancelled_call(self):
        """A cancelled call's answer is read and dropped; the connection
        and the other calls go on."""
        c = self.c
        tasks = [asyncio.ensure_future(c.get_items([ID[i % N_ITEMS]])) for i in range(100)]
        await asyncio.sleep(0)  # every task has sent its request
        self.assertEqual(c.in_flight, 100)
        tasks[40].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        self.assertIsInstance(done[40], asyncio.CancelledError)
        for i, r in enumerate(done):
            if i != 40:
                self.assertEqual(r[0].id, ID[i % N_ITEMS])
        # asyncio.wait_for: the same.
        with self.assertRaises(asyncio.TimeoutError):
            await asyncio.wait_for(c.add_triplets([triplet(0)], wait_for_view=True), 1e-6)
        self.assertEqual((await c.get_items([ID[3]]))[0].id, ID[3])
        self.assertEqual(c.in_flight, 0)
        self.assertFalse(c.closed)

    async def test_06_timeouts(self):
        async with Silent() as peer:
            c = await omld.connect_async(peer.addr, timeout=30)
            slow = asyncio.ensure_future(c.status())          # the client's 30 s
            t0 = time.monotonic()
            with self.assertRaises(omld.OmldTimeout) as cm:
                await c.health(timeout=0.2)                    # this call's 0.2 s
            self.assertLess(time.monotonic() - t0, 5)
            self.assertIn("within 0.2s", str(cm.exception))
            # The answers behind it cannot overtake it: the connection is closed.
            with self.assertRaises(omld.OmldConnectionError) as cm:
                await slow
            self.assertNotIsInstance(cm.exception, omld.OmldTimeout)
            self.assertTrue(c.closed)
            with self.assertRaises(omld.OmldConnectionError):
                await c.health()
            await c.close()
            c = await omld.connect_async(peer.addr, timeout=0.3)  # the client's timeout
            with self.assertRaises(omld.OmldTimeout):
                await c.status()
            await c.close()
        # A generous per-call timeout on a live daemon; math.inf: none.
        self.assertTrue((await self.c.health(timeout=math.inf)).live)
        self.assertTrue((await self.c.health(timeout=10)).live)

    async def test_07_transport_errors(self):
        with self.assertRaises(omld.OmldConnectionError) as cm:
            await omld.connect_async("127.0.0.1:%d" % free_port(), timeout=2)
        self.assertNotIsInstance(cm.exception, omld.OmldTimeout)
        async with Silent(close_at_once=True) as peer:
            c = await omld.connect_async(peer.addr, timeout=5)
            calls = [c.health() for _ in range(5)]
            for r in await asyncio.gather(*calls, return_exceptions=True):
                self.assertIsInstance(r, omld.OmldConnectionError)
            self.assertTrue(c.closed)
            await c.close()
        # Closing with calls in flight: they raise OmldConnectionError.
        c = await omld.connect_async(D.rpc, timeout=5)
        waiting = asyncio.ensure_future(c.add_triplets([triplet(2)], wait_for_view=True))
        await asyncio.sleep(0)
        await c.close()
        with self.assertRaises(omld.OmldConnectionError):
            await waiting
        with self.assertRaises(ValueError):
            omld.AsyncClient("no-port")

    async def test_08_unix_socket_and_context_manager(self):
        async with omld.AsyncClient("unix:" + D.unix, timeout=10) as u:
            got = await asyncio.gather(*(u.classify(ID[i], k=5) for i in range(40)))
            self.assertEqual([g.label for g in got], LABEL[:40])
        self.assertTrue(u.closed)

    async def test_09_trainer(self):
        c = self.c
        start = await c.train_start("triplet", name="aio-v1",
                                    params={"epochs": 2, "learning_rate": 0.01, "seed": 3})
        self.assertEqual((start.model, start.items, start.classes), ("aio-v1", N_ITEMS, CLASSES))
        job = await c.wait_job(start.job_id, timeout=120)
        self.assertEqual((job.state, job.model, job.epochs), ("DONE", "aio-v1", 2))
        models = await c.list_models()
        self.assertEqual([m.name for m in models], ["aio-v1"])
        got = await asyncio.gather(*(c.classify(ID[i], k=5, model="aio-v1") for i in range(8)))
        self.assertEqual(len(got), 8)
        p = await c.promote("aio-v1")
        self.assertEqual(p.depth, models[0].depth)
        r = await c.rollback()
        self.assertEqual(r.undone, "aio-v1")
        await self.expect(omld.Conflict, "rollback", c.rollback())
        await self.expect(omld.NotFound, "train_status.job_id", c.train_status(999))
        await self.expect(omld.InvalidArgument, "train_start.method", c.train_start("nope"))
        long = await c.train_start("triplet", params=omld.TrainParams(epochs=10000,
                                                                      validation_fraction=0))
        await c.train_cancel(long.job_id)
        self.assertEqual((await c.wait_job(long.job_id)).state, "CANCELLED")
        self.assertIsNone(await c.delete_model("aio-v1"))
        self.assertEqual(await c.list_models(), [])


class TestAsyncTokens(unittest.IsolatedAsyncioTestCase):
    async def test_tokens(self):
        d = Daemon(MODEL_ARGS + ["--tokens=rw:%s,ro:%s" % (RW_TOKEN, RO_TOKEN)])
        try:
            with self.assertRaises(omld.Unauthenticated) as cm:
                await omld.connect_async(d.rpc, timeout=10, token="wrong-token")
            self.assertEqual(cm.exception.field, "auth.token")
            c = await omld.connect_async(d.rpc, timeout=10)
            with self.assertRaises(omld.Unauthenticated):
                await c.status()
            await c.close()
            ro = await omld.connect_async("unix:" + d.unix, timeout=10, token=RO_TOKEN)
            self.assertFalse(ro.read_write)
            with self.assertRaises(omld.PermissionDenied):
                await ro.train_start("triplet")
            self.assertEqual(await ro.list_models(), [])
            self.assertTrue(await ro.auth(RW_TOKEN))
            self.assertEqual((await ro.put_items([("t-1", X[0], LABEL[0])])).created, 1)
            await ro.close()
        finally:
            self.assertEqual(d.stop(signal.SIGTERM), 0)
            d.cleanup()


if __name__ == "__main__":
    unittest.main()
