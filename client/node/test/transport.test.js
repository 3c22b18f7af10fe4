// transport.test.js - failures that are not daemon errors: a refused
// connect, a timeout against a real omld that stops answering (SIGSTOP),
// the daemon going away mid-call, and answers that make no sense (a fake
// server). Each is an OmldConnectionError (never an OmldError), closes the
// client and rejects every call in flight.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const net = require("net");
const omld = require("..");
const { Request, Response } = require("../lib/proto");
const { frameHeader } = require("../lib/frame");
const { Daemon } = require("./daemon");

const transport = (cls, code) => (e) =>
  e instanceof cls && !(e instanceof omld.OmldError) && (code === undefined || e.code === code);

// A TCP server on an ephemeral port; onFrame(request, socket) for each
// whole Request frame. Resolves with {server, address}.
function fakeServer(onFrame) {
  const server = net.createServer((s) => {
    let buf = Buffer.alloc(0);
    s.on("error", () => {});
    s.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const n = buf.readUInt32BE(0);
        onFrame(Request.decode(buf.subarray(4, 4 + n)), s);
        buf = buf.subarray(4 + n);
      }
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () =>
    resolve({ server, address: `127.0.0.1:${server.address().port}` })));
}

function answer(s, fields) {
  const p = Response.encode(fields).finish();
  s.write(Buffer.concat([frameHeader(p.length), p]));
}

test("a refused connect is an OmldConnectionError with the system code", async () => {
  const { server, address } = await fakeServer(() => {});
  await new Promise((r) => server.close(r));  // the port is free again: nobody listens
  await assert.rejects(omld.connect(address), transport(omld.OmldConnectionError, "ECONNREFUSED"));
});

test("timeout: a stopped omld; the connection closes, a new one works after", async () => {
  const D = await Daemon.start();
  try {
    const c = await omld.connect(D.rpc, { timeout: 20000 });
    assert.equal((await c.health()).live, true);
    D.proc.kill("SIGSTOP");
    let closeErr;
    c.once("close", (e) => { closeErr = e; });
    const t0 = Date.now();
    const slow = c.health({ timeout: 300 });
    const behind = c.status();  // queued behind it: fails with it
    await assert.rejects(slow, transport(omld.OmldTimeoutError, "ETIMEDOUT"));
    const ms = Date.now() - t0;
    assert.ok(ms >= 290 && ms < 5000, `timed out after ${ms} ms`);
    await assert.rejects(behind, (e) => transport(omld.OmldConnectionError)(e) &&
                                        !(e instanceof omld.OmldTimeoutError) && /timed out/.test(e.message));
    assert.equal(c.closed, true);
    assert.ok(closeErr instanceof omld.OmldConnectionError);
    await assert.rejects(c.health(), transport(omld.OmldConnectionError));
    D.proc.kill("SIGCONT");
    const again = await omld.connect(D.rpc, { timeout: 20000 });
    assert.equal((await again.health()).live, true);
    // The daemon going away fails the calls in flight.
    const stopped = D.stop();
    await assert.rejects((async () => { for (;;) await again.status(); })(),
                         transport(omld.OmldConnectionError));
    assert.equal(await stopped, 0);
  } finally {
    D.proc.kill("SIGCONT");
    await D.stop();
  }
});

test("an answer with the wrong request id is an OmldProtocolError", async () => {
  const { server, address } = await fakeServer((req, s) =>
    answer(s, { requestId: Number(req.requestId) + 1, status: { code: 0 }, health: { live: true } }));
  try {
    const c = await omld.connect(address);
    await assert.rejects(c.health(), transport(omld.OmldProtocolError, "OMLD_PROTOCOL"));
    assert.equal(c.closed, true);
  } finally {
    server.close();
  }
});

test("garbage, a wrong body, an oversized answer, a close mid-call", async () => {
  const replies = [
    (req, s) => s.write(Buffer.from([0, 0, 0, 3, 0xff, 0xff, 0xff])),        // not a Response
    (req, s) => answer(s, { requestId: req.requestId, status: { code: 0 }, statusInfo: {} }),
    (req, s) => s.write(frameHeader(1 << 20)),                              // > maxFrame
    (req, s) => s.destroy(),
  ];
  const want = [omld.OmldProtocolError, omld.OmldProtocolError, omld.OmldProtocolError,
                omld.OmldConnectionError];
  let i = 0;
  const { server, address } = await fakeServer((req, s) => replies[i](req, s));
  try {
    for (; i < replies.length; i++) {
      const c = await omld.connect(address, { maxFrame: 1024 });
      await assert.rejects(c.health(), transport(want[i]), `reply ${i}`);
      assert.equal(c.closed, true);
    }
  } finally {
    server.close();
  }
});
