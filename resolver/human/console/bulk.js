// Bulk decisions: the selection (its actions in a bar that stays in view while the list
// scrolls), its review before anything is written, and the chunked send with every item's
// result; the counts above the list are read again after it.
import * as auth from "./auth.js";
import { refreshCounts } from "./counts.js";
import { DECISIONS, decisionChoices, reasonFields } from "./decide.js";
import { caseLink, el, plural, problemText, say } from "./dom.js";
import { route } from "./nav.js";
import { signInAgain, stepUp } from "./session.js";
import { keepSelection, known, selected } from "./state.js";
import { BULK_CHUNK, SELECT_ALL_CAP, apiQuery, matchesFilter } from "./views.js";

export function updateBulkCount() {
  keepSelection();
  const count = document.getElementById("bulk-count");
  if (count) count.textContent = `${selected.size} selected`;
  const button = document.getElementById("bulk-submit");
  if (button) button.textContent = `Review ${selected.size} selected`;
  const jump = document.getElementById("bulk-jump");
  if (jump) jump.hidden = selected.size === 0;
  const outside = Array.from(selected).filter((id) => !document.querySelector(`#list tr[data-dispatch-id="${CSS.escape(id)}"]`));
  const note = document.getElementById("bulk-outside");
  if (note) {
    note.hidden = outside.length === 0;
    note.querySelector("summary").textContent = `${outside.length} selected outside this page (same filter): show them`;
    note.querySelector("ul").replaceChildren(...outside.map((id) => el("li", {}, caseLink(id))));
  }
}

// The selection's actions, in a bar that stays at the bottom of the screen while the list is
// in view: its count, select this page, everything matching, none, and the way to decide.
export function bulkDock(view, params, page) {
  const allOnPage = el("button", { type: "button", id: "select-page", text: "Select this page", onclick: () => {
    page.items.forEach((item) => selected.add(item.dispatch_id));
    document.querySelectorAll("#list .pick:not(:disabled)").forEach((box) => { box.checked = true; });
    updateBulkCount();
  } });
  const allMatching = el("button", { type: "button", id: "select-matching", text: "Select everything matching the filter", onclick: async () => {
    const count = await selectMatching(view, params);
    document.querySelectorAll("#list .pick:not(:disabled)").forEach((box) => { box.checked = true; });
    updateBulkCount();
    say(`${count} selected from every page of this filter.`, "ok");
  } });
  const none = el("button", { type: "button", id: "select-none", text: "Clear selection", onclick: () => {
    selected.clear();
    document.querySelectorAll("#list .pick").forEach((box) => { box.checked = false; });
    updateBulkCount();
  } });
  return el("div", { id: "bulk-dock", className: "dock", role: "region", "aria-label": "Selection" },
    el("span", { id: "bulk-count", role: "status", text: `${selected.size} selected` }), " ",
    allOnPage, " ", allMatching, " ", none, " ",
    el("a", { href: "#bulk-title", id: "bulk-jump", hidden: selected.size === 0, text: "Decide the selection ↓", onclick: (event) => {
      // The link's target is a heading, not a route: move there without touching the fragment.
      event.preventDefault();
      const heading = document.getElementById("bulk-title");
      heading.scrollIntoView({ block: "start" });
      heading.focus({ preventScroll: true });
    } }),
    el("details", { id: "bulk-outside", hidden: true }, el("summary", { text: "" }), el("ul")));
}

