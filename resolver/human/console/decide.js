// Deciding one case: the three decisions and their consequences, the attestation, the
// forged-evidence acknowledgement, a two-person proposal, and every answer as it came back.
// A sign-in that interrupts a decision (an expired token, a step-up) keeps everything chosen:
// the form is put back as it was and the same request, with the same mutation id, is sent
// once more.
import * as auth from "./auth.js";
import { age, copyButton, el, problemText, say, utc, when } from "./dom.js";
import { redraw } from "./nav.js";
import { reasonWords } from "./reasons.js";
import { amrText, signInAgain, stepUp, tokenWorks } from "./session.js";
import { config, keepFormFor, takeFormFor } from "./state.js";

// Each decision's consequence, said before the click and short enough to read beside it.
// Nothing here tells anyone to run an action again: whether that is safe depends on what
// happened, which the operator is checking.
export const DECISIONS = {
  confirm_succeeded: {
    label: "Confirm succeeded",
    consequence: "Marks it succeeded: nothing will run it again. Only if you saw that the side effect happened.",
  },
  confirm_failed: {
    label: "Confirm failed",
    consequence: "Marks it failed: nothing will run it again, and the platform treats the action as not done.",
  },
  abandon_unknown: {
    label: "Abandon as unknown",
    consequence: "Marks it blocked with the outcome unknown: nothing will run it again. It may have happened once.",
  },
};

// What the API accepts as a strong sign-in (the `amr` values a decision needs one of).
const STRONG_AMR = ["mfa", "hwk", "swk", "otp", "fido"];

export function decisionLabel(decision) {
  return DECISIONS[decision] ? DECISIONS[decision].label : decision;
}

export function decisionChoices(prefix) {
  const fieldset = el("fieldset", { className: "decisions" }, el("legend", { text: "Decision" }));
  Object.entries(DECISIONS).forEach(([value, spec]) => {
    const id = `${prefix}-${value}`;
    fieldset.append(el("div", { className: "choice" },
      el("input", { type: "radio", name: "decision", id, value, required: true, "aria-describedby": id + "-says" }),
      el("label", { for: id, text: spec.label }),
      el("p", { id: id + "-says", className: "consequence", text: spec.consequence })));
  });
  return fieldset;
}

export function reasonFields(prefix) {
  return [
    el("div", { className: "field inline" },
      el("label", { for: prefix + "-reason", text: "Reason code (pick or type your own)" }),
      el("input", { id: prefix + "-reason", name: "reason_code", list: "reason-codes", required: true, pattern: "[a-z0-9_.\\-]{1,64}", autocomplete: "off" })),
    el("details", { className: "digest" },
      el("summary", { text: "Evidence digest (optional)" }),
      el("div", { className: "field" },
        el("label", { for: prefix + "-digest", text: "sha256 hex of what you checked" }),
        el("input", { id: prefix + "-digest", name: "evidence_digest", pattern: "[0-9a-f]{64}", className: "wide", autocomplete: "off" }))),
  ];
}

// What the operator chose, to put back after a sign-in.
function formValues(form, mutationId) {
  const data = new FormData(form);
  return {
    decision: data.get("decision"), reason_code: data.get("reason_code") || "",
    evidence_digest: data.get("evidence_digest") || "", verified: data.get("verified") === "on",
    tamper_ack: data.get("tamper_ack") === "on", mutation_id: mutationId,
  };
}

function putBack(form, values) {
  const choice = values.decision && form.querySelector(`input[name=decision][value="${CSS.escape(values.decision)}"]`);
  if (choice) {
    choice.checked = true;
    choice.dispatchEvent(new Event("change"));
  }
  form.querySelector("[name=reason_code]").value = values.reason_code;
  const digest = form.querySelector("[name=evidence_digest]");
  digest.value = values.evidence_digest;
  if (values.evidence_digest) digest.closest("details").open = true;
  form.querySelector("#verified").checked = values.verified;
  const ack = form.querySelector("#tamper-ack");
  if (ack) ack.checked = values.tamper_ack;
}

