// client.js - one connection to omld, promise-based and pipelined.
//
// Every call writes its Request frame at once and returns a Promise of the
// answer; any number of calls may be in flight on the one connection. The
// daemon answers in request order, so answers are matched to the oldest
// pending call and the echoed request_id is checked against it. A daemon
// error (non-OK Status) rejects only its own call with an OmldError; a
// transport failure (I/O error, close, timeout, an answer that makes no
// sense) closes the connection and rejects every call in flight with an
// OmldConnectionError (or subclass). The client does not reconnect by
// itself: make a new one.
"use strict";

const fs = require("fs");
const net = require("net");
const tls = require("tls");
const { EventEmitter } = require("events");
const { Request, Response, StatusCode, codeName } = require("./proto");
const { FrameReader, frameHeader } = require("./frame");
const { build, convert, body } = require("./messages");
const { OmldError, OmldConnectionError, OmldTimeoutError, OmldProtocolError } = require("./errors");

const DEFAULT_SERVER = "127.0.0.1:7600";
const FRAME_TOO_LARGE = StatusCode.values.FRAME_TOO_LARGE;
const MALFORMED = StatusCode.values.MALFORMED;
const UNAVAILABLE = StatusCode.values.UNAVAILABLE; // with id 0: "this port speaks TLS"

// A decoded uint64 (a Long, or a number when long.js is absent) as a Number.
const u64 = (v) => (typeof v === "number" ? v : v.toNumber());

// "HOST:PORT", "[V6ADDR]:PORT" or "unix:/path" -> net.connect options.
function parseServer(server) {
  if (server && typeof server === "object") return server;
  if (typeof server !== "string") throw new TypeError("server: expected 'HOST:PORT' or 'unix:/path'");
  if (server.startsWith("unix:")) {
    if (server.length === 5) throw new TypeError("server: unix: needs a socket path");
    return { path: server.slice(5) };
  }
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(server);
  const port = m ? Number(m[3]) : 0;
  if (!m || port < 1 || port > 65535)
    throw new TypeError(`server must be 'HOST:PORT', '[V6ADDR]:PORT' or 'unix:/path', got '${server}'`);
  return { host: m[1] || m[2], port };
}

// The tls.connect options of a client (null: plain): the address, the
// CA of cafile, the client certificate of certfile / keyfile (for a daemon
// with tls_client_ca), and the name to verify (SNI only for a DNS name).
function tlsOptions(address, options) {
  if (!options.tls && !options.cafile && !options.certfile) return null;
  if (address.path) throw new TypeError("tls: the Unix socket is plain (TLS is for TCP)");
  if (options.keyfile && !options.certfile) throw new TypeError("tls: keyfile without certfile");
  const o = { ...address, ...(typeof options.tls === "object" ? options.tls : {}) };
  if (options.cafile) o.ca = fs.readFileSync(options.cafile);
  if (options.certfile) {
    o.cert = fs.readFileSync(options.certfile);
    o.key = fs.readFileSync(options.keyfile || options.certfile);
  }
  if (o.servername === undefined && !net.isIP(o.host)) o.servername = o.host;
  return o;
}

// What the daemon's TLS alert means when it refuses a client certificate
// (tls_client_ca), or "".
function clientCertHint(e) {
  const m = `${e.code || ""} ${e.message || ""}`.toLowerCase();
  if (/certificate.required/.test(m))
    return " (the daemon requires a client certificate: its tls_client_ca is set; give one " +
      "with certfile and keyfile)";
  if (/unknown.ca|bad.certificate|certificate.unknown/.test(m))
    return " (the daemon refused the client certificate: is it signed by a CA in the " +
      "daemon's tls_client_ca, and valid now?)";
  return "";
}

