// The lists: what each one shows, its filters and its API query, and the page's own check of
// the filter (for an API that ignores it).

export const FINDINGS = ["conflict", "unsupported", "missing", "still_running", "unavailable"];
// "over 4 hours" is the manual-queue alert's threshold (ResolverManualQueueAgeing).
export const AGES = [["", "any age"], ["300", "over 5 minutes"], ["3600", "over 1 hour"], ["14400", "over 4 hours (the alert's threshold)"], ["86400", "over 1 day"]];
const LIST_FILTERS = ["project_id", "action_type", "owner", "last_finding", "last_reason", "min_age_seconds", "summary", "q", "sort"];
export const SORTS = [["", "oldest first"], ["action_type", "by action type"], ["project_id", "by project"], ["last_finding", "by last finding"]];
// The triage counts above a list, each value a filter (and a suggestion in its filter field).
export const TRIAGE = [["action_type", "By action type"], ["reason", "By reason"], ["project_id", "By project"], ["owner", "By executor"]];
export const VIEWS = {
  queue: {
    title: "Manual queue", path: "/v1/manual-queue", filters: LIST_FILTERS, bulk: true, noun: ["case", "cases"],
    lede: "Evidence could not settle these executions. Each decision is final and audited; nothing here runs an action again.",
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
export const BULK_CHUNK = 100;
// Where an API that does not say (`total_cap`) stops counting the matching cases.
export const OLDER_TOTAL_CAP = 10000;
export const PAGE_SIZES = ["25", "50", "100"];
export const SELECT_ALL_CAP = 1000;

export function isFiltered(view, params) {
  return VIEWS[view].filters.some((name) => name !== "sort" && params.get(name));
}

export function apiQuery(view, params, cursor, limit) {
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
export function pageSize(params) {
  const n = Number(params.get("limit"));
  return Number.isInteger(n) && n >= 1 && n <= 100 ? n : 50;
}

export function firstRow(params) {
  const n = Number(params.get("from"));
  return params.get("cursor") && Number.isInteger(n) && n >= 1 ? n : 1;
}

// What a list is ordered by and what its age filter measures: entering the queue for the
// manual queue, the first inspection for the waiting list (the API's own keyset).
export function sinceMs(view, item) {
  return view === "waiting" ? item.first_inspected_at_ms : item.manual_at_ms;
}

// The filter checked in the page too: an older API ignores filter parameters, and a bulk
// selection must never take in more than the operator filtered for.
export function matchesFilter(view, item, params) {
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

