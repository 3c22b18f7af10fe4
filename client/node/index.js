// omld - Node.js client for omld, the streaming online metric-learning daemon.
//
//   const omld = require("omld");
//   const c = await omld.connect("127.0.0.1:7600");
//   await c.putItems([{ id: "shoe-1", features: [0.9, 0.1, 0, 0.2], label: "shoes" }]);
//   console.log((await c.classify("shoe-1", { k: 5 })).label);
//   await c.close();
//
// See README.md for every operation, its options and answers, and errors.
// The wire contract is proto/omld.proto, loaded at run time (lib/proto.js).
"use strict";

const { Client, connect, parseServer, DEFAULT_SERVER } = require("./lib/client");
const { OmldError, OmldConnectionError, OmldTimeoutError, OmldProtocolError } = require("./lib/errors");
const { root, codeName } = require("./lib/proto");

module.exports = {
  Client, connect, parseServer, DEFAULT_SERVER,
  OmldError, OmldConnectionError, OmldTimeoutError, OmldProtocolError,
  codeName, pb: root,
};