export function decidePanel(target) {
  const answers = el("ol", { id: "answers", "aria-live": "polite", "aria-label": "Answers" });
  const section = el("section", { id: "decide", className: "card", "aria-labelledby": "decide-title" },
    el("h3", { id: "decide-title", className: "visually-hidden", text: target.proposal ? "Two-person decision" : "Decide" }));
  const mine = target.proposal && target.proposal.proposed_by === (auth.tokenClaims() || {}).sub;
  const form = el("form", { id: "decide-form" });
  if (target.proposal) section.append(proposalBox(target, form, answers, mine));
  // The proposer cannot settle its own proposal (the API answers second_person_required):
  // it may only withdraw it, so the decision form is not offered to it.
  if (mine) {
    section.append(answers);
    return section;
  }
  const choices = decisionChoices("one");
  const ack = target.tampering ? tamperWarning(choices, target.tampering) : null;
  form.append(choices, ...reasonFields("one"),
    el("div", { className: "field" }, el("input", { type: "checkbox", id: "verified", name: "verified", required: true }),
      el("label", { for: "verified", text: "I checked the outcome outside the system" })),
    el("button", { type: "submit", id: "decide-submit", text: target.proposal ? "Record this decision instead" : "Record decision" }));
  suggestReason(form);
  const restored = takeFormFor(target.dispatch_id);
  // One mutation id per form (kept across a sign-in): a resubmission after a lost answer
  // replays, never doubles.
  const mutationId = (restored && restored.mutation_id) || crypto.randomUUID();
  if (restored) putBack(form, restored);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    if (ack && data.get("decision") === "confirm_succeeded" && !ack.checked) {
      say("Acknowledge the warning on possibly forged evidence before confirming it succeeded.", "error");
      ack.focus();
      return;
    }
    const body = {
      decision: data.get("decision"), reason_code: data.get("reason_code"), mutation_id: mutationId,
      expected_execution_version: target.version,
    };
    if (data.get("evidence_digest")) body.evidence_digest = data.get("evidence_digest");
    // The API requires it for this decision on possibly forged evidence; the box above asked.
    if (ack && ack.checked && body.decision === "confirm_succeeded") body.tamper_acknowledged = true;
    const kept = { dispatchId: target.dispatch_id, values: formValues(form, mutationId) };
    await send(answers, "POST", "/v1/dispatches/" + encodeURIComponent(target.dispatch_id) + "/resolution", body, null, kept);
  });
  // The second person's view leads with the proposal and its one confirm step; deciding
  // differently (which rejects the proposal) is there, folded away.
  const body = target.proposal
    ? el("details", { id: "decide-other", open: Boolean(restored) }, el("summary", { text: "Decide differently (this rejects the proposal, nothing is settled)" }), form)
    : form;
  section.append(body, answers);
  return section;
}

// Choosing a decision suggests its usual reason code (when the installation offers it) into an
// empty reason field; the operator may type another. One interaction fewer at night.
const SUGGESTED_REASON = {
  confirm_succeeded: "checked_downstream_succeeded", confirm_failed: "checked_downstream_not_done", abandon_unknown: "cannot_verify",
};

function suggestReason(form) {
  const reason = form.querySelector("[name=reason_code]");
  let suggested = "";
  form.querySelectorAll("input[name=decision]").forEach((radio) => radio.addEventListener("change", () => {
    const code = SUGGESTED_REASON[radio.value];
    if (!radio.checked || !(config.reason_codes || []).includes(code)) return;
    if (reason.value === "" || reason.value === suggested) {
      reason.value = code;
      suggested = code;
    }
  }));
}

// Beside "Confirm succeeded", when the conflict's reason suggests forged or tampered evidence:
// a warning and an acknowledgement of its own, required only for that decision.
function tamperWarning(choices, reason) {
  const ack = el("input", { type: "checkbox", id: "tamper-ack", name: "tamper_ack" });
  const box = el("div", { id: "tamper-warning", className: "notice alarm" },
    el("p", {}, el("strong", { text: "The evidence may be forged. " }),
      `The conflict's reason is ${reason}: ${reasonWords(reason)}. It proves nothing: confirm succeeded only if the downstream system itself shows it happened.`),
    el("div", { className: "field" }, ack,
      el("label", { for: "tamper-ack", text: "I know it may be forged, and I checked the downstream system myself" })));
  const succeeded = choices.querySelector("#one-confirm_succeeded").closest(".choice");
  succeeded.append(box);
  choices.querySelectorAll("input[name=decision]").forEach((radio) => radio.addEventListener("change", () => {
    ack.required = radio.checked && radio.value === "confirm_succeeded";
  }));
  return ack;
}

