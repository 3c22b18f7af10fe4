#!/usr/bin/python3
"""Tests of the Python client against a real omld.

The daemon (OMLD_BIN) is started on ephemeral ports in a temporary data
directory; its addresses are read from <data_dir>/omld.addr. Data: 4
classes of items in 8 dimensions, each class a tight cloud around its own
centre, so a correctly serving model classifies every item by its
neighbours. Tests run in name order against the one daemon; the last one
stops it with SIGTERM and expects exit 0.

Environment: OMLD_BIN (required), OMLD_PB2_DIR (the generated omld_pb2.py;
else omld._pb generates one). Exit 77 (a ctest skip) when this Python has
no google.protobuf.
"""
import array
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

try:
    import google.protobuf  # noqa: F401
except ImportError:
    print("SKIP: %s has no google.protobuf (apt-get install python3-protobuf)" % sys.executable)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)
sys.path.insert(0, PKG_ROOT)
import omld  # noqa: E402

try:
    import numpy
except ImportError:
    numpy = None

DIM = 8
CLASSES = 4
N_ITEMS = 80
MAX_K = 100
EXAMPLE = os.path.join(PKG_ROOT, "examples", "clicklog_to_triplets.py")
MODEL_ARGS = ["--dim=%d" % DIM, "--layers=2", "--hidden=16", "--emb=4", "--publish_ms=50",
              "--max_k=%d" % MAX_K, "--max_batch=1000", "--seed=3", "--log_level=warn"]


def make_data():
    state = [12345]

    def rnd():
        state[0] = (state[0] * 1103515245 + 12345) & 0xFFFFFFFF
        return ((state[0] >> 8) & 0xFFFF) / 65536.0 - 0.5

    X, ids, labels = [], [], []
    for i in range(N_ITEMS):
        c = i % CLASSES
        X.append([(1.0 if j % CLASSES == c else 0.0) + rnd() * 0.1 for j in range(DIM)])
        ids.append("item-%d" % i)
        labels.append("class-%d" % c)
    return X, ids, labels


X, ID, LABEL = make_data()


def f32(v):
    """v as float32 values (what the daemon stores)."""
    return array.array("f", v).tolist()


def triplet(i):
    """Anchor and positive of one class, negative of the next."""
    a = (i * 7) % N_ITEMS
    p = (a + CLASSES * (1 + i % 5)) % N_ITEMS
    n = (a + 1) % N_ITEMS
    return (ID[a], ID[p], ID[n])


class Daemon:
    def __init__(self, extra):
        self.dir = tempfile.mkdtemp(prefix="omld-py-")
        self.unix = os.path.join(self.dir, "omld.sock")
        self.log = os.path.join(self.dir, "omld.log")
        binary = os.environ.get("OMLD_BIN")
        if not binary or not os.access(binary, os.X_OK):
            raise RuntimeError("OMLD_BIN must name the omld executable (got %r)" % binary)
        argv = [binary, "--data_dir=" + self.dir, "--listen=127.0.0.1:0",
                "--http=127.0.0.1:0", "--unix_socket=" + self.unix] + extra
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.rpc = self.http = None
        deadline = time.monotonic() + 20
        path = os.path.join(self.dir, "omld.addr")
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("omld exited during startup (%s):\n%s"
                                   % (self.proc.returncode, self.log_text()))
            if os.path.exists(path):
                with open(path) as f:
                    kv = dict(line.split(None, 1) for line in f.read().splitlines() if line)
                self.rpc, self.http = kv.get("rpc", "").strip(), kv.get("http", "").strip()
                if self.rpc and self.http:
                    return
            time.sleep(0.01)
        self.proc.kill()
        raise RuntimeError("omld did not write %s:\n%s" % (path, self.log_text()))

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


D = None


def setUpModule():
    global D
    # --basis=1: the exported model carries the fixed input basis (emb 4 < DIM)
    # that the offline forward must apply (the trainer's daemon has none: a
    # batch model is promoted into it).
    D = Daemon(MODEL_ARGS + ["--basis=1"])
    with omld.Client(D.rpc, timeout=20) as c:
        r = c.put_items([(ID[i], X[i], LABEL[i]) for i in range(N_ITEMS)])
        assert r.created == N_ITEMS, r


def tearDownModule():
    if D is not None:
        D.cleanup()


