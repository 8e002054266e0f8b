// Find (an id someone pasted into a chat, a link to the platform, or words of what was
// approved) and the alert's link to the oldest case. Find is a view of its own
// (#/find?q=...): whatever was on screen before is replaced, whatever was typed, so a previous
// case never stays under an answer about something else.
import * as auth from "./auth.js";
import { caseLink, el, problemText, say, summaryLine, when } from "./dom.js";
import { redraw } from "./nav.js";
import { needSignIn } from "./session.js";
import { known, rememberList } from "./state.js";
import { VIEWS } from "./views.js";

const ID_SHAPE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
// Words of what was approved: as many characters as the API takes (`words` of GET /v1/find),
// on one line. Shorter than three is not a search (it would match nearly everything).
const WORDS_MIN = 3;
const WORDS_MAX = 100;
const CONTROL = /[\u0000-\u001f\u007f]/;
// A link pasted from the platform's UI: its path segments and query values are looked up as ids.
const LINK = /^[a-z][a-z0-9+.-]*:\/\//i;
const LINK_IDS_MAX = 5;

export function find(q) {
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
  // "Back" from the case goes to the queue as the alert sees it: everything past its threshold.
  const listed = new URLSearchParams();
  if (query.has("min_age_seconds")) listed.set("min_age_seconds", minAge);
  rememberList("#/queue" + (listed.toString() ? "?" + listed.toString() : ""));
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

export function foundState(item) {
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
  const where = pruned.export_digest ? ["exported (sha256 ", el("span", { className: "mono digest-text", text: pruned.export_digest }), ")"] : ["no export was written"];
  return [el("br"), el("span", { className: "pruned" }, "pruned ", when(pruned.pruned_at_ms), ` by prune run ${pruned.run_id}; `, ...where)];
}

const MATCHED = {
  dispatch_id: "dispatch id", idempotency_key: "idempotency key", approval_request_id: "approval id", summary: "what was approved",
};

// What the typed text is: an id (looked up exactly, then as words if it names nothing: an
// order number has an id's shape too), words, a link (its ids looked up), or something that
// cannot be looked up, with the reason.
function understand(q) {
  if (!q) return { problem: "Type a dispatch id, an idempotency key, an approval id or words of what was approved." };
  if (CONTROL.test(q)) return { problem: "It holds a control character (a line break, a tab): paste one id or one line of words." };
  if (LINK.test(q)) {
    let url = null;
    try {
      url = new URL(q);
    } catch (_e) {
      return { problem: "It looks like a link but is not a valid one." };
    }
    const parts = [...url.pathname.split("/").reverse(), ...url.searchParams.values()]
      .map((part) => { try { return decodeURIComponent(part); } catch (_e) { return ""; } })
      .filter((part) => ID_SHAPE.test(part) && part.length >= WORDS_MIN);
    const ids = [...new Set(parts)].slice(0, LINK_IDS_MAX);
    if (!ids.length) return { problem: "It is a link with no id in it: open the approval it points to and paste the approval id or the dispatch id." };
    return { ids, link: true };
  }
  if (ID_SHAPE.test(q)) return { ids: [q], words: q.length >= WORDS_MIN && q.length <= WORDS_MAX ? q : null };
  if (q.length < WORDS_MIN) return { problem: `Words of what was approved need ${WORDS_MIN} characters or more.` };
  if (q.length > WORDS_MAX) return { problem: `At most ${WORDS_MAX} characters: paste one id, or a few words of what was approved.` };
  return { ids: [], words: q };
}

export async function renderFind(main, q) {
  document.title = `Find ${q.slice(0, 60)} · approved-action resolver`;
  main.append(el("h2", { tabindex: "-1" }, "Find ", el("span", { className: "mono", text: q.length > 120 ? q.slice(0, 120) + "…" : q })),
    el("p", { className: "lede", text: "Every dispatch you may read, in any state (pruned included), whose dispatch id, idempotency key or approval id is exactly this, or whose summary of what was approved contains these words." }));
  const asked = understand(q);
  if (asked.problem) {
    main.append(el("p", { id: "found-none", className: "error", role: "alert", text: `“${q.length > 120 ? q.slice(0, 120) + "…" : q}” cannot be looked up. ${asked.problem}` }));
    say("Nothing was looked up.", "error");
    return false;
  }
  if (asked.link) main.append(el("p", { id: "found-link", className: "notice", text: `That is a link, not an id: looking up the ids in it (${asked.ids.join(", ")}).` }));
  const items = [];
  const add = (found) => found.forEach((item) => { if (!items.some((seen) => seen.dispatch_id === item.dispatch_id)) items.push(item); });
  for (const one of asked.ids) {
    const answer = await auth.api("GET", "/v1/find?q=" + encodeURIComponent(one));
    if (answer.status === 401) { needSignIn(main); return false; }
    if (answer.ok) add(answer.body.items);
    else if (answer.status === 404) add(await findWithOlderApi(one));
    else {
      main.append(el("p", { className: "error", role: "alert", text: problemText(answer) }));
      return false;
    }
  }
  // Words only when no id matched: what was pasted named no dispatch, so it may be an order
  // number, a customer or an amount.
  if (!items.length && asked.words) {
    const answer = await auth.api("GET", "/v1/find?words=" + encodeURIComponent(asked.words));
    if (answer.status === 401) { needSignIn(main); return false; }
    if (answer.ok) add(answer.body.items);
    else if (answer.status === 422 || answer.status === 404) {
      // An API that finds by id only answers a `words` query as invalid.
      if (!asked.ids.length) {
        main.append(el("p", { id: "found-none", className: "error", text: "This API finds by exact id only (dispatch id, idempotency key or approval id), not by words." }));
        return false;
      }
    } else {
      main.append(el("p", { className: "error", role: "alert", text: problemText(answer) }));
      return false;
    }
  }
  // One match opens its case (a pruned one too: its page says what retention kept).
  if (items.length === 1) {
    window.location.replace("#/dispatch/" + encodeURIComponent(items[0].dispatch_id));
    return true;
  }
  if (items.length === 0) {
    main.append(el("p", { id: "found-none", text: `Nothing found for “${q}”: no dispatch you may read has that id, idempotency key or approval id` +
      (asked.words ? ", or those words in what was approved." : ".") }));
    say(`Nothing found for “${q}”.`, "error");
    return false;
  }
  const columns = ["Dispatch", "What was approved", "Project", "Action type", "Matched by", "State", "Created"];
  const body = el("tbody");
  items.forEach((item) => {
    const row = el("tr", { "data-dispatch-id": item.dispatch_id });
    const cell = (...content) => row.append(el("td", { "data-label": columns[row.children.length] }, ...content));
    cell(caseLink(item.dispatch_id));
    cell(item.action_summary ? summaryLine(item.action_summary) : "—");
    cell(item.project_id);
    cell(item.action_type);
    cell(MATCHED[item.matched_by] || (item.matched_by || "").replace(/_/g, " "));
    cell(foundState(item), ...prunedText(item.pruned));
    cell(when(item.created_at_ms));
    body.append(row);
  });
  main.append(el("p", { id: "found-count", text: `${items.length} dispatches match, newest first.` }),
    el("table", { id: "found", className: "cards" }, el("caption", { className: "visually-hidden", text: "Dispatches found" }),
      el("thead", {}, el("tr", {}, ...columns.map((t) => el("th", { scope: "col", text: t })))),
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
