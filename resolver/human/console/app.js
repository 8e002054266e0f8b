// The operator console: three lists, the case view and decisions, against the same-origin API.
// Data is only ever placed as text (textContent, attribute values): nothing from the server or
// the address bar becomes markup. All state a reload must keep lives in the URL fragment.
import * as auth from "./auth.js";

const FINDINGS = ["conflict", "unsupported", "missing", "still_running", "unavailable"];
// "over 4 hours" is the manual-queue alert's threshold (ResolverManualQueueAgeing).
const AGES = [["", "any age"], ["300", "over 5 minutes"], ["3600", "over 1 hour"], ["14400", "over 4 hours (the alert's threshold)"], ["86400", "over 1 day"]];
const DECISIONS = {
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
// Why the evidence says what it says: each reason code's sentence, and whether a conflict
// with it suggests forged or tampered evidence (confirming such a case as succeeded needs its
// own acknowledgement), as the installed providers declare them (config.json).
function reasonSentence(code) {
  const reason = Object.hasOwn(config.evidence_reasons || {}, code) ? config.evidence_reasons[code] : null;
  return reason ? reason.sentence : null;
}
function reasonSuggestsTampering(code) {
  const reason = Object.hasOwn(config.evidence_reasons || {}, code) ? config.evidence_reasons[code] : null;
  return Boolean(reason && reason.suggests_tampering);
}
const FINDING_WORDS = {
  conflict: "Evidence conflicts", unsupported: "No provider can check it", missing: "No evidence found yet",
  still_running: "The action still looks in progress", unavailable: "The evidence source could not be read",
  verified_succeeded: "Verified: succeeded", verified_failed: "Verified: failed",
};
const LIST_FILTERS = ["project_id", "action_type", "owner", "last_finding", "last_reason", "min_age_seconds", "summary", "q", "sort"];
const SORTS = [["", "oldest first"], ["action_type", "by action type"], ["project_id", "by project"], ["last_finding", "by last finding"]];
// The triage counts above a list, each value a filter (and a suggestion in its filter field).
const TRIAGE = [["action_type", "By action type"], ["reason", "By reason"], ["project_id", "By project"], ["owner", "By executor"]];
const VIEWS = {
  queue: {
    title: "Manual queue", path: "/v1/manual-queue", filters: LIST_FILTERS, bulk: true, noun: ["case", "cases"],
    lede: "Evidence could not settle these executions. Each decision is final and audited.",
    empty: "Nothing waits for a decision.",
    columns: ["Dispatch", "What was approved", "Project", "Action type", "Executor", "Last finding", "Why here", "In queue since", "Proposal"],
  },
  waiting: {
    title: "Waiting for evidence", path: "/v1/waiting", filters: LIST_FILTERS, bulk: false, noun: ["case", "cases"],
    lede: "Recovery required, inspected at least once, not settled: providers keep looking.",
    empty: "Nothing is waiting for evidence.",
    columns: ["Dispatch", "What was approved", "Project", "Action type", "Executor", "Last finding", "Last failure", "Waiting since", "Next look", "Proposal"],
  },
  proposals: {
    title: "Waiting for a second person", path: "/v1/manual-queue", fixed: { open_proposal: "true" }, filters: LIST_FILTERS, bulk: false, noun: ["case", "cases"],
    lede: "Two-person cases: one person proposed a decision; a different person with the same permission must confirm or reject it before it expires.",
    empty: "No proposal waits for a second person.",
    columns: ["Dispatch", "What was approved", "Project", "Action type", "Executor", "Last finding", "Why here", "In queue since", "Proposal"],
  },
  decided: {
    title: "Decided", path: "/v1/decisions", bulk: false, noun: ["decision", "decisions"],
    filters: ["project_id", "action_type", "overridden_finding", "user_id", "since", "until", "q"],
    lede: "Human decisions, newest first: who decided what, how they signed in, and what evidence said later.",
    empty: "No decision has been recorded yet.",
    columns: ["Dispatch", "Project", "Action type", "Decision", "By", "Reason", "Sign-in", "Decided", "Later evidence"],
  },
};
const BULK_CHUNK = 100;
// Where an API that does not say (`total_cap`) stops counting the matching cases.
const OLDER_TOTAL_CAP = 10000;
const PAGE_SIZES = ["25", "50", "100"];
const SELECT_ALL_CAP = 1000;

let config = { oidc: null, links: [], reason_codes: [], evidence_reasons: {} };
const known = new Map(); // dispatch_id -> the last list item seen for it
// The bulk selection belongs to one list and filter: another filter (or list) clears it, so a
// decision can never reach a case the filter on screen leaves out. Another page of the same
// filter keeps it, counted as "selected outside this page" with a way to see them.
const selected = new Set();
let selectionKey = null;

function filterKey(view, params) {
  const p = new URLSearchParams(params);
  ["cursor", "from", "limit"].forEach((name) => p.delete(name));
  p.sort();
  return view + "?" + p.toString();
}

// -- small DOM helpers ------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([key, value]) => {
    if (value === null || value === undefined || value === false) return;
    if (key === "text") node.textContent = value;
    else if (key === "className") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  });
  children.flat().forEach((child) => {
    if (child === null || child === undefined) return;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  });
  return node;
}

