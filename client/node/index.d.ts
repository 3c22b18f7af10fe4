// Type declarations of the omld Node.js client (index.js). uint64 values of
// the wire (versions, counters, job ids) are Numbers: exact below 2^53.
/// <reference types="node" />
import { EventEmitter } from "events";

/** A feature vector of the daemon's dimension. */
export type Vector = number[] | Float32Array | Float64Array;
/** A stored item's id, or an inline vector used for this request only. */
export type ItemRef = string | Vector | { id: string } | { vector: Vector };

export interface ItemInput {
  id: string; features: Vector; label?: string | null; metadata?: Record<string, string>;
}
export type ItemLike = ItemInput | [string, Vector] | [string, Vector, string | null]
  | [string, Vector, string | null, Record<string, string>];
/** weight: how far the triplet moves the model, in (0, 100] (absent: 1). */
export type TripletLike = [ItemRef, ItemRef, ItemRef] | [ItemRef, ItemRef, ItemRef, number] |
  { anchor: ItemRef; positive: ItemRef; negative: ItemRef; weight?: number };
/** similar: true / "similar" or false / "dissimilar". */
export type Similar = boolean | "similar" | "dissimilar" | "SIMILAR" | "DISSIMILAR";
export type PairLike = [ItemRef, ItemRef, Similar] |
  { a: ItemRef; b: ItemRef; similar?: Similar; relation?: Similar };

export type CodeName = "OK" | "INVALID_ARGUMENT" | "NOT_FOUND" | "WRONG_DIMENSION" | "NON_FINITE" |
  "RESOURCE_EXHAUSTED" | "FRAME_TOO_LARGE" | "MALFORMED" | "UNAVAILABLE" | "INTERNAL" |
  "UNAUTHENTICATED" | "PERMISSION_DENIED" | "CONFLICT" | "NOT_PRIMARY" | "UNKNOWN_STATUS";

/** Per call: ms allowed for this call's answer (0: none); default the client's. */
export interface CallOptions { timeout?: number; }
export interface ModelOption extends CallOptions { model?: string; }
/** Writes: idempotencyKey (1..255 bytes; a retry with the same key changes
 * nothing and answers duplicate: true); waitForView (answered once a serving
 * view includes the write, with that view's modelVersion). */
export interface WriteOptions extends CallOptions { idempotencyKey?: string; waitForView?: boolean; }

export interface Answer { modelVersion: number; }
export interface Item {
  id: string; features: number[]; label: string | null;
  /** Small string key/values (omld.proto METADATA); null when the item has none. */
  metadata: Record<string, string> | null;
}
/** A metadata filter: a value (equality) or values (one of) per key; every key must hold. */
export type Where = Record<string, string | Iterable<string>>;
export interface CountResult extends Answer { count: number; total: number; }
export interface PutResult extends Answer { created: number; replaced: number; duplicate: boolean; }
export interface DeleteResult extends Answer { deleted: number; }
export interface Rejected { index: number; code: CodeName; field: string; message: string; }
export interface TripletResult extends Answer {
  accepted: number; queueDepth: number; rejected: Rejected[]; duplicate: boolean;
}
export interface PairResult extends Answer { accepted: number; derivedTriplets: number; duplicate: boolean; }
export interface Classification extends Answer { label: string; scores: { label: string; score: number }[]; }
export interface Verification extends Answer { similar: boolean; score: number; distances: number[]; }
export interface Hit { id: string; score: number; label: string | null; similarity: number; }
export interface Retrieval extends Answer { hits: Hit[]; }
export interface Embedding extends Answer { heads: number[][]; alpha: number[]; }
export interface ExportedModel extends Answer {
  model: Buffer; version: number; dim: number; heads: number; emb: number;
}
export interface Status extends Answer {
  version: string; uptimeMs: number; dim: number; depth: number; alpha: number[]; items: number;
  tripletsReceived: number; tripletsApplied: number; queueDepth: number; snapshotAgeMs: number;
  viewTriplets: number; preset: string; seed: number; utilisation: number;
  tripletAccuracy: number; recentAccuracy: number; tripletsRehearsed: number; replayTriplets: number;
  duplicates: number;
}
export interface Health extends Answer { live: boolean; ready: boolean; draining: boolean; }
export interface CheckpointResult extends Answer { path: string; bytes: number; tripletsApplied: number; }

export interface TrainParams {
  epochs?: number; learningRate?: number; depth?: number; batchM?: number; batchK?: number;
  margin?: number; gamma1?: number; gamma2?: number; lambda1?: number; lambda2?: number;
  seed?: number; validationFraction?: number; patience?: number;
}
export interface TrainStartResult extends Answer { jobId: number; model: string; items: number; classes: number; }
export interface JobInfo extends Answer {
  id: number; method: string; variant: string;
  state: "STATE_UNSPECIFIED" | "QUEUED" | "RUNNING" | "DONE" | "FAILED" | "CANCELLED";
  epoch: number; epochs: number; step: number; stepsTotal: number; loss: number; valR1: number;
  bestValR1: number; etaS: number; elapsedS: number; error: string; model: string; items: number;
  classes: number; cancelRequested: boolean;
}
export interface ModelInfo {
  name: string; method: string; variant: string; depth: number; createdMs: number; valR1: number;
  itemsIndexed: number; trainedItems: number; epochsRun: number; jobId: number; indexVersion: number;
}

