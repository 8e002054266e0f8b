// Receipt publication to object storage against real PostgreSQL, a real S3-compatible server
// (moto's, signatures and IAM policies checked) and a real `resolver run` with object_receipt.
//
//   DATABASE_URL, RESOLVER_PYTHON        as executor.test.mjs
//   S3_ENDPOINT, S3_BUCKET               the store (the tests put a small proxy in front)
//   S3_WRITER, S3_READER                 access-key-id:secret of the publishing and reading users
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import pg from "pg";

import {
  Executor,
  FenceConflict,
  LeaseLost,
  PublicationFailed,
  ReceiptAlreadyPublished,
  ReceiptPublisher,
  receiptKey,
  sha256Hex,
} from "../index.js";

const { DATABASE_URL: URL_, RESOLVER_PYTHON: PYTHON, S3_ENDPOINT, S3_BUCKET } = process.env;
const KEY = { kid: "node-obj-k1", secretHex: "3c".repeat(32) };
const skip = URL_ && PYTHON && S3_ENDPOINT ? false : "DATABASE_URL, RESOLVER_PYTHON or S3_ENDPOINT is not set";
const ACTION = "artifact.push";
const WAIT_MS = 30_000;
const credentials = (who) => {
  const [accessKeyId, secretAccessKey] = (process.env[who] ?? ":").split(":");
  return { accessKeyId, secretAccessKey };
};

// A proxy in front of the store: counts requests, answers 503 SlowDown, or holds PUT replies.
const proxy = { puts: 0, slowDown: 0, holdPuts: false, onHeld: null, url: null };
let server;
let pool;
before(async () => {
  if (skip) return;
  pool = new pg.Pool({ connectionString: URL_, max: 4 });
  const upstream = new URL(S3_ENDPOINT);
  server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "PUT") proxy.puts += 1;
      if (proxy.slowDown > 0) {
        proxy.slowDown -= 1;
        res.writeHead(503, { "content-type": "application/xml" });
        return res.end("<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>");
      }
      const out = http.request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          const body = [];
          up.on("data", (c) => body.push(c));
          up.on("end", () => {
            if (req.method === "PUT" && proxy.holdPuts) return proxy.onHeld?.(); // landed; no reply
            const headers = { ...up.headers };
            delete headers["transfer-encoding"];
            res.writeHead(up.statusCode, headers);
            res.end(Buffer.concat(body));
          });
        },
      );
      out.end(Buffer.concat(chunks));
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  proxy.url = `http://127.0.0.1:${server.address().port}`;
});
after(async () => {
  server?.closeAllConnections();
  server?.close();
  await pool?.end();
});

const s3 = (who = "S3_WRITER", options = {}) =>
  new S3Client({ endpoint: proxy.url, region: "us-east-1", forcePathStyle: true, credentials: credentials(who), maxAttempts: 1, ...options });
const publisher = (options = {}) => new ReceiptPublisher({ client: s3(), bucket: S3_BUCKET, requestTimeoutMs: 1_000, ...options });
const executor = (options = {}) => new Executor({ pool, owner: "node-pusher", key: KEY, leaseMs: 6_000, ...options });
const row = async (text, values) => (await pool.query(text, values)).rows[0];
const execution = (id) => row("SELECT * FROM approved_action_executions WHERE dispatch_id = $1", [id]);

async function newDispatch() {
  const dispatchId = `node-obj-${crypto.randomBytes(6).toString("hex")}`;
  await executor().createDispatch({
    dispatchId,
    approvalRequestId: `ar-${dispatchId}`,
    projectId: "proj-node",
    actionType: ACTION,
    actionDigest: sha256Hex(`action:${dispatchId}`),
    idempotencyKey: `idem-${dispatchId}`,
  });
  return dispatchId;
}

async function stored(dispatchId) {
  try {
    const reply = await s3("S3_READER").send(new GetObjectCommand({ Bucket: S3_BUCKET, Key: receiptKey("receipts/", "proj-node", dispatchId) }));
    return Buffer.from(await reply.Body.transformToByteArray());
  } catch (err) {
    if (err?.name === "NoSuchKey") return null;
    throw err;
  }
}

