// The published receipt v1 test vectors (docs/receipt-v1-vectors.json), byte for byte.
// RECEIPT_VECTORS names the file; beside the repository it is found on its own.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  canonicalJson,
  exactInteger,
  parseKey,
  parseReceiptJson,
  ReceiptError,
  sha256Hex,
  signReceipt,
  verifyReceipt,
} from "../index.js";

const path = process.env.RECEIPT_VECTORS ?? fileURLToPath(new URL("../../../docs/receipt-v1-vectors.json", import.meta.url));

/**
 * JSON.parse with every integer kept exact: integers become BigInt (a JavaScript number
 * cannot hold the vectors' 2**63-1). Integer tokens outside strings are rewritten as tagged
 * strings first, then revived.
 */
function parseExact(text) {
  const TAG = "\u0000int:";
  let out = "";
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === "\\") out += text[++i];
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (c === "-" || (c >= "0" && c <= "9")) {
      let j = i + 1;
      while (j < text.length && /[0-9.eE+-]/.test(text[j])) j += 1;
      const token = text.slice(i, j);
      out += /^-?[0-9]+$/.test(token) ? JSON.stringify(TAG + token) : token;
      i = j - 1;
    } else {
      out += c;
    }
  }
  return JSON.parse(out, (_k, v) => (typeof v === "string" && v.startsWith(TAG) ? BigInt(v.slice(TAG.length)) : v));
}

const vectors = parseExact(readFileSync(path, "utf8"));
// docs/receipts.md, whose JavaScript block (the SDK's canonicalJson) is run on the vectors too.
const specPath = process.env.RECEIPTS_SPEC ?? fileURLToPath(new URL("../../../docs/receipts.md", import.meta.url));
const keys = Object.fromEntries(vectors.keys.map((k) => [k.kid, { kid: k.kid, secretHex: k.secret_hex }]));
const hex = (text) => Buffer.from(text, "utf8").toString("hex");

for (const c of vectors.accepted) {
  test(`accepted vector ${c.name}: canonical bytes, signature, receipt, evidence digest`, () => {
    const out = signReceipt({
      identity: c.identity,
      outcome: c.body.outcome,
      resultCode: c.body.result_code,
      finishedAtMs: c.body.finished_at_ms,
      receiptId: c.receipt_id,
      key: keys[c.body.kid],
    });
    assert.equal(out.signed, c.canonical);
    assert.equal(hex(out.signed), c.canonical_hex);
    assert.equal(out.sig, c.sig);
    assert.equal(out.json, c.receipt);
    assert.equal(hex(out.json), c.receipt_hex);
    assert.equal(out.evidenceDigest, c.evidence_digest);
    assert.equal(canonicalJson(c.body), c.canonical);
  });
}

test("integers a driver returns as text sign exactly as JSON integers", () => {
  const c = vectors.accepted.find((v) => v.name === "bounds");
  const asText = Object.fromEntries(Object.entries(c.identity).map(([k, v]) => [k, typeof v === "bigint" ? v.toString() : v]));
  const out = signReceipt({
    identity: asText,
    outcome: c.body.outcome,
    resultCode: c.body.result_code,
    finishedAtMs: c.body.finished_at_ms.toString(),
    receiptId: c.receipt_id,
    key: keys[c.body.kid],
  });
  assert.equal(out.json, c.receipt);
});

test("the transport vector's canonical form is the receipt's", () => {
  for (const t of vectors.transport) {
    assert.equal(canonicalJson(parseExact(t.raw)), t.receipt);
    assert.equal(sha256Hex(Buffer.from(t.receipt, "utf8")), t.evidence_digest);
  }
});

for (const c of vectors.canonical_json) {
  test(`canonical JSON of ${JSON.stringify(Object.keys(c.value))}`, () => {
    assert.equal(canonicalJson(c.value), c.canonical);
    assert.equal(hex(canonicalJson(c.value)), c.canonical_hex);
  });
}

test("the signer refuses what the resolver would reject, with the same reason", () => {
  const base = vectors.accepted[0];
  const sign = (overrides) =>
    signReceipt({
      identity: base.identity,
      outcome: "succeeded",
      resultCode: "charged",
      finishedAtMs: base.body.finished_at_ms,
      receiptId: base.receipt_id,
      key: keys["vec-k1"],
      ...overrides,
    });
  const refused = (overrides) => {
    try {
      sign(overrides);
    } catch (err) {
      assert.ok(err instanceof ReceiptError);
      return err.reason;
    }
    assert.fail("signed");
  };
  const unicode = vectors.rejected.find((r) => r.name === "unicode-result-code");
  assert.equal(refused({ resultCode: "café" }), unicode.reason);
  assert.equal(refused({ finishedAtMs: 1.5 }), "bad_type");
  assert.equal(refused({ finishedAtMs: "12e3" }), "bad_type");
  assert.equal(refused({ finishedAtMs: (2n ** 63n).toString() }), "bad_value");
  assert.equal(refused({ outcome: "blocked" }), "bad_value");
  assert.equal(refused({ identity: { ...base.identity, schema_version: 2 } }), "version_mismatch");
  assert.equal(refused({ identity: { ...base.identity, dispatch_id: "dé" } }), "bad_value");
  assert.equal(refused({ key: { kid: "vec-k1", secretHex: "00" } }), "bad_value");
});

