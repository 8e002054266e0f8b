// The Node.js executor SDK against real PostgreSQL and a real `resolver run`.
//
//   DATABASE_URL      a migrated database (required; without it every test is skipped)
//   RESOLVER_PYTHON   a Python with the resolver installed (for the crash tests)
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import pg from "pg";

import {
  Executor,
  FenceConflict,
  InvalidInput,
  LeaseLost,
  MutationNotCommitted,
  NotFound,
  NotLeasable,
  ProtocolError,
  SQLSTATE_ERRORS,
  sha256Hex,
} from "../index.js";

const URL_ = process.env.DATABASE_URL;
const PYTHON = process.env.RESOLVER_PYTHON;
const KEY = { kid: "node-sdk-k1", secretHex: "4e".repeat(32) };
const skip = URL_ ? false : "DATABASE_URL is not set";
const WAIT_MS = 20_000;

let pool;
before(async () => {
  if (skip) return;
  pool = new pg.Pool({ connectionString: URL_, max: 6 });
  await pool.query("CREATE TABLE IF NOT EXISTS node_sdk_accounts (id text PRIMARY KEY, balance int NOT NULL)");
});
after(async () => pool?.end());

let n = 0;
async function newDispatch(executor) {
  n += 1;
  const dispatchId = `node-sdk-${process.pid}-${n}-${crypto.randomBytes(3).toString("hex")}`;
  await executor.createDispatch({
    dispatchId,
    approvalRequestId: `ar-${dispatchId}`,
    projectId: "proj-node",
    actionType: "db.mutation",
    actionDigest: sha256Hex(`action:${dispatchId}`),
    idempotencyKey: `idem-${dispatchId}`,
  });
  await pool.query("INSERT INTO node_sdk_accounts VALUES ($1, 100)", [dispatchId]);
  return dispatchId;
}

const executor = (options = {}) => new Executor({ pool, owner: "node-sdk", key: KEY, ...options });
const row = async (text, values) => (await pool.query(text, values)).rows[0];
const execution = (id) => row("SELECT * FROM approved_action_executions WHERE dispatch_id = $1", [id]);
const balance = async (id) => (await row("SELECT balance FROM node_sdk_accounts WHERE id = $1", [id])).balance;
const receiptCount = async (id) =>
  Number((await row("SELECT count(*) AS n FROM action_receipts WHERE dispatch_id = $1", [id])).n);

async function charge(effect, client) {
  await client.query("UPDATE node_sdk_accounts SET balance = balance - 10 WHERE id = $1", [effect.lease.dispatch_id]);
  return effect.writeReceipt(client, { outcome: "succeeded", resultCode: "applied", receiptId: `ledger-${effect.lease.dispatch_id}` });
}