async function waitFor(condition, what) {
  const deadline = Date.now() + WAIT_MS;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const leaseExpired = async (id) =>
  (await row("SELECT lease_expires_at_ms <= resolver_now_ms(NULL) AS expired FROM approved_action_executions WHERE dispatch_id = $1", [id]))
    .expired;

function resolverRunOnce() {
  const dir = mkdtempSync(join(tmpdir(), "node-object-"));
  const settings = `{provider: object_receipt, bucket: ${S3_BUCKET}, endpoint_url: "${S3_ENDPOINT}", addressing_style: path, timeout_seconds: 2}`;
  writeFileSync(join(dir, "providers.yaml"), `action_types:\n  ${ACTION}: ${settings}\n`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RESOLVER_") && !k.startsWith("AWS_")));
  const reader = credentials("S3_READER");
  const done = spawnSync(PYTHON, ["-m", "resolver", "run", "--once"], {
    env: {
      ...env,
      RESOLVER_DATABASE_URL: URL_,
      RESOLVER_CONFIG: join(dir, "providers.yaml"),
      RESOLVER_RECEIPT_KEYS: `${KEY.kid}=${KEY.secretHex}`,
      AWS_ACCESS_KEY_ID: reader.accessKeyId,
      AWS_SECRET_ACCESS_KEY: reader.secretAccessKey,
      AWS_DEFAULT_REGION: "us-east-1",
    },
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(done.status, 0, done.stderr);
}

const CRASHER = fileURLToPath(new URL("./object-crash-executor.mjs", import.meta.url));

async function crash(id, point) {
  const child = spawn(process.execPath, [CRASHER, id, point], {
    env: { ...process.env, RECEIPT_KEY: `${KEY.kid}=${KEY.secretHex}`, S3_ENDPOINT: proxy.url },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (c) => {
    stderr += c;
  });
  if (point === "put_in_flight") {
    proxy.holdPuts = true;
    proxy.onHeld = () => child.kill("SIGKILL");
  }
  const [, signal] = await once(child, "exit");
  proxy.holdPuts = false;
  proxy.onHeld = null;
  assert.equal(signal, "SIGKILL", stderr);
}

// point: [published?, state after recovery]
const CRASH_POINTS = {
  before_publish: [false, "executing"],
  put_in_flight: [true, "succeeded"],
  after_publish: [true, "succeeded"],
  after_complete: [true, "succeeded"],
};

for (const [point, [published, state]] of Object.entries(CRASH_POINTS)) {
  test(`a crash at ${point} is settled from the store`, { skip }, async () => {
    const id = await newDispatch();
    await crash(id, point);
    const body = await stored(id);
    assert.equal(body !== null, published);
    if (point !== "after_complete") {
      assert.equal((await execution(id)).state, "executing");
      await waitFor(() => leaseExpired(id), "the crashed executor's lease to end");
      resolverRunOnce();
    }
    const e = await execution(id);
    assert.equal(e.state, state);
    if (published) assert.equal(e.evidence_digest, sha256Hex(body));
    else assert.equal((await row("SELECT last_finding FROM approved_action_recovery_controls WHERE dispatch_id = $1", [id])).last_finding, "missing");
    assert.deepEqual(await stored(id), body); // frozen: nothing of the dead executor can still arrive
  });
}

test("publish, then complete with the receipt's digest", { skip }, async () => {
  const id = await newDispatch();
  let published;
  const result = await executor().run(id, async (effect) => {
    published = await effect.publishReceipt(publisher(), { outcome: "failed", resultCode: "rejected", receiptId: "r-1" });
  });
  assert.equal(result.result, "committed");
  const e = await execution(id);
  assert.equal(e.state, "failed");
  assert.equal(e.evidence_digest, published.evidenceDigest);
  assert.equal(JSON.parse(await stored(id)).outcome, "failed");
});

test("a lost lease publishes nothing", { skip }, async () => {
  const id = await newDispatch();
  const puts = proxy.puts;
  await assert.rejects(
    executor().run(id, async (effect) => {
      await executor().renew(effect.lease); // the version moves on under the effect
      await effect.publishReceipt(publisher(), { outcome: "succeeded", resultCode: "pushed", receiptId: "r-1" });
    }),
    FenceConflict,
  );
  assert.equal(proxy.puts, puts);
  assert.equal(await stored(id), null);
});

test("no PUT leaves when the lease could run out during it", { skip }, async () => {
  const id = await newDispatch();
  const puts = proxy.puts;
  await assert.rejects(
    // A 2.4 s lease cannot cover a 2 s request plus its margin (a quarter of the lease).
    executor({ leaseMs: 2_400 }).run(id, async (effect) => {
      await effect.publishReceipt(publisher({ requestTimeoutMs: 2_000 }), { outcome: "succeeded", resultCode: "pushed", receiptId: "r-1" });
    }),
    (err) => err instanceof LeaseLost && /too little of the lease/.test(err.message),
  );
  assert.equal(proxy.puts, puts);
});

test("a second publication is refused by the store and typed", { skip }, async () => {
  const id = await newDispatch();
  await executor().run(id, (effect) => effect.publishReceipt(publisher(), { outcome: "succeeded", resultCode: "pushed", receiptId: "r-1" }));
  const first = await stored(id);
  const key = receiptKey("receipts/", "proj-node", id);
  await assert.rejects(publisher().publish(key, '{"other":1}', { leaseLeftMs: () => 60_000, leaseMs: 30_000 }), ReceiptAlreadyPublished);
  assert.deepEqual(await stored(id), first);
});

test("throttling is retried within the lease", { skip }, async () => {
  const id = await newDispatch();
  proxy.slowDown = 2;
  const puts = proxy.puts;
  await executor({ leaseMs: 10_000 }).run(id, (effect) =>
    effect.publishReceipt(publisher(), { outcome: "succeeded", resultCode: "pushed", receiptId: "r-1" }),
  );
  assert.equal(proxy.puts, puts + 3);
  assert.equal((await execution(id)).state, "succeeded");
});

test("credentials that may not write are a typed failure; a retrying client is refused", { skip }, async () => {
  const reader = new ReceiptPublisher({ client: s3("S3_READER"), bucket: S3_BUCKET, requestTimeoutMs: 1_000 });
  const lease = { leaseLeftMs: () => 60_000, leaseMs: 30_000 };
  await assert.rejects(reader.publish("receipts/proj-node/denied.receipt.json", "{}", lease), PublicationFailed);
  const retrying = new ReceiptPublisher({ client: s3("S3_WRITER", { maxAttempts: 3 }), bucket: S3_BUCKET });
  await assert.rejects(retrying.publish("receipts/proj-node/x.receipt.json", "{}", lease), /maxAttempts: 1/);
});

// Nothing left the client (no region, no credentials): nothing can have landed, so the
// failure is PublicationFailed, with what the client said as its `cause`, never "unknown".
test("a PUT the client never sent is a PublicationFailed with its cause", { skip }, async () => {
  const lease = { leaseLeftMs: () => 60_000, leaseMs: 30_000 };
  const cases = {
    "no region": new S3Client({ endpoint: proxy.url, forcePathStyle: true, credentials: credentials("S3_WRITER"), maxAttempts: 1 }),
    "no credentials": new S3Client({
      endpoint: proxy.url,
      region: "us-east-1",
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: async () => {
        throw new Error("no credentials in this process");
      },
    }),
  };
  for (const [what, client] of Object.entries(cases)) {
    const puts = proxy.puts;
    const publisher = new ReceiptPublisher({ client, bucket: S3_BUCKET, requestTimeoutMs: 1_000 });
    const refused = await publisher.publish(`receipts/proj-node/never-${crypto.randomUUID()}.receipt.json`, "{}", lease).then(
      () => assert.fail(`${what}: published`),
      (err) => err,
    );
    assert.ok(refused instanceof PublicationFailed, `${what}: ${refused?.name}: ${refused?.message}`);
    assert.ok(refused.cause instanceof Error, `${what}: no cause`);
    assert.match(refused.message, /never sent/);
    assert.equal(proxy.puts, puts, `${what}: a request reached the store`);
  }
});
