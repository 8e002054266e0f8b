// The Node.js outcome feed against real PostgreSQL: waiting for one dispatch (LISTEN and
// polling), reading the feed in order, CloudEvents, and a consumer following from its cursor.
//
//   DATABASE_URL   a migrated database (required; without it every test is skipped)
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, test } from "node:test";
import pg from "pg";

import { Executor, NotFound, OutcomeFeed, OutcomeTimeout, sha256Hex, toCloudEvent } from "../index.js";

const URL_ = process.env.DATABASE_URL;
const skip = URL_ ? false : "DATABASE_URL is not set";

let pool;
before(() => {
  if (!skip) pool = new pg.Pool({ connectionString: URL_, max: 6 });
});
after(async () => pool?.end());

async function started(executor) {
  const id = `node-out-${crypto.randomUUID().slice(0, 12)}`;
  await executor.createDispatch({
    dispatchId: id,
    approvalRequestId: `ar-${id}`,
    projectId: "proj-node",
    actionType: "db.mutation",
    actionDigest: sha256Hex(id),
    idempotencyKey: `idem-${id}`,
  });
  return { id, lease: await executor.start(await executor.lease(id)) };
}

// The records of `ids` after `from`, once all are readable: the horizon is the cluster's, so a
// write transaction elsewhere on the server may hold fresh records back a moment.
async function readUntil(feed, from, ids) {
  const deadline = performance.now() + 60_000;
  for (;;) {
    const records = (await feed.read(from, { limit: 1000 })).filter((r) => ids.includes(r.dispatch_id));
    if (records.length === ids.length || performance.now() > deadline) return records;
    await new Promise((resolve) => setTimeout(resolve, 50)); // the poll interval; the read decides
  }
}

// A feed whose reads a test can watch: `empty` resolves at the first read that came back
// empty after `arm()`.
const resolvers = () => {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
};

class WatchedFeed extends OutcomeFeed {
  armed = false;
  #empty = resolvers();
  #reading = resolvers();
  get empty() {
    return this.#empty.promise;
  }
  get reading() {
    return this.#reading.promise;
  }
  arm() {
    this.armed = true;
  }
  async read(cursor, options) {
    const armed = this.armed;
    const records = await super.read(cursor, options);
    this.#reading.resolve();
    if (armed && records.length === 0) this.#empty.resolve();
    return records;
  }
}

for (const olderBegins of ["before the follower starts", "after it started"]) {
  test(`a follower woken while an older transaction holds the record back still gets it (${olderBegins})`, { skip, timeout: 90_000 }, async () => {
    // An hour's fallback: the record arrives only if the follower keeps reading until the
    // horizon passes what it was told about (or what may have committed before its LISTEN).
    const executor = new Executor({ pool, owner: "node-outcomes" });
    const feed = new WatchedFeed({ pool, listenFallbackMs: 3_600_000 });
    const { id, lease } = await started(executor);
    const consumer = `node-held-${crypto.randomUUID().slice(0, 8)}`;
    await feed.saveCursor(consumer, await feed.cursorNow());
    const older = await pool.connect();
    const stop = new AbortController();
    const seen = [];
    const follow = () =>
      feed.follow(
        consumer,
        (record) => {
          seen.push(record.dispatch_id);
          if (record.dispatch_id === id) stop.abort();
        },
        { signal: stop.signal },
      );
    const settle = () => executor.complete(lease, { outcome: "succeeded", resultCode: "ok", mutationId: `m-${id}` });
    let following;
    try {
      await older.query("BEGIN");
      if (olderBegins === "before the follower starts") {
        await older.query("SELECT pg_current_xact_id()");
        await settle();
        feed.arm();
        following = follow();
      } else {
        following = follow();
        await feed.reading;
        await older.query("SELECT pg_current_xact_id()");
        await settle();
        feed.arm();
      }
      await feed.empty; // read past the settling commit, and held back
      assert.equal(seen.includes(id), false);
      await older.query("COMMIT");
    } finally {
      older.release();
    }
    await following;
    assert.equal(seen.at(-1), id);
    await feed.dropConsumer(consumer);
  });
}

