// Types of approved-action-executor (index.js).
import type pg from "pg";

/** A refusal decided inside the database (SQLSTATE class RS). */
export class ProtocolError extends Error {
  readonly sqlstate: string;
  constructor(message: string, sqlstate: string, options?: ErrorOptions);
}
/** RS001: the row moved on, or a completion drifts. */
export class FenceConflict extends ProtocolError {}
/** RS002: the lease expired or was taken over. */
export class LeaseLost extends FenceConflict {}
/** RS003: leased by someone alive, or past the barrier. */
export class NotLeasable extends ProtocolError {}
/** RS004: no such dispatch or execution. */
export class NotFound extends ProtocolError {}
/** RS005: a malformed argument or receipt. */
export class InvalidInput extends ProtocolError {}
/** RS006: a write outside the state machine. */
export class StateMachineViolation extends ProtocolError {}
export const SQLSTATE_ERRORS: Readonly<Record<"RS001" | "RS002" | "RS003" | "RS004" | "RS005" | "RS006", typeof ProtocolError>>;
/** The COMMIT reply was lost and the re-read could not tell: never repeat the side effect. */
export class CommitUnknown extends Error {}
/** The COMMIT reply was lost and the receipt is absent: the mutation rolled back. */
export class MutationNotCommitted extends Error {}
/** A receipt this package refuses to sign; `reason` is the resolver's rejection code. */
export class ReceiptError extends Error {
  readonly reason: string;
  constructor(message: string, reason: string);
}
export function protocolError(err: unknown): ProtocolError | null;

export const RECEIPT_VERSION: 1;
export const MAX_RECEIPT_BYTES: 4096;
export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };
/** Canonical JSON: keys sorted by code point, `,` and `:`, UTF-8, integers only. */
export function canonicalJson(value: JsonValue): string;
export function sha256Hex(data: string | Uint8Array): string;
/** An exact integer from a BigInt, a safe integer or a decimal string (a driver's bigint). */
export function exactInteger(value: bigint | number | string, name: string): bigint;

export type Integerish = bigint | number | string;
export type Outcome = "succeeded" | "failed";
export interface ReceiptKey {
  kid: string;
  /** At least 32 bytes, hex. */
  secretHex: string;
}
/** The row `resolver_receipt_identity` answers (snake_case, as the driver returns it). */
export interface ReceiptIdentity {
  schema_version: Integerish;
  dispatch_id: string;
  approval_request_id: string;
  project_id: string;
  action_type: string;
  action_digest: string;
  idempotency_key: string;
  attempt: Integerish;
  started_at_ms: Integerish;
}
export interface Receipt {
  v: bigint;
  dispatch_id: string;
  approval_request_id: string;
  project_id: string;
  action_type: string;
  action_digest: string;
  attempt: bigint;
  started_at_ms: bigint;
  idempotency_key: string;
  outcome: Outcome;
  result_code: string;
  finished_at_ms: bigint;
  receipt_identity_digest: string;
  kid: string;
  sig: string;
}
export interface SignedReceipt {
  receipt: Receipt;
  /** The canonical JSON the signature covers (the receipt without `sig`). */
  signed: string;
  sig: string;
  /** The canonical serialization of the signed receipt: store or send this. */
  json: string;
  /** sha256 of `json`: what the resolver stores; pass it to `complete`. */
  evidenceDigest: string;
}
/** Binding v1: the token an executor leaves where its side effect lands (docs/providers.md). */
export const BINDING_VERSION: 1;
export const IDEMPOTENCY_RECORD: "request_record";
export const GIT_COMMIT: "git_commit";
export const GIT_TRAILER: "Resolver-Binding";
export const OCI_MANIFEST: "oci_manifest";
export const OCI_ANNOTATION: "org.approved-action-resolver.binding";
/** `v1 dispatch=… attempt=… kid=… sig=…`, the same bytes as the Python SDK's. */
export function signBinding(args: { identity: ReceiptIdentity; kind: string; subject?: string; key: ReceiptKey }): string;
export function bindingEvidenceDigest(kind: string, objectId: string, token: string): string;
/** For the downstream service to keep in its idempotency record (e.g. a `Resolver-Binding` header). */
export function idempotencyBinding(identity: ReceiptIdentity, key: ReceiptKey): string;
/** `Resolver-Binding: …`, the last line of a commit message, bound to its tree and parents. */
export function gitCommitTrailer(identity: ReceiptIdentity, key: ReceiptKey, commit: { tree: string; parents?: string[] }): string;
export function gitCommitEvidenceDigest(commit: string, trailer: string): string;
/** `{ "org.approved-action-resolver.binding": … }`, bound to the manifest's config and layers. */
export function ociAnnotations(identity: ReceiptIdentity, key: ReceiptKey, manifest: { configDigest: string; layerDigests?: string[] }): Record<string, string>;
export function ociManifestEvidenceDigest(manifestDigest: string, annotations: Record<string, string>): string;