// The open proposal: who proposed what and until when, and what this person may do about it
// (the proposer withdraws; anyone else confirms with the same decision, or rejects it).
function proposalBox(target, form, answers, mine) {
  const p = target.proposal;
  const path = "/v1/dispatches/" + encodeURIComponent(target.dispatch_id) + "/proposal/";
  const consequence = DECISIONS[p.decision] ? DECISIONS[p.decision].consequence : "";
  const box = el("div", { id: "proposal", className: "notice", role: "region", "aria-labelledby": "proposal-title" },
    el("h4", { id: "proposal-title", text: "Waiting for a second person" }),
    el("p", { id: "proposal-who" }, el("strong", { text: p.proposed_by }), " proposed ",
      el("strong", { text: decisionLabel(p.decision) }),
      ` (reason ${p.reason_code}) `, when(p.proposed_at_ms), "."),
    el("p", { id: "proposal-expires" }, "It expires ", when(p.expires_at_ms),
      `: unconfirmed by then, nothing is decided. Made on execution version ${p.expected_execution_version}: any change to the execution voids it.`),
    p.evidence_digest ? el("p", {}, "Evidence digest: ", el("span", { className: "mono", text: p.evidence_digest })) : null,
    consequence ? el("p", { id: "proposal-consequence", className: "consequence", text: "If confirmed: " + consequence }) : null,
    mine ? el("p", { text: "You proposed it: a different person with the same permission must confirm or reject it. You may withdraw it." }) : null);
  const closeForm = el("form", { id: "proposal-form", className: "filters" },
    el("div", { className: "field" },
      el("label", { for: "close-reason", text: mine ? "Reason code for withdrawing" : "Reason code for rejecting" }),
      el("input", { id: "close-reason", name: "reason_code", list: "reason-codes", required: true, pattern: "[a-z0-9_.\\-]{1,64}", autocomplete: "off" })),
    el("button", { type: "submit", id: mine ? "withdraw" : "reject", className: "secondary", text: mine ? "Withdraw my proposal" : "Reject the proposal" }));
  // One mutation id per closing form, like the decision form: a resend replays.
  const closeId = crypto.randomUUID();
  closeForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const reason = new FormData(closeForm).get("reason_code");
    send(answers, "POST", path + (mine ? "withdraw" : "reject"), { mutation_id: closeId, reason_code: reason });
  });
  if (!mine) {
    // One confirm step, its attestation beside it: the same decision with the same evidence
    // digest; the reason is the confirmer's own if typed below, else the proposer's.
    const attest = el("input", { type: "checkbox", id: "confirm-verified" });
    box.append(el("div", { className: "field" }, attest,
      el("label", { for: "confirm-verified", text: "I checked the outcome outside the system myself; confirming records it in my name" })),
    el("p", {}, el("button", { type: "button", id: "confirm-proposal", className: "primary", text: `Confirm ${p.proposed_by}'s proposal (${decisionLabel(p.decision)})`, onclick: () => {
      if (!attest.checked) {
        say("Tick “I checked the outcome outside the system myself” to confirm.", "error");
        attest.focus();
        return;
      }
      form.querySelector("[name=reason_code]").value ||= p.reason_code;
      const choice = form.querySelector(`input[name=decision][value="${p.decision}"]`);
      choice.checked = true;
      choice.dispatchEvent(new Event("change"));
      form.querySelector("[name=evidence_digest]").value = p.evidence_digest || "";
      form.querySelector("#verified").checked = true;
      if (!form.checkValidity()) {
        // Something only the form shows still needs an answer (a forged-evidence warning).
        form.closest("details").open = true;
        form.reportValidity();
        return;
      }
      form.requestSubmit();
    } })));
  }
  const link = window.location.origin + window.location.pathname + "#/dispatch/" + encodeURIComponent(target.dispatch_id);
  box.append(el("p", { className: "hint" }, mine ? "Hand this link to the person who should confirm: " : "Link to this case: ",
    el("span", { id: "reviewer-link", className: "mono", text: link }), " ", copyButton("link for the reviewer", link)));
  box.append(closeForm);
  return box;
}

