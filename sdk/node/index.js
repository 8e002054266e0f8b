// approved-action-executor: run an approved side effect under the resolver's executor protocol.
//
// The protocol lives in the database (docs/executor-protocol.md): every transition is a
// `resolver_*` SQL function fenced on owner/token/version and the database clock. This
// package calls those functions, and adds what an executor otherwise gets wrong by hand:
// a heartbeat that stops before the mutation's transaction, the receipt signed and written in
// that transaction, a lost COMMIT reply treated as unknown (re-read, never repeated), typed
// errors per SQLSTATE, and exact integers in receipts although drivers return bigints as text.
import crypto from "node:crypto";
import { performance } from "node:perf_hooks";
import pg from "pg";

// -- errors ---------------------------------------------------------------------------------

/** A refusal decided inside the database (SQLSTATE class RS). Decide by class, never text. */
export class ProtocolError extends Error {
  constructor(message, sqlstate, options) {
    super(message, options);
    this.name = new.target.name;
    this.sqlstate = sqlstate;
  }
}
/** RS001: the row moved on, or a completion drifts. Stop; never repeat the side effect. */
export class FenceConflict extends ProtocolError {}
/** RS002: the lease expired or was taken over. Never start (or continue) the side effect. */
export class LeaseLost extends FenceConflict {}
/** RS003: leased by someone alive, or past the barrier. Leave it alone. */
export class NotLeasable extends ProtocolError {}
/** RS004: no such dispatch or execution: a bug in the caller. */
export class NotFound extends ProtocolError {}
/** RS005: a malformed argument or receipt; nothing was written. */
export class InvalidInput extends ProtocolError {}
/** RS006: a write outside the state machine (a hand-written UPDATE). */
export class StateMachineViolation extends ProtocolError {}

export const SQLSTATE_ERRORS = Object.freeze({
  RS001: FenceConflict,
  RS002: LeaseLost,
  RS003: NotLeasable,
  RS004: NotFound,
  RS005: InvalidInput,
  RS006: StateMachineViolation,
});

/** The COMMIT reply was lost and the re-read could not tell: never repeat; recovery settles. */
export class CommitUnknown extends Error {
  name = "CommitUnknown";
}
/** The COMMIT reply was lost and the receipt is absent: the mutation rolled back. */
export class MutationNotCommitted extends Error {
  name = "MutationNotCommitted";
}
/** A receipt this package refuses to sign; `reason` is the code the resolver would reject it with. */
export class ReceiptError extends Error {
  constructor(message, reason) {
    super(message);
    this.name = "ReceiptError";
    this.reason = reason;
  }
}

/** The typed error for a driver error carrying a protocol SQLSTATE, else null. */
export function protocolError(err) {
  const Class = err instanceof pg.DatabaseError ? SQLSTATE_ERRORS[err.code] : undefined;
  return Class ? new Class(err.message, err.code, { cause: err }) : null;
}

/** True for an answer of the server (it has a SQLSTATE); false for a lost connection. */
const serverAnswered = (err) => err instanceof pg.DatabaseError;

// -- canonical JSON and receipt v1 ------------------------------------------------------------

const ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const ACTION_TYPE = /^[a-z][a-z0-9_.-]{0,63}$/;
const HEX64 = /^[0-9a-f]{64}$/;
const RESULT_CODE = /^[a-z0-9_.-]{1,64}$/;
const KID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const MAX_INT = 2n ** 63n - 1n;
export const RECEIPT_VERSION = 1;
export const MAX_RECEIPT_BYTES = 4096;

// canonical-json:begin (docs/receipts.md shows this region verbatim; a test compares them)
const utf8 = (text) => Buffer.from(text, "utf8");
const byCodePoint = (a, b) => Buffer.compare(utf8(a), utf8(b)); // UTF-8 order is code point order

/**
 * Canonical JSON: keys sorted by code point, `,` and `:`, no whitespace, UTF-8, integers only
 * (numbers must be safe integers; use BigInt beyond 2**53).
 */
export function canonicalJson(value) {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "bigint":
      return value.toString();
    case "number":
      if (!Number.isSafeInteger(value)) {
        throw new ReceiptError("canonical JSON holds integers only (BigInt past 2**53)", "float");
      }
      return String(value);
    case "string":
      if (!value.isWellFormed()) throw new ReceiptError("a lone surrogate is not UTF-8", "not_json");
      // For one string JSON.stringify escapes exactly `"`, `\` and U+0000-U+001F (\b \t \n
      // \f \r, the others as \u00xx in lowercase hex), and nothing else: the canonical set.
      return JSON.stringify(value);
    case "object":
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
      // Never an object's own key order: engines list integer-like keys first.
      return `{${Object.keys(value)
        .sort(byCodePoint)
        .map((k) => `${canonicalJson(k)}:${canonicalJson(value[k])}`)
        .join(",")}}`;
    default:
      throw new ReceiptError(`canonical JSON cannot hold a ${typeof value}`, "bad_type");
  }
}
// canonical-json:end

export const sha256Hex = (data) => crypto.createHash("sha256").update(data).digest("hex");

/**
 * An exact integer from what a driver hands back: a BigInt, a safe integer, or a decimal
 * string (node-postgres returns bigint columns as strings). Anything else is refused.
 */
export function exactInteger(value, name) {
  let n;
  if (typeof value === "bigint") n = value;
  else if (typeof value === "number" && Number.isSafeInteger(value)) n = BigInt(value);
  else if (typeof value === "string" && /^(0|[1-9][0-9]{0,18})$/.test(value)) n = BigInt(value);
  else throw new ReceiptError(`receipt field ${name} must be an integer`, "bad_type");
  if (n < 0n || n > MAX_INT) throw new ReceiptError(`receipt field ${name} is out of range`, "bad_value");
  return n;
}

function checked(value, pattern, name) {
  if (typeof value !== "string") throw new ReceiptError(`receipt field ${name} must be a string`, "bad_type");
  if (!pattern.test(value)) throw new ReceiptError(`receipt field ${name} has the wrong form`, "bad_value");
  return value;
}

/**
 * Sign receipt v1 for `identity` (the row `resolver_receipt_identity` answers, snake_case).
 * Returns the receipt (integers as BigInt), its canonical serialization `json` (what to
 * store or send), `signed` (the canonical bytes the signature covers) and `evidenceDigest`
 * (sha256 of `json`: what the resolver stores and what `complete` should be given).
 */