export function signReceipt(args: {
  identity: ReceiptIdentity;
  outcome: Outcome;
  resultCode: string;
  finishedAtMs: Integerish;
  receiptId: string;
  key: ReceiptKey;
}): SignedReceipt;
/** `kid=hexsecret` as a signing key. */
export function parseKey(text: string): ReceiptKey;

export const MAX_RAW_RECEIPT_BYTES: 8192;
/** What `verifyReceipt` accepted; integers are BigInt (a receipt may carry up to 2**63-1). */
export interface VerifiedReceipt {
  outcome: Outcome;
  resultCode: string;
  finishedAtMs: bigint;
  kid: string;
  /** sha256 of the canonical receipt: the evidence digest the resolver stores. */
  evidenceDigest: string;
  receipt: Receipt;
}
/**
 * Verify receipt v1 as the resolver does: same checks, same order, the same `reason` on the
 * `ReceiptError` it throws. `keys`: every key a verifier accepts.
 */
export function verifyReceipt(
  raw: Uint8Array | string,
  args: { identity: ReceiptIdentity; keys: ReceiptKey | ReceiptKey[] },
): VerifiedReceipt;
/** Strict JSON as the resolver reads a receipt: integers as BigInt; `ReceiptError` otherwise. */
export function parseReceiptJson(text: string): JsonValue;

/** A lease as the protocol functions return it; bigints stay strings: pass them back as they are. */
export interface Lease {
  dispatch_id: string;
  owner: string;
  token: string;
  version: string;
  attempt: number;
  lease_expires_at_ms: string;
  state: "leased" | "executing";
  started_at_ms?: string;
  controls_rearmed?: number;
}
export interface DispatchSpec {
  dispatchId: string;
  approvalRequestId: string;
  projectId: string;
  actionType: string;
  actionDigest: string;
  idempotencyKey: string;
  schemaVersion?: number;
  supersedesDispatchId?: string | null;
  /** What was approved, for people (optional): a 1-120 character title and up to 8 facts of
   * a 1-40 character label and a 1-200 character value. Never a secret, tool arguments or a
   * raw response; a bad one is refused with InvalidInput. */
  actionSummary?: ActionSummary | null;
}
export interface ActionSummary {
  title: string;
  facts?: { label: string; value: string }[];
}
export interface Completion {
  outcome: Outcome;
  resultCode: string;
  mutationId?: string;
  evidenceDigest?: string | null;
}
export interface RunResult {
  dispatchId: string;
  result: "committed" | "replayed";
  state: "succeeded" | "failed";
  evidenceDigest: string | null;
}

