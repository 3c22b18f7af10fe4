// trainer.test.js - batch trainer jobs and named models against a real
// omld: trainStart / trainStatus / trainCancel, listModels, a query on a
// named model, promote / rollback, deleteModel, and their errors.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const omld = require("..");
const { Daemon, ITEMS, N_ITEMS, CLASSES } = require("./daemon");

let D, c;

test.before(async () => {
  D = await Daemon.start();
  c = await omld.connect(D.rpc, { timeout: 20000 });
  await c.putItems(ITEMS);
});

test.after(async () => {
  if (c) await c.close();
  if (D) await D.stop();
});

function isCode(code, field) {
  return (e) => e instanceof omld.OmldError && e.code === code && e.field === field;
}

// Polls trainStatus until the job has ended; resolves with its JobInfo.
async function finished(jobId) {
  const deadline = Date.now() + 60000;
  for (;;) {
    const job = await c.trainStatus(jobId);
    if (!["QUEUED", "RUNNING"].includes(job.state)) return job;
    assert.ok(Date.now() < deadline, `job ${jobId} still ${job.state}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("train a model, query it, promote, roll back, delete", async () => {
  const start = await c.trainStart("triplet", { variant: "semihard", name: "shoes-v1",
                                                params: { epochs: 3, learningRate: 0.01, seed: 7 } });
  assert.deepEqual(start, { modelVersion: start.modelVersion, jobId: start.jobId, model: "shoes-v1",
                            items: N_ITEMS, classes: CLASSES });
  const job = await finished(start.jobId);
  assert.equal(job.state, "DONE", job.error);
  assert.equal(job.id, start.jobId);
  assert.equal(job.method, "triplet");
  assert.equal(job.model, "shoes-v1");
  assert.equal(job.epochs, 3);
  const models = await c.listModels();
  assert.deepEqual(models.map((m) => [m.name, m.method, m.jobId]), [["shoes-v1", "triplet", start.jobId]]);
  assert.equal(models[0].itemsIndexed, N_ITEMS);
  // Queries name the model.
  const cl = await c.classify("item-0", { model: "shoes-v1", k: 5 });
  assert.equal(cl.label, "class-0");
  const e = await c.embed("item-0", { model: "shoes-v1" });
  assert.equal(e.heads.length, models[0].depth + 1);
  assert.equal((await c.retrieve("item-0", { model: "shoes-v1", k: 3 })).hits.length, 3);
  assert.equal(typeof (await c.verify("item-0", "item-4", { model: "shoes-v1" })).similar, "boolean");
  // Promote, then undo it (one level).
  const before = (await c.status()).modelVersion;
  const p = await c.promote("shoes-v1");
  assert.equal(p.depth, models[0].depth);
  assert.ok(p.modelVersion > before);
  const r = await c.rollback();
  assert.equal(r.undone, "shoes-v1");
  assert.ok(r.modelVersion > p.modelVersion);
  await assert.rejects(c.rollback(), isCode("CONFLICT", "rollback"));
  await assert.rejects(c.trainCancel(start.jobId), isCode("CONFLICT", "train_cancel.job_id"));
  await assert.rejects(c.trainStart("triplet", { name: "shoes-v1" }), isCode("CONFLICT", "train_start.name"));
  assert.deepEqual(await c.deleteModel("shoes-v1"), { modelVersion: c.lastModelVersion });
  assert.deepEqual(await c.listModels(), []);
});

test("cancel a queued and a running job", async () => {
  // No validation, so no early stop: the first job runs until cancelled.
  const long = { epochs: 10000, validationFraction: 0 };
  const a = await c.trainStart("triplet", { params: long });
  const b = await c.trainStart("contrastive", { params: long, labels: ["class-0", "class-1"] });
  assert.equal(b.classes, 2);
  const qb = await c.trainCancel(b.jobId);  // queued behind a: cancelled at once
  assert.equal(qb.state, "CANCELLED");
  const qa = await c.trainCancel(a.jobId);
  assert.ok(qa.cancelRequested || qa.state === "CANCELLED", JSON.stringify(qa));
  assert.equal((await finished(a.jobId)).state, "CANCELLED");
  assert.deepEqual(await c.listModels(), [], "a cancelled job leaves no model");
});

test("trainer errors name their field", async () => {
  await assert.rejects(c.trainStart("nope"), isCode("INVALID_ARGUMENT", "train_start.method"));
  await assert.rejects(c.trainStart("triplet", { labels: ["no-such-label"] }),
                       isCode("NOT_FOUND", "train_start.labels[0]"));
  await assert.rejects(c.trainStatus(999), isCode("NOT_FOUND", "train_status.job_id"));
  await assert.rejects(c.trainCancel(999), isCode("NOT_FOUND", "train_cancel.job_id"));
  await assert.rejects(c.promote("nope"), isCode("NOT_FOUND", "promote.name"));
  await assert.rejects(c.deleteModel("nope"), isCode("NOT_FOUND", "delete_model.name"));
  await assert.rejects(c.classify("item-0", { model: "nope" }), isCode("NOT_FOUND", "classify.model"));
});