function say(text, kind) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = kind || "";
}

function decisionLabel(decision) {
  return DECISIONS[decision] ? DECISIONS[decision].label : decision;
}

function isFiltered(view, params) {
  return VIEWS[view].filters.some((name) => name !== "sort" && params.get(name));
}

function pad(n) {
  return String(n).padStart(2, "0");
}

function age(ms) {
  const seconds = Math.round((Date.now() - ms) / 1000);
  const abs = Math.abs(seconds);
  const [n, unit] = abs < 90 ? [abs, "s"] : abs < 5400 ? [Math.round(abs / 60), "min"]
    : abs < 129600 ? [Math.round(abs / 3600), "h"] : [Math.round(abs / 86400), "d"];
  return seconds >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
}

// UTC with the relative age beside it: an on-call engineer reads both at a glance.
function utc(ms) {
  const d = new Date(ms);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
}

function when(ms) {
  if (ms === null || ms === undefined) return el("span", { text: "—" });
  const iso = new Date(ms).toISOString();
  return el("time", { datetime: iso, title: iso }, utc(ms), el("span", { className: "age", text: ` (${age(ms)})` }));
}

function caseLink(id) {
  return el("a", { href: "#/dispatch/" + encodeURIComponent(id), className: "mono", text: id });
}

function problemText(answer) {
  const p = answer.body || {};
  const code = p.code || "http_" + answer.status;
  let text = `${answer.status || "no answer"} ${code}: ${p.title || "the request failed"}`;
  if (p.current) {
    text += ` Current state: ${p.current.state}, version ${p.current.version}` +
      (p.current.control_status ? `, control ${p.current.control_status}` : "") + ".";
  }
  return text;
}

// -- routing: the fragment is the whole state -------------------------------------------------

