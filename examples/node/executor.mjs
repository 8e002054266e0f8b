// A Node.js executor of the approved-action resolver, on the SDK in sdk/node
// (package `approved-action-executor`; docs/executor-sdk.md).
//
// The SDK leases, crosses the start barrier, renews on a heartbeat, stops the heartbeat
// before the mutation's transaction, signs the receipt in that transaction and completes:
// this file holds no protocol logic of its own.
//
//   npm install            # the SDK and the `pg` driver
//   DATABASE_URL=postgresql://executor@db/app RECEIPT_KEY=kid=hexsecret \
//     node executor.mjs <dispatch_id>
import pg from "pg";
import { Executor, FenceConflict, parseKey, sha256Hex } from "approved-action-executor";

async function main() {
  const [dispatchId] = process.argv.slice(2);
  if (!dispatchId || !process.env.RECEIPT_KEY) {
    console.error("usage: RECEIPT_KEY=kid=hexsecret DATABASE_URL=... node executor.mjs <dispatch_id>");
    process.exit(2);
  }
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
  const executor = new Executor({ pool, owner: "node-executor", key: parseKey(process.env.RECEIPT_KEY) });
  const log = (step, value) => console.log(JSON.stringify({ step, ...value }));
  try {
    const created = await executor.createDispatch({
      dispatchId,
      approvalRequestId: `ar-${dispatchId}`,
      projectId: "proj-node",
      actionType: "node.mutation",
      actionDigest: sha256Hex(`action:${dispatchId}`),
      idempotencyKey: `idem-${dispatchId}`,
    });
    log("create", { created: created.created });

    let lease;
    const done = await executor.run(dispatchId, async (effect) => {
      // Past the start barrier: recovery is armed, the heartbeat renews the lease.
      log("start", { state: effect.lease.state, version: effect.lease.version });
      // A long side effect checks effect.signal (aborted when the lease is lost).
      effect.throwIfCancelled();
      // The mutation and its receipt commit together, or not at all.
      const digest = await effect.transaction(async (client) => {
        // ... the executor's own internal mutation goes here, on this same client ...
        return effect.writeReceipt(client, {
          outcome: "succeeded",
          resultCode: "applied",
          receiptId: `rcpt-${dispatchId}`,
        });
      });
      log("receipt", { evidence_digest: digest });
      lease = effect.lease;
    });
    log("complete", { result: done.result, state: done.state });

    // The same completion again is an exact replay; a different one is refused.
    const completion = { outcome: "succeeded", resultCode: "applied", evidenceDigest: done.evidenceDigest };
    const again = await executor.complete(lease, completion);
    log("replay", { result: again.result });
    try {
      await executor.complete(lease, { outcome: "failed", resultCode: "declined" });
    } catch (err) {
      if (!(err instanceof FenceConflict)) throw err;
      log("drift", { refused: err.name, sqlstate: err.sqlstate });
    }
  } finally {
    await pool.end();
  }
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});
