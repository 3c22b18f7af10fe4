// client.test.js - every data and query operation against a real omld:
// answers, daemon errors with their code and field, pipelining of many
// requests on one connection, the Unix socket and the generic layer.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const omld = require("..");
const { Daemon, DIM, CLASSES, N_ITEMS, MAX_K, ITEMS, triplet, f32 } = require("./daemon");

let D, c;

test.before(async () => {
  D = await Daemon.start();
  c = await omld.connect(D.rpc, { timeout: 20000 });
  const r = await c.putItems(ITEMS);
  assert.equal(r.created, N_ITEMS);
});

test.after(async () => {
  if (c) await c.close();
  if (D) assert.equal(await D.stop(), 0, "SIGTERM ends omld with exit 0");
});

// fn() rejects with an OmldError of this code and field.
async function expectError(code, field, fn) {
  let err;
  await assert.rejects(fn(), (e) => (err = e, true));
  assert.ok(err instanceof omld.OmldError, `${err}`);
  assert.equal(err.code, code, err.message);
  assert.equal(err.field, field, err.message);
  assert.ok(err.statusMessage.length > 0);
  assert.ok(err.message.includes(code) && err.message.includes(field));
  return err;
}

test("put, get, replace, delete items", async () => {
  const got = await c.getItems([ITEMS[5].id, ITEMS[6].id]);
  assert.deepEqual(got.map((x) => x.id), [ITEMS[5].id, ITEMS[6].id]);
  assert.deepEqual(got[0].features, f32(ITEMS[5].features));
  assert.equal(got[1].label, ITEMS[6].label);
  // Replace by id; an unlabelled item; a tuple with a Float32Array.
  const r = await c.putItems([ITEMS[5], { id: "extra-a", features: ITEMS[1].features },
                              ["extra-b", Float32Array.from(ITEMS[2].features), "class-2"]]);
  assert.deepEqual([r.created, r.replaced], [2, 1]);
  assert.ok(r.modelVersion >= 1);
  const [a, b] = await c.getItems(["extra-a", "extra-b"]);
  assert.equal(a.label, null);
  assert.deepEqual(b.features, f32(ITEMS[2].features));
  assert.equal((await c.getItems("extra-a"))[0].id, "extra-a");  // one id as a string
  assert.equal((await c.deleteItems(["extra-a", "extra-b"])).deleted, 2);
  assert.equal((await c.deleteItems(["extra-a"], { missingOk: true })).deleted, 0);
  await expectError("NOT_FOUND", "delete_items.ids[0]", () => c.deleteItems(["extra-a"]));
  await expectError("NOT_FOUND", "get_items.ids[1]", () => c.getItems([ITEMS[0].id, "nope"]));
  await expectError("CONFLICT", "get_items.ids[1]", () => c.getItems(["item-1", "item-1"]));
});

test("metadata: put and get; where filters retrieve, classify, count and delete", async () => {
  const f = ITEMS[0].features;
  await c.putItems([{ id: "m-1", features: f, metadata: { color: "red", size: "L" } },
                    ["m-2", f, "class-0", { color: "blue" }],
                    { id: "m-3", features: f, metadata: { color: "red", size: "S" } }],
                   { waitForView: true });
  const [a, b] = await c.getItems(["m-1", "m-2"]);
  assert.deepEqual(a.metadata, { color: "red", size: "L" });
  assert.deepEqual(b.metadata, { color: "blue" });
  assert.equal((await c.getItems(ITEMS[0].id))[0].metadata, null);
  assert.equal((await c.countItems({ where: { color: "red" } })).count, 2);
  assert.equal((await c.countItems({ where: { color: ["red", "blue"], size: "L" } })).count, 1);
  const hits = await c.retrieve(ITEMS[0].id, { k: 10, where: { color: ["blue"] } });
  assert.deepEqual(hits.hits.map((h) => h.id), ["m-2"]);
  assert.equal((await c.classify(ITEMS[0].id, { where: { color: "none" } })).label, "");
  await expectError("INVALID_ARGUMENT", "count_items.metadata[0].values",
                    () => c.countItems({ where: { color: [] } }));
  assert.equal((await c.deleteItems(null, { where: { color: ["red", "blue"] } })).deleted, 3);
  assert.equal((await c.countItems()).total, N_ITEMS);
});

