// One Node.js executor of `python -m benchmarks.executor_path`: approved actions one after
// another through the Node SDK exactly as docs/executor-sdk.md shows it (a pg.Pool, an
// Executor, createDispatch, then run with the mutation, its receipt and the completion in
// effect.transaction(..., { complete: true })), each call timed.
//
//   node executor.mjs PREFIX COUNT STATS     (DATABASE_URL, RECEIPT_KEY in the environment)
//
// Prints `ready` once connected, starts on a line on stdin, prints `done` after COUNT
// actions, and writes its figures as JSON to STATS on SIGTERM (benchmarks/executor_loop.py's
// protocol). The harness copies sdk/node beside this file's node_modules before it runs.
import fs from "node:fs";
import readline from "node:readline";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { Executor, parseKey, sha256Hex } from "approved-action-executor";

const OWNER = "bench-executor";
const ACCOUNTS = 10_000;
const [prefix, countText, statsPath] = process.argv.slice(2);
const count = Number(countText);

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const executor = new Executor({ pool, owner: OWNER, key: parseKey(process.env.RECEIPT_KEY) });
const latency = {};
const since = (name, started) => (latency[name] ??= []).push(performance.now() - started);

async function action(n) {
  const dispatchId = `${prefix}${String(n).padStart(9, "0")}`;
  const account = (n * 7919) % ACCOUNTS;
  let started = performance.now();
  await executor.createDispatch({
    dispatchId,
    approvalRequestId: `ar-${dispatchId}`,
    projectId: `proj-${account % 32}`,
    actionType: "bench.mutation",
    actionDigest: sha256Hex(`action:${dispatchId}`),
    idempotencyKey: `idem-${dispatchId}`,
  });
  since("create", started);
  started = performance.now();
  await executor.run(dispatchId, async (effect) => {
    since("lease+start", started);
    effect.throwIfCancelled();
    const mutation = performance.now();
    await effect.transaction(
      async (client) => {
        await client.query("UPDATE bench_accounts SET balance = balance - 1 WHERE id = $1", [account]);
        await effect.writeReceipt(client, { outcome: "succeeded", resultCode: "applied", receiptId: `r-${dispatchId}` });
      },
      { complete: true },
    );
    since("mutation+complete", mutation);
  });
}

async function main() {
  let startedAt = 0;
  let finishedAt = 0;
  // Handled from the start: the harness may send SIGTERM as soon as it read `done`, before
  // this process ran another line after writing it (a loaded host), and without a handler
  // SIGTERM ends Node before it wrote its figures.
  process.on("SIGTERM", async () => {
    await pool.end();
    const rss = fs.readFileSync("/proc/self/status", "utf8").match(/^VmHWM:\s+(\d+)/m);
    fs.writeFileSync(
      statsPath,
      JSON.stringify({ actions: count, started_at: startedAt, finished_at: finishedAt, latency_ms: latency, peak_rss_kb: rss ? Number(rss[1]) : 0 }),
    );
    process.exit(0);
  });
  await (await pool.connect()).release(); // connected before `ready`, as the other loops
  const lines = readline.createInterface({ input: process.stdin });
  const go = new Promise((resolve) => lines.once("line", resolve));
  process.stdout.write("ready\n");
  await go;
  startedAt = Date.now() / 1000;
  for (let n = 0; n < count; n += 1) await action(n);
  finishedAt = Date.now() / 1000;
  process.stdout.write("done\n");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
