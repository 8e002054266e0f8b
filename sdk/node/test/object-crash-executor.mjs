// An executor on this SDK that publishes its receipt to object storage and SIGKILLs itself at
// one point of the publication: before_publish, put_in_flight (the test's proxy holds the
// PUT's reply and the test kills us), after_publish, after_complete.
//   DATABASE_URL=... RECEIPT_KEY=kid=hex S3_ENDPOINT=... S3_WRITER=id:secret S3_BUCKET=...
//   node object-crash-executor.mjs <dispatch_id> <point>
import { S3Client } from "@aws-sdk/client-s3";
import pg from "pg";

import { Executor, ReceiptPublisher, parseKey } from "../index.js";

const [dispatchId, point] = process.argv.slice(2);
const [accessKeyId, secretAccessKey] = process.env.S3_WRITER.split(":");
const crash = () => process.kill(process.pid, "SIGKILL");
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const client = new S3Client({
  endpoint: process.env.S3_ENDPOINT,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId, secretAccessKey },
  maxAttempts: 1,
});
const publisher = new ReceiptPublisher({ client, bucket: process.env.S3_BUCKET, requestTimeoutMs: 1_000 });
const executor = new Executor({ pool, owner: "node-object-crasher", key: parseKey(process.env.RECEIPT_KEY), leaseMs: 6_000 });

await executor.run(dispatchId, async (effect) => {
  if (point === "before_publish") crash();
  await effect.publishReceipt(publisher, { outcome: "succeeded", resultCode: "pushed", receiptId: `art-${dispatchId}` });
  if (point === "after_publish") crash();
});
crash();