export class Executor {
  constructor(options: {
    pool: pg.Pool;
    owner: string;
    key?: ReceiptKey;
    /** Default 30 000. */
    leaseMs?: number;
    /** Renew every this fraction of the lease; (0, 0.5], default 1/3. */
    renewFraction?: number;
    /** Tries of `complete` when its reply is lost (an exact replay is idempotent). Default 3. */
    completeAttempts?: number;
    /**
     * Prepare each protocol call once per connection. Default: unless RESOLVER_DATABASE_POOLER
     * declares a pooler (`session` or `transaction`); pass false behind a transaction pooler
     * that does not keep prepared statements.
     */
    prepared?: boolean;
  });
  readonly pool: pg.Pool;
  readonly prepared: boolean;
  readonly owner: string;
  readonly leaseMs: number;
  createDispatch(spec: DispatchSpec): Promise<{ dispatch_id: string; created: boolean; created_at_ms: string }>;
  lease(dispatchId: string): Promise<Lease>;
  start(lease: Lease): Promise<Lease>;
  renew(lease: Lease): Promise<Lease>;
  complete(lease: Lease, completion: Completion): Promise<{ dispatch_id: string; result: "committed" | "replayed"; state: string; version: string }>;
  /** Lease, start, heartbeat, run `body`, complete what it recorded. */
  run(dispatchId: string, body: (effect: SideEffect) => Promise<void> | void): Promise<RunResult>;
}

export class SideEffect {
  /** The current fence (renewals replace it). */
  readonly lease: Lease;
  /** Aborted when the lease is lost; `signal.reason` is the LeaseLost/FenceConflict. */
  readonly signal: AbortSignal;
  throwIfCancelled(): void;
  remainingMs(): number;
  record(outcome: Outcome, resultCode: string, options?: { evidenceDigest?: string | null; mutationId?: string }): void;
  /** With `complete: true` the execution completes in this transaction: terminal state, mutation and receipt commit together. */
  transaction<T>(fn: (client: pg.ClientBase) => Promise<T>, options?: { client?: pg.ClientBase; complete?: boolean }): Promise<T>;
  writeReceipt(client: pg.ClientBase, args: { outcome: Outcome; resultCode: string; receiptId: string }): Promise<string>;
  /** The dispatch's identity, read under the live lease: what a binding token is signed over. */
  identity(): Promise<ReceiptIdentity>;
  /** Sign receipt v1 and PUT it to object storage (If-None-Match: *) while the lease surely outlasts the request. */
  publishReceipt(publisher: ReceiptPublisher, args: { outcome: Outcome; resultCode: string; receiptId: string }): Promise<PublishedReceipt>;
}

/** The receipt could not be published; the subclass says what the store answered. */
export class PublicationError extends Error {}
/** The store holds a different object under this dispatch's key: nothing was written. */
export class ReceiptAlreadyPublished extends PublicationError {}
/** The store refused the PUT (or never got it) and nothing was written. */
export class PublicationFailed extends PublicationError {}
/** A PUT may have landed and nothing later told: never repeat the effect; recovery settles it. */
export class PublicationUnknown extends PublicationError {}

/** What an `S3Client` of `@aws-sdk/client-s3` offers the publisher (build it with `maxAttempts: 1`). */
export interface S3ClientLike {
  // `any`: the AWS client's send is generic and overloaded per command.
  send(command: any, options?: { abortSignal?: AbortSignal }): Promise<any>;
  config: { maxAttempts?: () => Promise<number> };
}

export interface PublishedReceipt {
  key: string;
  etag: string | null;
  versionId: string | null;
  /** sha256 of the published bytes: what the completion carries. */
  evidenceDigest: string;
}

export function receiptKey(prefix: string, projectId: string, dispatchId: string): string;

export class ReceiptPublisher {
  constructor(options: {
    client: S3ClientLike;
    bucket: string;
    prefix?: string;
    requestTimeoutMs?: number;
    marginMs?: number | null;
    sleep?: (ms: number) => Promise<void>;
  });
  readonly bucket: string;
  readonly prefix: string;
  readonly requestTimeoutMs: number;
  keyFor(projectId: string, dispatchId: string): string;
  publish(key: string, body: string, lease: { leaseLeftMs: () => number; leaseMs: number }): Promise<PublishedReceipt>;
}

