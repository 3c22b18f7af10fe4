// proto.js - loads the wire contract, proto/omld.proto, with protobufjs.
//
// The .proto is parsed at run time (no generated code in the package), so
// the contract stays one file. It is looked for, in order:
//   1. $OMLD_PROTO;
//   2. omld.proto inside this package (`npm pack` copies it in: prepack);
//   3. ../../proto/omld.proto, i.e. the source tree this package sits in
//      (a checkout, or `npm install ./client/node`, which links the
//      directory).
// Loading happens once, at the first require of the package.
"use strict";

const fs = require("fs");
const path = require("path");
const protobuf = require("protobufjs");

function protoPath() {
  const candidates = [
    process.env.OMLD_PROTO,
    path.join(__dirname, "..", "omld.proto"),
    path.join(__dirname, "..", "..", "..", "proto", "omld.proto"),
  ].filter(Boolean);
  for (const p of candidates)
    if (fs.existsSync(p)) return p;
  throw new Error("omld: omld.proto not found (looked at " + candidates.join(", ") +
                  "); set OMLD_PROTO to the path of proto/omld.proto");
}

const file = protoPath();
const root = protobuf.loadSync(file);
root.resolveAll();

const Request = root.lookupType("omld.Request");
const Response = root.lookupType("omld.Response");
const StatusCode = root.lookupEnum("omld.Status.Code");
const Relation = root.lookupEnum("omld.Pair.Relation");
const JobState = root.lookupEnum("omld.JobInfo.State");

// Status.Code number -> name ("NOT_FOUND"); a code this contract does not
// know (a newer daemon) is "UNKNOWN_STATUS".
function codeName(code) {
  return StatusCode.valuesById[code] || "UNKNOWN_STATUS";
}

// The options every answer is converted with: uint64 as Number (exact below
// 2^53: counters, versions, job ids), enums by name, absent fields as their
// proto3 default. Members of single-field oneofs (proto3 optional) stay
// absent when unset.
const TO_OBJECT = { longs: Number, enums: String, defaults: true, arrays: true };

module.exports = { protobuf, root, file, Request, Response, StatusCode, Relation, JobState,
                   codeName, TO_OBJECT };