test("canonical JSON refuses floats and lone surrogates", () => {
  assert.throws(() => canonicalJson({ a: 1.5 }), (err) => err.reason === "float");
  assert.throws(() => canonicalJson({ a: 2 ** 60 }), (err) => err.reason === "float");
  assert.throws(() => canonicalJson({ a: "\ud800" }), (err) => err.reason === "not_json");
});

test("exactInteger and parseKey", () => {
  assert.equal(exactInteger("9007199254740993", "x"), 9007199254740993n);
  assert.throws(() => exactInteger("007", "x"), ReceiptError);
  assert.deepEqual(parseKey(`vec-k1=${vectors.keys[0].secret_hex}`), keys["vec-k1"]);
  assert.throws(() => parseKey("no-secret"), ReceiptError);
});

// -- verification: the same verdict, digest and reason as the resolver ------------------------

const ring = Object.values(keys);
const reason = (fn) => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ReceiptError, String(err));
    return err.reason;
  }
  return "accepted";
};

for (const c of vectors.accepted) {
  test(`verifyReceipt accepts ${c.name} with its evidence digest`, () => {
    for (const raw of [c.receipt, Buffer.from(c.receipt_hex, "hex")]) {
      const out = verifyReceipt(raw, { identity: c.identity, keys: ring });
      assert.equal(out.evidenceDigest, c.evidence_digest);
      assert.equal(out.outcome, c.body.outcome);
      assert.equal(out.resultCode, c.body.result_code);
      assert.equal(out.finishedAtMs, c.body.finished_at_ms);
    }
  });
}

for (const t of vectors.transport) {
  test(`verifyReceipt: transport form ${t.name} verifies to the canonical digest`, () => {
    assert.notEqual(t.raw, t.receipt);
    const out = verifyReceipt(Buffer.from(t.raw, "utf8"), { identity: t.identity, keys: ring });
    assert.equal(out.evidenceDigest, t.evidence_digest);
    assert.equal(canonicalJson(parseReceiptJson(t.raw)), t.receipt);
  });
}

for (const r of vectors.rejected) {
  test(`verifyReceipt refuses ${r.name} as ${r.reason}`, () => {
    assert.equal(reason(() => verifyReceipt(r.raw, { identity: r.identity, keys: ring })), r.reason);
    assert.equal(reason(() => verifyReceipt(Buffer.from(r.raw, "utf8"), { identity: r.identity, keys: ring })), r.reason);
  });
}

test("verifyReceipt: binding, size, key ring and JSON edge cases name the resolver's reasons", () => {
  const c = vectors.accepted[0];
  const verify = (raw, identity = c.identity, keyList = ring) => reason(() => verifyReceipt(raw, { identity, keys: keyList }));
  assert.equal(verify(c.receipt, { ...c.identity, attempt: "2" }), "fence_mismatch");
  assert.equal(verify(c.receipt, { ...c.identity, action_digest: "0".repeat(64) }), "digest_mismatch");
  assert.equal(verify(c.receipt, { ...c.identity, schema_version: 2 }), "version_mismatch");
  assert.equal(verify(c.receipt, c.identity, [keys["vec-k2"]]), "unknown_kid");
  assert.equal(verify(" ".repeat(8193)), "too_large");
  assert.equal(verify(Buffer.from([0xff, 0x7b, 0x7d])), "not_json"); // not UTF-8
  assert.equal(verify(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(c.receipt)])), "not_json"); // BOM
  assert.equal(verify("[1]"), "not_object");
  assert.equal(verify('{"a":1,"a":2}'), "duplicate_field");
  assert.equal(verify('{"a":NaN}'), "float");
  assert.equal(verify('{"a":1E+2}'), "float");
  assert.equal(verify('{"a":01}'), "not_json");
  assert.equal(verify('{"a":"\\ud800"}'), "not_json"); // an escaped lone surrogate is not text
  assert.equal(verify('{"a":"raw\ttab"}'), "not_json"); // a raw control character in a string
  assert.equal(verify('{"a":1,}'), "not_json");
  assert.equal(verify('{"__proto__":1}'), "unknown_field");
});

test("the canonical form code shown in docs/receipts.md passes every vector", () => {
  const blocks = [...readFileSync(specPath, "utf8").matchAll(/```js\n(.*?)```/gs)].map((m) => m[1]);
  const shown = blocks.find((b) => b.includes("function canonicalJson"));
  assert.ok(shown, "receipts.md shows no canonicalJson");
  const run = new Function("ReceiptError", `${shown.replace("export function", "function")}\nreturn canonicalJson;`);
  const docCanonical = run(ReceiptError);
  for (const c of vectors.canonical_json) assert.equal(docCanonical(c.value), c.canonical);
  for (const c of vectors.accepted) {
    assert.equal(docCanonical(c.body), c.canonical);
    assert.equal(docCanonical({ ...c.body, sig: c.sig }), c.receipt);
  }
  // The hint it replaced fails the code-point vector: sort() compares UTF-16 code units.
  const naive = (v) => JSON.stringify(Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]])));
  const astral = vectors.canonical_json.find((c) => Object.keys(c.value).some((k) => k.codePointAt(0) > 0xffff));
  assert.notEqual(naive(astral.value), astral.canonical);
});
