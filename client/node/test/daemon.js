// daemon.js - starts a real omld for the tests (not a test file itself).
//
// OMLD_BIN names the executable (ctest sets it). The daemon gets a fresh
// temporary data directory, ephemeral ports (--listen / --http
// 127.0.0.1:0) and a Unix socket; its addresses are read from
// <data_dir>/omld.addr ("rpc HOST:PORT" / "http HOST:PORT"). Also: the
// test data (4 classes of tight clouds in DIM dimensions) shared by the
// test files.
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawn } = require("child_process");

const DIM = 8, CLASSES = 4, N_ITEMS = 80, MAX_K = 100;
const MODEL_ARGS = [`--dim=${DIM}`, "--layers=2", "--hidden=32", "--emb=8", "--publish_ms=50",
                    `--max_k=${MAX_K}`, "--max_batch=1000", "--seed=3", "--log_level=warn"];

// Item i: class i % CLASSES, a one-hot-like centre plus small noise
// (a fixed LCG, so every run stores the same values).
function makeData() {
  let state = 12345;
  const rnd = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return ((state >>> 8) & 0xFFFF) / 65536 - 0.5;
  };
  const items = [];
  for (let i = 0; i < N_ITEMS; i++) {
    const c = i % CLASSES;
    const features = Array.from({ length: DIM }, (_, j) => (j % CLASSES === c ? 1 : 0) + rnd() * 0.1);
    items.push({ id: `item-${i}`, features, label: `class-${c}` });
  }
  return items;
}

const ITEMS = makeData();

// Anchor and positive of one class, negative of the next.
function triplet(i) {
  const a = (i * 7) % N_ITEMS, p = (a + CLASSES * (1 + i % 5)) % N_ITEMS, n = (a + 1) % N_ITEMS;
  return [ITEMS[a].id, ITEMS[p].id, ITEMS[n].id];
}

const f32 = (v) => Array.from(Float32Array.from(v));

class Daemon {
  // Resolves once the daemon has written its addresses (20 s at most).
  static async start(extra = []) {
    const bin = process.env.OMLD_BIN;
    if (!bin || !fs.existsSync(bin))
      throw new Error(`OMLD_BIN must name the omld executable (got '${bin || ""}')`);
    const d = new Daemon();
    d.dir = fs.mkdtempSync(path.join(os.tmpdir(), "omld-node-"));
    d.unix = path.join(d.dir, "omld.sock");
    d.logFile = path.join(d.dir, "omld.log");
    const log = fs.openSync(d.logFile, "w");
    d.proc = spawn(bin, [`--data_dir=${d.dir}`, "--listen=127.0.0.1:0", "--http=127.0.0.1:0",
                         `--unix_socket=${d.unix}`, ...MODEL_ARGS, ...extra],
                   { stdio: ["ignore", log, log], env: { ...process.env, OPENBLAS_NUM_THREADS: "1" } });
    fs.closeSync(log);
    d.exit = new Promise((resolve) => d.proc.once("exit", (code, sig) => resolve(sig || code)));
    const addr = path.join(d.dir, "omld.addr");
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline) {
      if (d.proc.exitCode !== null) throw new Error(`omld exited during startup:\n${d.log()}`);
      if (fs.existsSync(addr)) {
        const kv = Object.fromEntries(fs.readFileSync(addr, "utf8").split("\n").filter(Boolean)
          .map((l) => l.split(/\s+/, 2)));
        if (kv.rpc && kv.http) {
          d.rpc = kv.rpc;
          d.http = kv.http;
          return d;
        }
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    d.proc.kill("SIGKILL");
    throw new Error(`omld did not write ${addr}:\n${d.log()}`);
  }

  log() {
    try { return fs.readFileSync(this.logFile, "utf8"); } catch (e) { return ""; }
  }

  // SIGTERM; resolves with the exit code (or the signal's name), and
  // removes the data directory.
  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGTERM");
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), 20000);
    const status = await this.exit;
    clearTimeout(timer);
    fs.rmSync(this.dir, { recursive: true, force: true });
    return status;
  }
}

module.exports = { Daemon, DIM, CLASSES, N_ITEMS, MAX_K, ITEMS, triplet, f32 };
