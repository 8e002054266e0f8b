"""Receipt verification, Python against Node: the same verdict, evidence digest and rejection
reason for every input, on thousands of seeded mutations of the published vectors (the
transport forms a second implementation is most likely to read differently: whitespace,
escapes in either case, duplicate keys, numbers in every form, a BOM, bytes that are not
UTF-8, truncations)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

from resolver.core.domain import DispatchIdentity
from resolver.core.errors import ReceiptRejected
from resolver.evidence.receipts import KeyRing, verify_receipt
from tests.protocol.conftest import ROOT

VECTORS: dict[str, Any] = json.loads(
    (ROOT / "docs" / "receipt-v1-vectors.json").read_text(encoding="utf-8")
)
SECRETS = {key["kid"]: bytes.fromhex(key["secret_hex"]) for key in VECTORS["keys"]}
CASES_PER_RECEIPT = 500

NODE_VERIFY = """
import { readFileSync } from "node:fs";
import { verifyReceipt, ReceiptError } from "./index.js";
const { keys, cases } = JSON.parse(readFileSync(process.argv[2], "utf8"));
const ring = keys.map((k) => ({ kid: k.kid, secretHex: k.secret_hex }));
const out = cases.map(({ raw_hex, identity }) => {
  try {
    return ["ok", verifyReceipt(Buffer.from(raw_hex, "hex"), { identity, keys: ring }).evidenceDigest];
  } catch (err) {
    return err instanceof ReceiptError ? ["reject", err.reason] : ["error", String(err)];
  }
});
process.stdout.write(JSON.stringify(out));
"""


def python_verdict(raw: bytes, identity: dict[str, Any]) -> list[str]:
    try:
        verified = verify_receipt(raw, DispatchIdentity(**identity), KeyRing(SECRETS))
    except ReceiptRejected as exc:
        return ["reject", exc.reason]
    return ["ok", verified.evidence_digest]


def _integer_forms(rng: random.Random) -> str:
    return rng.choice(
        [
            "1.0",
            "1e0",
            "1E+0",
            "-0",
            "01",
            "0",
            "-1",
            str(2**63),
            str(2**63 - 1),
            "1" * 30,
            '"1"',
            "true",
            "null",
            "NaN",
            "Infinity",
            "-Infinity",
            "1.",
            ".5",
            "+1",
            "0x1",
        ]
    )


def mutate(text: str, rng: random.Random) -> bytes:
    """One transport form of `text` (a canonical receipt): valid, or wrong in one place."""
    data = text
    kind = rng.randrange(15)
    if kind == 0:  # whitespace between tokens, JSON's and others
        spots = [i for i, c in enumerate(data) if c in ",:{}"]
        for i in sorted(rng.sample(spots, k=min(4, len(spots))), reverse=True):
            data = (
                data[: i + 1]
                + rng.choice([" ", "\n", "\t", "\r", "\u00a0", "\u2028", "\f"])
                + data[i + 1 :]
            )
    elif kind == 1:  # a character of a string value as an escape, in either hex case
        spots = [i for i, c in enumerate(data) if c.isalnum() and data[i - 1] not in ":,"]
        i = rng.choice(spots)
        escape = f"\\u{ord(data[i]):04x}"
        data = (
            data[:i]
            + (escape.upper().replace("\\U", "\\u") if rng.random() < 0.5 else escape)
            + data[i + 1 :]
        )
    elif kind == 2:  # a member repeated
        body = json.loads(data)
        key = rng.choice(list(body))
        data = data[:-1] + f",{json.dumps(key)}:{json.dumps(body[key])}" + "}"
    elif kind == 3:  # an integer in another form
        field = rng.choice(["attempt", "started_at_ms", "finished_at_ms", "v"])
        start = data.index(f'"{field}":') + len(field) + 3
        end = start
        while data[end].isdigit():
            end += 1
        data = data[:start] + _integer_forms(rng) + data[end:]
    elif kind == 4:
        data = "\ufeff" + data
    elif kind == 5:  # truncated
        data = data[: rng.randrange(len(data))]
    elif kind == 6:  # trailing content
        data += rng.choice([" ", "\n", "x", "{}", ",", "\u0000"])
    elif kind == 7:  # keys reordered and pretty-printed: still the same receipt
        body = json.loads(data)
        items = list(body.items())
        rng.shuffle(items)
        data = json.dumps(
            dict(items), indent=rng.choice([None, 1, 2]), ensure_ascii=rng.random() < 0.5
        )
    elif kind == 8:  # an extra field, or one missing
        body = json.loads(data)
        if rng.random() < 0.5:
            body.pop(rng.choice(list(body)))
        else:
            body[rng.choice(["x", "V", "sig2", "é", "__proto__", "constructor"])] = 1
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    elif kind == 9:  # a value of another type
        body = json.loads(data)
        body[rng.choice(list(body))] = rng.choice([True, None, [], {}, "", "x" * 200, 7])
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    elif kind == 10:  # a control character, raw or escaped, in a string
        i = data.index('"result_code":"') + len('"result_code":"')
        data = (
            data[:i]
            + rng.choice(
                ["\t", "\u0001", "\\u0001", "\\t", "\\/", "\\ud800", "\\ud83d\\ude00", "\u007f"]
            )
            + data[i:]
        )
    elif kind == 14:  # JSON, but not an object
        data = rng.choice([f"[{data}]", '"receipt"', "1", "null", "[]"])
    raw = data.encode("utf-8", "surrogatepass")
    if kind == 11:  # bytes that are not UTF-8
        i = rng.randrange(len(raw))
        raw = raw[:i] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf"]) + raw[i:]
    elif kind == 12:  # one byte changed
        i = rng.randrange(len(raw))
        raw = raw[:i] + bytes([rng.randrange(256)]) + raw[i + 1 :]
    elif kind == 13:  # over the transport cap
        raw = raw + b" " * (8193 - len(raw) + rng.randrange(2))
    return raw


def test_python_and_node_agree_on_every_mutated_receipt(node_sdk: Path, tmp_path: Path) -> None:
    rng = random.Random(20261203)
    cases = []
    for vector in VECTORS["accepted"]:
        for _ in range(CASES_PER_RECEIPT):
            raw = mutate(vector["receipt"], rng)
            cases.append({"raw_hex": raw.hex(), "identity": vector["identity"]})
    for vector in VECTORS["transport"] + VECTORS["rejected"]:
        cases.append(
            {"raw_hex": vector["raw"].encode("utf-8").hex(), "identity": vector["identity"]}
        )
    expected = [python_verdict(bytes.fromhex(c["raw_hex"]), c["identity"]) for c in cases]
    # The mutations reach every verdict: accepted transport forms and each kind of refusal.
    reasons = {verdict[1] for verdict in expected if verdict[0] == "reject"}
    assert sum(verdict[0] == "ok" for verdict in expected) > 100
    assert {
        "not_json",
        "duplicate_field",
        "float",
        "bad_type",
        "bad_value",
        "too_large",
        "unknown_field",
        "missing_field",
        "bad_signature",
        "not_object",
    } <= reasons

    # Node reads the identity's integers as a driver hands bigints back: decimal strings
    # (JSON.parse would round 2**53+1).
    for case in cases:
        case["identity"] = {
            k: str(v) if isinstance(v, int) else v for k, v in case["identity"].items()
        }
    (tmp_path / "cases.json").write_text(json.dumps({"keys": VECTORS["keys"], "cases": cases}))
    (node_sdk / "parity.mjs").write_text(NODE_VERIFY)
    done = subprocess.run(
        ["node", "parity.mjs", str(tmp_path / "cases.json")],
        cwd=node_sdk,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    actual = json.loads(done.stdout)
    differ = [
        (bytes.fromhex(case["raw_hex"])[:120], want, got)
        for case, want, got in zip(cases, expected, actual, strict=True)
        if want != got
    ]
    assert differ == [], f"{len(differ)} of {len(cases)} differ, first: {differ[:5]}"
