#!/usr/bin/env node
// dashboard.test.js - omld's live dashboard in headless Chromium.
//
// Starts a real omld (OMLD_BIN) on ephemeral ports with a small model,
// stores items and then streams triplets into it with omlctl (OMLCTL_BIN)
// while the dashboard (GET /) is open in Debian's chromium, driven by
// playwright-core. First a burst of triplets is learned BEFORE the page is
// opened: GET /status/history must hold it (and honour ?since=), and the
// page must start from it (the hedge-weight chart has >= 3 points on its
// first render, before any live poll, showing the learned weights). Then,
// with the page open: no console or page errors; the hedge-weight chart
// has one series per depth with a growing number of points and values that
// change as triplets arrive; the counters shown (triplets applied, model
// version) increase; the charts actually paint; the trainer-jobs panel says
// there are none; and once omld goes away the page shows "disconnected" and
// keeps retrying. A short simulated outage (requests refused by the
// browser) must be filled from /status/history?since= on reconnect. Saves a screenshot (OMLD_DASHBOARD_OUT/dashboard.png, by
// default next to this file) and prints its path.
//
// Needs: chromium (apt-get install chromium; CHROMIUM_BIN overrides
// /usr/bin/chromium) and playwright-core (npm ci --prefix tests/dashboard).
// A missing prerequisite is a failure, never a skip.
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawn, execFile } = require("child_process");

const HERE = __dirname;
const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";
const OUT_DIR = process.env.OMLD_DASHBOARD_OUT || HERE;
const FEED_MS = Number(process.env.OMLD_DASHBOARD_FEED_MS || 8000);
const DIM = 16, CLASSES = 4, ITEMS = 400;