// A connect error in words a user can act on.
function tlsReason(e) {
  const hint = clientCertHint(e);
  if (hint) return `TLS handshake failed: ${e.message}${hint}`;
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS_CERT_ALTNAME/.test(e.code || ""))
    return `TLS: the daemon's certificate is not trusted: ${e.message} (give its CA with cafile)`;
  if (/wrong version number|packet length/.test(e.message))
    return `TLS handshake failed: ${e.message} (does the daemon speak TLS there? tls_cert)`;
  return e.message;
}

// Answers that do not come as the body of the same name.
const ANSWER = { status: "statusInfo" };

class Client extends EventEmitter {
  // server: as parseServer takes it. options: timeout (ms allowed for the
  // connect and for each call's answer; 0: none; default 30000), maxFrame
  // (largest answer accepted, bytes; default 64 MiB), tls (true, or
  // tls.connect options such as ca or servername: TLS to a daemon with
  // tls_cert, verified against the system's CAs or ca, and the host),
  // cafile (a PEM file of the daemon's CA, read now; implies tls),
  // certfile / keyfile (PEM files of a client certificate and its key, read
  // now, for a daemon with tls_client_ca; keyfile defaults to certfile;
  // implies tls). A daemon that refuses the certificate fails the connect,
  // or under TLS 1.3 the first call, with an OmldConnectionError saying so.
  // Emits "close" (err or undefined) once the connection is gone.
  constructor(server = DEFAULT_SERVER, options = {}) {
    super();
    this.server = server;
    this.address = parseServer(server);
    this.tls = tlsOptions(this.address, options);
    this.timeout = options.timeout === undefined ? 30000 : options.timeout;
    this.reader = new FrameReader(options.maxFrame || 64 * 1024 * 1024);
    this.socket = null;
    this.closed = false;
    this.pending = [];     // calls sent and not answered, oldest at pendingHead
    this.pendingHead = 0;
    this.nextId = 1;
    this.lastModelVersion = 0;
    this.readWrite = null; // set by auth()
  }

  get inFlight() { return this.pending.length - this.pendingHead; }

  // Opens the connection; resolves with this client.
  connect() {
    if (this.socket) return Promise.reject(new Error("omld: connect() called twice"));
    return new Promise((resolve, reject) => {
      const s = this.tls ? tls.connect(this.tls) : net.connect(this.address);
      this.socket = s;
      let timer = null;
      const fail = (err) => { clearTimeout(timer); this.destroy(err); reject(err); };
      if (this.timeout > 0)
        timer = setTimeout(() => fail(new OmldTimeoutError(
          `connect to ${this.server}: no connection within ${this.timeout} ms`)), this.timeout);
      s.once(this.tls ? "secureConnect" : "connect", () => {
        clearTimeout(timer);
        s.removeListener("error", onConnectError);
        if (!this.address.path) s.setNoDelay(true);
        s.on("error", (e) => this.destroy(new OmldConnectionError(
          `${this.server}: ${e.message}${clientCertHint(e)}`, e.code, e)));
        resolve(this);
      });
      const onConnectError = (e) => fail(new OmldConnectionError(
        `connect to ${this.server}: ${tlsReason(e)}`, e.code, e));
      s.once("error", onConnectError);
      s.on("data", (chunk) => this.onData(chunk));
      s.on("close", () => this.destroy(new OmldConnectionError(
        `${this.server}: the daemon closed the connection`)));
    });
  }

  // Closes the connection; calls in flight are rejected. Resolves once the
  // socket is closed.
  close() {
    const s = this.socket;
    this.destroy(new OmldConnectionError(`${this.server}: closed by the client`));
    if (!s || s.closed) return Promise.resolve();
    return new Promise((resolve) => s.once("close", resolve));
  }

  // Closes with err: every pending call is rejected (first: an error for
  // the oldest one only, e.g. the timeout that caused this).
  destroy(err, first) {
    if (this.closed) return;
    this.closed = true;
    if (this.socket) this.socket.destroy();
    const calls = this.pending.slice(this.pendingHead);
    this.pending = [];
    this.pendingHead = 0;
    calls.forEach((c, i) => {
      clearTimeout(c.timer);
      c.reject(i === 0 && first ? first : err);
    });
    this.emit("close", err);
  }