test("add triplets: all-or-nothing, inline vectors, partial with rejected", async () => {
  const before = await c.status();
  const ts = Array.from({ length: 200 }, (_, i) => triplet(i));
  ts.push([ITEMS[0].features, ITEMS[4].id, ITEMS[1].id]);  // an inline anchor
  ts[3] = [...ts[3], 2.5];                                    // a weighted click
  ts[4] = { anchor: ts[4][0], positive: ts[4][1], negative: ts[4][2], weight: 0.5 };
  const r = await c.addTriplets(ts);
  assert.equal(r.accepted, 201);
  await expectError("INVALID_ARGUMENT", "add_triplets.triplets[1].weight",
                    () => c.addTriplets([triplet(0), [...triplet(1), -1]]));
  assert.equal(typeof r.queueDepth, "number");
  assert.deepEqual(r.rejected, []);
  // All-or-nothing: one unknown id refuses the batch, naming it.
  await expectError("NOT_FOUND", "add_triplets.triplets[1].positive.id",
                    () => c.addTriplets([triplet(0), ["item-0", "ghost", "item-1"]]));
  await expectError("INVALID_ARGUMENT", "add_triplets.triplets[0].negative",
                    () => c.addTriplets([{ anchor: "item-0", positive: "item-4", negative: "item-0" }]));
  // Partial: the good ones are learned, each bad one listed.
  const p = await c.addTriplets([triplet(1), ["item-0", "ghost", "item-1"], triplet(2),
                                 ["item-0", [1, 2], "item-1"]], { partial: true });
  assert.equal(p.accepted, 2);
  assert.deepEqual(p.rejected.map((e) => [e.index, e.code, e.field]), [
    [1, "NOT_FOUND", "add_triplets.triplets[1].positive.id"],
    [3, "WRONG_DIMENSION", "add_triplets.triplets[3].positive.vector"],
  ]);
  assert.ok(p.rejected.every((e) => e.message.length > 0));
  const s = await c.waitLearned({ applied: before.tripletsApplied + 203, timeout: 30000 });
  assert.ok(s.tripletsApplied >= before.tripletsApplied + 203);
  assert.equal(s.queueDepth, 0);
});

test("writes: an idempotency key makes a retry a duplicate; waitForView reads the write", async () => {
  const fresh = { id: "fresh", features: new Array(DIM).fill(-1), label: "class-x" };
  const first = await c.putItems([fresh], { idempotencyKey: "put-fresh-1" });
  assert.deepEqual([first.created, first.duplicate], [1, false]);
  const again = await c.putItems([fresh], { idempotencyKey: "put-fresh-1" });
  assert.deepEqual([again.created, again.replaced, again.duplicate], [1, 0, true]);
  const t1 = await c.addTriplets([triplet(3)], { idempotencyKey: "t-1", partial: true });
  const t2 = await c.addTriplets([triplet(3)], { idempotencyKey: "t-1", partial: true });
  assert.deepEqual([t1.duplicate, t2.duplicate, t2.accepted], [false, true, 1]);
  await assert.rejects(c.addPairs([["item-0", "item-4", true]], { idempotencyKey: "t-1" }),
                       (e) => e.code === "CONFLICT" && e.field === "add_pairs.idempotency_key");
  assert.ok((await c.status()).duplicates >= 2);
  // Moved far away, and answered once a serving view has it: the next query finds it there.
  const moved = { ...fresh, features: new Array(DIM).fill(-2) };
  const w = await c.putItems([moved], { waitForView: true });
  assert.equal(w.replaced, 1);
  const hit = (await c.retrieve(moved.features, { k: 1 })).hits[0];
  assert.equal(hit.id, "fresh");
  assert.ok(hit.similarity > 0.99, `${hit.similarity}`);
  assert.ok((await c.addPairs([["item-0", "item-4", true]], { waitForView: true })).modelVersion >= w.modelVersion);
  assert.equal((await c.deleteItems(["fresh"])).deleted, 1);
});

test("add pairs: similar, dissimilar, a contradiction", async () => {
  const r = await c.addPairs([["item-0", "item-4", true], { a: "item-8", b: "item-4", similar: "similar" },
                              ["item-0", "item-1", "dissimilar"]]);
  assert.equal(r.accepted, 3);
  assert.equal(typeof r.derivedTriplets, "number");
  await expectError("CONFLICT", "add_pairs.pairs[0]", () => c.addPairs([["item-8", "item-0", false]]));
  await expectError("INVALID_ARGUMENT", "add_pairs.pairs[0].a",
                    () => c.addPairs([[ITEMS[0].features, "item-1", true]]));
  await c.waitLearned();
});

