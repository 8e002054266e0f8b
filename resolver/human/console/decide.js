// Deciding one case: the three decisions and their consequences, the attestation, the
// forged-evidence acknowledgement, a two-person proposal, and every answer as it came back.
import * as auth from "./auth.js";
import { age, copyButton, el, problemText, say, utc, when } from "./dom.js";
import { redraw } from "./nav.js";
import { reasonWords } from "./reasons.js";
import { signInAgain, stepUp } from "./session.js";
import { config } from "./state.js";

export const DECISIONS = {
  confirm_succeeded: {
    label: "Confirm succeeded",
    consequence: "Marks it succeeded: nothing will run it again. Choose this only if you checked " +
      "that the side effect happened. To run it again anyway, create a new dispatch that supersedes this one.",
  },
  confirm_failed: {
    label: "Confirm failed",
    consequence: "Marks it failed: nothing will run it again, and the platform treats the action as " +
      "not done. Choose this only if you checked that the side effect did not happen. To do it after " +
      "all, create a new dispatch that supersedes this one.",
  },
  abandon_unknown: {
    label: "Abandon as unknown",
    consequence: "Marks it blocked with the outcome unknown: nothing will run it again. To do the " +
      "action again, create a new approval and dispatch that supersedes this one, knowing it may " +
      "already have happened once.",
  },
};

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
    el("div", { className: "field" },
      el("label", { for: prefix + "-reason", text: "Reason code (pick one or type your own)" }),
      el("input", { id: prefix + "-reason", name: "reason_code", list: "reason-codes", required: true, pattern: "[a-z0-9_.\\-]{1,64}", autocomplete: "off" })),
    el("div", { className: "field" },
      el("label", { for: prefix + "-digest", text: "Evidence digest (optional, sha256 hex of what you checked)" }),
      el("input", { id: prefix + "-digest", name: "evidence_digest", pattern: "[0-9a-f]{64}", className: "wide", autocomplete: "off" })),
  ];
}


export function decidePanel(target) {
  const answers = el("ol", { id: "answers", "aria-live": "polite" });
  const section = el("section", { id: "decide", className: "card", "aria-labelledby": "decide-title" },
    el("h3", { id: "decide-title", text: target.proposal ? "Two-person decision" : "Decide" }));
  const mine = target.proposal && target.proposal.proposed_by === (auth.tokenClaims() || {}).sub;
  const form = el("form", { id: "decide-form" });
  if (target.proposal) section.append(proposalBox(target, form, answers, mine));
  // The proposer cannot settle its own proposal (the API answers second_person_required):
  // it may only withdraw it, so the decision form is not offered to it.
  if (mine) {
    section.append(el("h4", { text: "Answers" }), answers);
    return section;
  }
  const choices = decisionChoices("one");
  const ack = target.tampering ? tamperWarning(choices, target.tampering) : null;
  form.append(choices, ...reasonFields("one"),
    el("div", { className: "field" }, el("input", { type: "checkbox", id: "verified", name: "verified", required: true }),
      el("label", { for: "verified", text: "I checked the outcome outside the system" })),
    el("button", { type: "submit", id: "decide-submit", text: target.proposal ? "Record this decision instead" : "Record decision" }));
  // One mutation id per form: a resubmission after a lost answer replays, never doubles.
  const mutationId = crypto.randomUUID();
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
    await send(answers, "POST", "/v1/dispatches/" + encodeURIComponent(target.dispatch_id) + "/resolution", body);
  });
  suggestReason(form);
  // The second person's view leads with the proposal and its one confirm step; deciding
  // differently (which rejects the proposal) is there, folded away.
  const body = target.proposal
    ? el("details", { id: "decide-other" }, el("summary", { text: "Decide differently (this rejects the proposal, nothing is settled)" }), form)
    : form;
  section.append(body, el("h4", { text: "Answers" }), answers);
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
      `The conflict's reason is ${reason}: ${reasonWords(reason)}. A receipt like this is what a forged or ` +
      "tampered success looks like; it proves nothing. Confirm succeeded only if the downstream system itself shows the action happened."),
    el("div", { className: "field" }, ack,
      el("label", { for: "tamper-ack", text: "I know this evidence may be forged, and I checked the downstream system myself" })));
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
      `: unless a second person confirms it by then, nothing is decided. It was made on execution version ${p.expected_execution_version}; any change to the execution voids it.`),
    p.evidence_digest ? el("p", {}, "Evidence digest: ", el("span", { className: "mono", text: p.evidence_digest })) : null,
    consequence ? el("p", { className: "consequence", text: "If confirmed: " + consequence }) : null,
    el("p", { text: mine ? "You proposed it: a different person with the same permission must confirm or reject it. You may withdraw it." :
      `Confirming records the same decision (${p.decision}) in your name and settles the case. A different decision in the form below rejects this proposal and commits nothing.` }));
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
      el("label", { for: "confirm-verified", text: "I checked the outcome outside the system myself" })),
    el("p", {}, el("button", { type: "button", id: "confirm-proposal", text: `Confirm ${p.proposed_by}'s proposal (${decisionLabel(p.decision)})`, onclick: () => {
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

// Sends one request and shows its answer exactly as it came back; a step-up answer starts the
// step-up sign-in and the same request (same mutation id) is sent once more afterwards.
export async function send(answers, method, path, body, afterStepUp) {
  const answer = await auth.api(method, path, body);
  if (answer.status === 401 && answer.body.code === "step_up_required" && !afterStepUp && auth.signInAvailable()) {
    return stepUp(answer, { kind: "request", method, path, body, back: window.location.hash });
  }
  if (answer.status === 401 && ["invalid_token", "unauthenticated"].includes(answer.body.code) && !afterStepUp && auth.signInAvailable()) {
    return signInAgain({ kind: "request", method, path, body, back: window.location.hash });
  }
  showAnswer(answers, answer, afterStepUp);
  // The case changed (or was not as this page showed it): show it as it is now, with this
  // answer on top.
  if (answer.ok || answer.status === 409) window.setTimeout(() => redraw().then(() => showAnswer(answersArea(), answer, afterStepUp)), 0);
  return answer;
}

function showAnswer(answers, answer, afterStepUp) {
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
  } else if (b.code === "step_up_required") {
    text = problemText(answer) + (afterStepUp ? " Signing in again did not bring strong enough authentication." : " Sign in again with a second factor, then retry.");
  } else {
    text = problemText(answer);
  }
  answers.prepend(el("li", { className: "answer " + kind, text: (afterStepUp ? "After signing in again: " : "") + text }));
  say(text, kind);
}

export function answersArea() {
  let answers = document.getElementById("answers");
  if (!answers) {
    answers = el("ol", { id: "answers", "aria-live": "polite" });
    document.getElementById("main").append(el("section", { className: "card", "aria-label": "Answers" }, el("h3", { text: "Answers" }), answers));
  }
  return answers;
}