// Sends one request and shows its answer exactly as it came back. A token that no longer
// works (expired here, or refused by the API) and a step-up answer start a sign-in; `kept` is
// the form as the operator filled it, put back afterwards; the same request (same mutation id)
// is sent once more. `after` names the sign-in this send follows, if any.
export async function send(answers, method, path, body, after, kept) {
  const retry = { kind: "request", method, path, body, back: window.location.hash, form: kept || null };
  if (!after && auth.signInAvailable() && !tokenWorks()) return signInAgain(retry);
  const answer = await auth.api(method, path, body);
  if (answer.status === 401 && answer.body.code === "step_up_required" && !after && auth.signInAvailable()) {
    return stepUp(answer, retry);
  }
  if (answer.status === 401 && ["invalid_token", "unauthenticated"].includes(answer.body.code)) {
    auth.refuseToken();
    if (!after && auth.signInAvailable()) return signInAgain(retry);
  }
  showAnswer(answers, answer, after);
  // The case changed (or was not as this page showed it): show it as it is now, with this
  // answer on top. Anything else leaves the form as it is, everything chosen still there.
  if (answer.ok || answer.status === 409) window.setTimeout(() => redraw().then(() => showAnswer(answersArea(), answer, after)), 0);
  else if (kept) keepFormFor(kept.dispatchId, kept.values);
  return answer;
}

// What a second refusal after a sign-in means, in words that match what happened.
function afterSignInText(answer) {
  const claims = auth.tokenClaims() || {};
  if (answer.body.code === "step_up_required") {
    const strong = [].concat(claims.amr || []).some((m) => STRONG_AMR.includes(m));
    const how = claims.amr ? ` (${amrText(claims)})` : "";
    return strong
      ? ` The identity provider signed you in again${how}, but not recently enough for a decision: nothing was recorded, and your choices are kept below.`
      : ` The identity provider signed you in again${how} without a second factor, which a decision needs: nothing was recorded, and your choices are kept below.`;
  }
  if (answer.status === 401) return " The API did not accept the new sign-in either: nothing was recorded, and your choices are kept below.";
  return "";
}

function showAnswer(answers, answer, after) {
  const b = answer.body || {};
  let text;
  let kind = "error";
  if (answer.ok && (b.result === "committed" || b.result === "replayed")) {
    text = `${answer.status} ${b.result}: ${b.dispatch_id} is now ${b.outcome}.`;
    kind = "ok";
  } else if (answer.status === 202 || b.result === "proposed") {
    text = `${answer.status} proposed: waiting for a second person` + (b.proposal ? ` until ${utc(b.proposal.expires_at_ms)} (${age(b.proposal.expires_at_ms)})` : "") + ".";
    kind = "ok";
  } else if (answer.ok && (b.result === "withdrawn" || b.result === "rejected")) {
    text = `${answer.status} ${b.result}: the proposal on ${b.dispatch_id} is closed; nothing was decided.`;
    kind = "ok";
  } else if (answer.ok) {
    text = `${answer.status} ${b.result || "ok"}.`;
    kind = "ok";
  } else if (after) {
    text = problemText(answer) + afterSignInText(answer);
  } else if (b.code === "step_up_required") {
    text = problemText(answer) + " Sign in again with a second factor, then record it again.";
  } else {
    text = problemText(answer);
  }
  answers.prepend(el("li", { className: "answer " + kind, text: (after ? "After signing in again: " : "") + text }));
  say(text, kind);
}

export function answersArea() {
  let answers = document.getElementById("answers");
  if (!answers) {
    answers = el("ol", { id: "answers", "aria-live": "polite", "aria-label": "Answers" });
    document.getElementById("main").append(el("section", { className: "card", "aria-label": "Answers" }, el("h3", { text: "Answers" }), answers));
  }
  return answers;
}
