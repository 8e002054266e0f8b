// An executor on this SDK that SIGKILLs itself before or after its side effect: a real
// crash, no finally block runs, nothing completes.
//   DATABASE_URL=... RECEIPT_KEY=kid=hex node crash-executor.mjs <dispatch_id> before|after
import pg from "pg";

import { Executor, parseKey } from "../index.js";

const [dispatchId, point] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const crash = () => process.kill(process.pid, "SIGKILL");
const executor = new Executor({ pool, owner: "node-crasher", key: parseKey(process.env.RECEIPT_KEY), leaseMs: 2000 }); // the receipt must commit under a live lease, even on a loaded machine

await executor.run(dispatchId, async (effect) => {
  if (point === "before") crash();
  await effect.transaction(async (client) => {
    await client.query("UPDATE node_sdk_accounts SET balance = balance - 10 WHERE id = $1", [dispatchId]);
    await effect.writeReceipt(client, { outcome: "succeeded", resultCode: "applied", receiptId: `ledger-${dispatchId}` });
  });
  crash();
});
