// Why the evidence says what it says: each reason code a provider gives, in plain words, and
// the reasons that suggest forged or tampered evidence. The one home of both in the console.

// Why the evidence says what it says: each reason code a provider gives, in plain words.
const REASONS = {
  unknown_kid: "the receipt is signed with a key this installation does not know",
  bad_signature: "the receipt's signature does not verify: it was altered or not signed by the executor",
  digest_mismatch: "the receipt is for a different action than the one approved",
  identity_mismatch: "the evidence names another dispatch, project or attempt",
  fence_mismatch: "the receipt was written under a lease that no longer held",
  version_mismatch: "the receipt has a format version this installation does not read",
  too_large: "the receipt is larger than any valid receipt",
  not_json: "the receipt is not valid JSON", not_object: "the receipt is not a JSON object",
  duplicate_field: "the receipt repeats a field", float: "the receipt carries a fractional number",
  missing_field: "the receipt lacks a required field", unknown_field: "the receipt carries an unknown field",
  bad_type: "a receipt field has the wrong type", bad_value: "a receipt field has an invalid value",
  half_published: "the package is only partly published",
  failed_but_published: "the install reports failure, yet something was published",
  several_runs: "more than one run claims this dispatch",
  manual_only: "no provider can check this action type: a person must",
  http_404: "the receipt service has no receipt for it", no_receipt: "no receipt was found",
  no_run: "no run was found", no_install_facts: "no install record was found",
  timeout: "the evidence source did not answer in time", outage: "the evidence source is down",
  configuration: "the evidence source is misconfigured", error: "the evidence source failed",
  sqlstate_42501: "the evidence source refused access (permission denied)",
};
// Conflicts whose reason suggests the evidence itself was forged or tampered with: confirming
// such a case as succeeded needs its own, separate acknowledgement.
const TAMPERING = new Set(["unknown_kid", "bad_signature", "digest_mismatch", "identity_mismatch"]);

// The declared sentence of a reason code, or null when none is known.
export function reasonSentence(code) {
  return Object.hasOwn(REASONS, code) ? REASONS[code] : null;
}

// The reason in words, or the code itself when no sentence is known for it.
export function reasonWords(code) {
  return code ? reasonSentence(code) || `the provider reported ${code}` : null;
}

export function suggestsForgery(code) {
  return TAMPERING.has(code);
}