export function signReceipt({ identity, outcome, resultCode, finishedAtMs, receiptId, key }) {
  if (exactInteger(identity.schema_version, "schema_version") !== BigInt(RECEIPT_VERSION)) {
    throw new ReceiptError("receipt v1 binds only schema-version-1 dispatches", "version_mismatch");
  }
  if (outcome !== "succeeded" && outcome !== "failed") {
    throw new ReceiptError("receipt outcome must be succeeded or failed", "bad_value");
  }
  if (typeof receiptId !== "string" || receiptId.length === 0 || !receiptId.isWellFormed()) {
    throw new ReceiptError("receiptId must be a non-empty string", "bad_value");
  }
  const secret = secretBytes(key);
  const body = {
    v: BigInt(RECEIPT_VERSION),
    dispatch_id: checked(identity.dispatch_id, ID, "dispatch_id"),
    approval_request_id: checked(identity.approval_request_id, ID, "approval_request_id"),
    project_id: checked(identity.project_id, ID, "project_id"),
    action_type: checked(identity.action_type, ACTION_TYPE, "action_type"),
    action_digest: checked(identity.action_digest, HEX64, "action_digest"),
    attempt: exactInteger(identity.attempt, "attempt"),
    started_at_ms: exactInteger(identity.started_at_ms, "started_at_ms"),
    idempotency_key: checked(identity.idempotency_key, ID, "idempotency_key"),
    outcome,
    result_code: checked(resultCode, RESULT_CODE, "result_code"),
    finished_at_ms: exactInteger(finishedAtMs, "finished_at_ms"),
    receipt_identity_digest: sha256Hex(utf8(receiptId)),
    kid: checked(key.kid, KID, "kid"),
  };
  if (body.attempt < 1n) throw new ReceiptError("receipt attempt must be at least 1", "bad_value");
  const signed = canonicalJson(body);
  const sig = crypto.createHmac("sha256", secret).update(utf8(signed)).digest("hex");
  const receipt = { ...body, sig };
  const json = canonicalJson(receipt);
  if (utf8(json).length > MAX_RECEIPT_BYTES) {
    throw new ReceiptError(`receipt is over ${MAX_RECEIPT_BYTES} bytes`, "too_large");
  }
  return { receipt, signed, sig, json, evidenceDigest: sha256Hex(utf8(json)) };
}

// -- binding v1: the token left where a side effect lands (docs/providers.md) ------------------

export const BINDING_VERSION = 1;
export const IDEMPOTENCY_RECORD = "request_record";
export const GIT_COMMIT = "git_commit";
export const GIT_TRAILER = "Resolver-Binding";
export const OCI_MANIFEST = "oci_manifest";
export const OCI_ANNOTATION = "org.approved-action-resolver.binding";
const BINDING_KIND = /^[a-z][a-z0-9_.-]{0,63}$/;

/**
 * The binding v1 token for `identity` (the row `sideEffect.identity()` answers), an evidence
 * `kind` and its `subject`, signed with `key`: `v1 dispatch=… attempt=… kid=… sig=…`. The
 * same bytes as Python's `resolver.evidence.bindings.sign_binding`.
 */
export function signBinding({ identity, kind, subject = "", key }) {
  if (typeof kind !== "string" || !BINDING_KIND.test(kind)) throw new ReceiptError("a binding kind matches [a-z][a-z0-9_.-]{0,63}", "bad_value");
  if (typeof subject !== "string" || !subject.isWellFormed()) throw new ReceiptError("a binding subject is a string", "bad_value");
  const secret = secretBytes(key);
  const message = canonicalJson({
    v: BigInt(BINDING_VERSION),
    kind,
    subject,
    schema_version: exactInteger(identity.schema_version, "schema_version"),
    dispatch_id: checked(identity.dispatch_id, ID, "dispatch_id"),
    approval_request_id: checked(identity.approval_request_id, ID, "approval_request_id"),
    project_id: checked(identity.project_id, ID, "project_id"),
    action_type: checked(identity.action_type, ACTION_TYPE, "action_type"),
    action_digest: checked(identity.action_digest, HEX64, "action_digest"),
    attempt: exactInteger(identity.attempt, "attempt"),
    started_at_ms: exactInteger(identity.started_at_ms, "started_at_ms"),
    idempotency_key: checked(identity.idempotency_key, ID, "idempotency_key"),
  });
  const sig = crypto.createHmac("sha256", secret).update(utf8(message)).digest("hex");
  const kid = checked(key.kid, KID, "kid");
  return `v${BINDING_VERSION} dispatch=${identity.dispatch_id} attempt=${exactInteger(identity.attempt, "attempt")} kid=${kid} sig=${sig}`;
}

/** The evidence digest the resolver gives a verified bound object: complete with it. */
export function bindingEvidenceDigest(kind, objectId, token) {
  return sha256Hex(utf8(canonicalJson({ evidence: kind, object: objectId, binding: token })));
}

/** The token to send with a request for the downstream service to keep in its idempotency record. */
export function idempotencyBinding(identity, key) {
  return signBinding({ identity, kind: IDEMPOTENCY_RECORD, subject: "", key });
}

/** The trailer line that ends a commit message: bound to the commit's tree and parents. */
export function gitCommitTrailer(identity, key, { tree, parents = [] }) {
  const subject = ["tree", tree, ...parents.map((p) => `parent ${p}`)].join(" ");
  return `${GIT_TRAILER}: ${signBinding({ identity, kind: GIT_COMMIT, subject, key })}`;
}

/** The evidence digest of the commit `commit` carrying `trailer`. */
export function gitCommitEvidenceDigest(commit, trailer) {
  return bindingEvidenceDigest(GIT_COMMIT, commit, trailer.slice(`${GIT_TRAILER}: `.length));
}

/** The annotation to put in an OCI manifest: bound to its config and layers. */
export function ociAnnotations(identity, key, { configDigest, layerDigests = [] }) {
  const subject = ["config", configDigest, ...layerDigests.map((d) => `layer ${d}`)].join(" ");
  return { [OCI_ANNOTATION]: signBinding({ identity, kind: OCI_MANIFEST, subject, key }) };
}

/** The evidence digest of the manifest `manifestDigest` carrying `annotations`. */
export function ociManifestEvidenceDigest(manifestDigest, annotations) {
  return bindingEvidenceDigest(OCI_MANIFEST, manifestDigest, annotations[OCI_ANNOTATION]);
}

function secretBytes(key) {
  if (!key || typeof key.secretHex !== "string" || !/^([0-9a-fA-F]{2}){32,}$/.test(key.secretHex)) {
    throw new ReceiptError("the receipt key needs a kid and a secretHex of at least 32 bytes", "bad_value");
  }
  return Buffer.from(key.secretHex, "hex");
}

/** `kid=hexsecret` (the form of RESOLVER_RECEIPT_KEYS entries) as a signing key. */
export function parseKey(text) {
  const at = (text ?? "").indexOf("=");
  const key = { kid: text.slice(0, at).trim(), secretHex: text.slice(at + 1).trim() };
  if (at < 1 || !KID.test(key.kid)) throw new ReceiptError("write the key as kid=hexsecret", "bad_value");
  secretBytes(key);
  return key;
}

// -- receipt verification ---------------------------------------------------------------------

export const MAX_RAW_RECEIPT_BYTES = 8192;
const INT_FIELDS = ["v", "attempt", "started_at_ms", "finished_at_ms"];
const PATTERN_FIELDS = [
  ["dispatch_id", ID],
  ["approval_request_id", ID],
  ["project_id", ID],
  ["idempotency_key", ID],
  ["action_type", ACTION_TYPE],
  ["action_digest", HEX64],
  ["receipt_identity_digest", HEX64],
  ["result_code", RESULT_CODE],
  ["kid", KID],
  ["sig", HEX64],
];
const RECEIPT_FIELDS = new Set([...INT_FIELDS, ...PATTERN_FIELDS.map(([name]) => name), "outcome"]);
const IDENTITY_FIELDS = ["dispatch_id", "approval_request_id", "project_id", "action_type", "idempotency_key"];
// Python's int() refuses more digits than this; a receipt that long is not JSON to the resolver.
const MAX_INTEGER_DIGITS = 4300;

