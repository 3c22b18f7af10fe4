// messages.js - JavaScript values <-> the Request / Response bodies of
// omld.proto. Builders check their input and throw TypeError / RangeError
// naming the argument ("items[3].features") before anything is sent;
// converters turn an OK Response body into plain objects (camelCase field
// names, uint64 as Number, enums by name, an absent label as null).
"use strict";

const { Response, Relation, TO_OBJECT, codeName } = require("./proto");

// ------------------------------------------------------------ input checks

function str(v, what) {
  if (typeof v !== "string") throw new TypeError(`${what}: expected a string, got ${typeof v}`);
  return v;
}

function strings(v, what) {
  if (typeof v === "string") return [v];
  if (v == null || typeof v[Symbol.iterator] !== "function")
    throw new TypeError(`${what}: expected a string or an iterable of strings`);
  return Array.from(v, (s, i) => str(s, `${what}[${i}]`));
}

function uint(v, what, max = 0xFFFFFFFF) {
  if (!Number.isInteger(v) || v < 0 || v > max)
    throw new RangeError(`${what}: expected an integer in [0, ${max}], got ${v}`);
  return v;
}

function num(v, what) {
  if (typeof v !== "number") throw new TypeError(`${what}: expected a number, got ${typeof v}`);
  return v;
}

function isVector(x) {
  return Array.isArray(x) || (ArrayBuffer.isView(x) && !(x instanceof DataView));
}

// A feature vector: an Array or a typed array (Float32Array, ...) of
// numbers. Non-finite values are passed on: the daemon answers NON_FINITE.
function floats(x, what) {
  if (!isVector(x))
    throw new TypeError(`${what}: expected an array or typed array of numbers`);
  if (Array.isArray(x))
    for (let i = 0; i < x.length; i++)
      if (typeof x[i] !== "number") throw new TypeError(`${what}[${i}]: expected a number`);
  return x;
}

// ItemRef: a string is a stored id, an array of numbers an inline vector;
// {id} and {vector} are taken as they are.
function ref(x, what) {
  if (typeof x === "string") return { id: x };
  if (isVector(x)) return { vector: { values: floats(x, what) } };
  if (x && typeof x === "object") {
    if (typeof x.id === "string") return { id: x.id };
    if (x.vector !== undefined) return { vector: { values: floats(x.vector, what + ".vector") } };
  }
  throw new TypeError(`${what}: expected an id (string) or a vector (array of numbers)`);
}

// Copies the optional fields of opts named in names (camelCase) that are
// set; an unknown option is a TypeError (a typo would otherwise be ignored).
function options(opts, names, what) {
  const out = {};
  if (opts == null) return out;
  if (typeof opts !== "object") throw new TypeError(`${what}: options must be an object`);
  for (const key of Object.keys(opts)) {
    if (!(key in names)) throw new TypeError(`${what}: unknown option ${key}`);
    if (opts[key] !== undefined && opts[key] !== null) out[key] = names[key](opts[key], key);
  }
  return out;
}

// ------------------------------------------------------------ request bodies

// An item's metadata: {key: value, ...} -> [{key, value}] (omld.proto METADATA).
function keyValues(m, what) {
  if (m === undefined || m === null) return [];
  if (typeof m !== "object" || Array.isArray(m))
    throw new TypeError(`${what}: expected an object of string values`);
  return Object.keys(m).map((k) => ({ key: k, value: str(m[k], `${what}.${k}`) }));
}

// A metadata filter: {key: value | [values], ...} -> [{key, values}]: a
// value is equality, several are set membership, every key must hold.
function where(w, what) {
  if (typeof w !== "object" || Array.isArray(w))
    throw new TypeError(`${what}: expected an object of a string or strings per key`);
  return Object.keys(w).map((k) => ({ key: k, values: strings(w[k], `${what}.${k}`) }));
}

function item(x, what) {
  let id, features, label, metadata;
  if (Array.isArray(x)) [id, features, label, metadata] = x;
  else if (x && typeof x === "object") ({ id, features, label, metadata } = x);
  else throw new TypeError(`${what}: expected {id, features, label, metadata} or [id, features, label, metadata]`);
  const out = { id: str(id, what + ".id"), features: floats(features, what + ".features"),
                metadata: keyValues(metadata, what + ".metadata") };
  if (label !== undefined && label !== null) out.label = str(label, what + ".label");
  return out;
}

// options() with `where` renamed to the wire's `metadata`.
function filtered(opts, names, what) {
  const o = options(opts, { ...names, where }, what);
  if (o.where) { o.metadata = o.where; delete o.where; }
  return o;
}

// weight (optional): how far the triplet moves the model, (0, 100].
function triplet(x, what) {
  let a, p, n, w;
  if (Array.isArray(x) && (x.length === 3 || x.length === 4)) [a, p, n, w] = x;
  else if (x && typeof x === "object" && !Array.isArray(x))
    ({ anchor: a, positive: p, negative: n, weight: w } = x);
  else throw new TypeError(`${what}: expected [anchor, positive, negative(, weight)] or {anchor, positive, negative(, weight)}`);
  const t = { anchor: ref(a, what + ".anchor"), positive: ref(p, what + ".positive"),
              negative: ref(n, what + ".negative") };
  if (w !== undefined && w !== null) t.weight = num(w, what + ".weight");
  return t;
}

// similar: true / "similar" / "SIMILAR" or false / "dissimilar" / ...
function relation(v, what) {
  if (typeof v === "boolean") return v ? Relation.values.SIMILAR : Relation.values.DISSIMILAR;
  if (typeof v === "string" && Relation.values[v.toUpperCase()] > 0)
    return Relation.values[v.toUpperCase()];
  throw new TypeError(`${what}: expected true / false or "similar" / "dissimilar"`);
}

