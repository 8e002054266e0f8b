// The lists: the rows first, filters folded away (saying which are active), the triage
// counts, a live-refresh line, and the selection's actions in a bar that stays in view.
import * as auth from "./auth.js";
import { bulkDock, bulkPanel, updateBulkCount } from "./bulk.js";
import { countsText, triage } from "./counts.js";
import { decisionLabel } from "./decide.js";
import { caseLink, el, problemText, relative, say, summaryLine, when } from "./dom.js";
import { liveBar } from "./live.js";
import { listHash } from "./nav.js";
import { needSignIn } from "./session.js";
import { filterKey, known, rememberList, selected, selectionMovedTo } from "./state.js";
import {
  AGES, FINDINGS, PAGE_SIZES, SORTS, VIEWS,
  apiQuery, firstRow, isFiltered, matchesFilter, pageSize, sinceMs,
} from "./views.js";

const LIST_REFRESH_MS = 30000;
const TRIAGE_FOLDED_KEY = "resolver.triage.folded";
const findingOptions = (any) => [["", any], ...FINDINGS.map((f) => [f, f])];

// Each filter's label and control: one table, read by the form and by the line that says
// which filters are active.
const FIELDS = {
  q: ["Dispatch id, idempotency key or approval id", "text", { className: "wide" }],
  project_id: ["Project", "text", { list: "dl-project_id" }],
  owner: ["Executor", "text", { list: "dl-owner" }],
  last_reason: ["Reason", "text", { list: "dl-reason" }],
  summary: ["What was approved (words)", "text", { maxlength: 100 }],
  action_type: ["Action type", "text", { list: "dl-action_type" }],
  user_id: ["Decided by", "text", {}],
  last_finding: ["Finding", findingOptions("any finding")],
  overridden_finding: ["Finding overridden", findingOptions("any finding")],
  min_age_seconds: ["Age", AGES],
  sort: ["Order", SORTS],
  // Plain YYYY-MM-DD text, not a date picker: a picker shows the browser's locale order,
  // and an on-call engineer must never wonder whether 03/04 is March or April.
  since: ["From (UTC day, YYYY-MM-DD)", "day", {}],
  until: ["To (UTC day, YYYY-MM-DD, included)", "day", {}],
};

// "Action type: pay.charge; Age: over 4 hours": each active filter with its label.
function activeFilters(view, params) {
  return VIEWS[view].filters.filter((name) => params.get(name)).map((name) => {
    const [label, kind] = FIELDS[name];
    const option = Array.isArray(kind) && kind.find(([value]) => value === params.get(name));
    return `${label.replace(/ \(.*\)$/, "")}: ${option ? option[1] : params.get(name)}`;
  });
}

function filterForm(view, params) {
  const spec = VIEWS[view];
  const form = el("form", { id: "filters", className: "filters", role: "search", "aria-label": "Filter " + spec.title });
  const field = (name, label, control) => el("div", { className: "field" }, el("label", { for: "f-" + name, text: label }), control);
  const input = (name, extra) => el("input", { id: "f-" + name, name, value: params.get(name) || "", autocomplete: "off", ...extra });
  const select = (name, options, fallback = "") => {
    const control = el("select", { id: "f-" + name, name });
    options.forEach(([value, text]) => control.append(el("option", { value, text, selected: (params.get(name) || fallback) === value })));
    return control;
  };
  spec.filters.forEach((name) => {
    const [label, kind, extra] = FIELDS[name];
    if (Array.isArray(kind)) form.append(field(name, label, select(name, kind)));
    else if (kind === "day") form.append(field(name, label, input(name, { pattern: "\\d{4}-\\d{2}-\\d{2}", placeholder: "YYYY-MM-DD", size: 11 })));
    else form.append(field(name, label, input(name, extra)));
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
  // Folded away, so the rows come first; the summary says which filters are active.
  const active = activeFilters(view, params);
  const summary = active.length ? `Filters: ${active.length} active (${active.join("; ")})` : "Filters: none active";
  const panel = el("details", { id: "filter-panel", className: "fold" }, el("summary", { id: "filter-summary", text: summary }), form);
  const clear = active.length ? el("a", { href: "#/" + view, id: "clear-filters", text: "Clear filters" }) : null;
  return el("div", { className: "filter-line" }, panel, clear);
}

// The triage counts, folded or open as the operator left them; folded at first on a narrow
// screen (or at 200 % zoom), where they would push the rows out of the first screen.
const NARROW = "(max-width: 45rem)";

function triagePanel(section) {
  const left = sessionStorage.getItem(TRIAGE_FOLDED_KEY);
  const open = left === null ? !window.matchMedia(NARROW).matches : left !== "1";
  const panel = el("details", { id: "triage-panel", className: "fold", open },
    el("summary", { text: "Counts by action type, reason, project and executor" }), section);
  panel.addEventListener("toggle", () => sessionStorage.setItem(TRIAGE_FOLDED_KEY, panel.open ? "0" : "1"));
  return panel;
}

export async function renderList(main, view, params) {
  const spec = VIEWS[view];
  if (spec.bulk) {
    const before = selected.size;
    if (selectionMovedTo(filterKey(view, params)) && before) say(`Selection cleared: the ${before} selected under the previous filter were not kept.`, "");
  }
  rememberList(window.location.hash || "#/" + view);
  document.title = `${spec.title} · approved-action resolver`;
  main.append(el("div", { className: "list-head" }, el("h2", { tabindex: "-1", text: spec.title }), liveBar(LIST_REFRESH_MS, "this list")),
    el("p", { className: "lede", text: spec.lede }), filterForm(view, params));
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
  if (view !== "decided") main.append(triagePanel(await triage(view, params)));
  main.append(el("p", { id: "counts", text: countsText(view, params, page) }));
  if (page.items.length === 0) {
    main.append(el("p", { id: "empty", text: isFiltered(view, params) ? "Nothing matches this filter." : spec.empty }));
  } else {
    // The selection bar follows the rows: it sticks to the bottom of the screen while they
    // are in view, so selecting never needs a scroll to the end of the page.
    const rows = el("div", { className: "rows" }, listTable(view, page.items));
    if (spec.bulk) rows.append(bulkDock(view, params, page));
    main.append(rows);
  }
  main.append(pager(view, params, page.next_cursor, page.items.length));
  if (spec.bulk && page.items.length) {
    main.append(bulkPanel(view, params));
    updateBulkCount();
  }
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
  return [`${proposal.decision} proposed by ${proposal.proposed_by}, expires `, relative(proposal.expires_at_ms, true)];
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
  cell(...[].concat(proposalText(item.proposal)));
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


// Why a case is in the manual queue, said once and in words (the finding has its own column).
function whyHere(item) {
  if (item.manual_reason === "evidence_window_elapsed") return "escalated: no settling evidence in time";
  if (item.manual_reason === "conflict") return "the evidence conflicts";
  if (item.manual_reason === "unsupported") return "no provider can check it";
  return item.manual_reason || "—";
}
