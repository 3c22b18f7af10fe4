#!/usr/bin/env node
// run.js - runs test/*.test.js with Node's built-in test runner (what
// `npm test` and the ctest node_client do). The files are named one by one
// because `node --test DIR` means different things across Node 18..22.
// Exits 77 (ctest: skipped) when protobufjs is not installed (run
// `npm ci --prefix client/node`); OMLD_BIN must name the built omld.
"use strict";

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");

const pkg = path.join(__dirname, "..");
try {
  require.resolve("protobufjs", { paths: [pkg] });
} catch (e) {
  console.log(`SKIP: protobufjs is not installed: run 'npm ci --prefix ${path.relative(process.cwd(), pkg) || "."}'`);
  process.exit(77);
}
const files = fs.readdirSync(__dirname).filter((f) => f.endsWith(".test.js")).sort()
  .map((f) => path.join(__dirname, f));
const r = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
process.exit(r.status === null ? 1 : r.status);
