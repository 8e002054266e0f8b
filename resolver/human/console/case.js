// The case view. First screen: everything a decision depends on (the state in words, why the
// evidence says what it says, what was approved, how long it has waited and when it escalates,
// an open proposal, and the decision with its consequence and attestation); below it the
// identity, execution, links, related dispatches, timeline and authorizations. An open case is
// read again every few seconds and says when it changed under the operator.
import * as auth from "./auth.js";
import { decidePanel, decisionLabel } from "./decide.js";
import { caseLink, copyButton, el, problemText, say, utc, when } from "./dom.js";
import { foundState } from "./find.js";
import { liveBar } from "./live.js";
import { redraw, route } from "./nav.js";
import { reasonWords, suggestsForgery } from "./reasons.js";
import { needSignIn } from "./session.js";
import { config, known, lastList } from "./state.js";
import { VIEWS } from "./views.js";

const CASE_REFRESH_MS = 15000;

const FINDING_WORDS = {
  conflict: "Evidence conflicts", unsupported: "No provider can check it", missing: "No evidence found yet",
  still_running: "The action still looks in progress", unavailable: "The evidence source could not be read",
  verified_succeeded: "Verified: succeeded", verified_failed: "Verified: failed",
};

// The case on screen and what it looked like when drawn: a later read that differs is a change.
let watched = null;

