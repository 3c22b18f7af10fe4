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


def make_client_cert(name, ca):
    """A client certificate for name, signed by the CA of make_pair(ca)."""
    cert, key = os.path.join(CERTS, name + ".pem"), os.path.join(CERTS, name + "-key.pem")
    csr, ext = cert + ".csr", cert + ".ext"
    with open(ext, "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + name],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", cafile(ca), "-CAkey",
                    os.path.join(CERTS, ca + "-key.pem"), "-CAcreateserial", "-out", cert,
                    "-days", "2", "-extfile", ext], check=True, capture_output=True)
    return cert, key


class TestClientCertificates(unittest.TestCase):
    """A daemon with tls_client_ca: certfile/keyfile signed by its CA work;
    none, or one of another CA, is refused saying so."""

    @classmethod
    def setUpClass(cls):
        make_pair("clients-ca")
        make_pair("stranger-ca")
        cls.good = make_client_cert("web-1", "clients-ca")
        cls.stranger = make_client_cert("web-2", "stranger-ca")
        cls.d = Daemon(MODEL_ARGS + ["--tls_cert=" + cafile(), "--tls_key=" +
                                     os.path.join(CERTS, "localhost-key.pem"),
                                     "--tls_client_ca=" + cafile("clients-ca")])

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop(signal.SIGTERM)
        cls.d.cleanup()
        assert rc == 0, rc

    def refused(self, **kw):
        """The error a client with kw gets at connect or at its first call."""
        with self.assertRaises(omld.OmldConnectionError) as e:
            with omld.Client(self.d.rpc, timeout=20, cafile=cafile(), **kw) as c:
                c.health()
        return str(e.exception)

    def test_a_good_certificate(self):
        cert, key = self.good
        with omld.Client(self.d.rpc, timeout=20, cafile=cafile(), certfile=cert,
                         keyfile=key) as c:
            self.assertTrue(c.health().live)

    def test_b_none_or_a_stranger(self):
        self.assertIn("requires a client certificate", self.refused())
        cert, key = self.stranger
        self.assertIn("refused the client certificate", self.refused(certfile=cert, keyfile=key))

    def test_c_bad_files(self):
        cert, _ = self.good
        with self.assertRaises(ValueError) as e:
            omld.Client(self.d.rpc, timeout=20, cafile=cafile(), certfile=cert,
                        keyfile=self.stranger[1])
        self.assertIn(cert, str(e.exception))

    def test_d_async(self):
        async def run():
            cert, key = self.good
            c = await omld.connect_async(self.d.rpc, timeout=20, cafile=cafile(),
                                         certfile=cert, keyfile=key)
            try:
                self.assertTrue((await c.health()).live)
            finally:
                await c.close()
            with self.assertRaises(omld.OmldConnectionError) as e:
                c = await omld.connect_async(self.d.rpc, timeout=20, cafile=cafile())
                try:
                    await c.health()
                finally:
                    await c.close()
            self.assertIn("requires a client certificate", str(e.exception))
        asyncio.run(run())


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