const notJson = () => new ReceiptError("receipt is not valid JSON", "not_json");
const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Strict JSON as the resolver reads a receipt (docs/receipts.md): JSON whitespace only, no BOM,
 * integers as BigInt (any fraction or exponent, NaN or Infinity is `float`), a repeated key in
 * one object is `duplicate_field` (checked when the object closes), anything else `not_json`.
 */
export function parseReceiptJson(text) {
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i += 1;
  };
  const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
  const float = () => new ReceiptError("receipt holds a non-integer number", "float");

  function string() {
    i += 1; // the opening quote
    let out = "";
    for (;;) {
      const c = text[i];
      if (c === undefined || c < " ") throw notJson(); // unterminated, or a raw control character
      i += 1;
      if (c === '"') return out;
      if (c !== "\\") {
        out += c;
        continue;
      }
      const e = text[i];
      i += 1;
      const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" }[e];
      if (simple !== undefined) out += simple;
      else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i, i + 4))) {
        // UTF-16 code units: an escaped pair joins into one character, a lone half stays
        // lone and is refused below (it is not UTF-8 text).
        out += String.fromCharCode(parseInt(text.slice(i, i + 4), 16));
        i += 4;
      } else throw notJson();
    }
  }

  function value() {
    ws();
    const c = text[i];
    if (c === "{") {
      i += 1;
      const pairs = [];
      ws();
      if (text[i] === "}") i += 1;
      else
        for (;;) {
          ws();
          if (text[i] !== '"') throw notJson();
          const key = string();
          ws();
          if (text[i] !== ":") throw notJson();
          i += 1;
          pairs.push([key, value()]);
          ws();
          if (text[i] === ",") i += 1;
          else if (text[i] === "}") {
            i += 1;
            break;
          } else throw notJson();
        }
      const object = Object.create(null); // "__proto__" is a key like any other
      for (const [key, v] of pairs) {
        if (Object.hasOwn(object, key)) throw new ReceiptError("receipt repeats a field", "duplicate_field");
        object[key] = v;
      }
      return object;
    }
    if (c === "[") {
      i += 1;
      const items = [];
      ws();
      if (text[i] === "]") i += 1;
      else
        for (;;) {
          items.push(value());
          ws();
          if (text[i] === ",") i += 1;
          else if (text[i] === "]") {
            i += 1;
            break;
          } else throw notJson();
        }
      return items;
    }
    if (c === '"') return string();
    for (const [word, v] of [["null", null], ["true", true], ["false", false]]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    }
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (m) {
      i = NUMBER.lastIndex;
      if (m[1] !== undefined || m[2] !== undefined) throw float();
      if (m[0].replace("-", "").length > MAX_INTEGER_DIGITS) throw notJson();
      return BigInt(m[0]); // "-0" is the integer 0
    }
    if (["NaN", "Infinity", "-Infinity"].some((word) => text.startsWith(word, i))) throw float();
    throw notJson();
  }

  const parsed = value();
  ws();
  if (i !== text.length) throw notJson();
  return parsed;
}

function keyRing(keys) {
  const ring = new Map();
  for (const key of Array.isArray(keys) ? keys : [keys]) ring.set(key.kid, secretBytes(key));
  return ring;
}

/**
 * Verify receipt v1 `raw` (a Buffer of UTF-8 bytes, or a string) for `identity` (the
 * dispatch's, snake_case; integers as BigInt, number or decimal string) against `keys` (one
 * key or an array: every kid a verifier accepts). Returns `{ outcome, resultCode,
 * finishedAtMs, kid, evidenceDigest, receipt }`; a receipt the resolver would refuse throws a
 * `ReceiptError` with the same `reason`, checked in the same order (docs/receipts.md).
 */
export function verifyReceipt(raw, { identity, keys }) {
  const bytes = typeof raw === "string" ? Buffer.byteLength(raw, "utf8") : raw?.length;
  if (typeof bytes !== "number") throw new TypeError("verifyReceipt takes a Buffer or a string");
  if (bytes > MAX_RAW_RECEIPT_BYTES) throw new ReceiptError(`receipt is over ${MAX_RAW_RECEIPT_BYTES} bytes`, "too_large");
  let text = raw;
  if (typeof raw === "string") {
    if (!raw.isWellFormed()) throw notJson();
  } else {
    try {
      // fatal: bad UTF-8 is refused; ignoreBOM: a BOM is kept, and then is not JSON.
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(raw);
    } catch {
      throw notJson();
    }
  }
  const receipt = parseReceiptJson(text);
  if (!isObject(receipt)) throw new ReceiptError("receipt is not a JSON object", "not_object");
  const canonical = canonicalJson(receipt);
  if (utf8(canonical).length > MAX_RECEIPT_BYTES) {
    throw new ReceiptError(`receipt is over ${MAX_RECEIPT_BYTES} bytes`, "too_large");
  }
  checkShape(receipt);
  const secret = keyRing(keys).get(receipt.kid);
  if (!secret) throw new ReceiptError("the receipt's kid is not in the key ring", "unknown_kid");
  const { sig, ...body } = receipt;
  const expected = crypto.createHmac("sha256", secret).update(utf8(canonicalJson(body))).digest();
  if (!crypto.timingSafeEqual(expected, Buffer.from(sig, "hex"))) {
    throw new ReceiptError("the receipt's signature does not verify", "bad_signature");
  }
  checkBinding(receipt, identity);
  return {
    outcome: receipt.outcome,
    resultCode: receipt.result_code,
    finishedAtMs: receipt.finished_at_ms,
    kid: receipt.kid,
    evidenceDigest: sha256Hex(utf8(canonical)),
    receipt: { ...receipt },
  };
}

function checkShape(receipt) {
  const present = Object.keys(receipt);
  if (present.some((name) => !RECEIPT_FIELDS.has(name))) {
    throw new ReceiptError("receipt holds a field v1 does not define", "unknown_field");
  }
  if (present.length !== RECEIPT_FIELDS.size) throw new ReceiptError("receipt lacks a field v1 requires", "missing_field");
  for (const name of INT_FIELDS) {
    if (typeof receipt[name] !== "bigint") throw new ReceiptError(`receipt field ${name} must be an integer`, "bad_type");
    if (receipt[name] < 0n || receipt[name] > MAX_INT) throw new ReceiptError(`receipt field ${name} is out of range`, "bad_value");
  }
  for (const [name, pattern] of PATTERN_FIELDS) checked(receipt[name], pattern, name);
  if (receipt.outcome !== "succeeded" && receipt.outcome !== "failed") {
    throw new ReceiptError("receipt outcome must be succeeded or failed", "bad_value");
  }
  if (receipt.v !== BigInt(RECEIPT_VERSION)) throw new ReceiptError("receipt is not version 1", "version_mismatch");
  if (receipt.attempt < 1n) throw new ReceiptError("receipt attempt must be at least 1", "bad_value");
}

function checkBinding(receipt, identity) {
  if (exactInteger(identity.schema_version, "schema_version") !== receipt.v) {
    throw new ReceiptError("receipt version differs from the dispatch's", "version_mismatch");
  }
  for (const name of IDENTITY_FIELDS) {
    if (receipt[name] !== identity[name]) throw new ReceiptError(`receipt ${name} differs from dispatch`, "identity_mismatch");
  }
  if (receipt.action_digest !== identity.action_digest) {
    throw new ReceiptError("receipt action_digest differs from dispatch", "digest_mismatch");
  }
  if (
    receipt.attempt !== exactInteger(identity.attempt, "attempt") ||
    receipt.started_at_ms !== exactInteger(identity.started_at_ms, "started_at_ms")
  ) {
    throw new ReceiptError("receipt attempt or start differs from dispatch", "fence_mismatch");
  }
}

