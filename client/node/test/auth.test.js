// auth.test.js - a daemon with tokens (--tokens=rw:X,ro:Y): nothing is
// served before Auth, a wrong token is UNAUTHENTICATED, a read-only token
// may query but gets PERMISSION_DENIED on writes, and a later valid Auth
// replaces a connection's rights.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const omld = require("..");
const { Daemon, ITEMS } = require("./daemon");

const RW = "rw-secret-1", RO = "ro-secret-2";
let D;

test.before(async () => { D = await Daemon.start([`--tokens=rw:${RW},ro:${RO}`]); });
test.after(async () => { if (D) await D.stop(); });

function isCode(code, field) {
  return (e) => e instanceof omld.OmldError && e.code === code &&
                (field === undefined || e.field === field);
}

test("without Auth every request is UNAUTHENTICATED", async () => {
  const c = await omld.connect(D.rpc);
  try {
    await assert.rejects(c.health(), isCode("UNAUTHENTICATED"));
    await assert.rejects(c.putItems(ITEMS.slice(0, 2)), isCode("UNAUTHENTICATED"));
    assert.equal(c.closed, false);
  } finally {
    await c.close();
  }
});

test("a wrong token rejects connect with UNAUTHENTICATED, field auth.token", async () => {
  await assert.rejects(omld.connect(D.rpc, { token: "wrong" }), isCode("UNAUTHENTICATED", "auth.token"));
  const c = await omld.connect(D.rpc);
  try {
    await assert.rejects(c.auth("wrong"), isCode("UNAUTHENTICATED", "auth.token"));
    assert.equal(c.readWrite, null);
  } finally {
    await c.close();
  }
});

test("read-write and read-only tokens", async () => {
  const rw = await omld.connect(D.rpc, { token: RW });
  const ro = await omld.connect(D.rpc, { token: RO });
  try {
    assert.equal(rw.readWrite, true);
    assert.equal(ro.readWrite, false);
    assert.equal((await rw.putItems(ITEMS)).created, ITEMS.length);
    await rw.addTriplets([["item-0", "item-4", "item-1"]]);
    await rw.waitLearned();
    // Read-only: queries, status and health are served...
    assert.equal((await ro.getItems(["item-0"]))[0].id, "item-0");
    assert.equal(typeof (await ro.classify("item-0")).label, "string");
    assert.equal((await ro.status()).items, ITEMS.length);
    assert.equal((await ro.health()).live, true);
    // ... every write is PERMISSION_DENIED and changes nothing.
    const writes = [
      () => ro.putItems([{ id: "ro-item", features: ITEMS[0].features }]),
      () => ro.deleteItems(["item-0"]),
      () => ro.addTriplets([["item-0", "item-4", "item-1"]]),
      () => ro.addPairs([["item-0", "item-4", true]]),
      () => ro.checkpoint(),
      () => ro.trainStart("triplet"),
      () => ro.trainCancel(1),
      () => ro.promote("nope"),
      () => ro.rollback(),
      () => ro.deleteModel("nope"),
    ];
    for (const w of writes) await assert.rejects(w(), isCode("PERMISSION_DENIED"), String(w));
    assert.equal((await ro.status()).items, ITEMS.length);
    // A later valid Auth replaces the rights.
    assert.equal(await ro.auth(RW), true);
    assert.equal((await ro.putItems([{ id: "ro-item", features: ITEMS[0].features }])).created, 1);
    assert.equal(await ro.auth(RO), false);
    await assert.rejects(ro.deleteItems(["ro-item"]), isCode("PERMISSION_DENIED"));
  } finally {
    await rw.close();
    await ro.close();
  }
});