class TestClient(unittest.TestCase):
    def setUp(self):
        self.c = omld.Client(D.rpc, timeout=20)

    def tearDown(self):
        self.c.close()

    def expect(self, cls, field, fn, *args, **kw):
        """fn(*args, **kw) raises cls with the given field (None: any)."""
        with self.assertRaises(cls) as cm:
            fn(*args, **kw)
        e = cm.exception
        self.assertIsInstance(e, omld.OmldError)
        self.assertEqual(e.code, cls.code)
        self.assertEqual(e.code_name, omld.code_name(cls.code))
        self.assertTrue(e.message)
        if field is not None:
            self.assertEqual(e.field, field, str(e))
            self.assertIn(field, str(e))
        self.assertIn(e.code_name, str(e))
        return e

    # ------------------------------------------------------------ happy paths

    def test_01_put_get_round_trip(self):
        items = self.c.get_items([ID[5], ID[6]])
        self.assertEqual([it.id for it in items], [ID[5], ID[6]])
        self.assertEqual(items[0].features, f32(X[5]))
        self.assertEqual(items[1].label, LABEL[6])
        # Replacing by id; an unlabelled item; features as tuple / array('f') / numpy.
        r = self.c.put_items([omld.Item(ID[5], X[5], LABEL[5]),
                              {"id": "extra-a", "features": tuple(X[1])},
                              ("extra-b", array.array("f", X[2]), "class-2")])
        self.assertEqual((r.created, r.replaced), (2, 1))
        self.assertGreaterEqual(r.model_version, 1)
        a, b = self.c.get_items(["extra-a", "extra-b"])
        self.assertIsNone(a.label)
        self.assertEqual(a.features, f32(X[1]))
        self.assertEqual(b.features, f32(X[2]))
        if numpy is not None:
            self.c.put_items([("extra-np", numpy.array(X[3], dtype=numpy.float32))])
            self.assertEqual(self.c.get_items("extra-np")[0].features, f32(X[3]))
            self.c.delete_items(["extra-np"])
        r = self.c.delete_items(["extra-a", "extra-b"])
        self.assertEqual(r.deleted, 2)
        self.expect(omld.NotFound, "get_items.ids[0]", self.c.get_items, ["extra-a"])
        self.expect(omld.NotFound, "delete_items.ids[1]", self.c.delete_items,
                    [ID[0], "extra-a"])
        self.assertEqual(self.c.delete_items(["extra-a"], missing_ok=True).deleted, 0)
        self.assertEqual(self.c.status().items, N_ITEMS)

    def test_02_triplets_and_pairs_are_applied(self):
        before = self.c.wait_learned()
        ts = [triplet(i) for i in range(300)]
        ts[7] = (ts[7][0], ts[7][1], X[9])                     # an inline vector
        ts[8] = omld.Triplet(array.array("f", X[8]), ID[12], ID[13], weight=2.5)
        ts[9] = ts[9] + (0.5,)                                  # (a, p, n, weight)
        ts[10] = {"anchor": ts[10][0], "positive": ts[10][1], "negative": ts[10][2], "weight": 3}
        r = self.c.add_triplets(ts)
        self.assertEqual(r.accepted, 300)
        self.assertGreaterEqual(r.queue_depth, 0)
        p = self.c.add_pairs([(ID[0], ID[4], True), omld.Pair(ID[0], ID[1], False),
                              (ID[8], ID[12], "similar")])
        self.assertEqual(p.accepted, 3)
        s = self.c.wait_learned(before.triplets_applied + 300 + p.derived_triplets)
        self.assertEqual(s.triplets_received, before.triplets_received + 300)
        self.assertEqual(s.triplets_applied,
                         before.triplets_applied + 300 + p.derived_triplets)
        self.assertGreaterEqual(s.view_triplets, s.triplets_applied)
        self.assertGreater(s.model_version, before.model_version)

    def test_02b_triplet_weight_refused_out_of_range(self):
        for w in (0.0, -1.0, 101.0, float("nan")):
            with self.assertRaises(omld.InvalidArgument) as cm:
                self.c.add_triplets([triplet(0), triplet(1) + (w,)])
            self.assertEqual(cm.exception.field, "add_triplets.triplets[1].weight")
        with self.assertRaises(TypeError):
            self.c.add_triplets([triplet(0) + (1.0, 2.0)])

    def test_03_classify(self):
        for i in range(12):
            cl = self.c.classify(ID[i], k=5)
            self.assertEqual(cl.label, LABEL[i], cl)
            self.assertGreaterEqual(cl.model_version, 1)
            self.assertTrue(cl.scores)
            self.assertEqual(cl.scores[0].label, cl.label)
            self.assertEqual(cl.scores, sorted(cl.scores, key=lambda s: -s.score))
            self.assertEqual(self.c.classify(X[i], k=5, model="live").label, LABEL[i])
        self.assertEqual(self.c.classify(ID[1]).label, LABEL[1])  # the daemon's default k
        got = self.c.classify_many([ID[i] for i in range(40)] + [X[3]], k=5, window=8)
        self.assertEqual([c.label for c in got], LABEL[:40] + [LABEL[3]])

    def test_04_verify(self):
        v = self.c.verify(ID[0], ID[0], threshold=0.5)
        self.assertTrue(v.similar)
        self.assertAlmostEqual(v.score, 1.0, places=5)
        self.assertEqual(len(v.distances), 3)
        self.assertTrue(all(d == 0 or d < 1e-4 for d in v.distances), v)
        v = self.c.verify(ID[0], X[4])
        self.assertEqual(len(v.distances), 3)
        self.assertTrue(all(0 <= d <= 2 for d in v.distances), v)
        self.assertTrue(0 <= v.score <= 1)
        far = self.c.verify(ID[0], ID[1], threshold=1e-6)
        self.assertFalse(far.similar)

    def test_04b_partial_triplets(self):
        before = self.c.status().triplets_applied
        res = self.c.add_triplets([(ID[0], ID[CLASSES], ID[1]), (ID[0], "no-such", ID[1]),
                                   (ID[2], ID[2 + CLASSES], ID[2])], partial=True)
        self.assertEqual(res.accepted, 1)
        self.assertEqual([(r.index, r.code) for r in res.rejected],
                         [(1, "NOT_FOUND"), (2, "INVALID_ARGUMENT")])
        self.assertEqual(res.rejected[0].field, "add_triplets.triplets[1].positive.id")
        self.assertGreaterEqual(self.c.status().triplets_applied, before + 1)

    def test_04c_idempotency_and_wait_for_view(self):
        received = self.c.status().triplets_received
        t = [(ID[0], ID[CLASSES], ID[1]), (ID[2], ID[2 + CLASSES], ID[3])]
        first = self.c.add_triplets(t, idempotency_key="py-retry-1", wait_for_view=True)
        self.assertEqual((first.accepted, first.duplicate), (2, False))
        again = self.c.add_triplets(t, idempotency_key="py-retry-1")
        self.assertEqual((again.accepted, again.duplicate), (2, True))
        self.assertEqual(self.c.status().triplets_received, received + 2)
        # The same key on another kind of write is a conflict.
        with self.assertRaises(omld.OmldError) as cm:
            self.c.add_pairs([(ID[0], ID[CLASSES], True)], idempotency_key="py-retry-1")
        self.assertEqual(cm.exception.field, "add_pairs.idempotency_key")
        with self.assertRaises(ValueError):
            self.c.put_items([], idempotency_key="")

    def test_05b_recommend(self):
        hits = self.c.recommend([ID[0], ID[CLASSES]], negative=[ID[1]], k=5)
        self.assertEqual(len(hits), 5)
        for h in hits:
            self.assertNotIn(h.id, (ID[0], ID[CLASSES]))
            self.assertEqual(h.label, LABEL[0], hits)
        one = self.c.recommend([ID[2]], k=4)
        self.assertEqual(one.ids, self.c.retrieve(ID[2], k=4).ids)  # one positive: a retrieve
        with self.assertRaises(omld.NotFound):
            self.c.recommend(["no-such-item"])
        with self.assertRaises(ValueError):
            self.c.recommend([])

    def test_05_retrieve(self):
        for i in (0, 1, 2, 3, 17):
            hits = self.c.retrieve(ID[i], k=10)
            self.assertEqual(len(hits), 10)
            self.assertNotIn(ID[i], hits.ids)
            for h in hits:
                self.assertEqual(h.label, LABEL[i], hits)
            scores = [h.score for h in hits]
            self.assertEqual(scores, sorted(scores, reverse=True))
        by_vec = self.c.retrieve(X[2], k=3)
        self.assertEqual(len(by_vec.hits), 3)
        self.assertIn(ID[2], by_vec.ids)  # a vector query may find the item itself
        # Filters, paging and the k-independent similarity.
        other = LABEL[1] if LABEL[1] != LABEL[0] else LABEL[2]
        only = self.c.retrieve(ID[0], k=6, labels=[other])
        self.assertEqual(len(only), 6)
        self.assertTrue(all(h.label == other for h in only), only)
        sims = {h.id: h.similarity for h in only}
        page = self.c.retrieve(ID[0], k=3, labels=[other], exclude_ids=[only.hits[0].id],
                               offset=1)
        self.assertNotIn(only.hits[0].id, page.ids)
        for h in page:
            self.assertTrue(-1.0 <= h.similarity <= 1.0)
            if h.id in sims:
                self.assertEqual(h.similarity, sims[h.id])
        floor = only.hits[2].similarity
        above = self.c.retrieve(ID[0], k=6, labels=[other], min_similarity=floor)
        self.assertTrue(all(h.similarity >= floor for h in above))

    def test_05c_metadata(self):
        """Items carry metadata; queries, counts and deletes filter by it
        (equality, set membership, several keys ANDed)."""
        items = [omld.Item("meta-%d" % i, X[i], LABEL[i], {"color": ("red", "blue")[i % 2],
                                                          "tier": str(i % 3)})
                 for i in range(12)]
        items.append(("meta-tuple", X[12], None, {"color": "green"}))
        self.c.put_items(items, wait_for_view=True)
        got = self.c.get_items(["meta-4", "meta-tuple", ID[0]])
        self.assertEqual(got[0].metadata, {"color": "red", "tier": "1"})
        self.assertEqual(got[1].metadata, {"color": "green"})
        self.assertIsNone(got[2].metadata)
        self.assertEqual(self.c.count_items(where={"color": "red"}).count, 6)
        self.assertEqual(self.c.count_items(where={"color": ["red", "green"]}).count, 7)
        self.assertEqual(self.c.count_items(where={"color": "red", "tier": "0"}).count, 2)
        # Pages of 5 list every red item once, in store order, with metadata.
        seen, cursor = [], 0
        while True:
            page = self.c.list_items(cursor, limit=5, where={"color": "red"})
            self.assertLessEqual(len(page.items), 5)
            seen += page.items
            if page.next_cursor == 0:
                break
            cursor = page.next_cursor
        self.assertEqual(sorted(it.id for it in seen), sorted("meta-%d" % i for i in range(0, 12, 2)))
        self.assertTrue(all(it.metadata["color"] == "red" and not it.features for it in seen))
        self.assertGreaterEqual(page.total, 12)
        one = self.c.list_items(labels=[LABEL[0]], limit=1, with_features=True).items[0]
        self.assertEqual((one.label, len(one.features)), (LABEL[0], DIM))
        hits = self.c.retrieve(ID[0], k=20, where={"color": "blue", "tier": ["1", "2"]})
        self.assertEqual(sorted(hits.ids), sorted("meta-%d" % i for i in range(12)
                                                  if i % 2 and i % 3))
        rec = self.c.recommend([ID[0]], k=20, where={"color": "green"}, with_metadata=True)
        self.assertEqual(rec.ids, ["meta-tuple"])
        self.assertEqual(rec.hits[0].metadata, {"color": "green"})
        self.assertIsNone(hits.hits[0].metadata)  # not asked for
        self.assertEqual(self.c.classify(ID[0], where={"color": "none"}).label, "")
        self.assertEqual(self.c.retrieve_batch([ID[0], ID[1]], k=20,
                                               where={"color": "green"})[1].ids, ["meta-tuple"])
        self.expect(omld.InvalidArgument, "count_items.metadata[0].values",
                    self.c.count_items, where={"color": []})
        self.assertEqual(self.c.delete_items(where={"color": ["red", "blue", "green"]}).deleted, 13)
        self.assertEqual(self.c.count_items().total, N_ITEMS)

    def test_05b_query_batches(self):
        """One request for many queries; each answer is the query's own
        (compared when the batch and the single requests saw one model
        version: the learner may publish between them)."""
        queries = [ID[i] for i in range(40)] + [X[3], array.array("f", X[5])]
        if numpy is not None:
            queries.append(numpy.array(X[6], dtype=numpy.float32))
        for _ in range(50):
            got = self.c.classify_batch(queries, k=5)
            self.assertEqual(len(got), len(queries))
            want_labels = LABEL[:40] + [LABEL[3], LABEL[5]] + ([LABEL[6]] if numpy else [])
            self.assertEqual([c.label for c in got], want_labels)
            one = [self.c.classify(q, k=5) for q in queries]
            if all(o.model_version == got[0].model_version for o in one):
                self.assertEqual(got, one)
                break
            time.sleep(0.1)
        else:
            self.fail("no round with one model version")
        other = LABEL[1]
        for _ in range(50):
            hits = self.c.retrieve_batch(queries[:10], k=4, labels=[other], offset=1)
            one = [self.c.retrieve(q, k=4, labels=[other], offset=1) for q in queries[:10]]
            if all(o.model_version == hits[0].model_version for o in one):
                self.assertEqual(hits, one)
                break
            time.sleep(0.1)
        else:
            self.fail("no round with one model version")
        self.assertTrue(all(h.label == other for r in hits for h in r))
        # All-or-nothing, naming the query.
        self.expect(omld.NotFound, "classify_batch.queries[2].query.id", self.c.classify_batch,
                    [ID[0], ID[1], "no-such"])
        self.expect(omld.InvalidArgument, "retrieve_batch.queries[0].k",
                    self.c.retrieve_batch, [ID[0], ID[1]], k=MAX_K + 1)
        self.expect(omld.InvalidArgument, "classify_batch.queries", self.c.classify_batch, [])
        self.assertRaises(TypeError, self.c.classify_batch, ID[0])

    def test_06_embed_status_health(self):
        e = self.c.embed(ID[0])
        self.assertEqual(len(e.heads), 3)
        for h in e.heads:
            self.assertEqual(len(h), 4)
            self.assertAlmostEqual(math.sqrt(sum(x * x for x in h)), 1.0, places=4)
        self.assertEqual(len(e.alpha), 3)
        self.assertAlmostEqual(sum(e.alpha), 1.0, places=4)
        self.assertEqual(len(self.c.embed(X[0]).heads), 3)
        s = self.c.status()
        self.assertIsInstance(s, omld.Status)
        self.assertEqual((s.dim, s.depth, s.items, s.seed), (DIM, 2, N_ITEMS, 3))
        self.assertEqual(len(s.alpha), 3)
        self.assertAlmostEqual(sum(s.alpha), 1.0, places=4)
        self.assertTrue(s.version)
        self.assertEqual(s.preset, "default")
        self.assertGreaterEqual(s.model_version, 1)
        self.assertEqual(self.c.last_model_version, s.model_version)
        h = self.c.health()
        self.assertEqual((h.live, h.ready, h.draining), (True, True, False))

    def test_06b_export_model_embeds_offline(self):
        # The file embeds as the daemon's own Embed does at the same model
        # version (a publish between the two calls: try again).
        for _ in range(50):
            data = self.c.export_model()
            version = self.c.last_model_version
            e = self.c.embed(X[5])
            if e.model_version == version:
                break
        self.assertEqual(e.model_version, version)
        m = omld.model.load(data)
        self.assertEqual((m.dim, m.heads, m.emb, m.version), (DIM, 3, 4, version))
        self.assertEqual(m.alpha, e.alpha)
        self.assertTrue(m.has_basis)
        heads = m.embed([X[5]])
        plain = m._embed_py([X[5]])  # the path without numpy, the same answer
        for h in range(3):
            for a, b, c in zip(heads[h][0], e.heads[h], plain[h][0]):
                self.assertAlmostEqual(a, b, delta=1e-5)
                self.assertAlmostEqual(c, b, delta=1e-5)
        with self.assertRaises(ValueError):
            m.embed([X[5][:3]])
        damaged = bytearray(data)
        damaged[40] ^= 1
        with self.assertRaises(omld.model.ModelFileError):
            omld.model.load(bytes(damaged))
        with self.assertRaises(omld.NotFound):
            self.c.export_model("no-such-model")

    def test_07_checkpoint(self):
        cp = self.c.checkpoint()
        self.assertGreater(cp.bytes, 0)
        self.assertTrue(os.path.isfile(cp.path), cp)
        self.assertEqual(cp.triplets_applied, self.c.wait_learned().triplets_applied)

    def test_08_unix_socket(self):
        with omld.Client("unix:" + D.unix, timeout=10) as u:
            self.assertTrue(u.health().live)
            self.assertEqual(u.classify(ID[3], k=5).label, LABEL[3])
        self.assertTrue(u.closed)

    # ------------------------------------------------------------ errors

    def test_10_errors_carry_code_and_field(self):
        c = self.c
        before = c.status()
        good = (ID[1], X[1])
        self.expect(omld.WrongDimension, "put_items.items[1].features", c.put_items,
                    [("new-1", X[1]), ("new-2", X[2][:DIM - 1])])
        nan = list(X[2])
        nan[3] = float("nan")
        self.expect(omld.NonFinite, "put_items.items[1].features", c.put_items,
                    [good, ("new-2", nan)])
        nan[3] = float("inf")
        self.expect(omld.NonFinite, "put_items.items[0].features", c.put_items, [("new-2", nan)])
        self.expect(omld.Conflict, None, c.put_items, [("new-1", X[1]), ("new-1", X[2])])
        self.expect(omld.InvalidArgument, "put_items.items[0].id", c.put_items, [("", X[1])])

        ts = [triplet(0), triplet(1), (ID[2], "no-such-item", ID[3])]
        self.expect(omld.NotFound, "add_triplets.triplets[2].positive.id", c.add_triplets, ts)
        self.expect(omld.WrongDimension, None, c.add_triplets,
                    [triplet(0), (X[0][:DIM - 2], ID[1], ID[2])])
        self.expect(omld.NotFound, "classify.query.id", c.classify, "ghost")
        self.expect(omld.InvalidArgument, "classify.k", c.classify, ID[1], k=MAX_K + 1)
        self.expect(omld.InvalidArgument, "classify.k", c.classify, ID[1], k=0)
        self.expect(omld.InvalidArgument, "retrieve.k", c.retrieve, ID[1], k=10 ** 6)
        self.expect(omld.InvalidArgument, "retrieve.min_similarity", c.retrieve, ID[1],
                    min_similarity=1.5)
        self.expect(omld.NotFound, "classify.model", c.classify, ID[1], model="no-such-model")
        self.expect(omld.NotFound, "retrieve.model", c.retrieve, ID[1], model="no-such-model")
        self.expect(omld.InvalidArgument, "verify.threshold", c.verify, ID[1], ID[1],
                    threshold=1.5)
        self.expect(omld.WrongDimension, None, c.embed, [1.0, 2.0])
        self.expect(omld.InvalidArgument, "body", c.call, omld.pb.Request())

        # Every code maps to its class; OmldError is the common base.
        for code, name in omld.CODE_NAMES.items():
            if code:
                e = omld.error_for(code, "m", "f")
                self.assertEqual((e.code, e.code_name), (code, name))
                self.assertIsInstance(e, omld.OmldError)
        self.assertIs(type(omld.error_for(12, "")), omld.Conflict)
        self.assertIs(type(omld.error_for(99, "")), omld.OmldError)

        # Nothing changed, and the connection is still good.
        after = c.status()
        self.assertEqual(after.items, before.items)
        self.assertEqual(after.triplets_received, before.triplets_received)
        self.assertTrue(c.health().live)

    def test_11_pair_conflict(self):
        c = self.c
        c.add_pairs([(ID[20], ID[24], True)])
        e = self.expect(omld.Conflict, "add_pairs.pairs[0]", c.add_pairs,
                        [(ID[20], ID[24], False)])
        self.assertIsInstance(e, omld.Conflict)
        self.expect(omld.InvalidArgument, None, c.add_pairs, [(ID[20], X[0], True)])
        self.expect(omld.InvalidArgument, None, c.add_pairs, [(ID[20], ID[21], None)])

    def test_12_local_argument_errors(self):
        with self.assertRaises(TypeError):
            self.c.classify(42)
        with self.assertRaises(TypeError):
            self.c.put_items([("id-only",)])
        with self.assertRaises(TypeError):
            self.c.add_triplets([(ID[0], ID[1])])
        with self.assertRaises(ValueError):
            omld.Client("no-port")
        self.assertTrue(self.c.health().live)  # nothing was sent

    def test_13_malformed_and_oversized_frames(self):
        self.c.send_raw(b"\x00\x00\x00\x06" + b"\xff" * 6)
        r = self.c.recv()
        self.assertEqual((r.status.code, r.request_id), (7, 0))
        with self.assertRaises(omld.Malformed):
            omld.Client.check(r)
        self.assertTrue(self.c.health().live)  # still in step

        self.c.send_raw((64 << 20).to_bytes(4, "big"))
        with self.assertRaises(omld.FrameTooLarge):
            self.c.check(self.c.recv())
        self.assertTrue(self.c.closed)
        with self.assertRaises(omld.OmldConnectionError):
            self.c.health()

    def test_14_transport_errors(self):
        # Nothing listening.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaises(omld.OmldConnectionError) as cm:
            omld.Client("127.0.0.1:%d" % port, timeout=2)
        self.assertNotIsInstance(cm.exception, omld.OmldTimeout)
        # A peer that accepts and never answers.
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        try:
            c = omld.Client("127.0.0.1:%d" % srv.getsockname()[1], timeout=0.3)
            t0 = time.monotonic()
            with self.assertRaises(omld.OmldTimeout):
                c.health()
            self.assertLess(time.monotonic() - t0, 5)
            self.assertTrue(c.closed)
        finally:
            srv.close()
        # A peer that closes at once.
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        t = threading.Thread(target=lambda: srv.accept()[0].close())
        t.start()
        try:
            c = omld.Client("127.0.0.1:%d" % srv.getsockname()[1], timeout=5)
            with self.assertRaises(omld.OmldConnectionError):
                c.health()
        finally:
            t.join()
            srv.close()

    # ------------------------------------------------------------ batch helpers

    def test_20_pipelined_batches(self):
        c = self.c
        before = c.wait_learned()
        extra = [("bulk-%d" % i, X[i % N_ITEMS], LABEL[i % N_ITEMS]) for i in range(500)]
        seen = []
        r = c.put_items_pipelined(extra, batch=64, window=4,
                                  progress=lambda done, total: seen.append((done, total)))
        self.assertEqual((r.created, r.replaced, r.requests, r.done), (500, 0, 8, 500))
        self.assertEqual(seen[-1], (500, 500))
        self.assertEqual([d for d, _ in seen], sorted(d for d, _ in seen))
        self.assertEqual(c.status().items, N_ITEMS + 500)

        # A generator (no len), 2000 triplets in 20 requests, 8 in flight.
        gen = (triplet(i) for i in range(2000))
        r = c.add_triplets_pipelined(gen, batch=100, window=8)
        self.assertEqual((r.accepted, r.requests), (2000, 20))
        # Plain batching: one request at a time.
        r = c.add_triplets_batched([triplet(i) for i in range(250)], batch=100)
        self.assertEqual((r.accepted, r.requests), (250, 3))
        r = c.add_pairs_pipelined([(ID[40 + i], ID[44 + i], True) for i in range(8)], batch=3)
        self.assertEqual((r.accepted, r.requests), (8, 3))
        s = c.wait_learned(before.triplets_applied + 2250 + r.derived_triplets)
        self.assertEqual(s.triplets_received, before.triplets_received + 2250)

        # An error in batch 2: raised with where it happened and what came before.
        bad = [triplet(i) for i in range(500)]
        bad[250] = ("ghost", ID[1], ID[2])
        with self.assertRaises(omld.NotFound) as cm:
            c.add_triplets_pipelined(bad, batch=100, window=1)
        e = cm.exception
        self.assertEqual((e.batch_index, e.offset), (2, 200))
        self.assertEqual(e.field, "add_triplets.triplets[50].anchor.id")
        self.assertEqual(e.totals.accepted, 200)
        self.assertEqual(c.status().triplets_received, before.triplets_received + 2450)
        self.assertEqual(e.applied_after, [])
        # With a window: batches 0-7 sent, 8 and 9 as 0 and 1 are answered;
        # 5 fails, 6-9 were in flight and are applied; the connection stays
        # in step.
        with self.assertRaises(omld.NotFound) as cm:
            c.add_triplets_pipelined(bad, batch=50, window=8)
        e = cm.exception
        self.assertEqual((e.batch_index, e.offset, e.totals.accepted), (5, 250, 250))
        self.assertEqual(e.applied_after, [(300, 50), (350, 50), (400, 50), (450, 50)])
        self.assertEqual(c.status().triplets_received, before.triplets_received + 2450 + 450)
        self.assertTrue(c.health().live)
        # Bad input in a later batch: a local error, after draining.
        with self.assertRaises(TypeError):
            c.put_items_pipelined(extra[:10] + [("x",)], batch=5, window=4)
        self.assertTrue(c.health().live)
        c.delete_items([i for i, _, _ in extra])

    def test_21_generic_pipelining_in_order(self):
        c = self.c
        ids = []
        for i in range(60):
            req = omld.pb.Request()
            if i % 3 == 0:
                req.classify.query.id = ID[i % N_ITEMS]
            elif i % 3 == 1:
                t = req.add_triplets.triplets.add()
                t.anchor.id, t.positive.id, t.negative.id = triplet(i)
            else:
                req.status.SetInParent()
            ids.append(c.send(req))
        want = ["classify", "add_triplets", "status_info"]
        for i in range(60):
            r = c.check(c.recv())
            self.assertEqual(r.request_id, ids[i])
            self.assertEqual(r.WhichOneof("body"), want[i % 3])

    # ------------------------------------------------------------ threads and the pool

    def mixed_call(self, c, t, j):
        """One call of a mix, chosen by (thread t, call j), on client c;
        checks that the answer is this call's own; returns an error text
        or None."""
        i = (t * 37 + j * 11) % N_ITEMS
        kind = j % 8
        if kind == 0:
            got = c.get_items([ID[i]])
            ok = len(got) == 1 and got[0].id == ID[i] and got[0].features == f32(X[i])
        elif kind == 1:
            k = 1 + j % 6
            got = c.retrieve(ID[i], k=k)
            ok = len(got) == k and ID[i] not in got.ids
        elif kind == 2:
            got = c.verify(ID[i], ID[i])
            ok = got.similar and all(d < 1e-4 for d in got.distances)
        elif kind == 3:
            try:
                c.get_items(["ghost-%d-%d" % (t, j)])
                return "no error for ghost-%d-%d" % (t, j)
            except omld.NotFound as e:
                got = e
                ok = e.field == "get_items.ids[0]"
        elif kind == 4:
            got = c.classify_batch([ID[i], X[(i + 1) % N_ITEMS]], k=1 + j % 3)
            ok = len(got) == 2 and all(g.scores for g in got)
        elif kind == 5:
            key = "thr-%d-%d" % (t, j)
            got = c.put_items_pipelined([(key + "-%d" % n, X[n], "thr") for n in range(6)],
                                        batch=2, window=3)
            ok = (got.requests, got.created + got.replaced) == (3, 6)
            ok = ok and [x.id for x in c.get_items([key + "-5", key + "-0"])] == [key + "-5",
                                                                               key + "-0"]
        elif kind == 6:
            got = c.classify_many([ID[i], ID[(i + 2) % N_ITEMS]], k=3, window=2)
            ok = len(got) == 2
        else:
            got = c.embed(ID[i])
            ok = len(got.heads) == 3 and len(got.alpha) == 3
        return None if ok else "thread %d call %d (kind %d): %r" % (t, j, kind, got)

    def run_threads(self, n_threads, n_calls, call):
        errors = []

        def work(t):
            try:
                for j in range(n_calls):
                    e = call(t, j)
                    if e:
                        errors.append(e)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append("thread %d: %r" % (t, e))
        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        self.assertEqual(errors[:5], [])

    def test_40_one_client_many_threads(self):
        """8 threads x 200 mixed calls (batch helpers among them) on one
        Client: no interleaved frames, every answer its call's own."""
        c = self.c
        self.run_threads(8, 200, lambda t, j: self.mixed_call(c, t, j))
        self.assertFalse(c.closed)
        self.assertEqual(c.in_flight, 0)
        self.assertTrue(c.health().live)
        self.delete_thread_items(c, 8, 200)

    def delete_thread_items(self, c, n_threads, n_calls):
        """The items mixed_call's put_items_pipelined stored."""
        ids = ["thr-%d-%d-%d" % (t, j, n) for t in range(n_threads) for j in range(5, n_calls, 8)
               for n in range(6)]
        for chunk in omld.batched(ids, 500):
            c.delete_items(chunk, missing_ok=True)
        self.assertEqual(c.status().items, N_ITEMS)

    def test_41_close_wakes_a_waiting_thread(self):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        try:
            c = omld.Client("127.0.0.1:%d" % srv.getsockname()[1], timeout=30)
            got = []

            def wait():
                t0 = time.monotonic()
                try:
                    c.health()
                except omld.OmldConnectionError as e:
                    got.append((type(e), time.monotonic() - t0))
            th = threading.Thread(target=wait)
            th.start()
            time.sleep(0.2)
            c.close()
            th.join(10)
            self.assertEqual(len(got), 1, got)
            self.assertIs(got[0][0], omld.OmldConnectionError)
            self.assertLess(got[0][1], 5)
            self.assertTrue(c.closed)
        finally:
            srv.close()

    def test_42_pool_many_threads(self):
        pool = omld.ClientPool(D.rpc, size=3, timeout=20)
        most = []

        def call(t, j):
            with pool.client() as c:
                most.append(pool.open)
                return self.mixed_call(c, t, j)
        with pool:
            self.run_threads(12, 40, call)
            self.assertLessEqual(max(most), 3)
            self.assertEqual((pool.open, pool.idle, pool.reconnects), (3, 3, 0))
            self.assertEqual(pool.call(lambda c: c.get_items([ID[5]])[0].label), LABEL[5])
            pool.call(lambda c: self.delete_thread_items(c, 12, 40))
        self.assertTrue(pool.closed)
        self.assertEqual(pool.open, 0)
        with self.assertRaises(omld.OmldConnectionError):
            pool.call(lambda c: c.health())

    def test_43_pool_replaces_broken_connections(self):
        with omld.ClientPool(D.rpc, size=2, timeout=20, acquire_timeout=5) as pool:
            # A transport error inside the block: that client is thrown away,
            # the next borrower gets a new connection.
            with pool.client() as c:
                first = c
                c.send_raw((64 << 20).to_bytes(4, "big"))  # the daemon closes after this
                with self.assertRaises(omld.FrameTooLarge):
                    c.check(c.recv())
            self.assertEqual((pool.open, pool.reconnects), (0, 1))
            with pool.client() as c:
                self.assertIsNot(c, first)
                self.assertTrue(c.health().live)
                second = c
            # An idle connection the daemon has closed since: replaced when
            # it is borrowed, before any call fails on it.
            second._sock.shutdown(socket.SHUT_WR)  # the daemon reads EOF and closes
            deadline = time.monotonic() + 10
            while second._peer_alive():
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.01)
            with pool.client() as c:
                self.assertIsNot(c, second)
                self.assertTrue(c.health().live)
            self.assertTrue(second.closed)
            self.assertEqual((pool.open, pool.reconnects), (1, 2))
            # A block that leaves an answer unread: out of step, thrown away.
            with self.assertRaises(RuntimeError):
                with pool.client() as c:
                    req = omld.pb.Request()
                    req.status.SetInParent()
                    c.send(req)
                    raise RuntimeError("the caller gave up")
            self.assertTrue(c.closed)
            self.assertEqual((pool.open, pool.reconnects), (0, 3))
            # Bounded: with both clients out, a third borrower waits, then times out.
            a, b = pool.acquire(), pool.acquire()
            t0 = time.monotonic()
            with self.assertRaises(omld.OmldTimeout):
                pool.acquire(timeout=0.2)
            self.assertLess(time.monotonic() - t0, 3)
            pool.release(a)
            self.assertIs(pool.acquire(timeout=0.2), a)
            pool.release(a)
            pool.release(b)
        # Nothing listening: the error goes to the caller and the slot is freed.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        pool = omld.ClientPool("127.0.0.1:%d" % port, size=1, timeout=2)
        for _ in range(2):
            with self.assertRaises(omld.OmldConnectionError):
                pool.call(lambda c: c.health())
        self.assertEqual(pool.open, 0)

    # ------------------------------------------------------------ the click-log example

    def run_example(self, *args, **kw):
        env = dict(os.environ, PYTHONPATH=PKG_ROOT)
        return subprocess.run([sys.executable, EXAMPLE, "--server", D.rpc] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              timeout=60, universal_newlines=True, **kw)

    def test_30_clicklog_example(self):
        c = self.c
        before = c.wait_learned()
        lines = [
            '{"query": "item-0", "clicked": ["item-4"], "skipped": ["item-1", "item-2"]}',
            '{"query": "item-1", "clicked": ["item-5", "item-9"], "skipped": ["item-2", "item-3", "item-6"]}',
            'this is not json',
            '{"query": 17, "clicked": ["item-4"], "skipped": ["item-1"]}',
            '',
            '{"query": "item-2", "clicked": ["item-6"], "skipped": []}',
            '{"query": "item-3", "clicked": ["item-7"], "skipped": ["item-no-such"]}',
            '{"query": "item-3", "clicked": ["item-7"], "skipped": ["item-0", "item-1"]}',
            '["a", "list"]',
        ]
        expected = 2 + 6 + 0 + 2   # the unknown id's triplet is dropped
        path = os.path.join(D.dir, "clicks.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(lines))  # the last line has no newline
        p = self.run_example("--batch", "3", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("line 3: skipped: not JSON", p.stderr)
        self.assertIn("line 4: skipped", p.stderr)
        self.assertIn("line 9: skipped", p.stderr)
        self.assertIn("dropping triplet ('item-3', 'item-7', 'item-no-such')", p.stderr)
        self.assertIn("3 malformed, %d triplets sent" % expected, p.stderr)
        s = c.wait_learned(before.triplets_applied + expected)
        self.assertEqual(s.triplets_received, before.triplets_received + expected)
        self.assertEqual(s.triplets_applied, before.triplets_applied + expected)

        # stdin.
        p = self.run_example("-", input=lines[0] + "\n" + lines[1] + "\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        s2 = c.wait_learned(s.triplets_applied + 8)
        self.assertEqual(s2.triplets_received, s.triplets_received + 8)

    def test_31_clicklog_follow(self):
        c = self.c
        before = c.wait_learned()
        path = os.path.join(D.dir, "follow.jsonl")
        old = '{"query": "item-0", "clicked": ["item-4"], "skipped": ["item-1"]}\n'
        with open(path, "w") as f:
            f.write(old)  # before the follower starts: not sent without --from-start
        env = dict(os.environ, PYTHONPATH=PKG_ROOT)
        proc = subprocess.Popen([sys.executable, EXAMPLE, "--server", D.rpc, "--follow",
                                 "--batch", "100", "--flush-ms", "100", path],
                                stderr=subprocess.PIPE, env=env, universal_newlines=True)
        try:
            # Once it has said where it starts, appended lines are its.
            self.assertIn("following %s from byte %d" % (path, len(old)),
                          proc.stderr.readline())
            with open(path, "a") as f:
                for i in range(10):
                    f.write('{"query": "item-%d", "clicked": ["item-%d"], '
                            '"skipped": ["item-%d", "item-%d"]}\n'
                            % (i, i + 4, i + 1, i + 2))
                    f.flush()
                    time.sleep(0.02)
            deadline = time.monotonic() + 20
            while c.status().triplets_received < before.triplets_received + 20:
                self.assertLess(time.monotonic(), deadline, "the follower sent nothing")
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(c.status().triplets_received, before.triplets_received + 20)
        self.assertIn("10 lines, 0 malformed, 20 triplets sent", err)

    # ------------------------------------------------------------ shutdown

    def test_99_sigterm_exits_zero(self):
        self.c.close()
        rc = D.stop(signal.SIGTERM)
        if rc != 0:
            sys.stderr.write(D.log_text())
        self.assertEqual(rc, 0)


RW_TOKEN = "py-rw-secret-0123456789"
RO_TOKEN = "py-ro-secret-0123456789"


class TestTokens(unittest.TestCase):
    """A daemon of its own, with one read-write and one read-only token."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(MODEL_ARGS + ["--tokens=rw:%s,ro:%s" % (RW_TOKEN, RO_TOKEN)])

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop(signal.SIGTERM)
        cls.d.cleanup()
        assert rc == 0, rc

    def test_token(self):
        d = self.d
        # Without a token every request is refused and nothing changes.
        with omld.Client(d.rpc, timeout=20) as c:
            with self.assertRaises(omld.Unauthenticated):
                c.put_items([("t-1", X[0], LABEL[0])])
            with self.assertRaises(omld.Unauthenticated):
                c.status()
        # A wrong token: Unauthenticated from the constructor, field auth.token.
        with self.assertRaises(omld.Unauthenticated) as cm:
            omld.Client(d.rpc, timeout=20, token="not-the-token")
        self.assertEqual(cm.exception.field, "auth.token")
        # Read-write writes; read-only reads but may not write.
        with omld.Client(d.rpc, timeout=20, token=RW_TOKEN) as w:
            self.assertTrue(w.read_write)
            self.assertEqual(w.status().items, 0)
            self.assertEqual(w.put_items([("t-1", X[0], LABEL[0])]).created, 1)
        with omld.Client("unix:" + d.unix, timeout=20, token=RO_TOKEN) as r:
            self.assertFalse(r.read_write)
            self.assertEqual(r.status().items, 1)
            self.assertEqual(r.get_items(["t-1"])[0].id, "t-1")
            with self.assertRaises(omld.PermissionDenied):
                r.put_items([("t-2", X[1], LABEL[1])])
            with self.assertRaises(omld.PermissionDenied):
                r.delete_items(["t-1"])
            self.assertEqual(r.status().items, 1)
            self.assertTrue(r.auth(RW_TOKEN))  # a later Auth replaces the rights
            self.assertEqual(r.put_items([("t-2", X[1], LABEL[1])]).created, 1)
        self.assertNotIn(RW_TOKEN, d.log_text())
        self.assertNotIn(RO_TOKEN, d.log_text())


class TestTrainer(unittest.TestCase):
    """Batch trainer jobs and named models, on a daemon of their own
    (promote changes the live model)."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(MODEL_ARGS)
        cls.c = omld.Client(cls.d.rpc, timeout=20)
        cls.c.put_items([(ID[i], X[i], LABEL[i]) for i in range(N_ITEMS)])

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        rc = cls.d.stop(signal.SIGTERM)
        cls.d.cleanup()
        assert rc == 0, rc

    def expect(self, cls, field, fn, *args, **kw):
        with self.assertRaises(cls) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.field, field, str(cm.exception))

    def test_1_train_query_promote_rollback_delete(self):
        c = self.c
        start = c.train_start("triplet", variant="semihard", name="py-v1",
                              params=omld.TrainParams(epochs=3, learning_rate=0.01, seed=7))
        self.assertIsInstance(start, omld.TrainStartResult)
        self.assertEqual((start.model, start.items, start.classes), ("py-v1", N_ITEMS, CLASSES))
        job = c.wait_job(start.job_id, timeout=120)
        self.assertIsInstance(job, omld.JobInfo)
        self.assertEqual(job.state, "DONE", job.error)
        self.assertTrue(job.finished)
        self.assertEqual((job.id, job.method, job.variant, job.model, job.epochs),
                         (start.job_id, "triplet", "semihard", "py-v1", 3))
        self.assertEqual(c.train_status(start.job_id), job)
        models = c.list_models()
        self.assertEqual([(m.name, m.method, m.job_id) for m in models],
                         [("py-v1", "triplet", start.job_id)])
        m = models[0]
        self.assertIsInstance(m, omld.ModelInfo)
        self.assertEqual((m.items_indexed, m.trained_items), (N_ITEMS, N_ITEMS))
        # Queries name the model.
        self.assertEqual(c.classify(ID[0], k=5, model="py-v1").label, LABEL[0])
        self.assertEqual(len(c.embed(ID[0], model="py-v1").heads), m.depth + 1)
        self.assertEqual(len(c.retrieve(ID[0], k=3, model="py-v1")), 3)
        # Promote, then undo it (one level).
        before = c.status().model_version
        p = c.promote("py-v1")
        self.assertIsInstance(p, omld.PromoteResult)
        self.assertEqual(p.depth, m.depth)
        self.assertGreater(p.model_version, before)
        r = c.rollback()
        self.assertEqual(r.undone, "py-v1")
        self.assertGreater(r.model_version, p.model_version)
        self.expect(omld.Conflict, "rollback", c.rollback)
        self.expect(omld.Conflict, "train_cancel.job_id", c.train_cancel, start.job_id)
        self.expect(omld.Conflict, "train_start.name", c.train_start, "triplet", name="py-v1")
        self.assertIsNone(c.delete_model("py-v1"))
        self.assertEqual(c.list_models(), [])

    def test_2_cancel_queued_and_running(self):
        c = self.c
        long = {"epochs": 10000, "validation_fraction": 0}  # no early stop: runs until cancelled
        a = c.train_start("triplet", params=long)
        b = c.train_start("contrastive", params=long, labels=[LABEL[0], LABEL[1]])
        self.assertEqual(b.classes, 2)
        self.assertEqual(c.train_cancel(b.job_id).state, "CANCELLED")  # queued: at once
        qa = c.train_cancel(a.job_id)
        self.assertTrue(qa.cancel_requested or qa.state == "CANCELLED", qa)
        self.assertEqual(c.wait_job(a.job_id, timeout=60).state, "CANCELLED")
        self.assertEqual(c.list_models(), [])

    def test_3_errors(self):
        c = self.c
        self.expect(omld.InvalidArgument, "train_start.method", c.train_start, "nope")
        self.expect(omld.NotFound, "train_start.labels[0]", c.train_start, "triplet",
                    labels=["no-such-label"])
        self.expect(omld.NotFound, "train_status.job_id", c.train_status, 999)
        self.expect(omld.NotFound, "train_cancel.job_id", c.train_cancel, 999)
        self.expect(omld.NotFound, "promote.name", c.promote, "nope")
        self.expect(omld.NotFound, "delete_model.name", c.delete_model, "nope")
        # Bad arguments are refused before anything is sent.
        with self.assertRaises(TypeError):
            c.train_start("triplet", params={"epoch": 3})
        with self.assertRaises(TypeError):
            c.train_status(-1)
        with self.assertRaises(TypeError):
            c.promote(None)
        self.assertEqual(c.in_flight, 0)


if __name__ == "__main__":
    unittest.main()