async function waitFor(condition, what) {
  const deadline = Date.now() + WAIT_MS;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test("createDispatch records what was approved, and the database refuses a secret in it", { skip }, async () => {
  const ex = executor();
  const dispatchId = `node-sdk-summary-${process.pid}-${crypto.randomBytes(3).toString("hex")}`;
  const spec = {
    dispatchId,
    approvalRequestId: `ar-${dispatchId}`,
    projectId: "proj-node",
    actionType: "pay.charge",
    actionDigest: sha256Hex(`action:${dispatchId}`),
    idempotencyKey: `idem-${dispatchId}`,
    actionSummary: { title: "Charge 2,490.00 EUR", facts: [{ label: "Amount", value: "2,490.00 EUR" }, { label: "Order", value: "ord-7781" }] },
  };
  assert.equal((await ex.createDispatch(spec)).created, true);
  assert.equal((await ex.createDispatch(spec)).created, false); // the exact re-create
  const stored = await row("SELECT action_summary FROM approved_action_dispatches WHERE dispatch_id = $1", [dispatchId]);
  assert.deepEqual(stored.action_summary, { title: "Charge 2,490.00 EUR", facts: [{ label: "Amount", value: "2,490.00 EUR" }, { label: "Order", value: "ord-7781" }] });
  const secret = { ...spec, dispatchId: `${dispatchId}-2`, idempotencyKey: `idem-${dispatchId}-2`, actionSummary: { title: "Deploy", facts: [{ label: "API key", value: "k" }] } };
  await assert.rejects(ex.createDispatch(secret), (e) => e instanceof InvalidInput && /names a secret/.test(e.message) && !/"k"/.test(e.message));
});

test("run: lease, barrier, mutation and receipt in one transaction, completion", { skip }, async () => {
  const ex = executor();
  const id = await newDispatch(ex);
  let digest;
  const result = await ex.run(id, async (effect) => {
    assert.equal(effect.lease.state, "executing");
    digest = await effect.transaction((client) => charge(effect, client));
  });
  assert.deepEqual(result, { dispatchId: id, result: "committed", state: "succeeded", evidenceDigest: digest });
  const e = await execution(id);
  assert.equal(e.state, "succeeded");
  assert.equal(e.evidence_digest, digest);
  assert.equal(await balance(id), 90);
  const control = await row("SELECT closed_by FROM approved_action_recovery_controls WHERE dispatch_id = $1", [id]);
  assert.equal(control.closed_by, "completion");
});

// The protocol functions `fn` calls in `client`'s open transaction, by name. Counted as a
// difference: a backend keeps its not yet reported counts across transactions, and a pooled
// connection may have counted before.
async function protocolCallsDuring(client, fn) {
  await client.query("SET LOCAL track_functions = 'all'");
  const counts = async () =>
    Object.fromEntries(
      (
        await client.query(
          "SELECT funcname, calls FROM pg_stat_xact_user_functions WHERE funcname IN ('resolver_receipt_identity', 'resolver_receipt_write', 'resolver_execution_complete')",
        )
      ).rows.map((r) => [r.funcname, Number(r.calls)]),
    );
  const before = await counts();
  const value = await fn();
  const after = await counts();
  const called = Object.entries(after)
    .map(([name, calls]) => [name, calls - (before[name] ?? 0)])
    .filter(([, calls]) => calls > 0);
  return [value, Object.fromEntries(called)];
}

test("run: the barrier's statement reads the receipt's identity; the mutation's transaction only writes it", { skip }, async () => {
  const ex = executor();
  const id = await newDispatch(ex);
  let called;
  await ex.run(id, (effect) =>
    effect.transaction(async (client) => {
      [, called] = await protocolCallsDuring(client, () => charge(effect, client));
    }),
  );
  assert.deepEqual(called, { resolver_receipt_write: 1 });
  const e = await execution(id);
  const { receipt } = await row("SELECT receipt FROM action_receipts WHERE dispatch_id = $1", [id]);
  // Signed at the database clock the barrier read, plus the time that passed on this host.
  assert.equal(receipt.started_at_ms, Number(e.started_at_ms));
  assert.ok(Number(e.started_at_ms) <= receipt.finished_at_ms, "finished after the barrier");
  assert.ok(receipt.finished_at_ms <= Number(e.finished_at_ms), "finished before the completion");
});

test("run with complete: true: the receipt's write completes in its own statement", { skip }, async () => {
  const ex = executor();
  const id = await newDispatch(ex);
  let called;
  let digest;
  const result = await ex.run(id, (effect) =>
    effect.transaction(
      async (client) => {
        [digest, called] = await protocolCallsDuring(client, () => charge(effect, client));
      },
      { complete: true },
    ),
  );
  // Right after writeReceipt, the completion has run: nothing but the COMMIT follows the body.
  assert.deepEqual(called, { resolver_receipt_write: 1, resolver_execution_complete: 1 });
  assert.deepEqual(result, { dispatchId: id, result: "committed", state: "succeeded", evidenceDigest: digest });
  const e = await execution(id);
  assert.equal(e.evidence_digest, digest);
  assert.equal(await balance(id), 90);
});

// Whether the receipt and the execution's last change were written by one transaction.
const oneTransaction = async (id) =>
  (await row(
    "SELECT e.xmin::text = r.xmin::text AS same FROM approved_action_executions AS e JOIN action_receipts AS r USING (dispatch_id) WHERE dispatch_id = $1",
    [id],
  )).same;

test("run with complete: true: the completion commits in the mutation's transaction", { skip }, async () => {
  const ex = executor();
  const id = await newDispatch(ex);
  let digest;
  const result = await ex.run(id, async (effect) => {
    digest = await effect.transaction((client) => charge(effect, client), { complete: true });
  });
  assert.deepEqual(result, { dispatchId: id, result: "committed", state: "succeeded", evidenceDigest: digest });
  assert.equal((await execution(id)).evidence_digest, digest);
  assert.equal(await oneTransaction(id), true);
  const control = await row("SELECT closed_by FROM approved_action_recovery_controls WHERE dispatch_id = $1", [id]);
  assert.equal(control.closed_by, "completion");
});

test("protocol calls are prepared once per connection, unless a pooler is declared", { skip }, async () => {
  // One connection, so the session that ran the calls is the one asked.
  const single = new pg.Pool({ connectionString: URL_, max: 1 });
  const named = async () =>
    Number((await single.query("SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'aae_%'")).rows[0].n);
  try {
    for (const [options, expected] of [[{ prepared: false }, 0], [{}, 4]]) {
      const ex = new Executor({ pool: single, owner: "node-sdk", key: KEY, ...options });
      for (let i = 0; i < 2; i += 1) {
        const id = await newDispatch(ex);
        await ex.run(id, (effect) => effect.transaction((client) => charge(effect, client)));
      }
      // create, the lease with the barrier and the receipt's identity (one statement), the
      // receipt's write, complete: four, each once.
      assert.equal(await named(), expected);
    }
    const saved = process.env.RESOLVER_DATABASE_POOLER;
    try {
      process.env.RESOLVER_DATABASE_POOLER = "transaction";
      assert.equal(new Executor({ pool: single, owner: "node-sdk" }).prepared, false);
      process.env.RESOLVER_DATABASE_POOLER = "pgbouncer";
      assert.throws(() => new Executor({ pool: single, owner: "node-sdk" }), /not a pooler mode/);
    } finally {
      if (saved === undefined) delete process.env.RESOLVER_DATABASE_POOLER;
      else process.env.RESOLVER_DATABASE_POOLER = saved;
    }
  } finally {
    await single.end();
  }
});

test("the heartbeat renews while the side effect runs", { skip }, async () => {
  const ex = executor({ leaseMs: 600 });
  const id = await newDispatch(ex);
  await ex.run(id, async (effect) => {
    const started = BigInt(effect.lease.version);
    // Three renewals of a 600 ms lease: well past the lease the barrier granted.
    await waitFor(async () => BigInt((await execution(id)).version) >= started + 3n, "three renewals");
    assert.equal(effect.signal.aborted, false);
    await effect.transaction((client) => charge(effect, client));
  });
  assert.equal((await execution(id)).state, "succeeded");
});

test("a lost lease aborts the signal and nothing commits", { skip }, async () => {
  const ex = executor({ leaseMs: 600 });
  const id = await newDispatch(ex);
  await assert.rejects(
    ex.run(id, async (effect) => {
      // Another process with a copy of the fence moves the row on: the next renewal is fenced out.
      await new Executor({ pool, owner: "node-sdk", leaseMs: 30_000 }).renew(effect.lease);
      await new Promise((resolve) => effect.signal.addEventListener("abort", resolve, { once: true }));
      assert.ok(effect.signal.reason instanceof FenceConflict);
      assert.equal(effect.signal.reason.sqlstate, "RS001");
      await effect.transaction((client) => charge(effect, client));
    }),
    FenceConflict,
  );
  assert.equal((await execution(id)).state, "executing");
  assert.equal(await receiptCount(id), 0);
  assert.equal(await balance(id), 100);
});

test("refusals arrive as one error class per SQLSTATE", { skip }, async () => {
  const ex = executor();
  await assert.rejects(ex.lease("node-sdk-no-such-dispatch"), (err) => err instanceof NotFound && err.sqlstate === "RS004");
  const id = await newDispatch(ex);
  const lease = await ex.lease(id);
  await assert.rejects(ex.lease(id), (err) => err instanceof NotLeasable && err.sqlstate === "RS003");
  const started = await ex.start(lease);
  await ex.complete(started, { outcome: "succeeded", resultCode: "applied", mutationId: `m-${id}` });
  const replay = await ex.complete(started, { outcome: "succeeded", resultCode: "applied", mutationId: `m-${id}` });
  assert.equal(replay.result, "replayed");
  await assert.rejects(
    ex.complete(started, { outcome: "failed", resultCode: "declined", mutationId: `m-${id}` }),
    (err) => err instanceof FenceConflict && err.sqlstate === "RS001",
  );
  await assert.rejects(
    ex.complete(started, { outcome: "blocked", resultCode: "x", mutationId: `m-${id}` }),
    (err) => err instanceof InvalidInput && err instanceof ProtocolError && err.sqlstate === "RS005",
  );
});

/** A proxy that loses the next COMMIT (`lose_commit`) or only the server's reply (`lose_reply`). */
function commitProxy() {
  const target = new URL(URL_);
  const COMMIT = Buffer.concat([Buffer.from("Q"), Buffer.from([0, 0, 0, 11]), Buffer.from("COMMIT\0")]);
  const proxy = { fault: null, fired: false, sockets: new Set() };
  // Cut the database off: every connection reset, every new one refused.
  proxy.cut = () => {
    proxy.server.close();
    for (const socket of proxy.sockets) socket.resetAndDestroy();
  };
  proxy.server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    proxy.sockets.add(client).add(upstream);
    let cut = false;
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    client.on("data", (chunk) => {
      const fault = chunk.includes(COMMIT) ? proxy.fault : null;
      if (fault) proxy.fault = null;
      if (fault === "lose_commit") {
        proxy.fired = true;
        client.resetAndDestroy();
        upstream.resetAndDestroy();
        return;
      }
      if (fault === "lose_reply") cut = true;
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (!cut) return void client.write(chunk);
      // The server answered the COMMIT: it committed. The client never hears it.
      proxy.fired = true;
      client.resetAndDestroy();
    });
  });
  return new Promise((resolve) =>
    proxy.server.listen(0, "127.0.0.1", () => {
      const url = new URL(URL_);
      url.hostname = "127.0.0.1";
      url.port = String(proxy.server.address().port);
      proxy.url = url.toString();
      resolve(proxy);
    }),
  );
}

