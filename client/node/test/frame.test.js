// frame.test.js - the parts that need no daemon: framing split at every
// byte boundary, server addresses, and arguments refused before sending.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { FrameReader, frameHeader } = require("../lib/frame");
const omld = require("..");

function frames(payloads) {
  return Buffer.concat(payloads.flatMap((p) => [frameHeader(p.length), p]));
}

function readAll(r) {
  const out = [];
  for (let f; (f = r.next()) !== null;) out.push(Buffer.from(f));
  return out;
}

test("frames split at every byte boundary read back the same", () => {
  const payloads = [Buffer.from("hello"), Buffer.alloc(0), Buffer.alloc(300, 7), Buffer.from([1])];
  const stream = frames(payloads);
  for (let cut = 0; cut <= stream.length; cut++) {
    for (const step of [1, 3, 1000]) {
      const r = new FrameReader(1 << 20);
      const got = [];
      r.feed(stream.subarray(0, cut));
      got.push(...readAll(r));
      for (let i = cut; i < stream.length; i += step) {
        r.feed(stream.subarray(i, Math.min(stream.length, i + step)));
        got.push(...readAll(r));
      }
      assert.deepEqual(got, payloads, `cut ${cut} step ${step}`);
      assert.equal(r.length, 0);
    }
  }
});

test("a header above maxFrame is refused before its payload arrives", () => {
  const r = new FrameReader(16);
  r.feed(frameHeader(16));
  assert.equal(r.next(), null);  // 16 is allowed: waits for the payload
  const big = new FrameReader(16);
  big.feed(frameHeader(17));
  assert.throws(() => big.next(), RangeError);
  assert.equal(frameHeader(0x01020304).toString("hex"), "01020304");  // big-endian
});

test("parseServer", () => {
  assert.deepEqual(omld.parseServer("127.0.0.1:7600"), { host: "127.0.0.1", port: 7600 });
  assert.deepEqual(omld.parseServer("[::1]:9"), { host: "::1", port: 9 });
  assert.deepEqual(omld.parseServer("db.example:65535"), { host: "db.example", port: 65535 });
  assert.deepEqual(omld.parseServer("unix:/run/omld.sock"), { path: "/run/omld.sock" });
  for (const bad of ["localhost", "h:0", "h:65536", "h:x", ":7600", "unix:", "::1:7600"])
    assert.throws(() => omld.parseServer(bad), TypeError, bad);
});

test("bad arguments reject with TypeError / RangeError before anything is sent", async () => {
  const c = new omld.Client("127.0.0.1:1");  // never connected: a sent call would reject otherwise
  const cases = [
    [() => c.putItems([{ id: "a", features: "1,2" }]), TypeError, /items\[0\]\.features/],
    [() => c.putItems([{ id: 7, features: [1] }]), TypeError, /items\[0\]\.id/],
    [() => c.putItems([["a", [1, "2"]]]), TypeError, /items\[0\]\.features\[1\]/],
    [() => c.putItems("a"), TypeError, /items\[0\]/],
    [() => c.addTriplets([["a", "b"]]), TypeError, /triplets\[0\]/],
    [() => c.addTriplets([["a", "b", 3]]), TypeError, /triplets\[0\]\.negative/],
    [() => c.addPairs([["a", "b", "maybe"]]), TypeError, /pairs\[0\]\.similar/],
    [() => c.classify("a", { k: -1 }), RangeError, /k/],
    [() => c.classify("a", { k: 1.5 }), RangeError, /k/],
    [() => c.classify("a", { kk: 1 }), TypeError, /unknown option kk/],
    [() => c.retrieve("a", { labels: [1] }), TypeError, /labels\[0\]/],
    [() => c.verify("a", "b", { threshold: "0.5" }), TypeError, /threshold/],
    [() => c.getItems(null), TypeError, /ids/],
    [() => c.auth(42), TypeError, /token/],
    [() => c.trainStart("triplet", { params: { epoch: 1 } }), TypeError, /unknown option epoch/],
    [() => c.trainStatus(-1), RangeError, /jobId/],
  ];
  for (const [fn, cls, re] of cases) {
    const p = fn();
    assert.ok(p instanceof Promise);
    await assert.rejects(p, (e) => e instanceof cls && re.test(e.message), String(fn));
  }
  await assert.rejects(c.health(), omld.OmldConnectionError);  // not connected: transport error
});

test("error classes", () => {
  const e = new omld.OmldError("NOT_FOUND", 2, "no item has id \"x\"", "get_items.ids[0]", 3, 9);
  assert.ok(e instanceof Error);
  assert.equal(e.name, "OmldError");
  assert.equal(e.message, "NOT_FOUND: no item has id \"x\" (field get_items.ids[0])");
  const t = new omld.OmldTimeoutError("slow");
  assert.ok(t instanceof omld.OmldConnectionError && !(t instanceof omld.OmldError));
  assert.equal(t.code, "ETIMEDOUT");
  assert.ok(new omld.OmldProtocolError("bad") instanceof omld.OmldConnectionError);
  assert.equal(omld.codeName(12), "CONFLICT");
  assert.equal(omld.codeName(99), "UNKNOWN_STATUS");
});
