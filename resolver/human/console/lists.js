// The three lists: filters, triage counts, the page of rows and the pager.
import * as auth from "./auth.js";
import { bulkPanel, updateBulkCount } from "./bulk.js";
import { decisionLabel } from "./decide.js";
import { age, caseLink, el, problemText, say, when } from "./dom.js";
import { listHash } from "./nav.js";
import { reasonSentence } from "./reasons.js";
import { needSignIn } from "./session.js";
import { filterKey, known, selected, selectionMovedTo } from "./state.js";
import {
  AGES, FINDINGS, OLDER_TOTAL_CAP, PAGE_SIZES, SORTS, TRIAGE, VIEWS,
  apiQuery, firstRow, isFiltered, matchesFilter, pageSize, sinceMs,
} from "./views.js";

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

export async function renderList(main, view, params) {
  const spec = VIEWS[view];
  if (spec.bulk) {
    const before = selected.size;
    if (selectionMovedTo(filterKey(view, params)) && before) say(`Selection cleared: the ${before} selected under the previous filter were not kept.`, "");
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
      const sentence = dimension === "reason" ? reasonSentence(value) : null;
      const words = sentence ? ` (${sentence})` : "";
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