test("a lease that ends after writeReceipt and before COMMIT is refused at COMMIT as LeaseLost", { skip }, async () => {
  const ex = executor({ leaseMs: 1_000 });
  const id = await newDispatch(ex);
  let effect;
  const refused = await ex
    .run(id, async (e) => {
      effect = e;
      await e.transaction(async (client) => {
        await charge(e, client);
        // The commit-time check reads the database clock: wait on that clock, not a timer,
        // until the lease the receipt was written under is over.
        const expires = e.lease.lease_expires_at_ms;
        await waitFor(
          async () => (await row("SELECT resolver_now_ms(NULL) > $1::bigint AS over", [expires])).over,
          "the database clock to pass the lease",
        );
      });
    })
    .then(
      () => assert.fail("the COMMIT was not refused"),
      (err) => err,
    );
  // The deferred refusal is typed like every other: not a raw driver error.
  assert.ok(refused instanceof LeaseLost, `${refused?.constructor?.name}: ${refused?.message}`);
  assert.ok(refused instanceof FenceConflict && refused instanceof ProtocolError);
  assert.equal(refused.sqlstate, "RS002");
  assert.ok(refused.cause instanceof pg.DatabaseError);
  assert.equal(effect.signal.reason, refused); // the effect is told its lease is gone
  // Rolled back whole: no mutation, no receipt, nothing completed.
  assert.equal(await balance(id), 100);
  assert.equal(await receiptCount(id), 0);
  assert.equal((await execution(id)).state, "executing");
});