// -- the executor -----------------------------------------------------------------------------

const fence = (lease) => [lease.dispatch_id, lease.owner, lease.token, lease.version];
const now = () => performance.now();

async function call(queryable, text, values, prepared = false) {
  try {
    return (await queryable.query(prepared ? { name: statementName(text), text, values } : text, values)).rows[0];
  } catch (err) {
    throw protocolError(err) ?? err;
  }
}

// A protocol call prepared once per connection, by a name its text decides (two texts never
// share one). Only where no pooler sits between: a transaction pooler may hand the next
// transaction to a server connection that lacks the statement. RESOLVER_DATABASE_POOLER
// declares one, as for the Python SDK.
const statementNames = new Map();
function statementName(text) {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `aae_${sha256Hex(text).slice(0, 24)}`;
    statementNames.set(text, name);
  }
  return name;
}
const POOLERS = new Set(["none", "session", "transaction"]);
function preparedByDefault() {
  const declared = (process.env.RESOLVER_DATABASE_POOLER ?? "none").trim().toLowerCase() || "none";
  if (!POOLERS.has(declared)) {
    throw new TypeError(`RESOLVER_DATABASE_POOLER=${declared} is not a pooler mode: use transaction, session or none`);
  }
  return declared === "none";
}

/** Protocol calls and the high-level `run`, over a `pg.Pool` (or anything with connect/query). */
export class Executor {
  constructor({ pool, owner, key, leaseMs = 30_000, renewFraction = 1 / 3, completeAttempts = 3, prepared }) {
    if (!pool) throw new TypeError("Executor needs a pg.Pool");
    if (typeof owner !== "string" || owner.length === 0) throw new TypeError("Executor needs an owner name");
    if (!Number.isSafeInteger(leaseMs) || leaseMs < 1 || leaseMs > 86_400_000) {
      throw new RangeError("leaseMs must be an integer from 1 ms to one day");
    }
    if (!(renewFraction > 0 && renewFraction <= 0.5)) {
      throw new RangeError("renewFraction must be in (0, 0.5]: later leaves no time to retry a failed renewal");
    }
    this.pool = pool;
    this.owner = owner;
    this.key = key ?? null;
    this.leaseMs = leaseMs;
    this.renewIntervalMs = Math.max(1, Math.floor(leaseMs * renewFraction));
    this.completeAttempts = completeAttempts;
    this.prepared = prepared ?? preparedByDefault();
  }

  /**
   * Record the immutable dispatch; an exact re-create answers `created: false`.
   * `actionSummary` ({ title, facts: [{ label, value }] }) is what was approved, for people:
   * optional, bounded, never a secret, tool arguments or a raw response; the database checks
   * it and refuses a bad one with InvalidInput (RS005), naming the rule, never the content.
   */
  createDispatch(d) {
    const summary = d.actionSummary ?? null;
    if (summary !== null && (typeof summary !== "object" || Array.isArray(summary))) {
      throw new TypeError("actionSummary must be { title, facts: [{ label, value }] } or null");
    }
    return call(this.pool, "SELECT * FROM resolver_dispatch_create_v2($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)", [
      d.dispatchId,
      d.approvalRequestId,
      d.projectId,
      d.actionType,
      d.actionDigest,
      d.idempotencyKey,
      d.schemaVersion ?? 1,
      d.supersedesDispatchId ?? null,
      // Only the two known keys, in a fixed order: an exact re-create compares equal.
      summary === null ? null : JSON.stringify({ title: summary.title, facts: (summary.facts ?? []).map((f) => ({ label: f.label, value: f.value })) }),
    ], this.prepared);
  }

  lease(dispatchId) {
    return call(this.pool, "SELECT * FROM resolver_execution_lease($1, $2, $3)", [dispatchId, this.owner, this.leaseMs], this.prepared);
  }

  /** The start barrier: only after it returns may the side effect begin. */
  start(lease) {
    return call(this.pool, "SELECT * FROM resolver_execution_start($1, $2, $3, $4, $5)", [...fence(lease), this.leaseMs], this.prepared);
  }

  renew(lease) {
    return call(this.pool, "SELECT * FROM resolver_execution_renew($1, $2, $3, $4, $5)", [...fence(lease), this.leaseMs], this.prepared);
  }

  /** Terminal state; `result` is `committed`, or `replayed` for an exact replay. */
  complete(lease, completion) {
    return call(this.pool, COMPLETE, completeArgs(lease, completion), this.prepared);
  }

  /**
   * Lease, cross the barrier, run `body(effect)` under a heartbeat, then complete what the
   * body recorded (`effect.transaction` + `effect.writeReceipt`, or `effect.record`). If the
   * body throws, nothing is completed: recovery settles the execution from evidence.
   */
  async run(dispatchId, body) {
    const askedAt = now();
    const row = await call(this.pool, LEASE_START, [dispatchId, this.owner, this.leaseMs], this.prepared);
    const readAt = now();
    const { schema_version, approval_request_id, project_id, action_type, action_digest, idempotency_key, db_now_ms, ...lease } = row;
    const identity = {
      schema_version,
      dispatch_id: lease.dispatch_id,
      approval_request_id,
      project_id,
      action_type,
      action_digest,
      idempotency_key,
      attempt: lease.attempt,
      started_at_ms: lease.started_at_ms,
    };
    const effect = new SideEffect(this, lease, askedAt, { identity, dbNowMs: db_now_ms, readAt });
    effect._startHeartbeat();
    try {
      await body(effect);
    } finally {
      await effect._stopHeartbeat();
    }
    if (!effect._completion) {
      throw new Error("the body recorded no outcome (writeReceipt or record): nothing was completed");
    }
    const done = effect._completed ?? (await this._completeRetrying(effect.lease, effect._completion));
    return { dispatchId, result: done.result, state: done.state, evidenceDigest: effect._completion.evidenceDigest };
  }

  async _completeRetrying(lease, completion) {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.complete(lease, completion);
      } catch (err) {
        // A lost reply to complete may be retried: an exact replay is idempotent.
        if (serverAnswered(err) || err instanceof ProtocolError || attempt >= this.completeAttempts) throw err;
      }
    }
  }
}

const defaultMutationId = (lease) => `c-${lease.token}`;
// The run's way past the barrier, in one statement (one round trip, one commit): the lease,
// the start barrier and the identity the receipt is signed with, each call LATERAL to the one
// before it. A refusal by any raises and leaves nothing written.
const LEASE_START = `SELECT s.*, i.schema_version, i.approval_request_id, i.project_id, i.action_type,
       i.action_digest, i.idempotency_key, i.db_now_ms
FROM resolver_execution_lease($1, $2, $3) AS l
CROSS JOIN LATERAL resolver_execution_start(l.dispatch_id, l.owner, l.token, l.version, $3) AS s
CROSS JOIN LATERAL resolver_receipt_identity(s.dispatch_id, s.owner, s.token, s.version) AS i`;
const COMPLETE = "SELECT * FROM resolver_execution_complete($1, $2, $3, $4, $5, $6, $7, $8)";
const completeArgs = (lease, completion) => [...fence(lease), ...completionArgs(lease, completion)];

