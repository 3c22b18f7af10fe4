#!/usr/bin/python3
"""The Python clients over TLS against a real omld (ctest python_tls).

The daemon is test_client.py's (Daemon, MODEL_ARGS, its data) with
tls_cert and tls_key from a self-signed certificate made here with the
openssl command (nothing is committed). Checked: Client and AsyncClient
with cafile= put, classify and read back the items; a pool of TLS clients;
a wrong CA and a wrong name fail with the reason; a plain client is told
the port speaks TLS.

Environment as test_client.py (OMLD_BIN, OMLD_PB2_DIR). Exit 77 (a ctest
skip) when this Python has no google.protobuf or there is no openssl.
"""
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_client import ID, LABEL, MODEL_ARGS, N_ITEMS, X, Daemon, omld  # noqa: E402

if shutil.which("openssl") is None:
    print("SKIP: no openssl command to make a certificate")
    sys.exit(77)

D = None
CERTS = None


def make_pair(name):
    cert, key = os.path.join(CERTS, name + ".pem"), os.path.join(CERTS, name + "-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=" + name,
                    "-addext", "subjectAltName=DNS:%s,IP:127.0.0.1" % name],
                   check=True, capture_output=True)
    return cert, key


def setUpModule():
    global D, CERTS
    CERTS = tempfile.mkdtemp(prefix="omld-py-tls-")
    cert, key = make_pair("localhost")
    make_pair("other.example")
    D = Daemon(MODEL_ARGS + ["--tls_cert=" + cert, "--tls_key=" + key])


def tearDownModule():
    if D is not None:
        rc = D.stop(signal.SIGTERM)
        D.cleanup()
        assert rc == 0, rc
    shutil.rmtree(CERTS, ignore_errors=True)


def cafile(name="localhost"):
    return os.path.join(CERTS, name + ".pem")


class TestTls(unittest.TestCase):
    def test_a_client(self):
        with omld.Client(D.rpc, timeout=20, cafile=cafile()) as c:
            r = c.put_items([(ID[i], X[i], LABEL[i]) for i in range(N_ITEMS)])
            self.assertEqual(r.created + r.replaced, N_ITEMS)
            got = c.get_items(ID[:3])
            self.assertEqual([g.id for g in got], ID[:3])
            self.assertTrue(c.health().live)

    def test_b_name(self):
        port = D.rpc.rsplit(":", 1)[1]
        with omld.Client("localhost:" + port, timeout=20, cafile=cafile()) as c:
            self.assertTrue(c.health().live)
        with self.assertRaises(omld.OmldConnectionError) as e:
            omld.Client(D.rpc, timeout=20, cafile=cafile(), server_hostname="other.example")
        self.assertIn("not trusted", str(e.exception))

    def test_c_wrong_ca(self):
        with self.assertRaises(omld.OmldConnectionError) as e:
            omld.Client(D.rpc, timeout=20, cafile=cafile("other.example"))
        self.assertIn("not trusted", str(e.exception))
        with self.assertRaises(omld.OmldConnectionError):
            omld.Client(D.rpc, timeout=20, tls=True)  # the system's CAs do not know it

    def test_d_plain_client_told(self):
        with omld.Client(D.rpc, timeout=20) as c:
            with self.assertRaises(omld.Unavailable) as e:
                c.health()
        self.assertIn("speaks TLS", str(e.exception))

    def test_e_async(self):
        async def run():
            c = await omld.connect_async(D.rpc, timeout=20, cafile=cafile())
            try:
                answers = await asyncio.gather(*[c.classify(X[i], k=3) for i in range(50)])
                self.assertEqual(len(answers), 50)
                self.assertTrue((await c.health()).live)
            finally:
                await c.close()
            with self.assertRaises(omld.OmldConnectionError) as e:
                await omld.connect_async(D.rpc, timeout=20, cafile=cafile("other.example"))
            self.assertIn("not trusted", str(e.exception))
        asyncio.run(run())

    def test_f_pool(self):
        with omld.ClientPool(D.rpc, size=2, timeout=20, cafile=cafile()) as pool:
            for _ in range(3):
                with pool.client() as c:
                    self.assertTrue(c.health().live)


if __name__ == "__main__":
    unittest.main()
