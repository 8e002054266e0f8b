// Why the evidence says what it says: each reason code's sentence, and whether a conflict with
// it suggests forged or tampered evidence (confirming such a case as succeeded then needs its
// own acknowledgement), as the installed providers declare them. The API serves the
// declarations with the console's configuration (`evidence_reasons` in config.json); this
// module is the one place the console reads them.
import { config } from "./state.js";

function declared(code) {
  const reasons = config.evidence_reasons || {};
  return code && Object.hasOwn(reasons, code) ? reasons[code] : null;
}

// The declared sentence of a reason code, or null when no provider declares it.
export function reasonSentence(code) {
  const reason = declared(code);
  return reason ? reason.sentence : null;
}

// The reason in words, or the code itself when no sentence is declared for it.
export function reasonWords(code) {
  return code ? reasonSentence(code) || `the provider reported ${code}` : null;
}

export function suggestsForgery(code) {
  const reason = declared(code);
  return Boolean(reason && reason.suggests_tampering);
}
