// The case view: the state and headline in words, what was approved, identity, execution,
// links, the timeline and, while it is open, the decision panel.
import * as auth from "./auth.js";
import { decidePanel, decisionLabel } from "./decide.js";
import { caseLink, copyButton, el, problemText, when } from "./dom.js";
import { reasonWords, suggestsForgery } from "./reasons.js";
import { needSignIn } from "./session.js";
import { config, known } from "./state.js";

const FINDING_WORDS = {
  conflict: "Evidence conflicts", unsupported: "No provider can check it", missing: "No evidence found yet",
  still_running: "The action still looks in progress", unavailable: "The evidence source could not be read",
  verified_succeeded: "Verified: succeeded", verified_failed: "Verified: failed",
};

export async function renderCase(main, id) {
  document.title = `Dispatch ${id} · approved-action resolver`;
  const heading = el("h2", { tabindex: "-1" }, "Dispatch ", el("span", { className: "mono", text: id }));
  main.append(el("p", {}, el("a", { href: "#/queue", text: "← Manual queue" })), heading);
  const answer = await auth.api("GET", "/v1/dispatches/" + encodeURIComponent(id));
  if (answer.status === 401) return needSignIn(main);
  if (answer.ok) return renderCaseBody(main, answer.body);
  if (answer.status !== 404) {
    main.append(el("p", { className: "error", role: "alert", text: problemText(answer) }));
    return;
  }
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


function facts(title, rows) {
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
  const events = [
    [c.identity.created_at_ms, "Dispatch created"],
    [x.started_at_ms, `Start barrier crossed (attempt ${x.attempt})`],
    [x.lease_expires_at_ms, x.recovery_required || x.state !== "executing" ? "Execution lease expired" : "Execution lease expires"],
  ];
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
  const list = el("ol", { id: "timeline" });
  events.filter(([at]) => at !== null && at !== undefined).sort((a, b) => a[0] - b[0])
    .forEach(([at, text]) => list.append(el("li", {}, when(at), " ", el("span", { text }))));
  return el("section", { className: "card", "aria-label": "Timeline" }, el("h3", { text: "Timeline" }), list);
}

function renderCaseBody(main, c) {
  const id = c.identity;
  const x = c.execution;
  known.set(id.dispatch_id, { ...known.get(id.dispatch_id), execution_version: x.version });
  main.append(el("p", { id: "case-state", className: "state" }, stateName(c)),
    el("p", { id: "headline", className: "headline" + (suggestsTampering(c) ? " alarm" : "") }, ...headline(c)),
    approvedCard(c));
  if (!c.resolution && (c.two_person_decisions || []).length) {
    main.append(el("p", { id: "two-people", className: "notice" },
      el("strong", { text: "Needs two people" }),
      ` for ${c.two_person_decisions.map(decisionLabel).join(", ")}: that decision becomes a proposal, and a second person with the same permission must confirm it before anything is settled.`));
  }
  const contradicting = (c.late_evidence || []).filter((e) => !e.agrees);
  if (c.resolution && contradicting.length) {
    // The decision stands (it is final); the person who reads this has to act outside it.
    const last = contradicting[contradicting.length - 1];
    main.append(el("div", { id: "contradiction", className: "notice alarm" },
      el("p", {}, el("strong", { text: "Evidence observed after the decision contradicts it." }),
        ` ${contradicting.length === 1 ? "1 later finding disagrees" : `${contradicting.length} later findings disagree`}; the last, ${last.finding}, `, when(last.observed_at_ms), "."),
      el("p", { text: `The recorded outcome (${c.resolution.outcome}) stays final. Check the downstream system; ` +
        "if the action must happen after all, create a new dispatch that supersedes this one." })));
  }
  const related = el("section", { className: "card", "aria-label": "Related dispatches" }, el("h3", { text: "Related dispatches" }),
    el("p", {}, "Supersedes: ", id.supersedes_dispatch_id ? caseLink(id.supersedes_dispatch_id) : "nothing"),
    el("p", {}, "Superseded by: ", ...(id.superseded_by.length ? id.superseded_by.flatMap((s, i) => [i ? ", " : "", caseLink(s)]) : ["nothing"])));
  main.append(el("div", { className: "grid" },
    facts("Identity", [
      ["Dispatch", id.dispatch_id, true], ["Approval request", id.approval_request_id, true],
      ["Idempotency key", id.idempotency_key, true], ["Action digest", id.action_digest, true],
      ["Project", id.project_id], ["Action type", id.action_type], ["Schema version", String(id.schema_version)],
      ["Created", when(id.created_at_ms)],
    ]),
    facts("Execution", [
      ["State", x.state], ["Owner", x.owner || "—"], ["Attempt", String(x.attempt)], ["Version", String(x.version)],
      ["Started", when(x.started_at_ms)], ["Lease expires", when(x.lease_expires_at_ms)],
      ["Finished", when(x.finished_at_ms)], ["Result code", x.result_code || "—"],
    ]),
    linkOuts(id), related, timeline(c)));
  if (c.authorizations && c.authorizations.length) {
    const list = el("ul", { id: "authorizations" });
    c.authorizations.forEach((a) => list.append(el("li", {},
      `${a.role}: ${a.user_id} (${a.permission}, ${[].concat(a.amr).join(", ")}, signed in `, when(a.auth_time_ms), ")")));
    main.append(el("section", { className: "card", "aria-label": "Authorizations" }, el("h3", { text: "Authorizations" }), list));
  }
  if (x.recovery_required && !c.resolution) {
    main.append(decidePanel({ dispatch_id: id.dispatch_id, version: x.version, proposal: c.proposal,
      tampering: suggestsTampering(c) ? c.control.last_reason : null }));
  }
}

// A conflict whose reason suggests forged or tampered evidence.
function suggestsTampering(c) {
  return Boolean(c.control && c.control.last_finding === "conflict" && suggestsForgery(c.control.last_reason));
}

// The state in words a tired person cannot misread: what is known about the outcome, and who
// (or what) acts next. The machine names stay in the Execution card below.
function stateName(c) {
  const x = c.execution;
  const k = c.control;
  const r = c.resolution;
  const outcome = (s) => s.charAt(0).toUpperCase() + s.slice(1);
  if (!x) return "Not started: no executor has taken it";
  // Terminal exactly when it finished: the database checks that on every execution row, so
  // the console needs no copy of the terminal states.
  if (x.finished_at_ms != null) {
    const what = x.state === "blocked" ? "Blocked, outcome unknown" : outcome(x.state);
    if (r && r.source === "manual") return `${what}: decided by ${decidedBy(c)}`;
    if (r && r.source === "automatic") return `${what}: settled from verified evidence`;
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

// One plain sentence on why the case is where it is; for a waiting case, when it is looked at
// next.
function headline(c) {
  const k = c.control;
  if (!k || !k.last_finding) return [c.resolution || !k ? "" : "Not inspected yet."];
  const why = reasonWords(k.last_reason);
  const words = FINDING_WORDS[k.last_finding] || k.last_finding;
  const parts = [el("strong", { text: words + (why ? ": " + why : "") + "." })];
  if (k.status === "armed") {
    parts.push(" Next look ", when(k.next_scan_at_ms), ".");
    if (typeof k.escalates_at_ms === "number") {
      parts.push(" Goes to the manual queue ", when(k.escalates_at_ms), ` if the evidence is still ${k.last_finding} then (at the first look from that time).`);
    } else if (k.escalates_at_ms === null) {
      parts.push(" Never escalates on this finding: the providers keep looking.");
    }
  }
  if (k.status === "manual" && k.manual_reason === "evidence_window_elapsed") parts.push(" Escalated: no settling evidence within its window.");
  return parts;
}

// What was approved, at the top: the executor's own summary, always as text.
function approvedCard(c) {
  const s = c.identity.action_summary;
  const section = el("section", { id: "approved", className: "card", "aria-labelledby": "approved-title" },
    el("h3", { id: "approved-title", text: "What was approved" }));
  if (!s) {
    section.append(el("p", { className: "hint", text: "The executor gave no summary of this action: check the approval it names (" + c.identity.approval_request_id + ") before you decide." }));
    return section;
  }
  const list = el("dl", { className: "facts" });
  (s.facts || []).forEach((f) => list.append(el("dt", { text: f.label }), el("dd", { text: f.value })));
  section.append(el("p", { id: "approved-title-text", className: "summary-title", text: s.title }), list);
  return section;
}