test("a refusal inside the transaction body arrives typed", { skip }, async () => {
  const ex = executor();
  const id = await newDispatch(ex);
  const refused = await ex
    .run(id, (e) =>
      e.transaction(async (client) => {
        // A hand-written write to a protocol table: the state machine refuses it (RS006).
        await client.query("UPDATE approved_action_executions SET state = 'leased', version = version + 1 WHERE dispatch_id = $1", [id]);
      }),
    )
    .then(
      () => assert.fail("the write was not refused"),
      (err) => err,
    );
  assert.ok(refused instanceof ProtocolError, `${refused?.constructor?.name}: ${refused?.message}`);
  assert.equal(refused.sqlstate, "RS006");
  assert.equal(refused.constructor, SQLSTATE_ERRORS.RS006);
  assert.equal(await balance(id), 100);
});

for (const complete of [false, true]) {
  test(`a lost COMMIT reply is settled by re-reading the receipt, never repeated (complete: ${complete})`, { skip }, async () => {
    const proxy = await commitProxy();
    const proxied = new pg.Pool({ connectionString: proxy.url, max: 4 });
    try {
      const ex = new Executor({ pool: proxied, owner: "node-sdk", key: KEY });
      const id = await newDispatch(ex);
      let runs = 0;
      const result = await ex.run(id, async (effect) => {
        proxy.fault = "lose_reply";
        await effect.transaction(
          (client) => {
            runs += 1;
            return charge(effect, client);
          },
          { complete },
        );
      });
      assert.equal(proxy.fired, true);
      assert.equal(runs, 1);
      assert.equal(result.result, "committed");
      assert.equal(await balance(id), 90);
      assert.equal((await execution(id)).evidence_digest, result.evidenceDigest);
      // Completed in the mutation's transaction, or by a call of its own after it.
      assert.equal(await oneTransaction(id), complete);
    } finally {
      await proxied.end();
      proxy.server.close();
    }
  });
}

