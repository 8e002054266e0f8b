// Type-checked (tsc --strict) by tests/protocol/test_node_sdk.py: index.d.ts describes a
// usable API. Never run.
import pg from "pg";
import {
  type Lease,
  type RunResult,
  type VerifiedReceipt,
  Executor,
  FenceConflict,
  LeaseLost,
  MAX_RAW_RECEIPT_BYTES,
  ProtocolError,
  ReceiptAlreadyPublished,
  ReceiptError,
  ReceiptPublisher,
  PublicationUnknown,
  type S3ClientLike,
  SQLSTATE_ERRORS,
  canonicalJson,
  exactInteger,
  parseKey,
  sha256Hex,
  parseReceiptJson,
  signReceipt,
  verifyReceipt,
} from "approved-action-executor";

export async function usage(pool: pg.Pool): Promise<RunResult> {
  const executor = new Executor({ pool, owner: "worker-7", key: parseKey("k1=" + "ab".repeat(32)), leaseMs: 30_000 });
  await executor.createDispatch({
    dispatchId: "d-1",
    approvalRequestId: "ar-1",
    projectId: "p-1",
    actionType: "db.mutation",
    actionDigest: sha256Hex("x"),
    idempotencyKey: "k-1",
  });
  const lease: Lease = await executor.lease("d-1");
  const started: Lease = await executor.start(lease);
  const renewed = await executor.renew(started);
  const done = await executor.complete(renewed, { outcome: "failed", resultCode: "declined" });
  const replayed: "committed" | "replayed" = done.result;
  void replayed;
  return executor.run("d-2", async (effect) => {
    effect.signal.addEventListener("abort", () => {});
    effect.throwIfCancelled();
    const left: number = effect.remainingMs();
    void left;
    const digest: string = await effect.transaction(async (client) => {
      await client.query("SELECT 1");
      return effect.writeReceipt(client, { outcome: "succeeded", resultCode: "applied", receiptId: "r-1" });
    });
    effect.record("succeeded", "applied", { evidenceDigest: digest });
  });
}

export function errors(err: unknown): string {
  if (err instanceof LeaseLost) return `lease lost ${err.sqlstate}`;
  if (err instanceof FenceConflict) return err.sqlstate;
  if (err instanceof ReceiptError) return err.reason;
  if (err instanceof ProtocolError) return SQLSTATE_ERRORS.RS001.name;
  return "other";
}

export function receipts(): string {
  const signed = signReceipt({
    identity: {
      schema_version: 1,
      dispatch_id: "d-1",
      approval_request_id: "ar-1",
      project_id: "p-1",
      action_type: "db.mutation",
      action_digest: sha256Hex("x"),
      idempotency_key: "k-1",
      attempt: 1,
      started_at_ms: "1790000000000",
    },
    outcome: "succeeded",
    resultCode: "applied",
    finishedAtMs: 1790000001000n,
    receiptId: "r-1",
    key: { kid: "k1", secretHex: "ab".repeat(32) },
  });
  const big: bigint = exactInteger(signed.receipt.finished_at_ms, "finished_at_ms");
  const verified: VerifiedReceipt = verifyReceipt(Buffer.from(signed.json, "utf8"), {
    identity: { ...signed.receipt, schema_version: 1n },
    keys: [{ kid: "k1", secretHex: "ab".repeat(32) }],
  });
  const finished: bigint = verified.finishedAtMs;
  const parsed = parseReceiptJson(signed.json);
  void parsed;
  return canonicalJson({ big, finished, json: signed.json, digest: verified.evidenceDigest, max: MAX_RAW_RECEIPT_BYTES });
}

export async function publishing(pool: pg.Pool, s3: S3ClientLike): Promise<RunResult> {
  const executor = new Executor({ pool, owner: "pusher-1", key: parseKey("k1=" + "ab".repeat(32)) });
  const publisher = new ReceiptPublisher({ client: s3, bucket: "receipts", prefix: "receipts/", requestTimeoutMs: 2_000 });
  const key: string = publisher.keyFor("p-1", "d-3");
  void key;
  return executor.run("d-3", async (effect) => {
    try {
      const published = await effect.publishReceipt(publisher, { outcome: "succeeded", resultCode: "pushed", receiptId: "a-1" });
      const digest: string = published.evidenceDigest;
      void digest;
    } catch (err) {
      if (err instanceof ReceiptAlreadyPublished || err instanceof PublicationUnknown) throw err;
      throw err;
    }
  });
}