function pair(x, what) {
  let a, b, rel;
  if (Array.isArray(x) && x.length === 3) [a, b, rel] = x;
  else if (x && typeof x === "object" && !Array.isArray(x))
    ({ a, b } = x), rel = x.similar !== undefined ? x.similar : x.relation;
  else throw new TypeError(`${what}: expected [a, b, similar] or {a, b, similar}`);
  return { a: ref(a, what + ".a"), b: ref(b, what + ".b"), relation: relation(rel, what + ".similar") };
}

function list(xs, what, one) {
  if (xs == null || typeof xs[Symbol.iterator] !== "function")
    throw new TypeError(`${what}: expected an array`);
  return Array.from(xs, (x, i) => one(x, `${what}[${i}]`));
}

const MODEL = { model: str };
// Writes may carry an idempotency key (a retry changes nothing and answers
// duplicate: true) and ask to be answered once a serving view includes them.
const WRITE = { idempotencyKey: str, waitForView: Boolean };
const PARAMS = {
  epochs: uint, learningRate: num, depth: uint, batchM: uint, batchK: uint, margin: num,
  gamma1: num, gamma2: num, lambda1: num, lambda2: num,
  seed: (v, what) => uint(v, what, Number.MAX_SAFE_INTEGER), validationFraction: num,
  patience: uint,
};

const build = {
  putItems: (items, opts) => ({ items: list(items, "items", item),
                                ...options(opts, WRITE, "putItems") }),
  deleteItems: (ids, opts) => ({ ids: strings(ids == null ? [] : ids, "ids"),
                                 ...filtered(opts, { missingOk: Boolean, labels: strings },
                                             "deleteItems") }),
  countItems: (opts) => filtered(opts, { labels: strings }, "countItems"),
  getItems: (ids) => ({ ids: strings(ids, "ids") }),
  addTriplets: (triplets, opts) => ({ triplets: list(triplets, "triplets", triplet),
                                      ...options(opts, { partial: Boolean, ...WRITE }, "addTriplets") }),
  addPairs: (pairs, opts) => ({ pairs: list(pairs, "pairs", pair), ...options(opts, WRITE, "addPairs") }),
  classify: (query, opts) => ({ query: ref(query, "query"),
                                ...filtered(opts, { k: uint, ...MODEL }, "classify") }),
  verify: (a, b, opts) => ({ a: ref(a, "a"), b: ref(b, "b"),
                             ...options(opts, { threshold: num, ...MODEL }, "verify") }),
  retrieve: (query, opts) => ({
    query: ref(query, "query"),
    ...filtered(opts, { k: uint, offset: uint, minSimilarity: num, ...MODEL,
                        labels: strings, excludeIds: strings }, "retrieve"),
  }),
  embed: (x, opts) => ({ item: ref(x, "item"), ...options(opts, MODEL, "embed") }),
  exportModel: (opts) => options(opts, MODEL, "exportModel"),
  auth: (token) => ({ token: str(token, "token") }),
  trainStart: (method, opts) => {
    const o = options(opts, { variant: str, labels: strings, name: str, params: Object },
                      "trainStart");
    if (o.params) o.params = options(o.params, PARAMS, "trainStart params");
    return { method: str(method, "method"), ...o };
  },
  trainStatus: (jobId) => ({ jobId: uint(jobId, "jobId", Number.MAX_SAFE_INTEGER) }),
  trainCancel: (jobId) => ({ jobId: uint(jobId, "jobId", Number.MAX_SAFE_INTEGER) }),
  promote: (name) => ({ name: str(name, "name") }),
  deleteModel: (name) => ({ name: str(name, "name") }),
};

// ------------------------------------------------------------ answers

// An OK Response's body as a plain object (see TO_OBJECT in proto.js).
function body(resp) {
  return Response.toObject(resp, TO_OBJECT)[resp.body];
}

const withLabel = (x) => ({ ...x, label: x.label === undefined ? null : x.label });
// An item as put: label null when absent, metadata as {key: value} (null: none).
const asItem = (x) => ({ ...withLabel(x), metadata: x.metadata && x.metadata.length
  ? Object.fromEntries(x.metadata.map((kv) => [kv.key, kv.value])) : null });

const convert = {
  putItems: (b) => b,
  deleteItems: (b) => b,
  getItems: (b) => b.items.map(asItem),
  countItems: (b) => b,
  // A code this contract does not know stays a number under enums: String.
  addTriplets: (b) => ({ ...b, rejected: b.rejected.map((e) => (
    { ...e, code: typeof e.code === "number" ? codeName(e.code) : e.code })) }),
  addPairs: (b) => b,
  classify: (b) => b,
  verify: (b) => b,
  retrieve: (b) => ({ hits: b.hits.map(withLabel) }),
  embed: (b) => ({ heads: b.heads.map((h) => h.values), alpha: b.alpha }),
  exportModel: (b) => ({ model: Buffer.from(b.model), version: b.version, dim: b.dim,
                         heads: b.heads, emb: b.emb }),
  statusInfo: (b) => b,
  health: (b) => b,
  checkpoint: (b) => b,
  auth: (b) => b,
  trainStart: (b) => b,
  trainStatus: (b) => b.job,
  trainCancel: (b) => b.job,
  listModels: (b) => b.models,
  promote: (b) => b,
  rollback: (b) => b,
  deleteModel: (b) => b,
};

module.exports = { build, convert, body };