export interface ClientOptions {
  /** ms allowed for the connect and for each call's answer; 0: none. Default 30000. */
  timeout?: number;
  /** Largest answer accepted, bytes. Default 64 MiB. */
  maxFrame?: number;
  /** TLS to a daemon with tls_cert: true, or tls.connect options (ca, servername, ...);
   *  the daemon is verified against the system's CAs (or ca) and the host. */
  tls?: boolean | import("tls").ConnectionOptions;
  /** A PEM file of the daemon's CA (its own certificate if self-signed); implies tls. */
  cafile?: string;
  /** A PEM file of the client certificate, for a daemon with tls_client_ca; implies tls. */
  certfile?: string;
  /** A PEM file of its private key (default: certfile). */
  keyfile?: string;
}
export interface ConnectOptions extends ClientOptions {
  /** Sent in an Auth request right after connecting. */
  token?: string;
}
/** "HOST:PORT", "[V6ADDR]:PORT", "unix:/path", or net.connect options. */
export type Server = string | { host: string; port: number } | { path: string };

export class Client extends EventEmitter {
  constructor(server?: Server, options?: ClientOptions);
  readonly server: Server;
  timeout: number;
  readonly closed: boolean;
  /** Calls sent and not yet answered. */
  readonly inFlight: number;
  /** model_version of the last answer. */
  readonly lastModelVersion: number;
  /** Set by auth(): false for a read-only token. */
  readonly readWrite: boolean | null;
  connect(): Promise<this>;
  close(): Promise<void>;
  on(event: "close", listener: (err: OmldConnectionError) => void): this;

  putItems(items: Iterable<ItemLike>, o?: WriteOptions): Promise<PutResult>;
  deleteItems(ids: string | Iterable<string> | null, o?: CallOptions & {
    missingOk?: boolean; labels?: string | Iterable<string>; where?: Where;
  }): Promise<DeleteResult>;
  countItems(o?: CallOptions & { labels?: string | Iterable<string>; where?: Where }): Promise<CountResult>;
  getItems(ids: string | Iterable<string>, o?: CallOptions): Promise<Item[]>;
  addTriplets(triplets: Iterable<TripletLike>, o?: WriteOptions & { partial?: boolean }): Promise<TripletResult>;
  addPairs(pairs: Iterable<PairLike>, o?: WriteOptions): Promise<PairResult>;
  classify(query: ItemRef, o?: ModelOption & { k?: number; where?: Where }): Promise<Classification>;
  verify(a: ItemRef, b: ItemRef, o?: ModelOption & { threshold?: number }): Promise<Verification>;
  retrieve(query: ItemRef, o?: ModelOption & {
    k?: number; labels?: string | Iterable<string>; excludeIds?: string | Iterable<string>;
    offset?: number; minSimilarity?: number; where?: Where;
  }): Promise<Retrieval>;
  embed(item: ItemRef, o?: ModelOption): Promise<Embedding>;
  /** The serving model as an OMLSNAP file (src/snapshot.h), to embed offline. */
  exportModel(o?: ModelOption): Promise<ExportedModel>;
  status(o?: CallOptions): Promise<Status>;
  health(o?: CallOptions): Promise<Health>;
  checkpoint(o?: CallOptions): Promise<CheckpointResult>;
  auth(token: string, o?: CallOptions): Promise<boolean>;
  waitLearned(o?: { applied?: number; timeout?: number; poll?: number }): Promise<Status>;

  trainStart(method: string, o?: CallOptions & {
    variant?: string; params?: TrainParams; labels?: string | Iterable<string>; name?: string;
  }): Promise<TrainStartResult>;
  trainStatus(jobId: number, o?: CallOptions): Promise<JobInfo>;
  trainCancel(jobId: number, o?: CallOptions): Promise<JobInfo>;
  listModels(o?: CallOptions): Promise<ModelInfo[]>;
  promote(name: string, o?: CallOptions): Promise<Answer & { depth: number }>;
  rollback(o?: CallOptions): Promise<Answer & { undone: string }>;
  deleteModel(name: string, o?: CallOptions): Promise<Answer>;

  /** The generic layer: any Request body by its camelCase name; resolves with
   * the decoded protobufjs Response when its status is OK. */
  call(name: string, value: object, o?: CallOptions): Promise<any>;
}

export function connect(server?: Server, options?: ConnectOptions): Promise<Client>;
export function parseServer(server: Server): { host: string; port: number } | { path: string };
export const DEFAULT_SERVER: string;
export function codeName(code: number): CodeName;
/** The protobufjs Root of omld.proto (lookupType("omld.Request"), ...). */
export const pb: any;

/** The daemon refused the request; nothing was changed; the connection stays usable. */
export class OmldError extends Error {
  readonly code: CodeName;
  readonly codeNumber: number;
  /** The daemon's sentence. */
  readonly statusMessage: string;
  /** Path of the offending field, e.g. "put_items.items[3].features", or "". */
  readonly field: string;
  readonly requestId: number;
  readonly modelVersion: number;
}
/** Transport failure; the client is closed. code: the system's ("ECONNREFUSED") or "OMLD_CLOSED". */
export class OmldConnectionError extends Error { readonly code: string; }
/** No answer (or connection) within the timeout; code "ETIMEDOUT". */
export class OmldTimeoutError extends OmldConnectionError {}
/** An answer that is not a valid Response, or has the wrong request id or body; code "OMLD_PROTOCOL". */
export class OmldProtocolError extends OmldConnectionError {}