// The completion's own arguments, after the fence: resolver_execution_complete's, and the
// completion's in the receipt's write that completes too (RECEIPT_WRITE_COMPLETE).
const completionArgs = (lease, { outcome, resultCode, mutationId, evidenceDigest = null }) => [
  outcome,
  resultCode,
  mutationId ?? defaultMutationId(lease),
  evidenceDigest,
];

/** What `Executor.run`'s body gets: the cancellation signal, the lease, the one transaction. */
export class SideEffect {
  #executor;
  #controller = new AbortController();
  #deadline;
  #timer = null;
  #inflight = null;
  #stopped = false;
  #transactionUsed = false;
  #receipt = null;
  #signing;
  #completing = false;
  #completedByWrite = null;

  constructor(executor, lease, grantedAt, signing) {
    this.#executor = executor;
    this.lease = lease;
    // The receipt's identity as the barrier's statement read it, and the database clock then:
    // the receipt is signed with them, finished at that clock plus the time passed here.
    this.#signing = signing;
    // Taken before the call that granted the lease: the real expiry is never earlier.
    this.#deadline = grantedAt + executor.leaseMs;
    this._completion = null;
    this._completed = null;
  }

  /** Aborted when the lease is lost; its `reason` is the LeaseLost/FenceConflict. */
  get signal() {
    return this.#controller.signal;
  }

  /** Throws the loss reason if the lease is lost: call it between steps of a long effect. */
  throwIfCancelled() {
    this.#controller.signal.throwIfAborted();
  }

  /** Milliseconds left of the lease on this host's monotonic clock (a lower bound). */
  remainingMs() {
    return this.#deadline - now();
  }

  /** The outcome to complete with, for an effect whose evidence lives elsewhere. */
  record(outcome, resultCode, { evidenceDigest = null, mutationId } = {}) {
    this._completion = { outcome, resultCode, evidenceDigest, mutationId: mutationId ?? defaultMutationId(this.lease) };
  }

  /**
   * The mutation's transaction on `client` (or a pool client): the heartbeat stops first,
   * `fn(client)` runs the mutation and calls `writeReceipt`, then COMMIT. A lost COMMIT reply
   * is judged by re-reading the receipt: `MutationNotCommitted` or `CommitUnknown` otherwise.
   * With `complete: true` the execution completes in this transaction before the COMMIT: the
   * terminal state commits with the mutation and its receipt, or nothing does (no crash can
   * fall between them, and the action pays one transaction fewer).
   */
  async transaction(fn, { client, complete = false } = {}) {
    if (this.#transactionUsed) throw new Error("one side effect has one receipt transaction");
    this.#transactionUsed = true;
    await this._stopHeartbeat();
    this.throwIfCancelled();
    await this.#refreshBeforeTransaction();
    const own = !client;
    const conn = client ?? (await this.#executor.pool.connect());
    const swallow = () => {}; // a lost connection is judged below, not an unhandled event
    conn.on("error", swallow);
    let broken = false;
    try {
      await call(conn, "BEGIN");
      let value;
      let completed = null;
      // With `complete`, writeReceipt completes in its own statement and keeps the answer.
      this.#completing = complete;
      try {
        value = await fn(conn);
        if (!this.#receipt) throw new Error("writeReceipt was not called: the mutation was rolled back");
        if (complete) completed = this.#completedByWrite;
      } catch (err) {
        await conn.query("ROLLBACK").catch(() => {});
        throw protocolError(err) ?? err;
      } finally {
        this.#completing = false;
      }
      try {
        await conn.query("COMMIT");
      } catch (err) {
        // The server refused the COMMIT: it rolled back. A deferred check answers here, e.g.
        // RS002 when the lease ended after writeReceipt; it is typed like any other refusal.
        if (serverAnswered(err)) throw this.#refusedCommit(err);
        broken = true;
        if (own) conn.release(true);
        await this.#judgeLostCommit();
      }
      this._completed = completed;
      return value;
    } finally {
      conn.removeListener("error", swallow);
      if (own && !broken) conn.release();
    }
  }

  /** Sign receipt v1 and write it in `client`'s open transaction; returns its evidence digest. */
  async writeReceipt(client, { outcome, resultCode, receiptId }) {
    const key = this.#executor.key;
    if (!key) throw new ReceiptError("the Executor has no receipt key", "unknown_kid");
    const prepared = this.#executor.prepared;
    // The identity as the barrier's statement read it: no read in the mutation's transaction,
    // and the write below checks every field against the execution.
    const { identity, dbNowMs, readAt } = this.#signing;
    const finishedAtMs = exactInteger(dbNowMs, "finished_at_ms") + BigInt(Math.max(0, Math.floor(now() - readAt)));
    const signed = signReceipt({ identity, outcome, resultCode, finishedAtMs, receiptId, key });
    // The write names its own transaction: a lost COMMIT reply is judged by it (no lookup).
    let written;
    if (this.#completing) {
      // Completing in this transaction: the completion with the receipt's digest runs in the
      // write's own statement, fenced on the same lease.
      const completing = completionArgs(this.lease, { outcome, resultCode, evidenceDigest: signed.evidenceDigest });
      try {
        written = await call(client, RECEIPT_WRITE_COMPLETE, [...fence(this.lease), signed.json, ...completing], prepared);
      } catch (err) {
        if (err instanceof FenceConflict) this.#lose(err);
        throw err;
      }
      this.#completedByWrite = { dispatch_id: written.dispatch_id, result: written.result, state: written.state, version: written.version };
    } else {
      written = await call(client, RECEIPT_WRITE, [...fence(this.lease), signed.json], prepared);
    }
    this.#receipt = { ...signed, xactId: written.xact_id };
    this.record(outcome, resultCode, { evidenceDigest: signed.evidenceDigest });
    return signed.evidenceDigest;
  }

  /**
   * Sign receipt v1 and publish it to object storage (a side effect outside PostgreSQL) with
   * a conditional PUT that refuses to overwrite; the run completes with its digest. The
   * heartbeat stops, the lease is renewed once, the identity is read fenced on it (a lost
   * lease publishes nothing), and the PUT leaves only while the lease surely outlasts it.
   */
  /**
   * The dispatch's identity, read under the live lease (a lost fence throws and cancels):
   * what a binding token is signed over (`idempotencyBinding`, `gitCommitTrailer`, ...).
   */
  async identity() {
    this.throwIfCancelled();
    try {
      return await call(this.#executor.pool, "SELECT * FROM resolver_receipt_identity($1, $2, $3, $4)", fence(this.lease));
    } catch (err) {
      if (err instanceof FenceConflict || err instanceof NotFound) this.#lose(err);
      throw err;
    }
  }

  async publishReceipt(publisher, { outcome, resultCode, receiptId }) {
    const key = this.#executor.key;
    if (!key) throw new ReceiptError("the Executor has no receipt key", "unknown_kid");
    if (!(publisher instanceof ReceiptPublisher)) throw new TypeError("publishReceipt needs a ReceiptPublisher");
    if (this.#transactionUsed) throw new Error("one side effect has one receipt");
    this.#transactionUsed = true;
    await this._stopHeartbeat();
    this.throwIfCancelled();
    let identity;
    try {
      await this.#renew();
      identity = await call(this.#executor.pool, "SELECT * FROM resolver_receipt_identity($1, $2, $3, $4)", fence(this.lease));
    } catch (err) {
      if (err instanceof FenceConflict || err instanceof NotFound) this.#lose(err);
      throw err;
    }
    const signed = signReceipt({ identity, outcome, resultCode, finishedAtMs: identity.db_now_ms, receiptId, key });
    const published = await publisher.publish(publisher.keyFor(identity.project_id, identity.dispatch_id), signed.json, {
      leaseLeftMs: () => this.remainingMs(),
      leaseMs: this.#executor.leaseMs,
    });
    this.#receipt = signed;
    this.record(outcome, resultCode, { evidenceDigest: signed.evidenceDigest });
    return { ...published, evidenceDigest: signed.evidenceDigest };
  }

  // -- internals ------------------------------------------------------------------------------

  _startHeartbeat() {
    this.#schedule(this.#executor.renewIntervalMs);
  }

  async _stopHeartbeat() {
    this.#stopped = true;
    clearTimeout(this.#timer);
    if (this.#inflight) await this.#inflight;
  }

  #schedule(ms) {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#inflight = this.#beat().finally(() => {
        this.#inflight = null;
      });
    }, ms);
  }

  async #beat() {
    try {
      await this.#renew();
      this.#schedule(this.#executor.renewIntervalMs);
    } catch (err) {
      // A refusal the server answered will not heal by waiting; a lost connection may.
      if (err instanceof ProtocolError || serverAnswered(err)) return this.#lose(err);
      const remaining = this.remainingMs();
      if (remaining <= 0) return this.#lose(new LeaseLost("no renewal reached the database before the lease ran out", "RS002", { cause: err }));
      // Try again soon, but never hammer a database that is down.
      this.#schedule(Math.min(this.#executor.renewIntervalMs, Math.max(remaining / 4, 50)));
    }
  }

  async #renew() {
    const askedAt = now();
    this.lease = await this.#executor.renew(this.lease);
    this.#deadline = askedAt + this.#executor.leaseMs;
  }

  #lose(err) {
    if (!this.#controller.signal.aborted) this.#controller.abort(err);
  }

  async #refreshBeforeTransaction() {
    // With the heartbeat stopped, the transaction must fit in what is left of the lease.
    if (this.remainingMs() >= this.#executor.leaseMs / 2) return;
    try {
      await this.#renew();
    } catch (err) {
      if (err instanceof FenceConflict || err instanceof NotFound) this.#lose(err);
      throw err;
    }
  }

  #refusedCommit(err) {
    const typed = protocolError(err) ?? err;
    // Nothing was written: no receipt to complete with, and a lost fence cancels the effect.
    this.#receipt = null;
    this._completion = null;
    if (typed instanceof FenceConflict) this.#lose(typed);
    return typed;
  }