function route() {
  const hash = window.location.hash.replace(/^#/, "");
  const match = /^\/dispatch\/(.+)$/.exec(hash);
  if (match) return { view: "case", id: decodeURIComponent(match[1]) };
  const [path, query] = hash.split("?");
  const view = path.replace(/^\//, "");
  if (view === "find" || view === "oldest") return { view, params: new URLSearchParams(query || "") };
  return { view: VIEWS[view] ? view : "queue", params: new URLSearchParams(query || "") };
}

function listHash(view, params) {
  const query = params.toString();
  return "#/" + view + (query ? "?" + query : "");
}

function setNav(view) {
  document.querySelectorAll("#nav a").forEach((link) => {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  });
}

// Each render draws into a slot of its own: a slower, older render (the operator changed the
// filter while a page was loading) then finishes into a detached slot instead of mixing its
// rows into the view on screen. `aria-busy` tells assistive technology (and anyone waiting
// for the page) that the view is being redrawn; `data-route` names the view that was drawn.
let renders = 0;

// `quiet`: a refresh of the list on screen (polling). The new rows are drawn off screen and
// swapped in at once, keeping the scroll position, the focused control and the selection.
async function render(quiet) {
  const generation = ++renders;
  const where = route();
  setNav(where.view);
  const main = document.getElementById("main");
  const slot = el("div", { className: "view" });
  if (!quiet) {
    main.setAttribute("aria-busy", "true");
    main.replaceChildren(slot);
    say("");
  }
  renderIdentity();
  let moved = false;
  if (where.view === "case") await renderCase(slot, where.id);
  else if (where.view === "find") moved = await renderFind(slot, where.params.get("q") || "");
  else if (where.view === "oldest") moved = await renderOldest(slot, where.params);
  else await renderList(slot, where.view, where.params);
  // A find that names one dispatch moved on to its case: that render marks the page drawn.
  if (generation !== renders || moved) return;
  if (quiet) {
    const focused = document.activeElement && document.activeElement.id;
    const [x, y] = [window.scrollX, window.scrollY];
    main.replaceChildren(slot);
    updateBulkCount();
    window.scrollTo(x, y);
    if (focused && document.getElementById(focused)) document.getElementById(focused).focus({ preventScroll: true });
    return;
  }
  main.dataset.route = window.location.hash;
  main.setAttribute("aria-busy", "false");
  const heading = slot.querySelector("h2");
  if (heading && document.activeElement === document.body) heading.focus();
}

// -- sign-in ------------------------------------------------------------------------------------

function renderIdentity() {
  const box = document.getElementById("identity");
  const claims = auth.tokenClaims();
  const parts = [];
  if (claims && claims.sub && sessionLeft(claims) <= 0) {
    // An expired token is not a signed-in session, whatever name it carries.
    parts.push(el("span", { id: "who", className: "error", text: `Your sign-in as ${claims.sub} has expired` }));
    if (auth.signInAvailable()) parts.push(el("button", { type: "button", id: "sign-in", text: "Sign in again", onclick: () => startSignIn() }));
  } else if (claims && claims.sub) {
    parts.push(el("span", { id: "who", text: `Signed in as ${claims.sub}` + (claims.amr ? ` (${[].concat(claims.amr).join(", ")})` : "") }));
    parts.push(el("button", { type: "button", id: "sign-out", text: "Sign out", onclick: () => { auth.signOut(); render(); } }));
    parts.push(el("span", { id: "session", role: "status", className: "hint" }));
  } else if (auth.signInAvailable()) {
    parts.push(el("button", { type: "button", id: "sign-in", text: "Sign in", onclick: () => startSignIn() }));
  }
  box.replaceChildren(...parts);
  updateSession();
}

// -- the session: when the token and the strong sign-in run out, said before it matters ------

const WARN_BEFORE_MS = 2 * 60 * 1000;

function sessionLeft(claims) {
  return claims && claims.exp ? claims.exp * 1000 - Date.now() : Infinity;
}

function strongLeft(claims) {
  if (!claims || !claims.auth_time || !config.strong_auth_seconds) return Infinity;
  return (claims.auth_time + config.strong_auth_seconds) * 1000 - Date.now();
}

function updateSession() {
  const line = document.getElementById("session");
  const claims = auth.tokenClaims();
  if (!claims) return;
  if (sessionLeft(claims) <= 0 && line) { renderIdentity(); return; }
  if (!line) return;
  const parts = [];
  if (claims.exp) parts.push(`session until ${utc(claims.exp * 1000).slice(11)} (${age(claims.exp * 1000)})`);
  const strong = strongLeft(claims);
  if (strong !== Infinity) {
    parts.push(strong > 0 ? `decisions without signing in again until ${utc(Date.now() + strong).slice(11)} (${age(Date.now() + strong)})`
      : "a decision will ask you to sign in again");
  }
  line.textContent = parts.join("; ");
  const soon = Math.min(sessionLeft(claims), strong) < WARN_BEFORE_MS;
  line.className = soon ? "warn" : "hint";
}

async function startSignIn(stepUp, retry) {
  try {
    await auth.signIn(stepUp, retry);
  } catch (error) {
    say("Sign-in could not start: " + error.message, "error");
  }
}

function needSignIn(main) {
  const section = el("section", { id: "signin", "aria-labelledby": "signin-title" },
    el("h2", { id: "signin-title", tabindex: "-1", text: "Sign in" }));
  if (auth.signInAvailable()) {
    section.append(el("p", { text: "Sign in with your organisation's identity provider." }),
      el("button", { type: "button", id: "signin-oidc", text: "Sign in", onclick: () => startSignIn() }));
  }
  const form = el("form", { id: "signin-form" },
    el("label", { for: "token", text: "Access token" }),
    el("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true }),
    el("button", { type: "submit", text: "Use token" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    auth.setToken(document.getElementById("token").value.trim());
    render();
  });
  section.append(el("p", { text: auth.signInAvailable() ? "Or paste an access token (it stays in this tab only)." :
    "No session was forwarded by your identity proxy. Paste an access token (it stays in this tab only)." }), form);
  main.replaceChildren(section);
  say("Not signed in.", "error");
}

// -- the three lists ----------------------------------------------------------------------------

function filterForm(view, params) {
  const spec = VIEWS[view];
  const form = el("form", { id: "filters", className: "filters", role: "search", "aria-label": "Filter " + spec.title });
  const field = (name, label, control) => el("div", { className: "field" }, el("label", { for: "f-" + name, text: label }), control);
  const input = (name, extra) => el("input", { id: "f-" + name, name, value: params.get(name) || "", ...extra });
  const select = (name, options, fallback = "") => {
    const control = el("select", { id: "f-" + name, name });
    options.forEach(([value, text]) => control.append(el("option", { value, text, selected: (params.get(name) || fallback) === value })));
    return control;
  };
  spec.filters.forEach((name) => {
    if (name === "q") form.append(field(name, "Dispatch id, idempotency key or approval id", input(name, { className: "wide", autocomplete: "off" })));
    else if (name === "project_id") form.append(field(name, "Project", input(name, { list: "dl-project_id", autocomplete: "off" })));
    else if (name === "owner") form.append(field(name, "Executor", input(name, { list: "dl-owner", autocomplete: "off" })));
    else if (name === "last_reason") form.append(field(name, "Reason", input(name, { list: "dl-reason", autocomplete: "off" })));
    else if (name === "summary") form.append(field(name, "What was approved (words)", input(name, { autocomplete: "off", maxlength: 100 })));
    else if (name === "action_type") form.append(field(name, "Action type", input(name, { list: "dl-action_type", autocomplete: "off" })));
    else if (name === "user_id") form.append(field(name, "Decided by", input(name)));
    else if (name === "last_finding") form.append(field(name, "Finding", select(name, [["", "any finding"], ...FINDINGS.map((f) => [f, f])])));
    else if (name === "overridden_finding") form.append(field(name, "Finding overridden", select(name, [["", "any finding"], ...FINDINGS.map((f) => [f, f])])));
    else if (name === "min_age_seconds") form.append(field(name, "Age", select(name, AGES)));
    else if (name === "sort") form.append(field(name, "Order", select(name, SORTS)));
    // Plain YYYY-MM-DD text, not a date picker: a picker shows the browser's locale order,
    // and an on-call engineer must never wonder whether 03/04 is March or April.
    else if (name === "since" || name === "until") {
      form.append(field(name, name === "since" ? "From (UTC day, YYYY-MM-DD)" : "To (UTC day, YYYY-MM-DD, included)",
        input(name, { pattern: "\\d{4}-\\d{2}-\\d{2}", placeholder: "YYYY-MM-DD", size: 11, autocomplete: "off" })));
    }
  });
  const size = String(pageSize(params));
  const sizes = PAGE_SIZES.includes(size) ? PAGE_SIZES : [...PAGE_SIZES, size].sort((a, b) => a - b);
  form.append(field("limit", "Rows per page", select("limit", sizes.map((n) => [n, n]), "50")));
  form.append(el("button", { type: "submit", text: "Apply" }),
    el("a", { href: "#/" + view, className: "reset", text: "Clear filters" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    new FormData(form).forEach((value, key) => {
      const text = String(value).trim();
      if (text && !(key === "limit" && text === "50")) next.set(key, text); // the default stays out of the link
    });
    window.location.hash = listHash(view, next);
  });
  return form;
}

function apiQuery(view, params, cursor, limit) {
  const query = new URLSearchParams({ limit: String(limit || 50), ...(VIEWS[view].fixed || {}) });
  VIEWS[view].filters.forEach((name) => {
    const value = params.get(name);
    if (!value) return;
    if (name === "since") query.set("since_ms", String(Date.parse(value + "T00:00:00Z")));
    else if (name === "until") query.set("until_ms", String(Date.parse(value + "T00:00:00Z") + 86400000));
    else query.set(name, value);
  });
  if (cursor) query.set("cursor", cursor);
  return VIEWS[view].path + "?" + query.toString();
}

// Page size and the first row's number live in the fragment too, so a reload or a pasted link
// shows the same page; the row number is for display only (the cursor is the real position).
function pageSize(params) {
  const n = Number(params.get("limit"));
  return Number.isInteger(n) && n >= 1 && n <= 100 ? n : 50;
}

function firstRow(params) {
  const n = Number(params.get("from"));
  return params.get("cursor") && Number.isInteger(n) && n >= 1 ? n : 1;
}

function countsText(view, params, page) {
  const filtered = isFiltered(view, params);
  const first = firstRow(params);
  const sorted = SORTS.find(([value]) => value && value === params.get("sort"));
  const order = view === "decided" ? "newest first" : sorted ? `${sorted[1]}, oldest first within` : "oldest first";
  const shown = page.items.length ? ` Showing rows ${first} to ${first + page.items.length - 1}, ${order}.` : "";
  if (typeof page.total === "number") {
    const [one, several] = VIEWS[view].noun;
    const cap = typeof page.total_cap === "number" ? page.total_cap : OLDER_TOTAL_CAP;
    const many = page.total >= cap ? `${cap.toLocaleString("en")} or more ${several}` : page.total === 1 ? `1 ${one}` : `${page.total} ${several}`;
    const verb = page.total === 1 ? "matches" : "match";
    return (filtered ? `${many} ${verb} the filter.` : `${many} in this list.`) + shown;
  }
  // An older API's decisions list: no total, so say only whether more follow.
  if (view === "decided") {
    return (page.items.length ? shown.trim() : "No decision on this page.") + (page.next_cursor ? " More on the next page." : "");
  }
  // An older API: no totals, and it may ignore filters (this page was filtered here).
  return `${page.items.length} on this page.` + (filtered ? " This API reports no totals and filters nothing: the console filtered this page itself." : "");
}

async function renderList(main, view, params) {
  const spec = VIEWS[view];
  if (spec.bulk && selectionKey !== filterKey(view, params)) {
    if (selected.size) say(`Selection cleared: the ${selected.size} selected under the previous filter were not kept.`, "");
    selected.clear();
    selectionKey = filterKey(view, params);
  }
  document.title = `${spec.title} · approved-action resolver`;
  main.append(el("h2", { tabindex: "-1", text: spec.title }), el("p", { className: "lede", text: spec.lede }), filterForm(view, params));
  const answer = await auth.api("GET", apiQuery(view, params, params.get("cursor"), pageSize(params)));
  if (answer.status === 401) return needSignIn(main);
  if (answer.status === 404 && view !== "queue") {
    main.append(el("p", { id: "unavailable", className: "notice", text: `“${spec.title}” is not available from this API (GET ${spec.path} answered 404): upgrade the resolver API to see it.` }));
    return;
  }
  if (!answer.ok) {
    main.append(el("p", { className: "error", role: "alert", text: problemText(answer) }));
    // A link kept from an older page (a cursor the API no longer accepts): offer the start.
    if (params.get("cursor")) main.append(pager(view, params, null));
    return;
  }
  const page = answer.body;
  if (typeof page.total !== "number") page.items = page.items.filter((item) => matchesFilter(view, item, params));
  page.items.forEach((item) => known.set(item.dispatch_id, item));
  if (view !== "decided") main.append(await triage(view, params));
  main.append(el("p", { id: "counts", text: countsText(view, params, page) }));
  if (page.items.length === 0) {
    main.append(el("p", { id: "empty", text: isFiltered(view, params) ? "Nothing matches this filter." : spec.empty }));
  } else {
    main.append(listTable(view, page.items));
  }
  main.append(pager(view, params, page.next_cursor, page.items.length));
  if (spec.bulk && page.items.length) {
    main.append(bulkPanel(view, params, page));
    updateBulkCount();
  }
}

// Above the list: the matching cases by action type, reason, project and executor, each count
// a link that adds its filter; the values also become the filter fields' suggestions.
async function triage(view, params) {
  const section = el("section", { id: "triage", "aria-label": "Counts by type, reason, project and executor" });
  const answer = await auth.api("GET", apiQuery(view, params, null, 1).replace("?", "/counts?"));
  if (!answer.ok) return section;
  TRIAGE.forEach(([dimension, title]) => {
    const counts = answer.body[dimension] || {};
    const list = el("ul", { className: "chips", id: "triage-" + dimension });
    Object.entries(counts).forEach(([value, n]) => {
      const next = new URLSearchParams(params);
      ["cursor", "from"].forEach((p) => next.delete(p));
      const name = dimension === "reason" ? (FINDINGS.includes(value) ? "last_finding" : "last_reason") : dimension;
      next.set(name, value);
      const words = dimension === "reason" && reasonSentence(value) ? ` (${reasonSentence(value)})` : "";
      list.append(el("li", {}, el("a", { href: listHash(view, next), title: value + words, text: `${value}: ${n}` })));
    });
    const datalist = document.getElementById("dl-" + dimension) || document.body.appendChild(el("datalist", { id: "dl-" + dimension }));
    datalist.replaceChildren(...Object.keys(counts).map((value) => el("option", { value })));
    if (list.children.length) section.append(el("div", { className: "triage" }, el("h3", { text: title }), list));
  });
  return section;
}

function pager(view, params, nextCursor, shown) {
  const nav = el("nav", { className: "pager", "aria-label": "Pages" });
  if (params.get("cursor")) {
    const first = new URLSearchParams(params);
    first.delete("cursor");
    first.delete("from");
    nav.append(el("a", { href: listHash(view, first), id: "first-page", text: "First page" }));
  }
  if (nextCursor) {
    const next = new URLSearchParams(params);
    next.set("cursor", nextCursor);
    next.set("from", String(firstRow(params) + shown));
    nav.append(el("a", { href: listHash(view, next), id: "next-page", text: "Next page" }));
  }
  return nav;
}

function proposalText(proposal) {
  if (!proposal) return "—";
  return `${proposal.decision} proposed by ${proposal.proposed_by}, expires ${age(proposal.expires_at_ms)}`;
}

function listTable(view, items) {
  const spec = VIEWS[view];
  const head = el("tr");
  if (spec.bulk) head.append(el("th", { scope: "col" }, el("span", { className: "visually-hidden", text: "Select" })));
  spec.columns.forEach((title) => head.append(el("th", { scope: "col", text: title })));
  const body = el("tbody");
  items.forEach((item) => body.append(listRow(view, item)));
  return el("table", { id: "list", className: view }, el("caption", { className: "visually-hidden", text: spec.title }), el("thead", {}, head), body);
}

function listRow(view, item) {
  const row = el("tr", { "data-dispatch-id": item.dispatch_id, className: item.contradicted === true ? "contradicted" : null });
  // Each cell names its column (shown when narrow screens lay a row out as a card).
  const labels = [...(VIEWS[view].bulk ? [null] : []), ...VIEWS[view].columns];
  const cell = (...content) => row.append(el("td", { "data-label": labels[row.children.length] }, ...content));
  if (VIEWS[view].bulk) {
    const box = el("input", {
      type: "checkbox", className: "pick", "aria-label": "Select " + item.dispatch_id, checked: selected.has(item.dispatch_id),
    });
    box.addEventListener("change", () => {
      if (box.checked) selected.add(item.dispatch_id); else selected.delete(item.dispatch_id);
      updateBulkCount();
    });
    cell(box);
  }
  cell(caseLink(item.dispatch_id), twoPeopleMark(item.two_person_decisions));
  if (view !== "decided") cell(item.action_summary ? summaryLine(item.action_summary) : el("span", { className: "hint", text: "not given" }));
  cell(item.project_id);
  cell(item.action_type);
  if (view !== "decided") cell(item.owner || "—");
  if (view === "decided") {
    cell(`${item.decision} → ${item.outcome}`);
    cell(item.actor_user_id + (item.confirmed_by ? `, confirmed by ${item.confirmed_by}` : ""));
    cell(item.reason_code);
    cell([].concat(item.amr || []).join(", "));
    cell(when(item.resolved_at_ms));
    cell(item.contradicted === true ? el("strong", { className: "error", text: "contradicted: check it" }) : item.contradicted === false ? "agrees" : "—");
    return row;
  }
  cell((item.last_finding || "—") + (item.last_reason ? ` (${item.last_reason})` : "") +
    `, ${item.finding_count} inspection${item.finding_count === 1 ? "" : "s"}`);
  cell(view === "waiting" ? item.last_failure_class || "—" : whyHere(item));
  cell(when(sinceMs(view, item)));
  if (view === "waiting") cell(...waitingTimes(item.next_look_at_ms, item.escalates_at_ms, item.last_finding));
  cell(proposalText(item.proposal));
  return row;
}

// A waiting case's next look and, if its finding escalates, when it goes to the manual queue
// (the first look from then on); both in UTC with the relative time. An older API sends
// neither: a dash.
function waitingTimes(nextMs, escalatesMs, finding) {
  if (nextMs === null || nextMs === undefined) return [el("span", { text: "—" })];
  const parts = [when(nextMs)];
  if (escalatesMs !== null && escalatesMs !== undefined) {
    parts.push(el("br"), el("span", { className: "escalates" }, "escalates ", when(escalatesMs), ` if still ${finding || "unsettled"}`));
  } else if (escalatesMs === null) {
    parts.push(el("br"), el("span", { className: "escalates hint", text: "never escalates on this finding" }));
  }
  return parts;
}

// "Needs two people", before anyone decides: which decisions a rule covers on this action type.
function twoPeopleMark(decisions) {
  if (!decisions || !decisions.length) return null;
  return [" ", el("span", { className: "badge two-people", text: "needs two people: " + decisions.map(decisionLabel).join(", ").toLowerCase() })];
}

// A summary in one line for a list row: the title, then its facts.
function summaryLine(summary) {
  const facts = (summary.facts || []).map((f) => `${f.label}: ${f.value}`).join(" · ");
  return el("span", { className: "summary" }, el("strong", { text: summary.title }), facts ? el("br") : null, facts ? el("span", { className: "hint", text: facts }) : null);
}

// Why a case is in the manual queue, said once and in words (the finding has its own column).
function whyHere(item) {
  if (item.manual_reason === "evidence_window_elapsed") return "escalated: no settling evidence in time";
  if (item.manual_reason === "conflict") return "the evidence conflicts";
  if (item.manual_reason === "unsupported") return "no provider can check it";
  return item.manual_reason || "—";
}

function reasonWords(code) {
  return code ? reasonSentence(code) || `the provider reported ${code}` : null;
}

function suggestsTampering(c) {
  return Boolean(c.control && c.control.last_finding === "conflict" && reasonSuggestsTampering(c.control.last_reason));
}

// What a list is ordered by and what its age filter measures: entering the queue for the
// manual queue, the first inspection for the waiting list (the API's own keyset).
function sinceMs(view, item) {
  return view === "waiting" ? item.first_inspected_at_ms : item.manual_at_ms;
}

// -- bulk ---------------------------------------------------------------------------------------

function updateBulkCount() {
  const count = document.getElementById("bulk-count");
  if (count) count.textContent = `${selected.size} selected`;
  const button = document.getElementById("bulk-submit");
  if (button) button.textContent = `Review ${selected.size} selected`;
  const outside = Array.from(selected).filter((id) => !document.querySelector(`#list tr[data-dispatch-id="${CSS.escape(id)}"]`));
  const note = document.getElementById("bulk-outside");
  if (note) {
    note.hidden = outside.length === 0;
    note.querySelector("summary").textContent = `${outside.length} selected outside this page (same filter): show them`;
    note.querySelector("ul").replaceChildren(...outside.map((id) => el("li", {}, caseLink(id))));
  }
}

function decisionChoices(prefix) {
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

function reasonFields(prefix) {
  return [
    el("div", { className: "field" },
      el("label", { for: prefix + "-reason", text: "Reason code (pick one or type your own)" }),
      el("input", { id: prefix + "-reason", name: "reason_code", list: "reason-codes", required: true, pattern: "[a-z0-9_.\\-]{1,64}", autocomplete: "off" })),
    el("div", { className: "field" },
      el("label", { for: prefix + "-digest", text: "Evidence digest (optional, sha256 hex of what you checked)" }),
      el("input", { id: prefix + "-digest", name: "evidence_digest", pattern: "[0-9a-f]{64}", className: "wide", autocomplete: "off" })),
  ];
}

function bulkPanel(view, params, page) {
  const allOnPage = el("button", { type: "button", id: "select-page", text: "Select this page", onclick: () => {
    page.items.forEach((item) => selected.add(item.dispatch_id));
    document.querySelectorAll("#list .pick").forEach((box) => { box.checked = true; });
    updateBulkCount();
  } });
  const allMatching = el("button", { type: "button", id: "select-matching", text: "Select everything matching the filter", onclick: async () => {
    const count = await selectMatching(view, params);
    document.querySelectorAll("#list .pick").forEach((box) => { box.checked = true; });
    updateBulkCount();
    say(`${count} selected from every page of this filter.`, "ok");
  } });
  const none = el("button", { type: "button", id: "select-none", text: "Clear selection", onclick: () => {
    selected.clear();
    document.querySelectorAll("#list .pick").forEach((box) => { box.checked = false; });
    updateBulkCount();
  } });
  const form = el("form", { id: "bulk-form", "aria-labelledby": "bulk-title" },
    el("h3", { id: "bulk-title", text: "Decide the selection" }),
    el("p", { text: "One decision and reason for every selected dispatch; each is still its own fenced decision and two-person rules apply per item." }),
    el("p", {}, allOnPage, " ", allMatching, " ", none, " ", el("span", { id: "bulk-count", role: "status", text: `${selected.size} selected` })),
    el("details", { id: "bulk-outside", hidden: true }, el("summary", { text: "" }), el("ul")),
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

// The filter checked in the page too: an older API ignores filter parameters, and a bulk
// selection must never take in more than the operator filtered for.
function matchesFilter(view, item, params) {
  const finding = view === "decided" ? "overridden_finding" : "last_finding";
  const exact = ["project_id", "action_type", finding].every((name) => !params.get(name) || item[name] === params.get(name));
  const q = params.get("q");
  const found = !q || [item.dispatch_id, item.idempotency_key, item.approval_request_id].includes(q);
  // The decisions list's user and days were filtered by every API version that serves it.
  if (view === "decided") return exact && found;
  const minAge = Number(params.get("min_age_seconds") || 0);
  const since = sinceMs(view, item);
  return exact && found && (!minAge || (since !== undefined && Date.now() - since >= minAge * 1000));
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

async function runBulk(request) {
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
}

// -- the case view ------------------------------------------------------------------------------

async function renderCase(main, id) {
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

function copyButton(label, value) {
  return el("button", { type: "button", className: "copy", "aria-label": "Copy " + label, text: "Copy", onclick: async () => {
    try {
      await navigator.clipboard.writeText(value);
      say(`${label} copied.`, "ok");
    } catch (_e) {
      say(`Could not copy ${label}: select it and copy by hand.`, "error");
    }
  } });
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

function decidePanel(target) {
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
      `The conflict's reason is ${reason}: ${reasonSentence(reason)}. A receipt like this is what a forged or ` +
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
async function send(answers, method, path, body, afterStepUp) {
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
  if (answer.ok || answer.status === 409) window.setTimeout(() => render().then(() => showAnswer(answersArea(), answer, afterStepUp)), 0);
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

function answersArea() {
  let answers = document.getElementById("answers");
  if (!answers) {
    answers = el("ol", { id: "answers", "aria-live": "polite" });
    document.getElementById("main").append(el("section", { className: "card", "aria-label": "Answers" }, el("h3", { text: "Answers" }), answers));
  }
  return answers;
}

async function stepUp(answer, retry) {
  say("The API asks for a recent sign-in with a second factor: signing in again…", "");
  await startSignIn(auth.stepUpParameters(answer.headers) || { max_age: "300", acr_values: null }, { id: crypto.randomUUID(), ...retry });
}

// An expired (or revoked) token is treated like a step-up: sign in again, then the same request
// (the same mutation id: a replay if the first one did land) is sent once more.
async function signInAgain(retry) {
  say("Your sign-in has expired: signing in again, then this decision is sent once more…", "");
  await startSignIn(null, { id: crypto.randomUUID(), ...retry });
}

async function resume(result) {
  if (!result || !result.retry) return;
  const retry = result.retry;
  if (retry.kind === "bulk") {
    await render();
    await runBulk(retry.request);
    return;
  }
  await render();
  await send(answersArea(), retry.method, retry.path, retry.body, true);
}

// -- find: the id someone pasted into a chat ------------------------------------------------

const ID_SHAPE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

// Find is a view of its own (#/find?q=...): whatever was on screen before is replaced, so a
// previous case never stays under a "nothing found". One match opens its case; several are
// listed; none says so.
function find(q) {
  if (!ID_SHAPE.test(q)) {
    say("Paste a dispatch id, an idempotency key or an approval request id (letters, digits and _ . : - only).", "error");
    return;
  }
  const target = "#/find?q=" + encodeURIComponent(q);
  if (window.location.hash === target) render();
  else window.location.hash = target;
}

// The alert's console link: #/oldest?min_age_seconds=N opens the oldest case of the manual
// queue older than the alert's threshold (the alert carries no dispatch id: its series has none).
async function renderOldest(main, params) {
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

async function renderFind(main, q) {
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

// -- start --------------------------------------------------------------------------------------

async function loadConfig() {
  try {
    const response = await fetch("/console/config.json", { credentials: "same-origin" });
    if (response.ok) config = await response.json();
  } catch (_e) {
    // Without it the console still works with a proxy-forwarded or pasted token.
  }
  auth.setConfig(config);
  const codes = document.getElementById("reason-codes");
  codes.replaceChildren(...(config.reason_codes || []).map((code) => el("option", { value: code })));
}

document.addEventListener("DOMContentLoaded", async () => {
  auth.takeTokenFromFragment();
  document.getElementById("find").addEventListener("submit", (event) => {
    event.preventDefault();
    find(document.getElementById("find-q").value.trim());
  });
  await loadConfig();
  let result = null;
  try {
    result = await auth.finishSignIn();
  } catch (error) {
    await render();
    say("Sign-in failed: " + error.message, "error");
    return;
  }
  window.addEventListener("hashchange", () => render());
  if (result && result.retry) await resume(result);
  else await render();
  window.setInterval(updateSession, 15000);
  window.setInterval(refreshList, REFRESH_MS);
});

// Lists refresh on their own; never while the operator is filling a form on them (the typed
// reason and chosen decision would be lost), nor in a hidden tab.
const REFRESH_MS = 30000;

function refreshList() {
  const where = route();
  const main = document.getElementById("main");
  if (!VIEWS[where.view] || document.visibilityState !== "visible" || main.getAttribute("aria-busy") === "true") return;
  if (main.dataset.route !== window.location.hash) return;
  const form = document.getElementById("bulk-form");
  if (form && (form.querySelector("input[name=decision]:checked") || form.querySelector("#bulk-reason").value ||
    document.getElementById("bulk-summary") || document.getElementById("bulk-bar"))) return;
  if (document.activeElement && document.activeElement.closest("#filters")) return;
  render(true);
}