test("a COMMIT lost before the server is reported as not committed", { skip }, async () => {
  const proxy = await commitProxy();
  const proxied = new pg.Pool({ connectionString: proxy.url, max: 4 });
  try {
    const ex = new Executor({ pool: proxied, owner: "node-sdk", key: KEY });
    const id = await newDispatch(ex);
    await assert.rejects(
      ex.run(id, async (effect) => {
        proxy.fault = "lose_commit";
        await effect.transaction((client) => charge(effect, client));
      }),
      MutationNotCommitted,
    );
    assert.equal(proxy.fired, true);
    assert.equal(await balance(id), 100);
    assert.equal(await receiptCount(id), 0);
    assert.equal((await execution(id)).state, "executing"); // never completed, never repeated
  } finally {
    await proxied.end();
    proxy.server.close();
  }
});

test("renewals that never reach the database abort the signal before the lease ends", { skip }, async () => {
  const proxy = await commitProxy();
  const proxied = new pg.Pool({ connectionString: proxy.url, max: 4, connectionTimeoutMillis: 1000 });
  proxied.on("error", () => {}); // idle clients reset by the cut
  try {
    const ex = new Executor({ pool: proxied, owner: "node-sdk", key: KEY, leaseMs: 600 });
    const id = await newDispatch(executor());
    await assert.rejects(
      ex.run(id, async (effect) => {
        proxy.cut();
        await new Promise((resolve) => effect.signal.addEventListener("abort", resolve, { once: true }));
        assert.ok(effect.signal.reason instanceof LeaseLost);
        assert.match(effect.signal.reason.message, /no renewal reached the database/);
        await effect.transaction((client) => charge(effect, client));
      }),
      LeaseLost,
    );
    assert.equal((await execution(id)).state, "executing");
    assert.equal(await receiptCount(id), 0);
  } finally {
    await proxied.end();
  }
});

// -- crashes settled by a real `resolver run --once` -------------------------------------------

const crashSkip = skip || (PYTHON ? false : "RESOLVER_PYTHON is not set");
const CRASHER = fileURLToPath(new URL("./crash-executor.mjs", import.meta.url));

function crash(id, point) {
  const done = spawnSync(process.execPath, [CRASHER, id, point], {
    env: { ...process.env, RECEIPT_KEY: `${KEY.kid}=${KEY.secretHex}` },
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(done.signal, "SIGKILL", done.stderr);
}

function resolverRunOnce() {
  const dir = mkdtempSync(join(tmpdir(), "node-sdk-"));
  writeFileSync(join(dir, "providers.yaml"), "action_types:\n  db.mutation: {provider: internal_mutation}\n");
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RESOLVER_")));
  const done = spawnSync(PYTHON, ["-m", "resolver", "run", "--once"], {
    env: {
      ...env,
      RESOLVER_DATABASE_URL: URL_,
      RESOLVER_CONFIG: join(dir, "providers.yaml"),
      RESOLVER_RECEIPT_KEYS: `${KEY.kid}=${KEY.secretHex}`,
    },
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(done.status, 0, done.stderr);
}

const leaseExpired = async (id) =>
  (await row("SELECT lease_expires_at_ms <= resolver_now_ms(NULL) AS expired FROM approved_action_executions WHERE dispatch_id = $1", [id]))
    .expired;

test("a crash after the side effect is settled succeeded from its receipt", { skip: crashSkip }, async () => {
  const id = await newDispatch(executor());
  crash(id, "after");
  const { receipt } = await row("SELECT receipt::text AS receipt FROM action_receipts WHERE dispatch_id = $1", [id]);
  await waitFor(() => leaseExpired(id), "the crashed executor's lease to end");
  resolverRunOnce();
  const e = await execution(id);
  assert.equal(e.state, "succeeded");
  const resolution = await row("SELECT source, evidence_digest FROM approved_action_recovery_resolutions WHERE dispatch_id = $1", [id]);
  assert.equal(resolution.source, "automatic");
  assert.equal(resolution.evidence_digest, e.evidence_digest);
  assert.ok(receipt.includes(`"dispatch_id": "${id}"`));
  assert.equal(await balance(id), 90);
});

test("a crash before the side effect never succeeds", { skip: crashSkip }, async () => {
  const id = await newDispatch(executor());
  crash(id, "before");
  await waitFor(() => leaseExpired(id), "the crashed executor's lease to end");
  resolverRunOnce();
  assert.equal((await execution(id)).state, "executing");
  const control = await row("SELECT last_finding FROM approved_action_recovery_controls WHERE dispatch_id = $1", [id]);
  assert.equal(control.last_finding, "missing");
  assert.equal(await balance(id), 100);
});