  async #judgeLostCommit() {
    let verdict = "unknown";
    let conn;
    try {
      conn = await this.#executor.pool.connect();
      verdict = await judge(conn, this.#receipt.xactId, this.lease.dispatch_id, this.#receipt.sig, Math.max(5_000, this.remainingMs()));
    } catch {
      verdict = "unknown";
    } finally {
      conn?.release();
    }
    if (verdict === "not_committed") {
      this._completion = null;
      throw new MutationNotCommitted("the COMMIT reply was lost and the receipt is absent: the mutation rolled back");
    }
    if (verdict === "unknown") {
      this._completion = null;
      throw new CommitUnknown(
        "the COMMIT reply was lost and the receipt could not be re-read: do not repeat the side effect; recovery settles it",
      );
    }
  }
}

// The receipt's write answers the id of its transaction (64 bits, never reused, and the same
// behind a transaction pooler): what a lost COMMIT reply is judged by.
const RECEIPT_WRITE =
  "SELECT *, pg_current_xact_id()::text AS xact_id FROM resolver_receipt_write($1, $2, $3, $4, $5::jsonb)";
// The receipt's write and the completion with its digest in one statement, for a transaction
// that completes: the completion LATERAL to the write, fenced on the same lease.
const RECEIPT_WRITE_COMPLETE = `SELECT w.dispatch_id, pg_current_xact_id()::text AS xact_id, c.result, c.state, c.version
FROM resolver_receipt_write($1, $2, $3, $4, $5::jsonb) AS w
CROSS JOIN LATERAL resolver_execution_complete(w.dispatch_id, $2, $3, $4, $6, $7, $8, $9) AS c`;
// A backend shows the low 32 bits of its transaction id; while the 64-bit one is in progress
// no other transaction in progress has the same low bits.
const TERMINATE =
  "SELECT pg_terminate_backend(pid) FROM pg_stat_activity " +
  "WHERE backend_xid::text = ($1::text::bigint % 4294967296)::text AND pg_xact_status($1::text::xid8) = 'in progress'";
const STATUS = "SELECT pg_xact_status($1::text::xid8) AS status";

/**
 * Whether the lost COMMIT of transaction `xactId` committed: end the backend still running
 * it (it could still commit while we look), wait it out, then look for the receipt with this
 * run's signature.
 */
async function judge(conn, xactId, dispatchId, sig, timeoutMs) {
  try {
    await conn.query(TERMINATE, [xactId]);
  } catch (err) {
    if (err.code !== "42501") throw err; // another role's session: wait for it instead
  }
  const deadline = now() + timeoutMs;
  while ((await conn.query(STATUS, [xactId])).rows[0]?.status === "in progress") {
    if (now() >= deadline) return "unknown";
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const row = (await conn.query("SELECT receipt->>'sig' AS sig FROM action_receipts WHERE dispatch_id = $1", [dispatchId])).rows[0];
  return row?.sig === sig ? "committed" : "not_committed";
}

// -- receipts in object storage -----------------------------------------------------------------
//
// For side effects outside PostgreSQL: receipt v1 as an object under a key derived from the
// dispatch's identity, `{prefix}{project_id}/{dispatch_id}.receipt.json`, PUT once with
// `If-None-Match: *`. The client is the user's `S3Client` from `@aws-sdk/client-s3` (an
// optional peer dependency: only executors that publish install it), so credentials come from
// its standard chain (IRSA / workload identity included) and SigV4 is AWS's own.

/** The receipt could not be published; the subclass says what the store answered. */
export class PublicationError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}
/** The store holds a different object under this dispatch's key: nothing was written. */
export class ReceiptAlreadyPublished extends PublicationError {}
/** The store refused the PUT (or never got it) and nothing was written. */
export class PublicationFailed extends PublicationError {}
/** A PUT may have landed and nothing later told: never repeat the effect; recovery settles it. */
export class PublicationUnknown extends PublicationError {}

const PREFIX = /^(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\/){0,8}$/;
const RETRY_NAMES = new Set(["SlowDown", "Throttling", "ConditionalRequestConflict", "RequestTimeout"]);
const BACKOFF_MS = [50, 100, 200, 400, 800];
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

// Marks the moment the command's request reaches the HTTP handler: the innermost middleware
// of the last step, after serialization, endpoint resolution and signing. Every failure
// before it (a missing region or credentials) sent nothing.
function markHandedOver(command) {
  const handedOver = { value: false };
  command.middlewareStack.add(
    (next) => async (args) => {
      handedOver.value = true;
      return next(args);
    },
    { step: "deserialize", priority: "low", name: "receiptRequestHandedOver" },
  );
  return handedOver;
}

/** Where the receipt of `dispatchId` (in `projectId`) lives in the bucket. */
export const receiptKey = (prefix, projectId, dispatchId) => `${prefix}${projectId}/${dispatchId}.receipt.json`;