  // ---- the generic layer

  // Sends one Request with body `name` (camelCase, e.g. "putItems") set to
  // `value`; resolves with the decoded Response (a protobufjs message) when
  // its status is OK. options.timeout overrides the client's for this call.
  call(name, value, options) {
    if (this.closed || !this.socket)
      return Promise.reject(new OmldConnectionError(`${this.server}: the connection is closed`));
    const id = this.nextId;
    let frame;
    try {
      const payload = Request.encode({ requestId: id, [name]: value }).finish();
      frame = Buffer.allocUnsafe(4 + payload.length);
      frameHeader(payload.length).copy(frame, 0);
      frame.set(payload, 4);
    } catch (e) {
      return Promise.reject(e);
    }
    this.nextId++;
    return new Promise((resolve, reject) => {
      const c = { id, name, answer: ANSWER[name] || name, resolve, reject, timer: null };
      const ms = options && options.timeout !== undefined ? options.timeout : this.timeout;
      if (ms > 0)
        c.timer = setTimeout(() => this.destroy(
          new OmldConnectionError(`${this.server}: closed: request ${id} (${name}) timed out`),
          new OmldTimeoutError(`${this.server}: no answer to ${name} within ${ms} ms`)), ms);
      // Calls behind a timed-out one fail with it: answers come in order.
      this.pending.push(c);
      this.socket.write(frame);
    });
  }

  onData(chunk) {
    this.reader.feed(chunk);
    for (;;) {
      let payload, resp;
      try {
        payload = this.reader.next();
        if (payload === null) return;
        resp = Response.decode(payload);
      } catch (e) {
        return this.destroy(new OmldProtocolError(`${this.server}: ${e.message}`, e));
      }
      this.answer(resp);
      if (this.closed) return;
    }
  }

  answer(resp) {
    const c = this.pending[this.pendingHead];
    const rid = u64(resp.requestId);
    const code = resp.status ? resp.status.code : 0;
    if (!c)
      return this.destroy(new OmldProtocolError(`${this.server}: an answer (request id ${rid}) to no request`));
    if (rid !== c.id &&
        !(rid === 0 && (code === FRAME_TOO_LARGE || code === MALFORMED || code === UNAVAILABLE)))
      return this.destroy(new OmldProtocolError(
        `${this.server}: answer has request id ${rid}, expected ${c.id}`));
    this.pending[this.pendingHead++] = undefined;
    if (this.pendingHead > 1024 && this.pendingHead * 2 > this.pending.length) {
      this.pending = this.pending.slice(this.pendingHead);
      this.pendingHead = 0;
    }
    clearTimeout(c.timer);
    this.lastModelVersion = u64(resp.modelVersion);
    if (code !== 0) {
      const st = resp.status;
      c.reject(new OmldError(codeName(code), code, st.message, st.field, rid, this.lastModelVersion));
    } else if (resp.body !== c.answer) {
      const err = new OmldProtocolError(
        `${this.server}: OK answer with body ${resp.body}, expected ${c.answer}`);
      c.reject(err);
      return this.destroy(err);
    } else {
      c.resolve(resp);
    }
    if (code === FRAME_TOO_LARGE) // the daemon closes: the stream cannot be resynchronised
      this.destroy(new OmldConnectionError(`${this.server}: closed after FRAME_TOO_LARGE`));
  }

  // A typed call: the body built from args, the answer converted.
  async op(name, value, options) {
    const resp = await this.call(name, value, options);
    const out = convert[resp.body](body(resp));
    return Array.isArray(out) ? out : { modelVersion: u64(resp.modelVersion), ...out };
  }

  // ---- items, constraints, queries. o: the request's options (README.md)
  // and timeout, the call's. Bad arguments reject with TypeError /
  // RangeError; the frame is written before the first await, so calls
  // made one after another are sent (and answered) in that order.