export function bulkPanel(view, params) {
  const form = el("form", { id: "bulk-form", "aria-labelledby": "bulk-title" },
    el("h3", { id: "bulk-title", tabindex: "-1", text: "Decide the selection" }),
    el("p", { text: "One decision and reason for every selected dispatch; each is still its own fenced decision and two-person rules apply per item." }),
    decisionChoices("bulk"), ...reasonFields("bulk"),
    el("div", { className: "field" }, el("input", { type: "checkbox", id: "bulk-verified", required: true }),
      el("label", { for: "bulk-verified", text: "I checked these outcomes outside the system" })),
    el("button", { type: "submit", id: "bulk-submit", text: `Review ${selected.size} selected` }),
    el("div", { id: "bulk-review" }), el("div", { id: "bulk-progress" }), el("div", { id: "bulk-results" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    // Only what this filter can contain: the page re-checks each item against the filter on
    // screen (the server checks each item's fence, not the operator's view).
    const ids = Array.from(selected).filter((id) => known.has(id) && matchesFilter(view, known.get(id), params));
    const items = ids.map((id) => ({
      // One mutation id per item, made once: a resend after a lost answer replays, never doubles.
      dispatch_id: id, expected_execution_version: known.get(id).execution_version, mutation_id: crypto.randomUUID(),
    }));
    if (items.length === 0) { say("Select at least one dispatch.", "error"); return; }
    const request = { decision: data.get("decision"), reason_code: data.get("reason_code"), items };
    if (data.get("evidence_digest")) request.evidence_digest = data.get("evidence_digest");
    review(request);
  });
  return form;
}

// Before anything is written: how many, by project, action type and finding, the decision and
// what it does. Only "Confirm" sends it.
function review(request) {
  const tally = (field) => {
    const counts = new Map();
    request.items.forEach((item) => {
      const value = known.get(item.dispatch_id)[field] || "—";
      counts.set(value, (counts.get(value) || 0) + 1);
    });
    return Array.from(counts, ([value, n]) => `${value}: ${n}`).join(", ");
  };
  const spec = DECISIONS[request.decision];
  const n = request.items.length;
  const confirm = el("button", { type: "button", id: "bulk-commit", text: `Confirm: ${spec.label.toLowerCase()} for ${n} ${n === 1 ? "case" : "cases"}` });
  const back = el("button", { type: "button", id: "bulk-back", className: "secondary", text: "Back: change the selection" });
  const box = el("section", { id: "bulk-summary", className: "notice", "aria-labelledby": "bulk-summary-title" },
    el("h4", { id: "bulk-summary-title", tabindex: "-1", text: `Review: ${n} ${n === 1 ? "case" : "cases"}, nothing written yet` }),
    el("dl", { className: "facts" },
      el("dt", { text: "Decision" }), el("dd", { text: `${spec.label} (reason ${request.reason_code})` }),
      el("dt", { text: "What it does" }), el("dd", { text: spec.consequence }),
      el("dt", { text: "By project" }), el("dd", { id: "bulk-by-project", text: tally("project_id") }),
      el("dt", { text: "By action type" }), el("dd", { id: "bulk-by-type", text: tally("action_type") }),
      el("dt", { text: "By finding" }), el("dd", { id: "bulk-by-finding", text: tally("last_finding") })),
    el("p", {}, confirm, " ", back));
  confirm.addEventListener("click", () => { box.remove(); runBulk(request); });
  back.addEventListener("click", () => { box.remove(); document.getElementById("bulk-submit").focus(); });
  document.getElementById("bulk-review").replaceChildren(box);
  box.querySelector("h4").focus();
}

async function selectMatching(view, params) {
  let cursor = null;
  let count = 0;
  do {
    const answer = await auth.api("GET", apiQuery(view, params, cursor, 100));
    if (!answer.ok) { say(problemText(answer), "error"); break; }
    answer.body.items.filter((item) => matchesFilter(view, item, params)).forEach((item) => {
      known.set(item.dispatch_id, item);
      selected.add(item.dispatch_id);
      count += 1;
    });
    cursor = answer.body.next_cursor;
  } while (cursor && count < SELECT_ALL_CAP);
  return count;
}

function bulkOutput() {
  if (!document.getElementById("bulk-progress")) {
    document.getElementById("main").append(el("section", { className: "card", "aria-label": "Bulk decision" },
      el("div", { id: "bulk-progress" }), el("div", { id: "bulk-results" })));
  }
}

// The list above stays as it was loaded, each row marked with its item's result, so nothing
// that happened (or failed) disappears from view; a written row can no longer be selected.
function markRow(result, written) {
  const row = document.querySelector(`#list tr[data-dispatch-id="${CSS.escape(result.dispatch_id)}"]`);
  if (!row) return;
  const box = row.querySelector(".pick");
  if (box && written) { box.checked = false; box.disabled = true; }
  const cell = row.querySelector("td a.mono").parentElement;
  cell.querySelectorAll(".badge").forEach((old) => old.remove());
  cell.append(" ", el("span", { className: "badge r-" + result.result, text: result.result }));
}

export async function runBulk(request) {
  bulkOutput();
  const progress = el("progress", { id: "bulk-bar", max: request.items.length, value: 0 });
  const label = el("span", { id: "bulk-done", role: "status", text: `0 of ${request.items.length} decided` });
  document.getElementById("bulk-progress").replaceChildren(el("label", { for: "bulk-bar", text: "Progress " }), progress, " ", label);
  const list = el("tbody");
  document.getElementById("bulk-results").replaceChildren(el("table", { id: "bulk-table" },
    el("caption", { text: "Per-item results" }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Dispatch" }), el("th", { scope: "col", text: "Result" }), el("th", { scope: "col", text: "Code" }))),
    list));
  const tally = {};
  for (let start = 0; start < request.items.length; start += BULK_CHUNK) {
    const chunk = { ...request, items: request.items.slice(start, start + BULK_CHUNK) };
    const answer = await auth.api("POST", "/v1/resolutions/bulk", chunk);
    if (answer.status === 401 && answer.body.code === "step_up_required") {
      return stepUp(answer, { kind: "bulk", request: { ...request, items: request.items.slice(start) }, back: window.location.hash });
    }
    if (answer.status === 401 && ["invalid_token", "unauthenticated"].includes(answer.body.code) && auth.signInAvailable()) {
      return signInAgain({ kind: "bulk", request: { ...request, items: request.items.slice(start) }, back: window.location.hash });
    }
    const results = answer.ok ? answer.body.results
      : chunk.items.map((item) => ({ dispatch_id: item.dispatch_id, result: "not_sent", code: answer.body.code || "http_" + answer.status }));
    results.forEach((r) => {
      tally[r.result] = (tally[r.result] || 0) + 1;
      // Written (decided, or proposed for a second person): out of the selection; the rest stay.
      const written = ["committed", "replayed", "proposed"].includes(r.result);
      if (written) selected.delete(r.dispatch_id);
      markRow(r, written);
      list.append(el("tr", { className: "r-" + r.result }, el("td", {}, caseLink(r.dispatch_id)), el("td", { text: r.result }), el("td", { text: r.code || "" })));
    });
    progress.value = Math.min(start + BULK_CHUNK, request.items.length);
    label.textContent = `${progress.value} of ${request.items.length} decided`;
    if (!answer.ok) break;
  }
  say("Bulk decision done: " + Object.entries(tally).map(([k, v]) => `${v} ${k}`).join(", ") + ".", tally.committed ? "ok" : "");
  updateBulkCount();
  // What the list counts changed with every item written: say it now, not at the next load.
  const where = route();
  await refreshCounts(where.view, where.params, plural(request.items.length, "row", "rows"));
}