/**
 * Publishes receipt objects. `client`: an `S3Client` built with `maxAttempts: 1` (the
 * publisher retries itself, only while the lease allows). `requestTimeoutMs` bounds one whole
 * PUT; `marginMs` is what must be left of the lease beyond it (default: a quarter of the lease).
 */
export class ReceiptPublisher {
  #client;
  #sdk = null;

  constructor({ client, bucket, prefix = "receipts/", requestTimeoutMs = 5_000, marginMs = null, sleep }) {
    if (!client || typeof client.send !== "function") throw new TypeError("ReceiptPublisher needs an S3Client");
    if (typeof bucket !== "string" || !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
      throw new TypeError("bucket must be an S3 bucket name");
    }
    if (typeof prefix !== "string" || !PREFIX.test(prefix)) throw new TypeError("prefix must be path segments each ending with '/'");
    if (!(requestTimeoutMs > 0)) throw new RangeError("requestTimeoutMs must be positive");
    if (marginMs !== null && !(marginMs >= 0)) throw new RangeError("marginMs must not be negative");
    this.#client = client;
    this.bucket = bucket;
    this.prefix = prefix;
    this.requestTimeoutMs = requestTimeoutMs;
    this.marginMs = marginMs;
    this.sleep = sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  keyFor(projectId, dispatchId) {
    return receiptKey(this.prefix, projectId, dispatchId);
  }

  /** PUT `body` at `key` unless it exists; `leaseLeftMs()` is the lease's sure remainder. */
  async publish(key, body, { leaseLeftMs, leaseMs }) {
    const sdk = await this.#load();
    const attempts = await this.#client.config.maxAttempts?.();
    if (attempts !== undefined && attempts !== 1) {
      throw new TypeError("build the S3Client with maxAttempts: 1: a retry must not outlive the lease");
    }
    const margin = this.marginMs ?? leaseMs / 4;
    const bytes = Buffer.from(body, "utf8");
    const evidenceDigest = sha256Hex(bytes);
    let maybeLanded = false;
    for (let attempt = 0; attempt <= BACKOFF_MS.length; attempt += 1) {
      if (attempt > 0) await this.sleep(BACKOFF_MS[attempt - 1]);
      if (leaseLeftMs() < this.requestTimeoutMs + margin) {
        // The fence: no PUT leaves once it could land after the lease ran out.
        if (maybeLanded) throw new PublicationUnknown("a PUT of the receipt may have landed and the lease leaves no time to ask again");
        throw new LeaseLost("too little of the lease is left to publish the receipt before it runs out: nothing was published", "RS002");
      }
      const put = new sdk.PutObjectCommand({ Bucket: this.bucket, Key: key, Body: bytes, IfNoneMatch: "*", ContentType: "application/json" });
      const handedOver = markHandedOver(put);
      try {
        const reply = await this.#client.send(put, { abortSignal: AbortSignal.timeout(this.requestTimeoutMs) });
        return { key, etag: reply.ETag, versionId: reply.VersionId ?? null, evidenceDigest };
      } catch (err) {
        const status = err?.$metadata?.httpStatusCode ?? 0;
        if (status === 412) {
          if (maybeLanded && (await this.#storedEquals(sdk, key, bytes))) return { key, etag: null, versionId: null, evidenceDigest };
          throw new ReceiptAlreadyPublished(`a receipt is already published at ${key}: the store refused to overwrite it`, { cause: err });
        }
        if (status === 0 && !handedOver.value) {
          // The client failed before its HTTP handler had the request (no region, no
          // credentials, a bad endpoint): nothing left, nothing can land, and trying again
          // will not help. Only a request the handler had may have reached the store.
          throw new PublicationFailed(`the receipt's PUT was never sent: ${err?.message ?? err}`, { cause: err });
        }
        if (status === 0) {
          // No answer to a request the handler had: refused on connecting, or sent and
          // unanswered (it may have landed).
          if (!NOT_SENT.has(err?.code)) maybeLanded = true;
          continue;
        }
        if (RETRY_NAMES.has(err?.name) || status >= 500 || status === 429) continue;
        throw new PublicationFailed(`the store refused the receipt's PUT: HTTP ${status} ${err?.name ?? ""}`.trim(), { cause: err });
      }
    }
    if (maybeLanded) throw new PublicationUnknown("the store did not confirm the receipt's PUT");
    throw new PublicationFailed("the store kept refusing the receipt's PUT (throttled or down)");
  }

  async #storedEquals(sdk, key, bytes) {
    try {
      const reply = await this.#client.send(new sdk.GetObjectCommand({ Bucket: this.bucket, Key: key }), {
        abortSignal: AbortSignal.timeout(this.requestTimeoutMs),
      });
      return Buffer.from(await reply.Body.transformToByteArray()).equals(bytes);
    } catch {
      return false;
    }
  }

  async #load() {
    if (!this.#sdk) {
      try {
        this.#sdk = await import("@aws-sdk/client-s3");
      } catch (err) {
        throw new PublicationFailed("publishing to object storage needs @aws-sdk/client-s3: npm install @aws-sdk/client-s3", { cause: err });
      }
    }
    return this.#sdk;
  }
}

// -- the outcome feed (docs/outcomes.md) ------------------------------------------------------

/** The channel a settling commit notifies (resolver_outcomes_notify() in the schema). */
export const OUTCOME_CHANNEL = "resolver_outcomes";
export const OUTCOME_EVENT_SOURCE = "urn:approved-action-resolver:outcomes";
export const OUTCOME_EVENT_TYPE_PREFIX = "approved-action-resolver.outcome.";
const TERMINAL = new Set(["succeeded", "failed", "blocked"]);
const cursorXid = (cursor) => BigInt(cursor.split(":")[0] || "0");
// How often a LISTEN session renews its registration, which lasts a minute
// (resolver_outcome_listen): settling commits notify only while one is registered.
const LISTEN_RENEW_MS = 20_000;

/** A dispatch was not settled within the wait; `status` is the last one read. */
export class OutcomeTimeout extends Error {
  constructor(message, status) {
    super(message);
    this.name = "OutcomeTimeout";
    this.status = status;
  }
}

/** A feed record as a CloudEvents 1.0 event (structured JSON): forward it unchanged. */
export function toCloudEvent(record, source = OUTCOME_EVENT_SOURCE) {
  return {
    specversion: "1.0",
    id: record.cursor,
    source,
    type: OUTCOME_EVENT_TYPE_PREFIX + record.kind,
    subject: record.dispatch_id,
    time: new Date(Number(record.occurred_at_ms)).toISOString(),
    datacontenttype: "application/json",
    data: record,
  };
}

const abortable = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });

/**
 * The runtime's side of the outcome feed, over a pg.Pool. `wake: "listen"` (the default) keeps
 * one client of its own LISTENing while it waits; `"poll"` reads again after a pause that
 * doubles from `pollMinMs` to `pollMaxMs` (behind PgBouncer in transaction mode, where LISTEN
 * cannot work). Delivery is at least once: de-duplicate by `cursor`.
 */