test("classify by id and by vector", async () => {
  let right = 0;
  for (const it of ITEMS.slice(0, 20)) {
    const r = await c.classify(it.id, { k: 5 });
    if (r.label === it.label) right++;
    assert.ok(r.scores.length >= 1 && r.scores[0].label === r.label);
    for (let i = 1; i < r.scores.length; i++) assert.ok(r.scores[i - 1].score >= r.scores[i].score);
    assert.ok(r.modelVersion >= 1);
  }
  assert.ok(right >= 18, `${right} of 20 classified right`);
  const v = await c.classify(Float32Array.from(ITEMS[3].features));
  assert.equal(v.label, ITEMS[3].label);
  await expectError("INVALID_ARGUMENT", "classify.k", () => c.classify("item-0", { k: 0 }));
  await expectError("INVALID_ARGUMENT", "classify.k", () => c.classify("item-0", { k: MAX_K + 1 }));
  await expectError("NOT_FOUND", "classify.model", () => c.classify("item-0", { model: "nope" }));
  await expectError("NOT_FOUND", "classify.query.id", () => c.classify("ghost"));
});

test("verify", async () => {
  const same = await c.verify("item-0", "item-4");
  assert.equal(same.similar, true);
  assert.equal(same.distances.length, 3);  // L + 1 heads
  assert.ok(same.score >= 0.5 && same.score <= 1.0001);
  const other = await c.verify("item-0", ITEMS[1].features, { threshold: 0.01 });
  assert.equal(other.similar, false);
  await expectError("INVALID_ARGUMENT", "verify.threshold",
                    () => c.verify("item-0", "item-4", { threshold: 2 }));
});

test("retrieve: k, labels, excludeIds, offset, minSimilarity", async () => {
  const r = await c.retrieve("item-0", { k: 10 });
  assert.equal(r.hits.length, 10);
  assert.ok(!r.hits.some((h) => h.id === "item-0"), "a query by id never returns itself");
  assert.ok(r.hits.slice(0, 5).every((h) => h.label === "class-0"));
  for (let i = 1; i < r.hits.length; i++) assert.ok(r.hits[i - 1].similarity >= r.hits[i].similarity);
  // Paging: offset 5, k 5 is ranks 5..9 of the same ranking.
  const page = await c.retrieve("item-0", { k: 5, offset: 5 });
  assert.deepEqual(page.hits.map((h) => h.id), r.hits.slice(5).map((h) => h.id));
  // labels narrow the search: the best of class-2 however far they are.
  const l = await c.retrieve("item-0", { k: 3, labels: ["class-2"] });
  assert.equal(l.hits.length, 3);
  assert.ok(l.hits.every((h) => h.label === "class-2"));
  const ex = await c.retrieve("item-0", { k: 3, excludeIds: [r.hits[0].id, "not-stored"] });
  assert.ok(!ex.hits.some((h) => h.id === r.hits[0].id));
  assert.equal(ex.hits[0].id, r.hits[1].id);
  const ms = await c.retrieve("item-0", { k: MAX_K, minSimilarity: r.hits[4].similarity });
  assert.ok(ms.hits.length >= 5 && ms.hits.length < N_ITEMS - 1);
  assert.ok(ms.hits.every((h) => h.similarity >= r.hits[4].similarity));
  const byVector = await c.retrieve(ITEMS[0].features, { k: 1 });
  assert.equal(byVector.hits[0].id, "item-0");  // an inline vector may find the item itself
  await expectError("INVALID_ARGUMENT", "retrieve.offset",
                    () => c.retrieve("item-0", { k: MAX_K, offset: 1 }));
});