// -- the outcome feed (docs/outcomes.md) ----------------------------------------------------

export declare const OUTCOME_CHANNEL: "resolver_outcomes";
export declare const OUTCOME_EVENT_SOURCE: string;
export declare const OUTCOME_EVENT_TYPE_PREFIX: string;

export type DispatchState =
  | "pending" | "leased" | "executing" | "recovery_required" | "succeeded" | "failed" | "blocked";

/** One record of resolver_outcomes_after; bigints arrive as decimal strings. */
export interface OutcomeRecord {
  cursor: string;
  kind: "settled" | "contradicted" | "superseded";
  dispatch_id: string;
  approval_request_id: string;
  project_id: string;
  action_type: string;
  state: DispatchState;
  settled_by: "executor" | "resolver" | "person" | null;
  finding: string | null;
  result_code: string | null;
  evidence_digest: string | null;
  mutation_id: string | null;
  reason_code: string | null;
  actors: string[] | null;
  superseded_by: string | null;
  occurred_at_ms: string;
}

/** One dispatch now (resolver_dispatch_status). */
export interface DispatchStatus {
  dispatch_id: string;
  approval_request_id: string;
  project_id: string;
  action_type: string;
  idempotency_key: string;
  supersedes_dispatch_id: string | null;
  superseded_by: string | null;
  state: DispatchState;
  attempt: number | null;
  lease_expires_at_ms: string | null;
  started_at_ms: string | null;
  finished_at_ms: string | null;
  result_code: string | null;
  evidence_digest: string | null;
  settled_by: "executor" | "resolver" | "person" | null;
  finding: string | null;
  reason_code: string | null;
  actors: string[] | null;
  control_status: "armed" | "manual" | "resolved" | null;
  created_at_ms: string;
  db_now_ms: string;
}

export interface HistoryEntry {
  cursor: string | null;
  kind: "created" | "started" | "settled" | "contradicted" | "superseded";
  state: DispatchState;
  settled_by: "executor" | "resolver" | "person" | null;
  finding: string | null;
  result_code: string | null;
  reason_code: string | null;
  actors: string[] | null;
  superseded_by: string | null;
  attempt: number | null;
  occurred_at_ms: string;
}

/** A CloudEvents 1.0 event in structured JSON form. */
export interface OutcomeCloudEvent {
  specversion: "1.0";
  id: string;
  source: string;
  type: string;
  subject: string;
  time: string;
  datacontenttype: "application/json";
  data: OutcomeRecord;
}

export declare function toCloudEvent(record: OutcomeRecord, source?: string): OutcomeCloudEvent;

export class OutcomeTimeout extends Error {
  readonly status: DispatchStatus;
}

export class OutcomeFeed {
  constructor(options: {
    pool: pg.Pool;
    /** "listen" (default) or "poll" (behind PgBouncer in transaction mode). */
    wake?: "listen" | "poll";
    pollMinMs?: number;
    pollMaxMs?: number;
    listenFallbackMs?: number;
  });
  read(cursor?: string | null, options?: { limit?: number; projectId?: string | null }): Promise<OutcomeRecord[]>;
  cursorNow(): Promise<string>;
  consumerCursor(consumer: string): Promise<string | null>;
  saveCursor(consumer: string, cursor: string): Promise<string>;
  dropConsumer(consumer: string): Promise<boolean>;
  status(dispatchId: string): Promise<DispatchStatus | null>;
  history(dispatchId: string): Promise<HistoryEntry[]>;
  follow(
    consumer: string,
    handle: (record: OutcomeRecord) => Promise<void> | void,
    options?: { start?: "beginning" | "now"; signal?: AbortSignal; batch?: number; projectId?: string | null },
  ): Promise<void>;
  waitForOutcome(dispatchId: string, timeoutMs: number, options?: { signal?: AbortSignal }): Promise<DispatchStatus>;
}