export class OutcomeFeed {
  constructor({ pool, wake = "listen", pollMinMs = 50, pollMaxMs = 2_000, listenFallbackMs = 10_000 }) {
    if (!pool) throw new TypeError("OutcomeFeed needs a pg.Pool");
    if (wake !== "listen" && wake !== "poll") throw new RangeError('wake must be "listen" or "poll"');
    if (!(pollMinMs > 0 && pollMinMs <= pollMaxMs)) throw new RangeError("pollMinMs must be positive and at most pollMaxMs");
    this.pool = pool;
    this.wake = wake;
    this.pollMinMs = pollMinMs;
    this.pollMaxMs = pollMaxMs;
    this.listenFallbackMs = listenFallbackMs;
  }

  async #rows(text, values) {
    try {
      return (await this.pool.query(text, values)).rows;
    } catch (err) {
      throw protocolError(err) ?? err;
    }
  }

  /** Up to `limit` (1-1000) records after `cursor` (null: the beginning), in feed order. */
  read(cursor = null, { limit = 100, projectId = null } = {}) {
    return this.#rows("SELECT * FROM resolver_outcomes_after($1, $2, $3)", [cursor, limit, projectId]);
  }

  async cursorNow() {
    return (await this.#rows("SELECT resolver_outcome_cursor_now() AS cursor"))[0].cursor;
  }

  async consumerCursor(consumer) {
    return (await this.#rows("SELECT resolver_outcome_consumer_cursor($1) AS cursor", [consumer]))[0].cursor;
  }

  /** Store a consumer's cursor after handling (it never moves back); answers the stored one. */
  async saveCursor(consumer, cursor) {
    return (await this.#rows("SELECT resolver_outcome_consumer_save($1, $2) AS cursor", [consumer, cursor]))[0].cursor;
  }

  async dropConsumer(consumer) {
    return (await this.#rows("SELECT resolver_outcome_consumer_drop($1) AS dropped", [consumer]))[0].dropped;
  }

  /** One dispatch now, or null. `state` is effective on the database clock. */
  async status(dispatchId) {
    return (await this.#rows("SELECT * FROM resolver_dispatch_status($1)", [dispatchId]))[0] ?? null;
  }

  history(dispatchId) {
    return this.#rows("SELECT * FROM resolver_dispatch_history($1)", [dispatchId]);
  }

  /**
   * A waiter: LISTEN before the first read (a commit in between still wakes it), or a pause
   * that doubles while nothing arrives. A notification names the transaction that committed;
   * its records are readable once the horizon has passed that id, and a transaction that took
   * its id earlier and still runs holds them back past the notification (nobody notifies when
   * it ends). So a feed reader woken too early (`horizon`) polls, still woken by notifications,
   * until a read began with the horizon past every id it was told about.
   */
  async #pacer(signal, { horizon = false } = {}) {
    let pause = this.pollMinMs;
    let behind = null; // the highest notified id whose records may still be held back
    const read = async (reading) => {
      let before = null;
      if (behind !== null) before = cursorXid(await this.cursorNow());
      const records = await reading();
      if (records.length > 0) pause = this.pollMinMs;
      if (before !== null && behind !== null && before > behind) behind = null;
      return records;
    };
    if (this.wake === "poll") {
      return {
        read,
        wait: async (ms) => {
          await abortable(Math.min(ms, pause), signal);
          pause = Math.min(pause * 2, this.pollMaxMs);
        },
        close: async () => {},
      };
    }
    const client = await this.pool.connect();
    // Notifications between two waits are kept (`pending`) until the next one.
    let pending = null;
    const keep = (xid) => (pending = pending === null || xid > pending ? xid : pending);
    let wake = keep;
    const onNotify = (msg) => wake(/^[0-9]+$/.test(msg.payload ?? "") ? BigInt(msg.payload) : 0n);
    client.on("notification", onNotify);
    const note = (xid) => {
      if (xid === null || !horizon) return;
      behind = behind === null || xid > behind ? xid : behind;
      pause = this.pollMinMs;
    };
    // Settling commits notify only while a listener is registered (for a minute): register,
    // then read the next id in a statement of its own. What committed before (or looked for
    // listeners before the registration committed) notified nobody and may still be held
    // back: read until the horizon reaches that id. A renewal does the same.
    let registeredAt = 0;
    const register = async () => {
      await client.query("SELECT resolver_outcome_listen()");
      registeredAt = performance.now();
      const { rows } = await client.query("SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next_xid");
      note(BigInt(rows[0].next_xid) - 1n);
    };
    try {
      await client.query(`LISTEN ${OUTCOME_CHANNEL}`);
      await register();
    } catch (err) {
      client.off("notification", onNotify);
      client.release(err);
      throw err;
    }
    // The highest id notified within `ms` (null: none, or aborted); the timer never outlives it.
    const notified = (ms) => {
      if (pending !== null) {
        const xid = pending;
        pending = null;
        return Promise.resolve(xid);
      }
      return new Promise((resolve) => {
        const done = (xid) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", aborted);
          wake = keep;
          resolve(xid);
        };
        const aborted = () => done(null);
        const timer = setTimeout(aborted, ms);
        if (signal?.aborted) return aborted();
        signal?.addEventListener("abort", aborted, { once: true });
        wake = done;
      });
    };
    return {
      read,
      wait: async (ms) => {
        if (performance.now() - registeredAt >= LISTEN_RENEW_MS) {
          await register();
          return;
        }
        if (behind === null) {
          note(await notified(Math.min(ms, this.listenFallbackMs)));
          return;
        }
        const waited = Math.min(ms, pause);
        pause = Math.min(pause * 2, this.pollMaxMs);
        note(await notified(waited));
      },
      close: async () => {
        client.off("notification", onNotify);
        try {
          await client.query("SELECT resolver_outcome_unlisten()");
          await client.query(`UNLISTEN ${OUTCOME_CHANNEL}`);
          client.release();
        } catch (err) {
          client.release(err);
        }
      },
    };
  }

  /**
   * Hand every record to `handle` from `consumer`'s stored cursor until `signal` aborts; the
   * cursor is saved after each batch was handled (at least once).
   */
  async follow(consumer, handle, { start = "beginning", signal, batch = 100, projectId = null } = {}) {
    let cursor = await this.consumerCursor(consumer);
    if (cursor === null) cursor = start === "now" ? await this.cursorNow() : "";
    const pacer = await this.#pacer(signal, { horizon: true });
    try {
      while (!signal?.aborted) {
        const records = await pacer.read(() => this.read(cursor, { limit: batch, projectId }));
        if (records.length === 0) {
          await pacer.wait(Infinity);
          continue;
        }
        for (const record of records) await handle(record);
        cursor = await this.saveCursor(consumer, records.at(-1).cursor);
      }
    } finally {
      await pacer.close();
    }
  }

  /** The dispatch's status once settled; OutcomeTimeout after `timeoutMs`, NotFound if none. */
  async waitForOutcome(dispatchId, timeoutMs, { signal } = {}) {
    const deadline = performance.now() + timeoutMs;
    const pacer = await this.#pacer(signal);
    try {
      for (;;) {
        const status = await this.status(dispatchId);
        if (status === null) throw new NotFound(`no dispatch ${dispatchId}`, "RS004");
        if (TERMINAL.has(status.state)) return status;
        const left = deadline - performance.now();
        if (left <= 0 || signal?.aborted) {
          throw new OutcomeTimeout(`dispatch ${dispatchId} is ${status.state} after ${timeoutMs} ms`, status);
        }
        await pacer.wait(left);
      }
    } finally {
      await pacer.close();
    }
  }
}
