// Find (the id someone pasted into a chat) and the alert's link to the oldest case.
import * as auth from "./auth.js";
import { caseLink, el, problemText, say, when } from "./dom.js";
import { redraw } from "./nav.js";
import { needSignIn } from "./session.js";
import { known } from "./state.js";
import { VIEWS } from "./views.js";

export const ID_SHAPE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

// Find is a view of its own (#/find?q=...): whatever was on screen before is replaced, so a
// previous case never stays under a "nothing found". One match opens its case; several are
// listed; none says so.
export function find(q) {
  if (!ID_SHAPE.test(q)) {
    say("Paste a dispatch id, an idempotency key or an approval request id (letters, digits and _ . : - only).", "error");
    return;
  }
  const target = "#/find?q=" + encodeURIComponent(q);
  if (window.location.hash === target) redraw();
  else window.location.hash = target;
}

// The alert's console link: #/oldest?min_age_seconds=N opens the oldest case of the manual
// queue older than the alert's threshold (the alert carries no dispatch id: its series has none).
export async function renderOldest(main, params) {
  const minAge = params.get("min_age_seconds") || "";
  document.title = "Oldest case · approved-action resolver";
  main.append(el("h2", { tabindex: "-1", text: "Oldest case in the manual queue" }));
  const query = new URLSearchParams({ limit: "1" });
  if (/^\d{1,12}$/.test(minAge)) query.set("min_age_seconds", minAge);
  const answer = await auth.api("GET", "/v1/manual-queue?" + query.toString());
  if (answer.status === 401) { needSignIn(main); return false; }
  if (!answer.ok) {
    main.append(el("p", { className: "error", role: "alert", text: problemText(answer) }));
    return false;
  }
  const [oldest] = answer.body.items;
  if (oldest) {
    known.set(oldest.dispatch_id, oldest);
    window.location.replace("#/dispatch/" + encodeURIComponent(oldest.dispatch_id));
    return true;
  }
  main.append(el("p", { id: "found-none", text: "Nothing in the manual queue is that old any more: someone decided it, or evidence settled it." }),
    el("p", {}, el("a", { href: "#/queue", text: "Open the manual queue" })));
  return false;
}

const FOUND_STATE = {
  completion: "settled by its executor", automatic: "settled automatically from verified evidence", manual: "decided by a person",
};

function foundState(item) {
  if (!item.state) return "created, never started";
  if (item.closed_by) return `${item.state}, ${FOUND_STATE[item.closed_by] || item.closed_by}`;
  if (item.control_status === "manual") return "outcome unknown, in the manual queue";
  if (item.control_status === "armed") return "outcome unknown, waiting for evidence";
  return item.state;
}

// Retention pruned it: when, by which run, and the sha256 of the run's export (where its
// record is kept), if the run wrote one.
function prunedText(pruned) {
  if (!pruned) return [];
  const where = pruned.export_digest ? `exported (sha256 ${pruned.export_digest})` : "no export was written";
  return [el("br"), el("span", { className: "pruned" }, "pruned ", when(pruned.pruned_at_ms), ` by prune run ${pruned.run_id}; ${where}`)];
}

export async function renderFind(main, q) {
  document.title = `Find ${q} · approved-action resolver`;
  main.append(el("h2", { tabindex: "-1" }, "Find ", el("span", { className: "mono", text: q })),
    el("p", { className: "lede", text: "Every dispatch you may read whose dispatch id, idempotency key or approval id is exactly this, in any state." }));
  if (!ID_SHAPE.test(q)) {
    main.append(el("p", { id: "found-none", className: "error", text: "Not an id: letters, digits and _ . : - only." }));
    return false;
  }
  const answer = await auth.api("GET", "/v1/find?q=" + encodeURIComponent(q));
  if (answer.status === 401) { needSignIn(main); return false; }
  let items;
  if (answer.ok) items = answer.body.items;
  else if (answer.status === 404) items = await findWithOlderApi(q);
  else {
    main.append(el("p", { className: "error", role: "alert", text: problemText(answer) }));
    return false;
  }
  // A pruned dispatch has no case to open: the list says when, by which run and where its
  // export is.
  if (items.length === 1 && !items[0].pruned) {
    window.location.replace("#/dispatch/" + encodeURIComponent(items[0].dispatch_id));
    return true;
  }
  if (items.length === 0) {
    main.append(el("p", { id: "found-none", text: `Nothing found for “${q}”: no dispatch, idempotency key or approval id you may read matches it.` }));
    say(`Nothing found for “${q}”.`, "error");
    return false;
  }
  const body = el("tbody");
  items.forEach((item) => body.append(el("tr", { "data-dispatch-id": item.dispatch_id },
    el("td", {}, caseLink(item.dispatch_id)), el("td", { text: item.action_summary ? item.action_summary.title : "—" }),
    el("td", { text: item.project_id }), el("td", { text: item.action_type }),
    el("td", { text: (item.matched_by || "").replace(/_/g, " ") }), el("td", {}, foundState(item), ...prunedText(item.pruned)), el("td", {}, when(item.created_at_ms)))));
  main.append(el("p", { id: "found-count", text: items.length === 1 ? "1 dispatch matches." : `${items.length} dispatches match, newest first.` }),
    el("table", { id: "found" }, el("caption", { className: "visually-hidden", text: "Dispatches found" }),
      el("thead", {}, el("tr", {}, ...["Dispatch", "What was approved", "Project", "Action type", "Matched by", "State", "Created"].map((t) => el("th", { scope: "col", text: t })))),
      body));
  return false;
}

// An API without /v1/find: the case by its id, then each list's own lookup (`q`).
async function findWithOlderApi(q) {
  const direct = await auth.api("GET", "/v1/dispatches/" + encodeURIComponent(q));
  if (direct.ok) return [{ dispatch_id: q }];
  for (const view of ["queue", "waiting", "decided"]) {
    const answer = await auth.api("GET", VIEWS[view].path + "?limit=2&q=" + encodeURIComponent(q));
    if (answer.ok && answer.body.items.length === 1) return [answer.body.items[0]];
  }
  return [];
}