test("embed, status, health, checkpoint", async () => {
  const e = await c.embed("item-0");
  assert.equal(e.heads.length, 3);
  for (const h of e.heads) {
    assert.equal(h.length, 8);
    assert.ok(Math.abs(Math.hypot(...h) - 1) < 1e-3, "heads are L2-normalised");
  }
  assert.ok(Math.abs(e.alpha.reduce((a, b) => a + b, 0) - 1) < 1e-4);
  await expectError("WRONG_DIMENSION", "embed.item.vector", () => c.embed([1, 2, 3]));
  const m = await c.exportModel();
  assert.ok(Buffer.isBuffer(m.model));
  assert.equal(m.model.subarray(0, 8).toString("latin1"), "OMLSNAP\0");
  assert.deepEqual([m.dim, m.heads, m.emb], [DIM, 3, 8]);
  assert.equal(m.version, m.modelVersion);
  await expectError("NOT_FOUND", "export_model.model", () => c.exportModel({ model: "nope" }));
  const s = await c.status();
  assert.equal(s.dim, DIM);
  assert.equal(s.depth, 2);
  assert.equal(s.items, N_ITEMS);
  assert.equal(s.alpha.length, 3);
  assert.equal(s.seed, 3);
  assert.equal(typeof s.version, "string");
  assert.ok(s.tripletsApplied >= 203 && s.modelVersion >= 1);
  assert.deepEqual(await c.health(), { modelVersion: c.lastModelVersion, live: true, ready: true,
                                       draining: false });
  const ck = await c.checkpoint();
  assert.ok(ck.bytes > 0 && fs.existsSync(ck.path), ck.path);
  assert.ok(ck.tripletsApplied >= 203);
  assert.equal(await c.auth("anything"), true);  // no tokens configured: always read-write
});

test("daemon errors name the field and leave the connection usable", async () => {
  await expectError("WRONG_DIMENSION", "put_items.items[1].features",
                    () => c.putItems([ITEMS[0], { id: "short", features: [1, 2] }]));
  await expectError("NON_FINITE", "put_items.items[0].features",
                    () => c.putItems([{ id: "nan", features: ITEMS[0].features.map(() => NaN) }]));
  await expectError("INVALID_ARGUMENT", "put_items.items", () => c.putItems([]));
  await expectError("CONFLICT", "put_items.items[1].id",
                    () => c.putItems([ITEMS[0], ITEMS[0]]));
  assert.equal((await c.getItems(["short", "nan"]).catch((e) => e)).code, "NOT_FOUND",
               "a refused batch stored nothing");
  assert.equal((await c.health()).live, true);
  assert.equal(c.closed, false);
});

test("pipelining: 600 requests in flight on one connection, answers matched", async () => {
  const n = 600;
  const calls = [];
  for (let i = 0; i < n; i++) {
    if (i % 50 === 7) calls.push(c.getItems([`missing-${i}`]).catch((e) => e));  // errors in the stream
    else if (i % 3 === 0) calls.push(c.classify(ITEMS[i % N_ITEMS].id, { k: 3 }));
    else calls.push(c.getItems([ITEMS[i % N_ITEMS].id]));
  }
  assert.equal(c.inFlight, n, "every request was written before any answer was read");
  const out = await Promise.all(calls);
  assert.equal(c.inFlight, 0);
  out.forEach((r, i) => {
    if (i % 50 === 7) {
      assert.ok(r instanceof omld.OmldError && r.code === "NOT_FOUND", `${i}: ${r}`);
      assert.equal(r.field, "get_items.ids[0]");
    } else if (i % 3 === 0) {
      assert.equal(typeof r.label, "string");
    } else {
      assert.equal(r[0].id, ITEMS[i % N_ITEMS].id, `answer ${i}`);
    }
  });
  // Writes pipelined too: 20 batches of triplets, all accepted in order.
  const batches = await Promise.all(Array.from({ length: 20 }, (_, b) =>
    c.addTriplets(Array.from({ length: 25 }, (_, i) => triplet(b * 25 + i)))));
  assert.ok(batches.every((r) => r.accepted === 25));
});

test("unix socket and the generic layer", async () => {
  const u = await omld.connect(`unix:${D.unix}`, { timeout: 5000 });
  try {
    const resp = await u.call("getItems", { ids: ["item-3"] });
    assert.equal(resp.body, "getItems");
    assert.equal(resp.getItems.items[0].label, "class-3");
    assert.equal(Number(resp.requestId), 1);
    const l = await u.listModels();
    assert.deepEqual(l, []);
    assert.ok(omld.pb.lookupType("omld.Request"));
  } finally {
    await u.close();
  }
});

test("close rejects calls in flight and later calls", async () => {
  const x = await omld.connect(D.rpc);
  const p = x.status();
  const closed = x.close();
  await assert.rejects(p, (e) => e instanceof omld.OmldConnectionError && !(e instanceof omld.OmldError));
  await closed;
  assert.equal(x.closed, true);
  await assert.rejects(x.health(), /closed/);
});