// "← Manual queue": back to the list, filter and page the case was opened from.
function backLink() {
  const hash = lastList();
  const view = hash.replace(/^#\//, "").split("?")[0];
  const title = VIEWS[view] ? VIEWS[view].title : "Manual queue";
  const filtered = hash.includes("?");
  return el("a", { href: hash, id: "back", className: "back", text: `← ${title}` + (filtered ? " (as you left it)" : "") });
}

export async function renderCase(main, id) {
  document.title = `Dispatch ${id} · approved-action resolver`;
  watched = null;
  const heading = el("h2", { tabindex: "-1" }, "Dispatch ", el("span", { className: "mono", text: id }));
  const head = el("div", { className: "case-head" }, backLink(), heading);
  main.append(head);
  const answer = await auth.api("GET", "/v1/dispatches/" + encodeURIComponent(id));
  if (answer.status === 401) return needSignIn(main);
  if (answer.ok) {
    head.append(liveBar(CASE_REFRESH_MS, "this case"));
    watched = { id, signature: signature(answer.body) };
    return renderCaseBody(main, answer.body);
  }
  if (answer.status !== 404) {
    main.append(el("p", { className: "error", role: "alert", text: problemText(answer) }));
    return;
  }
  // Gone from the case tables: retention may have pruned it whole, and find keeps its record.
  const found = await auth.api("GET", "/v1/find?q=" + encodeURIComponent(id));
  const pruned = found.ok ? found.body.items.find((item) => item.dispatch_id === id && item.pruned) : null;
  if (pruned) return renderPruned(main, pruned);
  // An API without the case route answers 404 before it looks at the token: ask the queue
  // whether this session is signed in, and for what it knows of the dispatch.
  const probe = await auth.api("GET", "/v1/manual-queue?limit=100&q=" + encodeURIComponent(id));
  if (probe.status === 401) return needSignIn(main);
  if (probe.ok) probe.body.items.forEach((entry) => known.set(entry.dispatch_id, entry));
  const item = known.get(id);
  main.append(el("p", { id: "unavailable", className: "notice", text: item
    ? "Full case details are not available from this API: showing what the queue knows."
    : `No dispatch “${id}” is visible to you, or this API does not serve case details.` }));
  if (item) {
    main.append(facts("Identity", [["Dispatch", item.dispatch_id, true], ["Project", item.project_id], ["Action type", item.action_type]]),
      facts("Execution", [["Version", String(item.execution_version)], ["Attempt", String(item.attempt)], ["Started", when(item.started_at_ms)]]),
      linkOuts(item),
      decidePanel({ dispatch_id: id, version: item.execution_version, proposal: item.proposal || null }));
  }
}

// A dispatch retention pruned whole: what its record kept, and where the rest went.
function renderPruned(main, item) {
  main.append(el("div", { className: "decision-view" },
    el("div", { className: "glance" },
      el("p", { id: "case-state", className: "state" }, `Pruned by retention: ${foundState(item)}`),
      el("div", { id: "headline", className: "headline" }, el("p", { text: "Retention removed this dispatch's records; nothing is left to decide or to look at here beyond what its prune kept." })),
      prunedCard(item.pruned, "the dispatch id, its project and action type, when it was created, its final state and how it closed (found by its approval id, and by its idempotency key through that key's sha256)"))),
    el("div", { className: "grid details" },
      facts("What retention kept", [["Dispatch", item.dispatch_id, true], ["Project", item.project_id], ["Action type", item.action_type],
        ["Created", when(item.created_at_ms)], ["Final state", foundState(item)]])));
}

// When and by which prune run it went, what stayed, and the run's export (its digest), if any.
function prunedCard(pruned, kept) {
  const exported = pruned.export_digest
    ? [`The run wrote an export holding what it removed: sha256 `, el("span", { className: "mono digest-text", text: pruned.export_digest }),
      " (", el("code", { text: "resolver audit verify --export" }), " checks a file against it)."]
    : ["The run wrote no export: what it removed is kept nowhere."];
  return el("section", { id: "pruned", className: "card", "aria-labelledby": "pruned-title" },
    el("h3", { id: "pruned-title", text: "Pruned by retention" }),
    el("p", {}, "Pruned ", when(pruned.pruned_at_ms), ` by prune run ${pruned.run_id}.`),
    el("p", { text: `Kept: ${kept}.` }),
    el("p", {}, ...exported));
}

export function facts(title, rows) {
  const list = el("dl", { className: "facts" });
  rows.forEach(([name, value, copy]) => {
    const shown = typeof value === "string" ? el("span", { className: copy ? "mono" : "", text: value }) : value;
    list.append(el("dt", { text: name }), el("dd", {}, shown, copy && typeof value === "string" ? [" ", copyButton(name, value)] : null));
  });
  return el("section", { className: "card", "aria-label": title }, el("h3", { text: title }), list);
}

function linkOuts(identity) {
  if (!config.links.length) return null;
  const list = el("ul", { id: "links" });
  config.links.forEach((link) => {
    const names = Array.from(link.template.matchAll(/\{([a-z_]+)\}/g), (m) => m[1]);
    if (names.some((name) => typeof identity[name] !== "string")) return; // no half-filled link
    // Only configured templates, each identity value URL-encoded: no id can change the target.
    const href = link.template.replace(/\{([a-z_]+)\}/g, (_m, key) => encodeURIComponent(identity[key]));
    list.append(el("li", {}, el("a", { href, target: "_blank", rel: "noopener noreferrer", text: link.label })));
  });
  if (!list.children.length) return null;
  return el("section", { className: "card", "aria-label": "Links" }, el("h3", { text: "Links" }), list);
}

function timeline(c) {
  const x = c.execution;
  const k = c.control;
  const events = [[c.identity.created_at_ms, "Dispatch created"]];
  if (x) {
    events.push([x.started_at_ms, `Start barrier crossed (attempt ${x.attempt})`],
      [x.lease_expires_at_ms, x.recovery_required || x.state !== "executing" ? "Execution lease expired" : "Execution lease expires"]);
  }
  if (k) {
    events.push([k.armed_at_ms, "Recovery armed"]);
    if (k.first_inspected_at_ms) events.push([k.first_inspected_at_ms, "First inspection"]);
    if (k.last_inspected_at_ms) {
      const counts = Object.entries(k.finding_counts || {}).map(([kind, n]) => `${kind} ×${n}`).join(", ");
      const reasons = Object.entries(k.reason_counts || {}).map(([code, n]) => `${code} ×${n}`).join(", ");
      events.push([k.last_inspected_at_ms, `Last inspection: ${k.last_finding || "—"}` + (k.last_reason ? ` because ${k.last_reason} (${reasonWords(k.last_reason)})` : "") +
        ` (${k.finding_count} in all${counts ? ": " + counts : ""}${reasons ? "; reasons: " + reasons : ""})`]);
    }
    if (k.manual_at_ms) events.push([k.manual_at_ms, `Reached the manual queue: ${k.manual_reason || k.last_finding || "no reason recorded"}` + (k.last_reason ? ` (${k.last_reason})` : "")]);
    if (k.status === "armed" && k.next_scan_at_ms) events.push([k.next_scan_at_ms, "Next look for evidence"]);
    if (k.status === "armed" && k.escalates_at_ms) events.push([k.escalates_at_ms, `Escalates to the manual queue if still ${k.last_finding}`]);
    if (k.closed_at_ms) events.push([k.closed_at_ms, `Recovery closed by ${k.closed_by}`]);
  }
  // Every proposal, open or closed, stays in the history (an older API sends the open one only).
  const proposals = c.proposals || (c.proposal ? [{ ...c.proposal, closed_as: null }] : []);
  proposals.forEach((p) => {
    events.push([p.proposed_at_ms, `${p.proposed_by} proposed ${decisionLabel(p.decision)} (${p.reason_code}); a second person must confirm`]);
    if (!p.closed_as) events.push([p.expires_at_ms, "Proposal expires unless confirmed"]);
    else if (p.closed_as === "expired" || p.closed_as === "voided") events.push([p.closed_at_ms, `Proposal ${p.closed_as}`]);
    else events.push([p.closed_at_ms, `${p.closed_by} ${p.closed_as} ${p.proposed_by}'s proposal (${p.close_reason_code})`]);
  });
  if (c.resolution) {
    const r = c.resolution;
    events.push([r.resolved_at_ms, r.source === "manual"
      ? `Decided: ${r.outcome}, by ${decidedBy(c)} (${r.reason_code})`
      : `Settled automatically from verified evidence: ${r.outcome}`]);
  }
  (c.late_evidence || []).forEach((e) => events.push([e.observed_at_ms,
    `Later evidence: ${e.finding}, ${e.agrees ? "agrees with the decision" : "CONTRADICTS the decision"}` +
    (e.evidence_digest ? ` (evidence ${e.evidence_digest.slice(0, 12)}…)` : "")]));
  if (c.pruned) events.push([c.pruned.pruned_at_ms, `Execution pruned by retention (prune run ${c.pruned.run_id})`]);
  const list = el("ol", { id: "timeline" });
  events.filter(([at]) => at !== null && at !== undefined).sort((a, b) => a[0] - b[0])
    .forEach(([at, text]) => list.append(el("li", {}, when(at), " ", el("span", { text }))));
  return el("section", { className: "card", "aria-label": "Timeline" }, el("h3", { text: "Timeline" }), list);
}

function isOpen(c) {
  return Boolean(c.execution && c.execution.recovery_required && !c.resolution);
}

function renderCaseBody(main, c) {
  const id = c.identity;
  const x = c.execution;
  if (x) known.set(id.dispatch_id, { ...known.get(id.dispatch_id), execution_version: x.version });
  const glance = el("div", { className: "glance" },
    el("p", { id: "case-state", className: "state" }, stateName(c)),
    headline(c), approvedCard(c), waited(c));
  if (isOpen(c) && (c.two_person_decisions || []).length) {
    glance.append(el("p", { id: "two-people", className: "notice" },
      el("strong", { text: "Needs two people" }),
      ` for ${c.two_person_decisions.map(decisionLabel).join(", ")}` + (c.proposal ? "." : ": that decision becomes a proposal, and a second person with the same permission must confirm it before anything is settled.")));
  }
  const view = el("div", { className: "decision-view" + (isOpen(c) ? " open" : "") }, glance);
  if (isOpen(c)) {
    view.append(decidePanel({ dispatch_id: id.dispatch_id, version: x.version, proposal: c.proposal,
      tampering: suggestsTampering(c) ? c.control.last_reason : null }));
  }
  const related = el("section", { className: "card", "aria-label": "Related dispatches" }, el("h3", { text: "Related dispatches" }),
    el("p", {}, "Supersedes: ", id.supersedes_dispatch_id ? caseLink(id.supersedes_dispatch_id) : "nothing"),
    el("p", {}, "Superseded by: ", ...(id.superseded_by.length ? id.superseded_by.flatMap((s, i) => [i ? ", " : "", caseLink(s)]) : ["nothing"])));
  const execution = x ? facts("Execution", [
    ["State", x.state], ["Owner", x.owner || "—"], ["Attempt", String(x.attempt)], ["Version", String(x.version)],
    ["Started", when(x.started_at_ms)], ["Lease expires", when(x.lease_expires_at_ms)],
    ["Finished", when(x.finished_at_ms)], ["Result code", x.result_code || "—"],
  ]) : c.pruned ? null : facts("Execution", [["State", "never leased"]]);
  const details = el("div", { className: "grid details" },
    c.pruned ? prunedCard(c.pruned, "its identity and its resolution" + (c.authorizations && c.authorizations.length ? ", with who decided it" : "") + " (the audit facts)") : null,
    facts("Identity", [
      ["Dispatch", id.dispatch_id, true], ["Approval request", id.approval_request_id, true],
      ["Idempotency key", id.idempotency_key, true], ["Action digest", id.action_digest, true],
      ["Project", id.project_id], ["Action type", id.action_type], ["Schema version", String(id.schema_version)],
      ["Created", when(id.created_at_ms)],
    ]),
    execution, linkOuts(id), related, timeline(c));
  main.append(view, details);
  if (c.authorizations && c.authorizations.length) {
    const list = el("ul", { id: "authorizations" });
    c.authorizations.forEach((a) => list.append(el("li", {},
      `${a.role}: ${a.user_id} (${a.permission}, ${[].concat(a.amr).join(", ")}, signed in `, when(a.auth_time_ms), ")")));
    details.append(el("section", { className: "card", "aria-label": "Authorizations" }, el("h3", { text: "Authorizations" }), list));
  }
}

// A conflict whose reason suggests forged or tampered evidence.
function suggestsTampering(c) {
  return Boolean(c.control && c.control.last_finding === "conflict" && suggestsForgery(c.control.last_reason));
}

function capital(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// The state in words a tired person cannot misread: what is known about the outcome, and who
// (or what) acts next. The one place the state is put in words; the machine names stay in the
// Execution card below.
function stateName(c) {
  const x = c.execution;
  const k = c.control;
  const r = c.resolution;
  const settledBy = () => (r.source === "manual" ? `decided by ${decidedBy(c)}` : "settled from verified evidence");
  if (!x && c.pruned) {
    const what = r ? (r.outcome === "blocked" ? "Blocked, outcome unknown" : capital(r.outcome)) : "Settled";
    return `${what}: ${r ? settledBy() + ", " : ""}its execution record pruned by retention`;
  }
  if (!x) return "Not started: no executor has taken it";
  // Terminal exactly when it finished: the database checks that on every execution row, so
  // the console needs no copy of the terminal states.
  if (x.finished_at_ms != null) {
    const what = x.state === "blocked" ? "Blocked, outcome unknown" : capital(x.state);
    if (r) return `${what}: ${settledBy()}`;
    return `${what}: reported by its executor`;
  }
  if (x.state === "leased") return "Not started: leased, the action has not begun";
  if (!x.recovery_required) return "Running: its executor holds a live lease";
  if (k && k.status === "manual") return c.proposal ? "Outcome unknown: waits for a second person" : "Outcome unknown: needs a person's decision";
  return "Outcome unknown: still looking for evidence";
}

function decidedBy(c) {
  const people = (c.authorizations || []).map((a) => a.user_id);
  const actor = c.resolution.actor_user_id;
  const others = people.filter((p) => p !== actor);
  return others.length ? `${actor}, confirmed by ${others.join(", ")}` : actor;
}

// Why the case is where it is, in one place: for an open case, the last finding and its
// reason; for a settled one, how it settled, and what evidence said after a decision. A
// finding from before a decision is history (the timeline keeps it), never a headline.
function headline(c) {
  const box = el("div", { id: "headline", className: "headline" });
  const x = c.execution;
  const k = c.control;
  const r = c.resolution;
  if (r) {
    const contradicting = (c.late_evidence || []).filter((e) => !e.agrees);
    if (r.source === "manual" && contradicting.length) {
      box.classList.add("alarm");
      box.append(contradiction(c, contradicting));
      return box;
    }
    if (r.source === "manual") {
      const agreeing = (c.late_evidence || []).some((e) => e.agrees);
      box.append(el("p", {}, `Recorded `, when(r.resolved_at_ms), ` with reason ${r.reason_code}.` +
        (agreeing ? " Evidence observed after the decision agrees with it." : "")));
    } else {
      box.append(el("p", {}, "Verified evidence settled it ", when(r.resolved_at_ms), (x && x.result_code ? ` (result code ${x.result_code})` : "") + "."));
    }
    return box;
  }
  if (x && x.finished_at_ms != null) {
    box.append(el("p", {}, "Its executor reported it ", when(x.finished_at_ms), (x.result_code ? ` (result code ${x.result_code})` : "") + "."));
    return box;
  }
  if (x && !x.recovery_required) {
    box.append(el("p", {}, "Its executor holds a live lease until ", when(x.lease_expires_at_ms), ": nothing to decide while it runs."));
    return box;
  }
  if (!k || !k.last_finding) {
    box.append(el("p", { text: x ? "Not inspected yet: no provider has looked at it." : "" }));
    return box;
  }
  if (suggestsTampering(c)) box.classList.add("alarm");
  const why = reasonWords(k.last_reason);
  const words = FINDING_WORDS[k.last_finding] || k.last_finding;
  box.append(el("p", {}, el("strong", { text: words + (why ? ": " + why : "") + "." })));
  return box;
}

// Late evidence against a decision. The advice follows what it says happened: evidence that
// the action did happen after it was recorded as not done warns against doing it again (that
// would be a duplicate); evidence that it did not happen says how to do it after all.
function contradiction(c, contradicting) {
  const last = contradicting[contradicting.length - 1];
  const outcome = c.resolution.outcome;
  const summary = c.identity.action_summary;
  const what = summary ? `“${summary.title}”` : "the action";
  const advice = last.finding === "verified_succeeded"
    ? `It says the action did happen. The recorded outcome (${outcome}) stays final. Do not create a new dispatch to do it again: ` +
      `${what} already happened once, and a new dispatch would do it a second time. Check the downstream system and correct whatever relied on “${outcome}”.`
    : `It says the action did not happen. The recorded outcome (${outcome}) stays final. Check the downstream system; ` +
      `if ${what} must happen after all, create a new dispatch that supersedes this one.`;
  return el("div", { id: "contradiction" },
    el("p", {}, el("strong", { text: "Evidence observed after the decision contradicts it." }),
      ` ${contradicting.length === 1 ? "1 later finding disagrees" : `${contradicting.length} later findings disagree`}; the last, ${last.finding}, `, when(last.observed_at_ms), "."),
    el("p", { id: "contradiction-advice", text: advice }));
}

// How long an open case has waited, and when it escalates or escalated.
function waited(c) {
  const k = c.control;
  if (!isOpen(c) || !k) return null;
  const line = el("p", { id: "waited" });
  if (k.status === "manual") {
    line.append("In the manual queue since ", when(k.manual_at_ms));
    if (k.manual_reason === "evidence_window_elapsed") line.append(": escalated, no settling evidence within its window");
    line.append(".");
    return line;
  }
  if (k.first_inspected_at_ms) line.append("Waiting for evidence since ", when(k.first_inspected_at_ms), ". ");
  line.append("Next look ", when(k.next_scan_at_ms), ".");
  if (typeof k.escalates_at_ms === "number") {
    line.append(" Goes to the manual queue ", when(k.escalates_at_ms), ` if the evidence is still ${k.last_finding} then (at the first look from that time).`);
  } else if (k.escalates_at_ms === null && k.last_finding) {
    line.append(" Never escalates on this finding: the providers keep looking.");
  }
  return line;
}

// What was approved, at the top: the executor's own summary, always as text.
function approvedCard(c) {
  const s = c.identity.action_summary;
  const section = el("section", { id: "approved", className: "card", "aria-labelledby": "approved-title" },
    el("h3", { id: "approved-title", text: "What was approved" }));
  if (!s) {
    const check = isOpen(c) ? ": check the approval it names (" + c.identity.approval_request_id + ") before you decide."
      : "; the approval it names is " + c.identity.approval_request_id + ".";
    section.append(el("p", { className: "hint", text: "The executor gave no summary of this action" + check }));
    return section;
  }
  const list = el("dl", { className: "facts" });
  (s.facts || []).forEach((f) => list.append(el("dt", { text: f.label }), el("dd", { text: f.value })));
  section.append(el("p", { id: "approved-title-text", className: "summary-title", text: s.title }), list);
  return section;
}

// -- noticing a change ---------------------------------------------------------------------

// What a decision on this case depends on: a read that differs here is a change to say.
function signature(c) {
  const x = c.execution || {};
  const k = c.control || {};
  const p = c.proposal || {};
  return JSON.stringify([x.state, x.version, x.finished_at_ms, k.status, k.last_finding, k.last_reason, k.finding_count,
    k.manual_at_ms, (c.resolution || {}).mutation_id, p.proposed_at_ms, p.proposed_by, (c.proposals || []).length,
    (c.late_evidence || []).length]);
}

// Whether the operator has started on the decision (a redraw would throw that away).
function deciding() {
  const form = document.getElementById("decide-form");
  const started = (selector) => Boolean(document.querySelector(selector));
  return Boolean(form && (form.querySelector("input[name=decision]:checked") || form.querySelector("[name=reason_code]").value ||
    started("#verified:checked") || started("#tamper-ack:checked"))) || started("#confirm-verified:checked") ||
    Boolean(document.getElementById("close-reason") && document.getElementById("close-reason").value);
}

// Reads the open case again. Unchanged: nothing moves. Changed while nobody is deciding: the
// case is drawn as it is now and the status line says so. Changed while the operator is
// deciding: the form stays, and a notice above it says what changed, with a way to see it.
export async function checkCase() {
  const where = route();
  if (!watched || where.view !== "case" || where.id !== watched.id) return;
  const answer = await auth.api("GET", "/v1/dispatches/" + encodeURIComponent(watched.id));
  if (!answer.ok || !watched || watched.id !== where.id) return;
  const now = signature(answer.body);
  if (now === watched.signature) return;
  const said = `This case changed at ${utc(Date.now()).slice(11)}: it is now “${stateName(answer.body)}”.`;
  if (!deciding()) {
    await redraw();
    say(said, "ok");
    return;
  }
  watched.signature = now;
  const notice = el("div", { id: "case-changed", className: "notice alarm", role: "alert" },
    el("p", { text: said + " A decision sent now answers with the case as it stands (409) if the execution moved on." }),
    el("button", { type: "button", id: "show-current", text: "Show the case as it is now", onclick: () => redraw() }));
  const panel = document.getElementById("decide") || document.getElementById("main");
  const old = document.getElementById("case-changed");
  if (old) old.replaceWith(notice);
  else panel.prepend(notice);
}
