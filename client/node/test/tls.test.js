// tls.test.js - the client over TLS against a real omld with tls_cert and
// tls_key from a self-signed certificate made here by the openssl command
// (nothing is committed): cafile verifies the daemon, a wrong CA or name is
// refused with the reason, a plain client is told the port speaks TLS; a
// daemon with tls_client_ca takes a client certificate of its CA (certfile,
// keyfile) and refuses none or another CA's, saying so.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");
const omld = require("..");
const { Daemon, ITEMS } = require("./daemon");

const haveOpenssl = spawnSync("openssl", ["version"]).status === 0;

function makePair(dir, name) {
  const cert = path.join(dir, `${name}.pem`), key = path.join(dir, `${name}-key.pem`);
  const r = spawnSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt",
    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
    "-subj", `/CN=${name}`, "-addext", `subjectAltName=DNS:${name},IP:127.0.0.1`]);
  assert.equal(r.status, 0, String(r.stderr));
  return { cert, key };
}

test("TLS", { skip: !haveOpenssl && "no openssl command" }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "omld-node-tls-"));
  const mine = makePair(dir, "localhost"), other = makePair(dir, "other.example");
  const d = await Daemon.start([`--tls_cert=${mine.cert}`, `--tls_key=${mine.key}`]);
  t.after(async () => {
    await d.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const port = d.rpc.split(":").pop();

  await t.test("cafile verifies the daemon, by IP and by name", async () => {
    for (const server of [d.rpc, `localhost:${port}`]) {
      const c = await omld.connect(server, { cafile: mine.cert });
      const r = await c.putItems(ITEMS.slice(0, 10));
      assert.equal(r.created + r.replaced, 10);
      assert.equal((await c.getItems(ITEMS[3].id))[0].id, ITEMS[3].id);
      await c.close();
    }
  });

  await t.test("a wrong CA or name is refused", async () => {
    await assert.rejects(omld.connect(d.rpc, { cafile: other.cert }), /not trusted/);
    await assert.rejects(omld.connect(d.rpc, { tls: { servername: "other.example" },
                                               cafile: mine.cert }), /not trusted/);
  });

  await t.test("a plain client is told", async () => {
    const c = await omld.connect(d.rpc);
    await assert.rejects(c.health(), (e) => e instanceof omld.OmldError &&
                         e.code === "UNAVAILABLE" && /speaks TLS/.test(e.message));
    await c.close();
  });
});

// A client certificate for name, signed by the CA ca (a makePair).
function makeClientCert(dir, name, ca) {
  const cert = path.join(dir, `${name}.pem`), key = path.join(dir, `${name}-key.pem`);
  const ext = `${cert}.ext`;
  fs.writeFileSync(ext, "extendedKeyUsage=clientAuth\n");
  let r = spawnSync("openssl", ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
    "-nodes", "-keyout", key, "-out", `${cert}.csr`, "-subj", `/CN=${name}`]);
  assert.equal(r.status, 0, String(r.stderr));
  r = spawnSync("openssl", ["x509", "-req", "-in", `${cert}.csr`, "-CA", ca.cert, "-CAkey", ca.key,
    "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext]);
  assert.equal(r.status, 0, String(r.stderr));
  return { cert, key };
}

// The error a client with options gets at connect or at its first call.
async function refusal(server, options) {
  let c = null;
  try {
    c = await omld.connect(server, options);
    await c.health();
  } catch (e) {
    return e;
  } finally {
    if (c) await c.close();
  }
  assert.fail("the daemon accepted the client");
}

test("client certificates (tls_client_ca)", { skip: !haveOpenssl && "no openssl command" },
  async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "omld-node-mtls-"));
    const mine = makePair(dir, "localhost");
    const ca = makePair(dir, "clients-ca"), strangerCa = makePair(dir, "stranger-ca");
    const good = makeClientCert(dir, "web-1", ca), stranger = makeClientCert(dir, "web-2", strangerCa);
    const d = await Daemon.start([`--tls_cert=${mine.cert}`, `--tls_key=${mine.key}`,
                                  `--tls_client_ca=${ca.cert}`]);
    t.after(async () => {
      await d.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    await t.test("a certificate of the CA works", async () => {
      const c = await omld.connect(d.rpc, { cafile: mine.cert, certfile: good.cert,
                                            keyfile: good.key });
      assert.equal((await c.health()).live, true);
      await c.close();
    });

    await t.test("none, or another CA's, is refused saying so", async () => {
      let e = await refusal(d.rpc, { cafile: mine.cert });
      assert.ok(e instanceof omld.OmldConnectionError, String(e));
      assert.match(e.message, /requires a client certificate/);
      e = await refusal(d.rpc, { cafile: mine.cert, certfile: stranger.cert,
                                 keyfile: stranger.key });
      assert.ok(e instanceof omld.OmldConnectionError, String(e));
      assert.match(e.message, /refused the client certificate/);
    });
  });