function log(msg) { console.log("dashboard test: " + msg); }
class Failure extends Error {}
function fail(msg) { throw new Failure(msg); }
function check(cond, msg) { if (!cond) fail(msg); log("ok - " + msg); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errors = []; // console errors and page errors seen so far

// ---- prerequisites: fail loudly, with the command that fixes it ----
function prerequisites() {
  const bins = {};
  for (const name of ["OMLD_BIN", "OMLCTL_BIN"]) {
    const v = process.env[name];
    if (!v) fail(`${name} is not set (ctest sets it; by hand: ${name}=build/... node ${path.relative(process.cwd(), __filename)})`);
    if (!fs.existsSync(v)) fail(`${name}=${v} does not exist: build first (cmake --build <build dir>)`);
    bins[name] = v;
  }
  if (!fs.existsSync(CHROMIUM))
    fail(`chromium not found at ${CHROMIUM}: install it with 'apt-get install -y chromium' ` +
         `(Debian 12; or set CHROMIUM_BIN)`);
  let playwright;
  try {
    playwright = require("playwright-core");
  } catch (e) {
    fail(`playwright-core is not installed: run 'npm ci --prefix tests/dashboard' from the ` +
         `repository root (${e.code || e.message})`);
  }
  return { omld: bins.OMLD_BIN, omlctl: bins.OMLCTL_BIN, playwright };
}

// ---- a small deterministic data set: 4 classes in 16 dimensions ----
function prng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = prng(7);
function itemsCsv() {
  const lines = [];
  for (let i = 0; i < ITEMS; i++) {
    const c = i % CLASSES, f = [];
    for (let j = 0; j < DIM; j++) f.push((0.35 * rnd() + (j % CLASSES === c ? 0.5 : 0)).toFixed(4));
    lines.push(`it${i},c${c},${f.join(",")}`);
  }
  return lines.join("\n") + "\n";
}
function tripletsCsv(n) {
  const lines = [];
  for (let k = 0; k < n; k++) {
    const a = Math.floor(rnd() * ITEMS), c = a % CLASSES;
    let p = Math.floor(rnd() * (ITEMS / CLASSES)) * CLASSES + c;
    if (p === a) p = (p + CLASSES) % ITEMS;
    let neg = Math.floor(rnd() * ITEMS);
    if (neg % CLASSES === c) neg = (neg + 1) % ITEMS;
    lines.push(`it${a},it${p},it${neg}`);
  }
  return lines.join("\n") + "\n";
}

// ---- omld and omlctl ----
function run(bin, args, timeoutMs) {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: timeoutMs || 30000 }, (err, stdout, stderr) => {
      if (err) reject(new Failure(`${path.basename(bin)} ${args.join(" ")} failed: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

async function startOmld(bin, dir, extra) {
  const logPath = path.join(dir, "omld.log");
  const logFd = fs.openSync(logPath, "w");
  // The paper preset: its hedge moves with every triplet, so the charts
  // have something to show (the default one holds alpha still while every
  // head satisfies these easy triplets alike).
  const child = spawn(bin, [
    `--data_dir=${dir}`, "--listen=127.0.0.1:0", "--http=127.0.0.1:0",
    "--dim=16", "--preset=paper", "--layers=2", "--hidden=32", "--emb=8", "--publish_ms=100",
    ...(extra || []),
  ], { stdio: ["ignore", logFd, logFd], env: { ...process.env, OPENBLAS_NUM_THREADS: "1" } });
  fs.closeSync(logFd);
  const proc = { child, logPath, exited: null };
  child.on("exit", (code, sig) => { proc.exited = { code, sig }; });
  const addrPath = path.join(dir, "omld.addr");
  for (let waited = 0; waited < 15000; waited += 50) {
    if (proc.exited) fail(`omld exited during startup (${JSON.stringify(proc.exited)})`);
    if (fs.existsSync(addrPath)) {
      const addr = {};
      for (const line of fs.readFileSync(addrPath, "utf8").split("\n")) {
        const [k, v] = line.trim().split(/\s+/);
        if (k && v) addr[k] = v;
      }
      if (addr.rpc && addr.http) { proc.rpc = addr.rpc; proc.http = addr.http; return proc; }
    }
    await sleep(50);
  }
  fail(`omld did not write ${addrPath} within 15 s`);
}

async function stopOmld(proc, sig) {
  if (!proc || proc.exited) return;
  proc.child.kill(sig || "SIGTERM");
  for (let waited = 0; waited < 10000 && !proc.exited; waited += 50) await sleep(50);
  if (!proc.exited) { proc.child.kill("SIGKILL"); await sleep(100); }
}

async function status(proc) {
  const r = await fetch(`http://${proc.http}/status`);
  if (!r.ok) fail(`/status answered ${r.status}`);
  return r.json();
}

async function history(proc, query) {
  const r = await fetch(`http://${proc.http}/status/history${query || ""}`);
  if (!r.ok) fail(`/status/history${query || ""} answered ${r.status}`);
  check(/application\/json/.test(r.headers.get("content-type") || ""), "/status/history is JSON");
  return r.json();
}

async function feedTriplets(omlctl, proc, dir, name, n) {
  const f = path.join(dir, name);
  fs.writeFileSync(f, tripletsCsv(n));
  await run(omlctl, ["--server", proc.rpc, "triplets", "--batch", "100", f]);
}

// ---- what the page shows ----
async function pageState(page) {
  return page.evaluate(() => {
    const chart = (id) => {
      const el = document.getElementById(id);
      const c = el.querySelector("canvas");
      // Painted pixels: the chart really drew something (axes, grid, lines).
      let painted = 0;
      try {
        const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        for (let i = 3; i < d.length; i += 16) if (d[i] > 0) painted++;
      } catch (e) { painted = -1; }
      return {
        series: Number(el.dataset.series), points: Number(el.dataset.points),
        names: el.dataset.seriesNames || "", last: el.dataset.lastValues || "",
        lastValue: el.dataset.lastValue, legend: el.querySelectorAll(".legend .item i").length,
        width: c.width, height: c.height, painted,
      };
    };
    const ids = ["hedge", "loss", "quality", "ingest", "queries", "queue", "backpressure", "version", "items", "connections"];
    const charts = {};
    for (const id of ids) charts[id] = chart("chart-" + id);
    const stat = (id) => document.getElementById(id).dataset.value;
    return {
      connection: document.body.dataset.connection,
      polls: Number(document.body.dataset.polls),
      okPolls: Number(document.body.dataset.okPolls),
      badge: document.getElementById("conn-badge").textContent,
      bannerVisible: getComputedStyle(document.getElementById("banner")).display !== "none",
      applied: Number(stat("stat-triplets-applied")),
      version: Number(stat("stat-version")),
      items: Number(stat("stat-items")),
      jobs: document.getElementById("jobs").textContent,
      header: document.getElementById("hdr-model").textContent,
      charts,
    };
  });
}

async function waitFor(page, what, pred, timeoutMs) {
  let st;
  for (let waited = 0; waited <= timeoutMs; waited += 200) {
    st = await pageState(page);
    if (pred(st)) return st;
    await sleep(200);
  }
  fail(`timed out after ${timeoutMs} ms waiting for ${what}; page errors: ` +
       `${errors.join(" | ") || "none"}; page state: ${JSON.stringify(st)}`);
}

// ---- the test ----
async function main() {
  const pre = prerequisites();
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR || os.tmpdir(), "omld-dash-"));
  let proc = null, browser = null, ok = false;
  try {
    proc = await startOmld(pre.omld, dir);
    log(`omld up: rpc ${proc.rpc}, dashboard http://${proc.http}/`);
    const heads = (await status(proc)).model.heads;
    check(heads === 3, `the model has 3 heads (layers + 1), /status says ${heads}`);

    fs.writeFileSync(path.join(dir, "items.csv"), itemsCsv());
    await run(pre.omlctl, ["--server", proc.rpc, "put", path.join(dir, "items.csv")]);

    // A burst of learning before anyone looks at the dashboard.
    const alphaStart = (await status(proc)).model.alpha;
    const PREFED = 1200;
    for (let b = 0; b < PREFED / 400; b++) await feedTriplets(pre.omlctl, proc, dir, `pre${b}.csv`, 400);
    for (let waited = 0; (await status(proc)).ingest.triplets_applied < PREFED; waited += 100) {
      if (waited > 10000) fail("the pre-fed triplets were not applied within 10 s");
      await sleep(100);
    }
    await sleep(3500);
    const hist = await history(proc);
    const hs = hist.samples;
    log(`/status/history: ${hs.length} samples, interval ${hist.interval_ms} ms, now ${hist.now_ms} ms`);
    check(hist.interval_ms === 1000 && hist.capacity >= 900, `history interval 1000 ms, capacity ${hist.capacity}`);
    check(hs.length >= 3 && hs.every((x, i) => i === 0 || x.t_ms > hs[i - 1].t_ms) && hs[hs.length - 1].t_ms <= hist.now_ms,
          `history has ${hs.length} samples, oldest first`);
    const hl = hs[hs.length - 1];
    check(hl.triplets_applied >= PREFED && hl.alpha.length === heads && hl.version >= 1,
          `the newest history sample shows the burst (applied ${hl.triplets_applied}, alpha ${hl.alpha})`);
    const sinceT = hs[hs.length - 3].t_ms;
    const newer = (await history(proc, `?since=${sinceT}`)).samples;
    check(newer.length >= 2 && newer.every((x) => x.t_ms > sinceT) && newer[0].t_ms === hs[hs.length - 2].t_ms,
          `?since=${sinceT} returns only newer samples (${newer.length})`);

    browser = await pre.playwright.chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    });
    const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    let omldGone = false, outage = false;
    page.on("console", (m) => {
      if (m.type() !== "error") return;
      // After omld is stopped on purpose (or during the simulated outage),
      // the refused polls are expected.
      if ((omldGone || outage) && /ERR_CONNECTION_REFUSED|Failed to fetch|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET|ERR_FAILED/.test(m.text())) return;
      errors.push("console: " + m.text());
    });
    page.on("pageerror", (e) => errors.push("page error: " + e.message));
    page.on("requestfailed", (r) => { if (!omldGone && !outage) errors.push(`request failed: ${r.url()} ${r.failure() && r.failure().errorText}`); });
    const historyRequests = [];
    page.on("request", (r) => { if (/\/status\/history/.test(r.url())) historyRequests.push(r.url()); });
    // The first render of the hedge chart, caught as it happens.
    await page.addInitScript(() => {
      window.__firstHedge = null;
      new MutationObserver(() => {
        const el = document.getElementById("chart-hedge");
        if (window.__firstHedge || !el || !(Number(el.dataset.points) > 0)) return;
        window.__firstHedge = {
          points: Number(el.dataset.points), series: Number(el.dataset.series),
          last: el.dataset.lastValues, okPolls: Number(document.body.dataset.okPolls),
          historySamples: Number(document.body.dataset.historySamples),
        };
      }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-points"] });
    });

    const resp = await page.goto(`http://${proc.http}/`, { waitUntil: "load" });
    check(resp.status() === 200 && /text\/html/.test(resp.headers()["content-type"] || ""),
          `GET / is 200 text/html (${resp.status()} ${resp.headers()["content-type"]})`);
    check((await page.title()) === "omld dashboard", "the page title is 'omld dashboard'");

    await page.waitForFunction(() => window.__firstHedge !== null, null, { timeout: 10000 });
    const first = await page.evaluate(() => window.__firstHedge);
    log(`first render of the hedge chart: ${JSON.stringify(first)}`);
    check(first.points >= 3 && first.series === heads,
          `the hedge chart is prefilled from /status/history on its first render (${first.points} points)`);
    check(first.okPolls === 0 && first.historySamples >= 3,
          `the first render came from the history, before any live poll (${first.historySamples} samples, ${first.okPolls} polls)`);
    const firstVals = first.last.split(",").map(Number);
    check(firstVals.some((a, i) => Math.abs(a - alphaStart[i]) > 1e-4),
          `the prefilled hedge weights show the burst learned before the page opened (${alphaStart} -> ${first.last})`);

    let st = await waitFor(page, "two answered polls and one hedge series per depth",
                           (s) => s.okPolls >= 2 && s.charts.hedge.series === heads, 10000);
    const before = st;
    check(before.charts.hedge.points > first.points,
          `the prefilled hedge chart keeps growing live (${first.points} -> ${before.charts.hedge.points})`);
    check(before.applied >= PREFED, `the page shows the pre-fed triplets applied (${before.applied})`);
    log(`before feeding: hedge ${before.charts.hedge.last} (${before.charts.hedge.points} points), ` +
        `triplets applied ${before.applied}`);
    check(before.connection === "connected" && before.badge === "ready", `the header says ready (${before.badge})`);
    check(/3 heads/.test(before.header), `the header shows the model config (${before.header})`);
    check(before.items === ITEMS, `the items stored tile shows ${ITEMS} (${before.items})`);

    // Stream triplets for FEED_MS while watching the page.
    let feeding = true, batches = 0;
    const feeder = (async () => {
      while (feeding) {
        const f = path.join(dir, `t${batches % 2}.csv`);
        fs.writeFileSync(f, tripletsCsv(400));
        await run(pre.omlctl, ["--server", proc.rpc, "triplets", "--batch", "100", f]);
        batches++;
        await sleep(150);
      }
    })();
    const seenHedge = new Set([before.charts.hedge.last]);
    const applied = [before.applied];
    const t0 = Date.now();
    while (Date.now() - t0 < FEED_MS) {
      await sleep(1000);
      st = await pageState(page);
      seenHedge.add(st.charts.hedge.last);
      applied.push(st.applied);
    }
    feeding = false;
    await feeder;
    const fed = batches * 400;
    log(`fed ${fed} triplets in ${batches} batches`);
    st = await waitFor(page, "the page to show every triplet applied", (s) => s.applied >= PREFED + fed, 10000);
    seenHedge.add(st.charts.hedge.last);
    const after = st;
    log(`after feeding: hedge ${after.charts.hedge.last} (${after.charts.hedge.points} points), ` +
        `triplets applied ${after.applied}, model version ${after.version}`);

    // The hedge-weight chart: one series per depth, growing, changing.
    const h = after.charts.hedge;
    check(h.series === heads && h.legend === heads, `hedge chart: ${heads} series and legend entries (${h.series}, ${h.legend})`);
    check(h.names === "depth 0,depth 1,depth 2", `hedge series are named by depth (${h.names})`);
    check(h.points >= before.charts.hedge.points + 5, `hedge chart points grow (${before.charts.hedge.points} -> ${h.points})`);
    const lastVals = h.last.split(",").map(Number);
    const sum = lastVals.reduce((a, b) => a + b, 0);
    check(lastVals.length === heads && Math.abs(sum - 1) < 1e-3, `hedge weights sum to 1 (${h.last})`);
    check(h.last !== before.charts.hedge.last && seenHedge.size >= 3,
          `hedge weights change as triplets arrive (${seenHedge.size} distinct readings)`);
    const srv = await status(proc);
    const srvAlpha = srv.model.alpha;
    check(srvAlpha.every((a, i) => Math.abs(a - lastVals[i]) < 0.05),
          `the chart's last hedge weights match /status (${srvAlpha.join(",")})`);

    // Counters shown on the page increase.
    check(applied.every((v, i) => i === 0 || v >= applied[i - 1]) && after.applied > before.applied,
          `triplets applied shown increases (${applied.join(" -> ")} -> ${after.applied})`);
    check(after.applied <= srv.ingest.triplets_applied, "the page never shows more than /status");
    check(after.version > before.version, `the model version shown increases (${before.version} -> ${after.version})`);

    // The other charts have data and paint.
    for (const [name, c] of Object.entries(after.charts)) {
      check(c.points >= 3 && c.width > 0 && c.painted > 100,
            `chart ${name}: ${c.series} series, ${c.points} points, painted (${c.painted} px samples)`);
    }
    check(after.charts.loss.series === heads, "loss chart has one series per depth");
    check(after.charts.ingest.names.startsWith("triplets applied/s"), "ingest chart shows triplets applied/s");
    check(after.charts.version.points >= 3 && Number(after.charts.version.lastValue) === after.version,
          "model-version chart ends at the version shown");
    check(/no trainer jobs/.test(after.jobs), `the trainer-jobs panel says 'no trainer jobs' (${after.jobs})`);
    check(errors.length === 0, `no console or page errors (${errors.join(" | ") || "none"})`);

    // A short outage (the browser refuses every request for 3 s): on
    // reconnect the page fills the hole from /status/history?since=.
    const histLoads = await page.evaluate(() => Number(document.body.dataset.historyLoads));
    const histSamples = await page.evaluate(() => Number(document.body.dataset.historySamples));
    const nReq = historyRequests.length;
    outage = true;
    const refuse = (route) => route.abort("connectionrefused");
    await page.route("**/status", refuse);
    await page.route("**/status/history*", refuse);
    await waitFor(page, "the page to notice the outage", (s) => s.connection === "disconnected", 8000);
    await sleep(3000);
    await page.unroute("**/status", refuse);
    await page.unroute("**/status/history*", refuse);
    st = await waitFor(page, "the page to reconnect", (s) => s.connection === "connected", 8000);
    outage = false;
    const reloads = await page.evaluate(() => ({
      loads: Number(document.body.dataset.historyLoads), samples: Number(document.body.dataset.historySamples) }));
    const sinceReqs = historyRequests.slice(nReq).filter((u) => /[?&]since=\d+/.test(u));
    check(reloads.loads === histLoads + 1 && sinceReqs.length >= 1,
          `after the outage the page read /status/history?since= once (${sinceReqs[sinceReqs.length - 1]})`);
    check(reloads.samples - histSamples >= 2,
          `the hole of the outage was filled from the history (${reloads.samples - histSamples} samples)`);
    check(st.charts.hedge.series === heads && errors.length === 0,
          `the page is whole after the outage (${errors.join(" | ") || "no errors"})`);

    fs.mkdirSync(OUT_DIR, { recursive: true });
    const shot = path.resolve(OUT_DIR, "dashboard.png");
    await page.screenshot({ path: shot, fullPage: true });
    log(`screenshot: ${shot}`);

    // Trainer jobs (batch trainers add a "jobs" array to /status): a second
    // page whose /status is the real one plus two jobs.
    const page2 = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page2.on("pageerror", (e) => errors.push("page error (jobs page): " + e.message));
    await page2.route("**/status", async (route) => {
      const r = await route.fetch();
      const body = await r.json();
      body.jobs = [
        { id: "job-1", kind: "batch", state: "running", progress: 0.42, model_version: 7,
          loss: 0.123456789, val_r1: 0.87654321, eta_s: 125.3, elapsed_s: 61.9, epoch: 3 },
        { id: "job-2", kind: "batch", state: "queued", done: 0, total: 1000, eta_s: null },
      ];
      body.promotes = [{ unix_ms: Date.now(), action: "promote", model: "shoes-v1", version: 12 },
                       { unix_ms: Date.now(), action: "rollback", model: "shoes-v1", version: 13 }];
      await route.fulfill({ response: r, json: body });
    });
    await page2.goto(`http://${proc.http}/`);
    await page2.waitForFunction(() => document.getElementById("jobs").dataset.jobs === "2", null, { timeout: 10000 });
    const jobsText = await page2.locator("#jobs").innerText();
    check(/job-1/.test(jobsText) && /running/.test(jobsText) && /42\.0%/.test(jobsText) && /job-2/.test(jobsText),
          `the trainer-jobs panel lists jobs with progress (${jobsText.replace(/\s+/g, " ")})`);
    check(/loss 0\.1235/.test(jobsText) && /val R@1 0\.8765/.test(jobsText) && /eta 2m 5s/.test(jobsText) &&
          /elapsed 1m 1s/.test(jobsText) && !/0\.123456789|eta_s|null/.test(jobsText),
          `the trainer figures are formatted (${jobsText.replace(/\s+/g, " ")})`);
    const versionsText = await page2.locator("#versions").innerText();
    check(/promote of shoes-v1/.test(versionsText) && /rollback of shoes-v1/.test(versionsText),
          `promotes and rollbacks from /status are listed (${versionsText.replace(/\s+/g, " ").slice(0, 300)})`);
    await page2.close();

    // omld goes away: the page says so and keeps retrying.
    omldGone = true;
    await stopOmld(proc, "SIGTERM");
    check(proc.exited && proc.exited.code === 0, `omld stopped cleanly on SIGTERM (${JSON.stringify(proc.exited)})`);
    st = await waitFor(page, "the page to notice omld is gone", (s) => s.connection === "disconnected", 8000);
    const polls = st.polls;
    check(st.badge === "disconnected" && st.bannerVisible, `the page shows 'disconnected' (${st.badge})`);
    st = await waitFor(page, "the page to keep retrying", (s) => s.polls >= polls + 2, 8000);
    check(true, `the page keeps polling while disconnected (${polls} -> ${st.polls} polls)`);
    check(errors.length === 0, `still no page errors (${errors.join(" | ") || "none"})`);
    const shot2 = path.resolve(OUT_DIR, "dashboard-disconnected.png");
    await page.screenshot({ path: shot2, fullPage: false });
    log(`screenshot (disconnected): ${shot2}`);

    // With tokens: the page loads, asks for a token on /status's 401,
    // refuses a wrong one, and shows the daemon with a right one.
    const tdir = fs.mkdtempSync(path.join(os.tmpdir(), "omld-dash-tok-"));
    const tproc = await startOmld(pre.omld, tdir, ["--tokens=ro:dash-ro-secret"]);
    try {
      const page3 = await browser.newPage({ viewport: { width: 1200, height: 900 } });
      const r3 = await page3.goto(`http://${tproc.http}/`);
      check(r3.status() === 200, `with tokens the dashboard page itself loads (${r3.status()})`);
      await page3.waitForFunction(() => document.body.dataset.token === "wanted", null, { timeout: 30000 });
      check(await page3.locator("#token-form").isVisible(), "the page asks for a token on a 401");
      await page3.fill("#token-input", "wrong-token");
      await page3.click("#token-form button");
      await page3.waitForFunction(() => document.body.dataset.token === "wanted" &&
                                  /refused/.test(document.getElementById("token-msg").textContent), null, { timeout: 30000 });
      check(true, "a wrong token is refused and asked for again");
      await page3.fill("#token-input", "dash-ro-secret");
      await page3.click("#token-form button");
      await page3.waitForFunction(() => document.body.dataset.connection === "connected", null, { timeout: 30000 });
      check(!(await page3.locator("#token-form").isVisible()), "with the token the page shows the daemon");
      await page3.close();
    } finally {
      await stopOmld(tproc, "SIGTERM");
      fs.rmSync(tdir, { recursive: true, force: true });
    }
    ok = true;
  } finally {
    if (browser) await browser.close().catch(() => {});
    if (proc && !proc.exited) await stopOmld(proc, "SIGKILL");
    if (!ok && proc && fs.existsSync(proc.logPath)) {
      console.error("---- omld log ----\n" + fs.readFileSync(proc.logPath, "utf8") + "---- end of log ----");
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => { log("PASS"); process.exit(0); },
  (e) => {
    console.error("dashboard test: FAIL: " + (e instanceof Failure ? e.message : e && e.stack || e));
    process.exit(1);
  });