  async putItems(items, o) { return this.op("putItems", build.putItems(items, req(o)), o); }
  async deleteItems(ids, o) { return this.op("deleteItems", build.deleteItems(ids, req(o)), o); }
  async getItems(ids, o) { return this.op("getItems", build.getItems(ids), o); }
  async countItems(o) { return this.op("countItems", build.countItems(req(o)), o); }
  async addTriplets(triplets, o) { return this.op("addTriplets", build.addTriplets(triplets, req(o)), o); }
  async addPairs(pairs, o) { return this.op("addPairs", build.addPairs(pairs, req(o)), o); }
  async classify(query, o) { return this.op("classify", build.classify(query, req(o)), o); }
  async verify(a, b, o) { return this.op("verify", build.verify(a, b, req(o)), o); }
  async retrieve(query, o) { return this.op("retrieve", build.retrieve(query, req(o)), o); }
  async embed(x, o) { return this.op("embed", build.embed(x, req(o)), o); }
  // The serving model as an OMLSNAP file (a Buffer): omld.model in the
  // Python package (or liboml) embeds with it offline.
  async exportModel(o) { return this.op("exportModel", build.exportModel(req(o)), o); }

  // ---- operations

  async status(o) { return this.op("status", {}, o); }
  async health(o) { return this.op("health", {}, o); }
  async checkpoint(o) { return this.op("checkpoint", {}, o); }

  // Authenticates this connection; resolves with readWrite (false: a
  // read-only token). A wrong token rejects with UNAUTHENTICATED.
  async auth(token, o) {
    const r = await this.op("auth", build.auth(token), o);
    this.readWrite = r.readWrite;
    return r.readWrite;
  }

  // Polls status until the learner queue is empty, at least `applied`
  // triplets are applied (if given) and the serving view includes them;
  // resolves with that status. Rejects with OmldTimeoutError after
  // `timeout` ms (default 30000); the connection stays open.
  async waitLearned({ applied, timeout = 30000, poll = 20 } = {}) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const s = await this.status();
      if (s.queueDepth === 0 && (applied === undefined || s.tripletsApplied >= applied) &&
          s.viewTriplets >= s.tripletsApplied)
        return s;
      if (Date.now() > deadline)
        throw new OmldTimeoutError(`${this.server}: learner not caught up within ${timeout} ms ` +
          `(applied ${s.tripletsApplied}, view ${s.viewTriplets}, queue ${s.queueDepth})`);
      await new Promise((r) => setTimeout(r, poll));
    }
  }

  // ---- trainer (batch models; see TRAINER in omld.proto)

  async trainStart(method, o) { return this.op("trainStart", build.trainStart(method, req(o)), o); }
  async trainStatus(jobId, o) { return this.op("trainStatus", build.trainStatus(jobId), o); }
  async trainCancel(jobId, o) { return this.op("trainCancel", build.trainCancel(jobId), o); }
  async listModels(o) { return this.op("listModels", {}, o); }
  async promote(name, o) { return this.op("promote", build.promote(name), o); }
  async rollback(o) { return this.op("rollback", {}, o); }
  async deleteModel(name, o) { return this.op("deleteModel", build.deleteModel(name), o); }
}

// The request's own options among a call's options (timeout is the call's).
function req(o) {
  if (o == null || !("timeout" in o)) return o;
  const { timeout, ...rest } = o;
  return rest;
}

// Connects, and sends Auth first when options.token is given (a wrong
// token rejects with UNAUTHENTICATED and closes). Resolves with the Client.
async function connect(server = DEFAULT_SERVER, options = {}) {
  const c = new Client(server, options);
  await c.connect();
  if (options.token !== undefined) {
    try {
      await c.auth(options.token);
    } catch (e) {
      c.close();
      throw e;
    }
  }
  return c;
}

module.exports = { Client, connect, parseServer, DEFAULT_SERVER };
