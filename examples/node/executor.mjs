// A Node.js executor of the approved-action resolver's executor protocol.
//
// Every transition is one call of a `resolver_*` SQL function (docs/executor-protocol.md);
// the fences live in the database, so this file holds no protocol logic of its own: it maps
// the functions' SQLSTATEs onto error classes and decides what to do about each.
//
//   npm install            # the `pg` driver
//   DATABASE_URL=postgresql://resolver_executor@db/app RECEIPT_KEY=kid=hexsecret \
//     node executor.mjs <dispatch_id>
import crypto from "node:crypto";
import pg from "pg";

/** One class per refusal; decide by class (SQLSTATE), never by message text. */
export class ProtocolError extends Error {
  constructor(sqlstate, message) {
    super(message);
    this.sqlstate = sqlstate;
    this.name = ProtocolError.NAMES[sqlstate] ?? "ProtocolError";
  }
}
ProtocolError.NAMES = {
  RS001: "FenceConflict", // the row moved on, or a completion drifts: stop, report, never retry
  RS002: "LeaseLost", // expired or taken over before the barrier: never start the side effect
  RS003: "NotLeasable", // leased by someone alive, or past the barrier: leave it alone
  RS004: "NotFound", // no such dispatch / execution: a bug in the caller
  RS005: "InvalidInput", // a malformed argument or receipt: fix the caller
  RS006: "StateMachineViolation", // a hand-written write outside the protocol
};

async function one(client, text, values) {
  try {
    const { rows } = await client.query(text, values);
    return rows[0];
  } catch (err) {
    if (err.code in ProtocolError.NAMES) throw new ProtocolError(err.code, err.message);
    throw err; // a lost connection: the outcome is unknown, re-read before acting
  }
}

const fence = (lease) => [lease.dispatch_id, lease.owner, lease.token, lease.version];

export const createDispatch = (client, d) =>
  one(
    client,
    "SELECT * FROM resolver_dispatch_create($1, $2, $3, $4, $5, $6)",
    [d.dispatchId, d.approvalRequestId, d.projectId, d.actionType, d.actionDigest, d.idempotencyKey],
  );

export const lease = (client, dispatchId, owner, leaseMs) =>
  one(client, "SELECT * FROM resolver_execution_lease($1, $2, $3)", [dispatchId, owner, leaseMs]);

export const start = (client, l, leaseMs) =>
  one(client, "SELECT * FROM resolver_execution_start($1, $2, $3, $4, $5)", [...fence(l), leaseMs]);

export const renew = (client, l, leaseMs) =>
  one(client, "SELECT * FROM resolver_execution_renew($1, $2, $3, $4, $5)", [...fence(l), leaseMs]);

export const complete = (client, l, outcome, resultCode, mutationId, evidenceDigest = null) =>
  one(
    client,
    "SELECT * FROM resolver_execution_complete($1, $2, $3, $4, $5, $6, $7, $8)",
    [...fence(l), outcome, resultCode, mutationId, evidenceDigest],
  );

/** Receipt v1's canonical JSON: keys sorted, `,` and `:`, no whitespace, no floats. */
export const canonicalJson = (obj) =>
  "{" +
  Object.keys(obj)
    .sort()
    .map((k) => JSON.stringify(k) + ":" + JSON.stringify(obj[k]))
    .join(",") +
  "}";

const sha256 = (text) => crypto.createHash("sha256").update(text, "utf8").digest("hex");

/**
 * Signs and writes receipt v1 inside the caller's transaction (the mutation's own), fenced on
 * the lease. Returns the evidence digest to pass to `complete`, so that a completion racing a
 * resolution of the same receipt replays it exactly.
 */
export async function writeReceipt(client, l, { outcome, resultCode, receiptId, kid, secretHex }) {
  const id = await one(client, "SELECT * FROM resolver_receipt_identity($1, $2, $3, $4)", fence(l));
  const body = {
    v: 1,
    dispatch_id: id.dispatch_id,
    approval_request_id: id.approval_request_id,
    project_id: id.project_id,
    action_type: id.action_type,
    action_digest: id.action_digest,
    attempt: Number(id.attempt),
    started_at_ms: Number(id.started_at_ms), // bigint arrives as a string; ms fit a double
    idempotency_key: id.idempotency_key,
    outcome,
    result_code: resultCode,
    finished_at_ms: Number(id.db_now_ms),
    receipt_identity_digest: sha256(receiptId),
    kid,
  };
  const sig = crypto
    .createHmac("sha256", Buffer.from(secretHex, "hex"))
    .update(canonicalJson(body), "utf8")
    .digest("hex");
  const receipt = { ...body, sig };
  await one(client, "SELECT * FROM resolver_receipt_write($1, $2, $3, $4, $5)", [
    ...fence(l),
    JSON.stringify(receipt),
  ]);
  return sha256(canonicalJson(receipt));
}

async function main() {
  const [dispatchId] = process.argv.slice(2);
  const [kid, secretHex] = (process.env.RECEIPT_KEY ?? "").split("=");
  if (!dispatchId || !kid || !secretHex) {
    console.error("usage: RECEIPT_KEY=kid=hexsecret DATABASE_URL=... node executor.mjs <dispatch_id>");
    process.exit(2);
  }
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  const log = (step, value) => console.log(JSON.stringify({ step, ...value }));
  try {
    const created = await createDispatch(client, {
      dispatchId,
      approvalRequestId: `ar-${dispatchId}`,
      projectId: "proj-node",
      actionType: "node.mutation",
      actionDigest: sha256(`action:${dispatchId}`),
      idempotencyKey: `idem-${dispatchId}`,
    });
    log("create", { created: created.created });
    let l = await lease(client, dispatchId, "node-executor", 30_000);
    log("lease", { attempt: l.attempt, version: l.version });
    l = await start(client, l, 30_000); // the start barrier: from here on, recovery is armed
    log("start", { state: l.state, version: l.version });
    l = await renew(client, l, 30_000); // a long side effect renews before its lease ends
    log("renew", { version: l.version, controls_rearmed: l.controls_rearmed });

    // The side effect and its receipt commit together, or not at all.
    await client.query("BEGIN");
    let digest;
    try {
      // ... the executor's own internal mutation goes here, on this same connection ...
      digest = await writeReceipt(client, l, {
        outcome: "succeeded",
        resultCode: "applied",
        receiptId: `rcpt-${dispatchId}`,
        kid,
        secretHex,
      });
      await client.query("COMMIT");
    } catch (err) {
      await client.query("ROLLBACK");
      throw err;
    }
    log("receipt", { evidence_digest: digest });

    const done = await complete(client, l, "succeeded", "applied", `m-${dispatchId}`, digest);
    log("complete", { result: done.result, state: done.state });
    const again = await complete(client, l, "succeeded", "applied", `m-${dispatchId}`, digest);
    log("replay", { result: again.result });
    try {
      await complete(client, l, "failed", "declined", `m-${dispatchId}`);
    } catch (err) {
      if (!(err instanceof ProtocolError) || err.name !== "FenceConflict") throw err;
      log("drift", { refused: err.name, sqlstate: err.sqlstate });
    }
  } finally {
    await client.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    console.error(`${err.name}: ${err.message}`);
    process.exit(1);
  });
}