test("a listening follower registers its session while it follows and ends that when it stops", { skip, timeout: 90_000 }, async () => {
  // Settling commits notify only while a listener is registered: the follower's own LISTEN
  // session (found by its pool's application name) holds a registration exactly while it follows.
  const name = `node-listen-${crypto.randomUUID().slice(0, 8)}`;
  const own = new pg.Pool({ connectionString: URL_, max: 3, application_name: name });
  const registered = async () => {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM recovery_outcome_listeners AS l
       JOIN pg_stat_activity AS a ON a.pid = l.pid WHERE a.application_name = $1`,
      [name],
    );
    return rows[0].n;
  };
  try {
    const feed = new WatchedFeed({ pool: own, listenFallbackMs: 3_600_000 });
    const consumer = `node-reg-${crypto.randomUUID().slice(0, 8)}`;
    const stop = new AbortController();
    const following = feed.follow(consumer, () => {}, { start: "now", signal: stop.signal });
    await feed.reading;
    assert.equal(await registered(), 1);
    stop.abort();
    await following;
    assert.equal(await registered(), 0);
    await feed.dropConsumer(consumer);
  } finally {
    await own.end();
  }
});

for (const wake of ["listen", "poll"]) {
  test(`waitForOutcome (${wake}) returns the status the completion settled`, { skip }, async () => {
    const executor = new Executor({ pool, owner: "node-outcomes" });
    const feed = new OutcomeFeed({ pool, wake, pollMaxMs: 100 });
    const { id, lease } = await started(executor);
    const waiting = feed.waitForOutcome(id, 20_000);
    await executor.complete(lease, { outcome: "succeeded", resultCode: "applied", mutationId: `m-${id}` });
    const status = await waiting;
    assert.equal(status.state, "succeeded");
    assert.equal(status.settled_by, "executor");
    assert.equal(status.result_code, "applied");
  });
}

test("waitForOutcome times out with the last status, and refuses an unknown dispatch", { skip }, async () => {
  const executor = new Executor({ pool, owner: "node-outcomes" });
  const feed = new OutcomeFeed({ pool, wake: "poll", pollMaxMs: 50 });
  const { id } = await started(executor);
  await assert.rejects(feed.waitForOutcome(id, 200), (err) => err instanceof OutcomeTimeout && err.status.state === "executing");
  await assert.rejects(feed.waitForOutcome("node-out-none", 200), NotFound);
});

test("the feed reads in order, maps to CloudEvents, and a consumer follows from its cursor", { skip }, async () => {
  const executor = new Executor({ pool, owner: "node-outcomes" });
  const feed = new OutcomeFeed({ pool });
  const from = await feed.cursorNow();
  const ids = [];
  for (let i = 0; i < 3; i += 1) {
    const { id, lease } = await started(executor);
    await executor.complete(lease, { outcome: i === 1 ? "failed" : "succeeded", resultCode: "done", mutationId: `m-${id}` });
    ids.push(id);
  }
  const records = await readUntil(feed, from, ids);
  assert.deepEqual(records.map((r) => r.dispatch_id), ids);
  assert.deepEqual(records.map((r) => r.state), ["succeeded", "failed", "succeeded"]);
  const event = toCloudEvent(records[0]);
  assert.equal(event.specversion, "1.0");
  assert.equal(event.id, records[0].cursor);
  assert.equal(event.type, "approved-action-resolver.outcome.settled");
  assert.equal(event.subject, ids[0]);
  assert.equal(event.time, new Date(Number(records[0].occurred_at_ms)).toISOString());

  const consumer = `node-consumer-${crypto.randomUUID().slice(0, 8)}`;
  await feed.saveCursor(consumer, from);
  const seen = [];
  const stop = new AbortController();
  await feed.follow(
    consumer,
    (record) => {
      if (ids.includes(record.dispatch_id)) seen.push(record.dispatch_id);
      if (seen.length === ids.length) stop.abort();
    },
    { signal: stop.signal, batch: 1 },
  );
  assert.deepEqual(seen, ids);
  assert.equal(await feed.consumerCursor(consumer), records.at(-1).cursor);
  // A cursor never moves back.
  assert.equal(await feed.saveCursor(consumer, from), records.at(-1).cursor);
  assert.equal(await feed.dropConsumer(consumer), true);
  const history = await feed.history(ids[0]);
  assert.deepEqual(history.map((h) => h.kind), ["created", "started", "settled"]);
});
