// errors.js - what the omld client rejects with.
//
//   OmldError              the daemon answered with a non-OK Status; nothing
//                          was changed and the connection stays usable
//   OmldConnectionError    transport: connect failed, I/O error, the daemon
//     |                    closed; the client is closed afterwards and every
//     |                    request in flight is rejected with it
//     +-- OmldTimeoutError   no answer (or no connection) within the timeout
//     +-- OmldProtocolError  an answer that is not a valid Response, has the
//                            wrong request id or body, or is too large
//
// Bad arguments (a feature that is not a number, a missing id) are thrown
// as TypeError / RangeError before anything is sent.
"use strict";

class OmldError extends Error {
  // code: the Status.Code name ("NOT_FOUND"); codeNumber: its number;
  // field: the path of the offending field ("put_items.items[3].features")
  // or ""; statusMessage: the daemon's sentence.
  constructor(code, codeNumber, statusMessage, field, requestId, modelVersion) {
    super(`${code}: ${statusMessage}` + (field ? ` (field ${field})` : ""));
    this.name = "OmldError";
    this.code = code;
    this.codeNumber = codeNumber;
    this.statusMessage = statusMessage;
    this.field = field;
    this.requestId = requestId;
    this.modelVersion = modelVersion;
  }
}

class OmldConnectionError extends Error {
  // code: the system error's code when there is one ("ECONNREFUSED"), else
  // "OMLD_CLOSED"; cause: the underlying error, if any.
  constructor(message, code, cause) {
    super(message, cause ? { cause } : undefined);
    this.name = "OmldConnectionError";
    this.code = code || "OMLD_CLOSED";
  }
}

class OmldTimeoutError extends OmldConnectionError {
  constructor(message) {
    super(message, "ETIMEDOUT");
    this.name = "OmldTimeoutError";
  }
}

class OmldProtocolError extends OmldConnectionError {
  constructor(message, cause) {
    super(message, "OMLD_PROTOCOL", cause);
    this.name = "OmldProtocolError";
  }
}

module.exports = { OmldError, OmldConnectionError, OmldTimeoutError, OmldProtocolError };
