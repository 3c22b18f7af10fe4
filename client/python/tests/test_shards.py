"""test_shards.py - omld.Shards (the Python fan-out) against real shards:
redis-server on loopback, a primary, a replica holding every item and two
replicas with shard = 0/2 and 1/2 (test_client's Daemon helper). Merged
retrievals (by id and vector, k 1-20, offsets, labels, excluded ids, a
similarity floor) and classifications (k 1-25) equal the full replica's,
floats compared exactly; a shard map missing a shard, k 0 and an unknown
id are named errors. Skipped without redis-server.

Environment: as test_client.py (OMLD_BIN, OMLD_PB2_DIR)."""
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from test_client import MODEL_ARGS, Daemon, omld  # noqa: E402  (sets up sys.path)

REDIS = "/usr/bin/redis-server"
N = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def same_version(daemons, timeout=60):
    """Until every daemon serves the first one's version, stable for 1 s."""
    last, since, deadline = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        vs = []
        for d in daemons:
            with omld.Client(d.rpc) as c:
                vs.append(c.status().model_version)
        if vs[0] != last:
            last, since = vs[0], time.monotonic()
        elif len(set(vs)) == 1 and time.monotonic() - since > 1.0:
            return vs[0]
        time.sleep(0.05)
    raise AssertionError("the replicas did not reach version %s" % last)


@unittest.skipUnless(os.access(REDIS, os.X_OK), "no redis-server")
class TestShards(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemons, cls.redis = [], None
        try:
            cls.start()
        except BaseException:
            cls.tearDownClass()  # unittest does not when setUpClass fails: nothing left running
            raise

    @classmethod
    def start(cls):
        cls.rdir = tempfile.mkdtemp(prefix="omld-py-redis-")
        cls.port = free_port()
        cls.redis = subprocess.Popen([REDIS, "--port", str(cls.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", cls.rdir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(250):
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        cls.url = "redis://127.0.0.1:%d/py" % cls.port
        args = MODEL_ARGS + ["--checkpoint_background=0"]
        cls.daemons.append(Daemon(args + ["--replicate=" + cls.url]))
        for extra in ([], ["--shard=0/2"], ["--shard=1/2"]):
            cls.daemons.append(Daemon(args + ["--replica_of=" + cls.url] + extra))
        rng = random.Random(7)
        items = [("it%d" % i, [rng.uniform(-1, 1) for _ in range(8)], "c%d" % (i % 5))
                 for i in range(N)]
        with omld.Client(cls.daemons[0].rpc) as c:
            c.put_items(items)
            c.add_triplets([("it%d" % (i % N), "it%d" % ((i + 5) % N), "it%d" % ((i + 1) % N))
                            for i in range(600)])
        cls.version = same_version(cls.daemons)

    @classmethod
    def tearDownClass(cls):
        for d in cls.daemons:
            d.stop()
            d.cleanup()
        if cls.redis:
            cls.redis.kill()
            cls.redis.wait()
            shutil.rmtree(cls.rdir, ignore_errors=True)

    def test_merged_equals_one_node(self):
        rng = random.Random(11)
        with omld.Shards.from_redis(self.url, 2) as sh, omld.Client(self.daemons[1].rpc) as full:
            for q in range(40):
                query = "it%d" % rng.randrange(N) if q % 2 else \
                    [rng.uniform(-1, 1) for _ in range(8)]
                k = 1 + q % 20
                for kw in ({}, {"offset": q % 7},
                           {"labels": ["c1", "c2"], "exclude_ids": ["it5", "it9"],
                            "min_similarity": 0.1, "offset": q % 3}):
                    a = sh.retrieve(query, k, **kw)
                    b = full.retrieve(query, k, **kw)
                    self.assertEqual(a.model_version, self.version)
                    self.assertEqual(a, b)
            scored = 0
            for q in range(40):
                query = "it%d" % rng.randrange(N) if q % 2 else \
                    [rng.uniform(-1, 1) for _ in range(8)]
                a = sh.classify(query, 1 + q % 25)
                self.assertEqual(a, full.classify(query, 1 + q % 25))
                scored += len(a.scores) > 1
            self.assertGreater(scored, 0)

    def test_errors_are_named(self):
        with self.assertRaisesRegex(omld.OmldConnectionError, "no shard 0 of 3"):
            omld.Shards.from_redis(self.url, 3)
        with self.assertRaises(ValueError):
            omld.Shards.from_redis("http://x", 2)
        with omld.Shards.from_redis(self.url, 2) as sh:
            with self.assertRaises(ValueError):
                sh.classify("it1", 0)
            with self.assertRaises(omld.NotFound):
                sh.retrieve("no-such-item", 5)
            self.assertEqual(len(sh.retrieve("it1", 3)), 3)  # usable after a refusal


if __name__ == "__main__":
    unittest.main()
